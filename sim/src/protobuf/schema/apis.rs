//! The named API groups kubectl creates objects in: apps, batch, rbac,
//! policy, scheduling, networking and autoscaling (`Scale`).

use super::core_v1::LOAD_BALANCER_STATUS;
use super::meta::{LABEL_SELECTOR, OBJECT_META};
use super::pod::POD_TEMPLATE_SPEC;
use super::{boolean, int32, int64, int_or_string, message, string, Message};

/// `apps/v1` `Deployment`.
pub static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &DEPLOYMENT_SPEC),
        message(3, "status", &DEPLOYMENT_STATUS),
    ],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        int32(1, "replicas").keep(),
        message(2, "selector", &LABEL_SELECTOR),
        message(3, "template", &POD_TEMPLATE_SPEC),
        message(4, "strategy", &DEPLOYMENT_STRATEGY),
        int32(5, "minReadySeconds"),
        int32(6, "revisionHistoryLimit").keep(),
        boolean(7, "paused"),
        int32(9, "progressDeadlineSeconds").keep(),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[string(1, "type"), message(2, "rollingUpdate", &ROLLING_UPDATE)],
};

static ROLLING_UPDATE: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[int_or_string(1, "maxUnavailable"), int_or_string(2, "maxSurge")],
};

static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        int64(1, "observedGeneration"),
        int32(2, "replicas"),
        int32(3, "updatedReplicas"),
        int32(7, "readyReplicas"),
        int32(4, "availableReplicas"),
        int32(5, "unavailableReplicas"),
        int32(8, "collisionCount").keep(),
    ],
};

/// `apps/v1` `ReplicaSet`.
pub static REPLICA_SET: Message = Message {
    name: "ReplicaSet",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &REPLICA_SET_SPEC),
        message(3, "status", &REPLICA_SET_STATUS),
    ],
};

static REPLICA_SET_SPEC: Message = Message {
    name: "ReplicaSetSpec",
    fields: &[
        int32(1, "replicas").keep(),
        int32(4, "minReadySeconds"),
        message(2, "selector", &LABEL_SELECTOR),
        message(3, "template", &POD_TEMPLATE_SPEC),
    ],
};

static REPLICA_SET_STATUS: Message = Message {
    name: "ReplicaSetStatus",
    fields: &[
        int32(1, "replicas").keep(),
        int32(2, "fullyLabeledReplicas"),
        int32(4, "readyReplicas"),
        int32(5, "availableReplicas"),
        int64(3, "observedGeneration"),
    ],
};

/// `batch/v1` `Job`.
pub static JOB: Message = Message {
    name: "Job",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &JOB_SPEC),
        message(3, "status", &JOB_STATUS),
    ],
};

static JOB_SPEC: Message = Message {
    name: "JobSpec",
    fields: &[
        int32(1, "parallelism").keep(),
        int32(2, "completions").keep(),
        int64(3, "activeDeadlineSeconds").keep(),
        int32(7, "backoffLimit").keep(),
        int32(12, "backoffLimitPerIndex").keep(),
        int32(13, "maxFailedIndexes").keep(),
        message(4, "selector", &LABEL_SELECTOR),
        boolean(5, "manualSelector").keep(),
        message(6, "template", &POD_TEMPLATE_SPEC),
        int32(8, "ttlSecondsAfterFinished").keep(),
        string(9, "completionMode").keep(),
        boolean(10, "suspend").keep(),
        string(14, "podReplacementPolicy").keep(),
    ],
};

static JOB_STATUS: Message = Message {
    name: "JobStatus",
    fields: &[int32(4, "active"), int32(5, "succeeded"), int32(6, "failed")],
};

/// `batch/v1` `CronJob`.
pub static CRON_JOB: Message = Message {
    name: "CronJob",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &CRON_JOB_SPEC),
        message(3, "status", &CRON_JOB_STATUS),
    ],
};

static CRON_JOB_SPEC: Message = Message {
    name: "CronJobSpec",
    fields: &[
        string(1, "schedule").keep(),
        string(8, "timeZone").keep(),
        int64(2, "startingDeadlineSeconds").keep(),
        string(3, "concurrencyPolicy"),
        boolean(4, "suspend").keep(),
        message(5, "jobTemplate", &JOB_TEMPLATE_SPEC),
        int32(6, "successfulJobsHistoryLimit").keep(),
        int32(7, "failedJobsHistoryLimit").keep(),
    ],
};

static JOB_TEMPLATE_SPEC: Message = Message {
    name: "JobTemplateSpec",
    fields: &[message(1, "metadata", &OBJECT_META), message(2, "spec", &JOB_SPEC)],
};

/// The status is the controller's; none of it is meaningful in a create.
static CRON_JOB_STATUS: Message = Message {
    name: "CronJobStatus",
    fields: &[],
};

/// `rbac.authorization.k8s.io/v1` `Role`.
pub static ROLE: Message = Message {
    name: "Role",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "rules", &POLICY_RULE).repeated(),
    ],
};

/// `rbac.authorization.k8s.io/v1` `ClusterRole`.
pub static CLUSTER_ROLE: Message = Message {
    name: "ClusterRole",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "rules", &POLICY_RULE).repeated(),
        message(3, "aggregationRule", &AGGREGATION_RULE),
    ],
};

static AGGREGATION_RULE: Message = Message {
    name: "AggregationRule",
    fields: &[message(1, "clusterRoleSelectors", &LABEL_SELECTOR).repeated()],
};

