//! Printers for pods and the workload kinds (apps, batch).

use super::age;
use super::columns::{
    age as age_cell, col, containers_and_images, int, items, label_selector, name, text_or, wide, Column, AGE,
    CONTAINERS, IMAGES, NAME,
};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(super) fn pod_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
        col("Status", "string", "The aggregate status of the containers in this pod."),
        col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
        AGE,
        wide("IP", "string", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
        wide("Node", "string", "NodeName indicates in which node this pod is scheduled."),
        wide("Nominated Node", "string", "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods."),
        wide("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness."),
    ]
}

/// kube-apiserver's `printPod`, without sidecar containers.
pub(super) fn pod_cells(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let status = &pod["status"];
    let total = items(&pod["spec"]["containers"]).len();
    let statuses = items(&status["containerStatuses"]);
    let ready = statuses.iter().filter(|s| s["ready"] == true).count();
    let (restarts, last_restart) = restarts(statuses);
    let restarts = match last_restart {
        Some(at) if restarts > 0 => format!("{restarts} ({} ago)", age::human_duration((now - at).num_seconds())),
        _ => restarts.to_string(),
    };
    let gates = items(&pod["spec"]["readinessGates"]);
    let gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = items(&status["conditions"]);
        let true_gates = gates
            .iter()
            .filter(|g| {
                conditions
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{true_gates}/{}", gates.len())
    };
    vec![
        name(pod),
        json!(format!("{ready}/{total}")),
        json!(pod_reason(pod)),
        json!(restarts),
        age_cell(pod, now),
        json!(text_or(&status["podIP"], "<none>")),
        json!(text_or(&pod["spec"]["nodeName"], "<none>")),
        json!(text_or(&status["nominatedNodeName"], "<none>")),
        json!(gates),
    ]
}

/// Total restarts and the latest time a container last terminated.
fn restarts(statuses: &[Value]) -> (i64, Option<DateTime<Utc>>) {
    let total = statuses.iter().map(|s| int(&s["restartCount"])).sum();
    let last = statuses
        .iter()
        .filter_map(|s| age::timestamp(&s["lastState"]["terminated"]["finishedAt"]))
        .max();
    (total, last)
}

/// The Status cell: phase or reason, refined by init and container states.
fn pod_reason(pod: &Value) -> String {
    let status = &pod["status"];
    let mut reason = text_or(&status["phase"], "");
    if let Some(r) = status["reason"].as_str().filter(|r| !r.is_empty()) {
        reason = r.to_string();
    }
    reason = match init_reason(pod) {
        Some(init) => init,
        None => containers_reason(status, reason),
    };
    if pod["metadata"]["deletionTimestamp"].is_string() {
        reason = if status["reason"] == "NodeLost" {
            "Unknown"
        } else {
            "Terminating"
        }
        .to_string();
    }
    reason
}

/// While an init container has not succeeded, the pod is initializing:
/// `Init:` and why the first such one failed or waits, else `Init:i/n`.
fn init_reason(pod: &Value) -> Option<String> {
    let init_total = items(&pod["spec"]["initContainers"]).len();
    for (i, s) in items(&pod["status"]["initContainerStatuses"]).iter().enumerate() {
        let terminated = &s["state"]["terminated"];
        if terminated.is_object() && int(&terminated["exitCode"]) == 0 {
            continue;
        }
        return Some(if terminated.is_object() {
            format!("Init:{}", terminated_reason(terminated))
        } else {
            match s["state"]["waiting"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty() && *r != "PodInitializing")
            {
                Some(r) => format!("Init:{r}"),
                None => format!("Init:{i}/{init_total}"),
            }
        });
    }
    None
}

/// `reason` refined by the containers' states, the first container's
/// winning as in kubectl; a Completed pod with a ready container still
/// running is Running (or NotReady).
fn containers_reason(status: &Value, mut reason: String) -> String {
    let mut has_running = false;
    for s in items(&status["containerStatuses"]).iter().rev() {
        let state = &s["state"];
        if let Some(r) = state["waiting"]["reason"].as_str().filter(|r| !r.is_empty()) {
            reason = r.to_string();
        } else if state["terminated"].is_object() {
            reason = terminated_reason(&state["terminated"]);
        } else if state["running"].is_object() && s["ready"] == true {
            has_running = true;
        }
    }
    if reason == "Completed" && has_running {
        let ready = items(&status["conditions"])
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        reason = if ready { "Running" } else { "NotReady" }.to_string();
    }
    reason
}

/// A terminated container's reason, else its signal, else its exit code.
fn terminated_reason(t: &Value) -> String {
    match t["reason"].as_str().filter(|r| !r.is_empty()) {
        Some(r) => r.to_string(),
        None if int(&t["signal"]) != 0 => format!("Signal:{}", int(&t["signal"])),
        None => format!("ExitCode:{}", int(&t["exitCode"])),
    }
}

pub(super) fn deployment_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        // kube 1.37 declares these `string`, though the cells are numbers.
        col("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
        col("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."),
    ]
}

