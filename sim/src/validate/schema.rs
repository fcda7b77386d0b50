//! The little schema strict field validation needs: per built-in kind, the
//! known top-level fields and the known `spec` fields.
//!
//! Simplification (documented in [`super`]): only `metadata`, the top level
//! and `spec` are checked, not nested structures such as a pod template;
//! kinds not listed here (custom resources included) keep unknown fields,
//! like a CRD with `x-kubernetes-preserve-unknown-fields` under `spec`.

/// Fields of `metav1.ObjectMeta`.
pub const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Known fields of one kind.
#[derive(Debug, Clone, Copy)]
pub struct KindSchema {
    /// Top-level fields besides `apiVersion`, `kind` and `metadata`.
    pub top: &'static [&'static str],
    /// Fields of `spec`, when `spec` is checked.
    pub spec: Option<&'static [&'static str]>,
}

const SPEC_STATUS: &[&str] = &["spec", "status"];

const POD_SPEC: &[&str] = &[
    "activeDeadlineSeconds",
    "affinity",
    "automountServiceAccountToken",
    "containers",
    "dnsConfig",
    "dnsPolicy",
    "enableServiceLinks",
    "ephemeralContainers",
    "hostAliases",
    "hostIPC",
    "hostNetwork",
    "hostPID",
    "hostUsers",
    "hostname",
    "hostnameOverride",
    "imagePullSecrets",
    "initContainers",
    "nodeName",
    "nodeSelector",
    "os",
    "overhead",
    "preemptionPolicy",
    "priority",
    "priorityClassName",
    "readinessGates",
    "resourceClaims",
    "resources",
    "restartPolicy",
    "runtimeClassName",
    "schedulerName",
    "schedulingGates",
    "securityContext",
    "serviceAccount",
    "serviceAccountName",
    "setHostnameAsFQDN",
    "shareProcessNamespace",
    "subdomain",
    "terminationGracePeriodSeconds",
    "tolerations",
    "topologySpreadConstraints",
    "volumes",
];

const DEPLOYMENT_SPEC: &[&str] = &[
    "minReadySeconds",
    "paused",
    "progressDeadlineSeconds",
    "replicas",
    "revisionHistoryLimit",
    "selector",
    "strategy",
    "template",
];

const STATEFULSET_SPEC: &[&str] = &[
    "minReadySeconds",
    "ordinals",
    "persistentVolumeClaimRetentionPolicy",
    "podManagementPolicy",
    "replicas",
    "revisionHistoryLimit",
    "selector",
    "serviceName",
    "template",
    "updateStrategy",
    "volumeClaimTemplates",
];

const DAEMONSET_SPEC: &[&str] = &[
    "minReadySeconds",
    "revisionHistoryLimit",
    "selector",
    "template",
    "updateStrategy",
];

const REPLICASET_SPEC: &[&str] = &["minReadySeconds", "replicas", "selector", "template"];

const JOB_SPEC: &[&str] = &[
    "activeDeadlineSeconds",
    "backoffLimit",
    "backoffLimitPerIndex",
    "completionMode",
    "completions",
    "managedBy",
    "manualSelector",
    "maxFailedIndexes",
    "parallelism",
    "podFailurePolicy",
    "podReplacementPolicy",
    "selector",
    "successPolicy",
    "suspend",
    "template",
    "ttlSecondsAfterFinished",
];

const CRONJOB_SPEC: &[&str] = &[
    "concurrencyPolicy",
    "failedJobsHistoryLimit",
    "jobTemplate",
    "schedule",
    "startingDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "suspend",
    "timeZone",
];

const SERVICE_SPEC: &[&str] = &[
    "allocateLoadBalancerNodePorts",
    "clusterIP",
    "clusterIPs",
    "externalIPs",
    "externalName",
    "externalTrafficPolicy",
    "healthCheckNodePort",
    "internalTrafficPolicy",
    "ipFamilies",
    "ipFamilyPolicy",
    "loadBalancerClass",
    "loadBalancerIP",
    "loadBalancerSourceRanges",
    "ports",
    "publishNotReadyAddresses",
    "selector",
    "sessionAffinity",
    "sessionAffinityConfig",
    "trafficDistribution",
    "type",
];

const NAMESPACE_SPEC: &[&str] = &["finalizers"];

const PVC_SPEC: &[&str] = &[
    "accessModes",
    "dataSource",
    "dataSourceRef",
    "resources",
    "selector",
    "storageClassName",
    "volumeAttributesClassName",
    "volumeMode",
    "volumeName",
];

const INGRESS_SPEC: &[&str] = &["defaultBackend", "ingressClassName", "rules", "tls"];

/// The schema of `group`/`kind`, if this simulator knows it.
pub fn kind_schema(group: &str, kind: &str) -> Option<KindSchema> {
    let with_spec = |spec| {
        Some(KindSchema {
            top: SPEC_STATUS,
            spec: Some(spec),
        })
    };
    let top_only = |top| Some(KindSchema { top, spec: None });
    match (group, kind) {
        ("", "Pod") => with_spec(POD_SPEC),
        ("", "Service") => with_spec(SERVICE_SPEC),
        ("", "Namespace") => with_spec(NAMESPACE_SPEC),
        ("", "PersistentVolumeClaim") => with_spec(PVC_SPEC),
        ("", "ConfigMap") => top_only(&["data", "binaryData", "immutable"]),
        ("", "Secret") => top_only(&["data", "stringData", "type", "immutable"]),
        ("", "ServiceAccount") => top_only(&["secrets", "imagePullSecrets", "automountServiceAccountToken"]),
        ("", "Event") => top_only(&[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ]),
        ("apps", "Deployment") => with_spec(DEPLOYMENT_SPEC),
        ("apps", "StatefulSet") => with_spec(STATEFULSET_SPEC),
        ("apps", "DaemonSet") => with_spec(DAEMONSET_SPEC),
        ("apps", "ReplicaSet") => with_spec(REPLICASET_SPEC),
        ("batch", "Job") => with_spec(JOB_SPEC),
        ("batch", "CronJob") => with_spec(CRONJOB_SPEC),
        ("networking.k8s.io", "Ingress") => with_spec(INGRESS_SPEC),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => top_only(&["rules", "aggregationRule"]),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => top_only(&["subjects", "roleRef"]),
        _ => None,
    }
}