/// `rbac.authorization.k8s.io/v1` `PolicyRule`. An empty string in
/// `apiGroups` is the core group and is kept.
static POLICY_RULE: Message = Message {
    name: "PolicyRule",
    fields: &[
        string(1, "verbs").repeated(),
        string(2, "apiGroups").repeated(),
        string(3, "resources").repeated(),
        string(4, "resourceNames").repeated(),
        string(5, "nonResourceURLs").repeated(),
    ],
};

/// `RoleBinding` and `ClusterRoleBinding` share their layout.
pub static ROLE_BINDING: Message = Message {
    name: "RoleBinding",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "subjects", &SUBJECT).repeated(),
        message(3, "roleRef", &ROLE_REF),
    ],
};

static SUBJECT: Message = Message {
    name: "Subject",
    fields: &[
        string(1, "kind").keep(),
        string(2, "apiGroup"),
        string(3, "name").keep(),
        string(4, "namespace"),
    ],
};

static ROLE_REF: Message = Message {
    name: "RoleRef",
    fields: &[
        string(1, "apiGroup").keep(),
        string(2, "kind").keep(),
        string(3, "name").keep(),
    ],
};

/// `policy/v1` `PodDisruptionBudget`.
pub static POD_DISRUPTION_BUDGET: Message = Message {
    name: "PodDisruptionBudget",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &POD_DISRUPTION_BUDGET_SPEC),
        message(3, "status", &POD_DISRUPTION_BUDGET_STATUS),
    ],
};

static POD_DISRUPTION_BUDGET_SPEC: Message = Message {
    name: "PodDisruptionBudgetSpec",
    fields: &[
        int_or_string(1, "minAvailable"),
        message(2, "selector", &LABEL_SELECTOR),
        int_or_string(3, "maxUnavailable"),
        string(4, "unhealthyPodEvictionPolicy").keep(),
    ],
};

static POD_DISRUPTION_BUDGET_STATUS: Message = Message {
    name: "PodDisruptionBudgetStatus",
    fields: &[
        int64(1, "observedGeneration"),
        int32(3, "disruptionsAllowed").keep(),
        int32(4, "currentHealthy").keep(),
        int32(5, "desiredHealthy").keep(),
        int32(6, "expectedPods").keep(),
    ],
};

/// `scheduling.k8s.io/v1` `PriorityClass`.
pub static PRIORITY_CLASS: Message = Message {
    name: "PriorityClass",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        int32(2, "value").keep(),
        boolean(3, "globalDefault"),
        string(4, "description"),
        string(5, "preemptionPolicy").keep(),
    ],
};

/// `networking.k8s.io/v1` `Ingress`.
pub static INGRESS: Message = Message {
    name: "Ingress",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &INGRESS_SPEC),
        message(3, "status", &INGRESS_STATUS),
    ],
};

static INGRESS_SPEC: Message = Message {
    name: "IngressSpec",
    fields: &[
        string(4, "ingressClassName").keep(),
        message(1, "defaultBackend", &INGRESS_BACKEND),
        message(2, "tls", &INGRESS_TLS).repeated(),
        message(3, "rules", &INGRESS_RULE).repeated(),
    ],
};

static INGRESS_BACKEND: Message = Message {
    name: "IngressBackend",
    fields: &[
        message(4, "service", &INGRESS_SERVICE_BACKEND),
        message(3, "resource", &TYPED_LOCAL_OBJECT_REFERENCE),
    ],
};

static INGRESS_SERVICE_BACKEND: Message = Message {
    name: "IngressServiceBackend",
    fields: &[string(1, "name").keep(), message(2, "port", &SERVICE_BACKEND_PORT)],
};

static SERVICE_BACKEND_PORT: Message = Message {
    name: "ServiceBackendPort",
    fields: &[string(1, "name"), int32(2, "number")],
};

static TYPED_LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "TypedLocalObjectReference",
    fields: &[
        string(1, "apiGroup").keep(),
        string(2, "kind").keep(),
        string(3, "name").keep(),
    ],
};

static INGRESS_TLS: Message = Message {
    name: "IngressTLS",
    fields: &[string(1, "hosts").repeated(), string(2, "secretName")],
};

/// `IngressRule` embeds `IngressRuleValue`, whose only member is `http`.
static INGRESS_RULE: Message = Message {
    name: "IngressRule",
    fields: &[
        string(1, "host"),
        message(2, "ingressRuleValue", &INGRESS_RULE_VALUE).inline(),
    ],
};

static INGRESS_RULE_VALUE: Message = Message {
    name: "IngressRuleValue",
    fields: &[message(1, "http", &HTTP_INGRESS_RULE_VALUE)],
};

static HTTP_INGRESS_RULE_VALUE: Message = Message {
    name: "HTTPIngressRuleValue",
    fields: &[message(1, "paths", &HTTP_INGRESS_PATH).repeated()],
};

static HTTP_INGRESS_PATH: Message = Message {
    name: "HTTPIngressPath",
    fields: &[
        string(1, "path"),
        string(3, "pathType").keep(),
        message(2, "backend", &INGRESS_BACKEND),
    ],
};

static INGRESS_STATUS: Message = Message {
    name: "IngressStatus",
    fields: &[message(1, "loadBalancer", &LOAD_BALANCER_STATUS)],
};

/// `autoscaling/v1` `Scale`, the `scale` subresource's object.
pub static SCALE: Message = Message {
    name: "Scale",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &SCALE_SPEC),
        message(3, "status", &SCALE_STATUS),
    ],
};

static SCALE_SPEC: Message = Message {
    name: "ScaleSpec",
    fields: &[int32(1, "replicas")],
};

static SCALE_STATUS: Message = Message {
    name: "ScaleStatus",
    fields: &[int32(1, "replicas").keep(), string(2, "selector")],
};