/// Desired replicas: `spec.replicas`, which defaults to 1.
fn desired(object: &Value) -> i64 {
    object["spec"]["replicas"].as_i64().unwrap_or(1)
}

pub(super) fn deployment_cells(d: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let status = &d["status"];
    let [containers, images] = containers_and_images(&d["spec"]["template"]);
    vec![
        name(d),
        json!(format!("{}/{}", int(&status["readyReplicas"]), desired(d))),
        json!(int(&status["updatedReplicas"])),
        json!(int(&status["availableReplicas"])),
        age_cell(d, now),
        containers,
        images,
        json!(label_selector(&d["spec"]["selector"])),
    ]
}

pub(super) fn replica_set_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Desired", "integer", "Replicas is the number of desired pods."),
        col(
            "Current",
            "integer",
            "Replicas is the most recently observed number of non-terminating pods.",
        ),
        col(
            "Ready",
            "integer",
            "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        wide(
            "Selector",
            "string",
            "Selector is a label query over pods that should match the replica count.",
        ),
    ]
}

pub(super) fn replica_set_cells(rs: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let [containers, images] = containers_and_images(&rs["spec"]["template"]);
    vec![
        name(rs),
        json!(desired(rs)),
        json!(int(&rs["status"]["replicas"])),
        json!(int(&rs["status"]["readyReplicas"])),
        age_cell(rs, now),
        containers,
        images,
        json!(label_selector(&rs["spec"]["selector"])),
    ]
}

pub(super) fn stateful_set_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        AGE,
        CONTAINERS,
        IMAGES,
    ]
}

pub(super) fn stateful_set_cells(s: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let [containers, images] = containers_and_images(&s["spec"]["template"]);
    vec![
        name(s),
        json!(format!("{}/{}", int(&s["status"]["readyReplicas"]), desired(s))),
        age_cell(s, now),
        containers,
        images,
    ]
}

pub(super) fn daemon_set_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Desired", "integer", "The total number of nodes that should be running the daemon pod."),
        col("Current", "integer", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod."),
        col("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition."),
        col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
        col("Available", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available."),
        col("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a node."),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", "A label query over pods that are managed by the daemon set."),
    ]
}

pub(super) fn daemon_set_cells(ds: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let status = &ds["status"];
    let [containers, images] = containers_and_images(&ds["spec"]["template"]);
    vec![
        name(ds),
        json!(int(&status["desiredNumberScheduled"])),
        json!(int(&status["currentNumberScheduled"])),
        json!(int(&status["numberReady"])),
        json!(int(&status["updatedNumberScheduled"])),
        json!(int(&status["numberAvailable"])),
        json!(super::columns::labels(&ds["spec"]["template"]["spec"]["nodeSelector"])),
        age_cell(ds, now),
        containers,
        images,
        json!(label_selector(&ds["spec"]["selector"])),
    ]
}

pub(super) fn revision_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Controller", "string", "Controller of the object"),
        col(
            "Revision",
            "integer",
            "Revision indicates the revision of the state represented by Data.",
        ),
        AGE,
    ]
}

pub(super) fn revision_cells(r: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let controller = items(&r["metadata"]["ownerReferences"])
        .iter()
        .find(|o| o["controller"] == true)
        .map(|o| {
            let kind = o["kind"].as_str().unwrap_or_default().to_lowercase();
            let group = o["apiVersion"].as_str().and_then(|v| v.split_once('/')).map(|(g, _)| g);
            match group {
                Some(group) => format!("{kind}.{group}/{}", o["name"].as_str().unwrap_or_default()),
                None => format!("{kind}/{}", o["name"].as_str().unwrap_or_default()),
            }
        })
        .unwrap_or_else(|| "<none>".into());
    vec![name(r), json!(controller), json!(int(&r["revision"])), age_cell(r, now)]
}

pub(super) fn job_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Status", "string", "Status of the job execution"),
        col("Completions", "string", "The completion status of the job"),
        col("Duration", "string", "Time required to complete the job."),
        AGE,
        CONTAINERS,
        IMAGES,
        wide(
            "Selector",
            "string",
            "A label query over pods that should match the pod count.",
        ),
    ]
}

pub(super) fn job_cells(job: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let status = &job["status"];
    let succeeded = int(&status["succeeded"]);
    let completions = match (job["spec"]["completions"].as_i64(), job["spec"]["parallelism"].as_i64()) {
        (Some(n), _) => format!("{succeeded}/{n}"),
        (None, Some(p)) if p > 1 => format!("{succeeded}/1 of {p}"),
        _ => format!("{succeeded}/1"),
    };
    let duration = match age::timestamp(&status["startTime"]) {
        Some(start) => {
            let end = age::timestamp(&status["completionTime"]).unwrap_or(now);
            age::human_duration((end - start).num_seconds())
        }
        None => String::new(),
    };
    let [containers, images] = containers_and_images(&job["spec"]["template"]);
    vec![
        name(job),
        json!(job_status(job)),
        json!(completions),
        json!(duration),
        age_cell(job, now),
        containers,
        images,
        json!(label_selector(&job["spec"]["selector"])),
    ]
}

/// Complete, Failed, Terminating, Suspended or Running, in that order.
fn job_status(job: &Value) -> &'static str {
    let holds = |kind: &str| {
        items(&job["status"]["conditions"])
            .iter()
            .any(|c| c["type"] == kind && c["status"] == "True")
    };
    if holds("Complete") {
        "Complete"
    } else if holds("Failed") {
        "Failed"
    } else if job["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if holds("Suspended") {
        "Suspended"
    } else {
        "Running"
    }
}

pub(super) fn cron_job_columns() -> Vec<Column> {
    vec![
        NAME,
        col("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
        col("Timezone", "string", "The time zone name for the given schedule."),
        col("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions."),
        col("Active", "integer", "A list of pointers to currently running jobs."),
        col("Last Schedule", "string", "Information when was the last time the job was successfully scheduled."),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", "A label query over pods that should match the pod count."),
    ]
}

pub(super) fn cron_job_cells(cj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let spec = &cj["spec"];
    let last = match age::timestamp(&cj["status"]["lastScheduleTime"]) {
        Some(at) => age::human_duration((now - at).num_seconds()),
        None => "<none>".into(),
    };
    let job_template = &spec["jobTemplate"]["spec"];
    let [containers, images] = containers_and_images(&job_template["template"]);
    vec![
        name(cj),
        json!(text_or(&spec["schedule"], "")),
        json!(text_or(&spec["timeZone"], "<none>")),
        json!(spec["suspend"].as_bool().unwrap_or(false)),
        json!(items(&cj["status"]["active"]).len()),
        json!(last),
        age_cell(cj, now),
        containers,
        images,
        json!(label_selector(&job_template["selector"])),
    ]
}
