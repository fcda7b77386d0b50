//! k8s.io/api `core/v1` `PodSpec` and its parts, which Pods and every
//! workload template share.
//!
//! Left out (skipped as unknown fields): affinity, lifecycle hooks,
//! ephemeral containers, DNS config, topology spread, resize policy,
//! SELinux and Windows options, and volume sources other than hostPath,
//! emptyDir, secret, configMap, persistentVolumeClaim and projected.

use super::core_v1::LOCAL_OBJECT_REFERENCE;
use super::meta::OBJECT_META;
use super::{boolean, int32, int64, int_or_string, message, quantity, string, Message};

/// `v1.PodTemplateSpec`, embedded by the workload kinds.
pub static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[message(1, "metadata", &OBJECT_META), message(2, "spec", &POD_SPEC)],
};

/// `v1.PodSpec`.
pub static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        message(1, "volumes", &VOLUME).repeated(),
        message(20, "initContainers", &CONTAINER).repeated(),
        message(2, "containers", &CONTAINER).repeated(),
        string(3, "restartPolicy"),
        int64(4, "terminationGracePeriodSeconds").keep(),
        int64(5, "activeDeadlineSeconds").keep(),
        string(6, "dnsPolicy"),
        string(7, "nodeSelector").map(),
        string(8, "serviceAccountName"),
        string(9, "serviceAccount"),
        boolean(21, "automountServiceAccountToken").keep(),
        string(10, "nodeName"),
        boolean(11, "hostNetwork"),
        boolean(12, "hostPID"),
        boolean(13, "hostIPC"),
        boolean(27, "shareProcessNamespace").keep(),
        message(14, "securityContext", &POD_SECURITY_CONTEXT),
        message(15, "imagePullSecrets", &LOCAL_OBJECT_REFERENCE).repeated(),
        string(16, "hostname"),
        string(17, "subdomain"),
        string(19, "schedulerName"),
        message(22, "tolerations", &TOLERATION).repeated(),
        message(23, "hostAliases", &HOST_ALIAS).repeated(),
        string(24, "priorityClassName"),
        int32(25, "priority").keep(),
        message(28, "readinessGates", &POD_READINESS_GATE).repeated(),
        string(29, "runtimeClassName").keep(),
        boolean(30, "enableServiceLinks").keep(),
        string(31, "preemptionPolicy").keep(),
        quantity(32, "overhead").map(),
        boolean(35, "setHostnameAsFQDN").keep(),
        message(36, "os", &POD_OS),
        boolean(37, "hostUsers").keep(),
        message(38, "schedulingGates", &POD_SCHEDULING_GATE).repeated(),
    ],
};

static POD_SECURITY_CONTEXT: Message = Message {
    name: "PodSecurityContext",
    fields: &[
        int64(2, "runAsUser").keep(),
        int64(6, "runAsGroup").keep(),
        boolean(3, "runAsNonRoot").keep(),
        int64(4, "supplementalGroups").repeated(),
        int64(5, "fsGroup").keep(),
        message(7, "sysctls", &NAME_VALUE).repeated(),
        string(9, "fsGroupChangePolicy").keep(),
        message(10, "seccompProfile", &SECCOMP_PROFILE),
    ],
};

static SECCOMP_PROFILE: Message = Message {
    name: "SeccompProfile",
    fields: &[string(1, "type").keep(), string(2, "localhostProfile").keep()],
};

static TOLERATION: Message = Message {
    name: "Toleration",
    fields: &[
        string(1, "key"),
        string(2, "operator"),
        string(3, "value"),
        string(4, "effect"),
        int64(5, "tolerationSeconds").keep(),
    ],
};

static HOST_ALIAS: Message = Message {
    name: "HostAlias",
    fields: &[string(1, "ip").keep(), string(2, "hostnames").repeated()],
};

static POD_READINESS_GATE: Message = Message {
    name: "PodReadinessGate",
    fields: &[string(1, "conditionType").keep()],
};

static POD_OS: Message = Message {
    name: "PodOS",
    fields: &[string(1, "name").keep()],
};

static POD_SCHEDULING_GATE: Message = Message {
    name: "PodSchedulingGate",
    fields: &[string(1, "name").keep()],
};

/// `{name, value}` pairs: `Sysctl`, `HTTPHeader`.
static NAME_VALUE: Message = Message {
    name: "Sysctl",
    fields: &[string(1, "name").keep(), string(2, "value").keep()],
};

/// `v1.Container`.
pub static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        string(1, "name").keep(),
        string(2, "image"),
        string(3, "command").repeated(),
        string(4, "args").repeated(),
        string(5, "workingDir"),
        message(6, "ports", &CONTAINER_PORT).repeated(),
        message(19, "envFrom", &ENV_FROM_SOURCE).repeated(),
        message(7, "env", &ENV_VAR).repeated(),
        message(8, "resources", &RESOURCE_REQUIREMENTS),
        message(9, "volumeMounts", &VOLUME_MOUNT).repeated(),
        message(10, "livenessProbe", &PROBE),
        message(11, "readinessProbe", &PROBE),
        message(22, "startupProbe", &PROBE),
        string(13, "terminationMessagePath"),
        string(20, "terminationMessagePolicy"),
        string(14, "imagePullPolicy"),
        message(15, "securityContext", &SECURITY_CONTEXT),
        boolean(16, "stdin"),
        boolean(17, "stdinOnce"),
        boolean(18, "tty"),
        string(24, "restartPolicy").keep(),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        string(1, "name"),
        int32(2, "hostPort"),
        int32(3, "containerPort").keep(),
        string(4, "protocol"),
        string(5, "hostIP"),
    ],
};

static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[
        string(1, "name").keep(),
        string(2, "value"),
        message(3, "valueFrom", &ENV_VAR_SOURCE),
    ],
};

static ENV_VAR_SOURCE: Message = Message {
    name: "EnvVarSource",
    fields: &[
        message(1, "fieldRef", &OBJECT_FIELD_SELECTOR),
        message(2, "resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
        message(3, "configMapKeyRef", &KEY_SELECTOR),
        message(4, "secretKeyRef", &KEY_SELECTOR),
    ],
};

static OBJECT_FIELD_SELECTOR: Message = Message {
    name: "ObjectFieldSelector",
    fields: &[string(1, "apiVersion"), string(2, "fieldPath").keep()],
};

static RESOURCE_FIELD_SELECTOR: Message = Message {
    name: "ResourceFieldSelector",
    fields: &[
        string(1, "containerName"),
        string(2, "resource").keep(),
        quantity(3, "divisor"),
    ],
};

/// `ConfigMapKeySelector` and `SecretKeySelector` share their layout.
static KEY_SELECTOR: Message = Message {
    name: "ConfigMapKeySelector",
    fields: &[
        message(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE).inline(),
        string(2, "key").keep(),
        boolean(3, "optional").keep(),
    ],
};

static ENV_FROM_SOURCE: Message = Message {
    name: "EnvFromSource",
    fields: &[
        string(1, "prefix"),
        message(2, "configMapRef", &ENV_SOURCE),
        message(3, "secretRef", &ENV_SOURCE),
    ],
};

/// `ConfigMapEnvSource` and `SecretEnvSource` share their layout.
static ENV_SOURCE: Message = Message {
    name: "ConfigMapEnvSource",
    fields: &[
        message(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE).inline(),
        boolean(2, "optional").keep(),
    ],
};

/// `v1.ResourceRequirements`.
pub static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[
        quantity(1, "limits").map(),
        quantity(2, "requests").map(),
        message(3, "claims", &RESOURCE_CLAIM).repeated(),
    ],
};

static RESOURCE_CLAIM: Message = Message {
    name: "ResourceClaim",
    fields: &[string(1, "name").keep(), string(2, "request")],
};

static VOLUME_MOUNT: Message = Message {
    name: "VolumeMount",
    fields: &[
        string(1, "name").keep(),
        boolean(2, "readOnly"),
        string(7, "recursiveReadOnly").keep(),
        string(3, "mountPath").keep(),
        string(4, "subPath"),
        string(5, "mountPropagation").keep(),
        string(6, "subPathExpr"),
    ],
};

static PROBE: Message = Message {
    name: "Probe",
    fields: &[
        message(1, "handler", &PROBE_HANDLER).inline(),
        int32(2, "initialDelaySeconds"),
        int32(3, "timeoutSeconds"),
        int32(4, "periodSeconds"),
        int32(5, "successThreshold"),
        int32(6, "failureThreshold"),
        int64(7, "terminationGracePeriodSeconds").keep(),
    ],
};

static PROBE_HANDLER: Message = Message {
    name: "ProbeHandler",
    fields: &[
        message(1, "exec", &EXEC_ACTION),
        message(2, "httpGet", &HTTP_GET_ACTION),
        message(3, "tcpSocket", &TCP_SOCKET_ACTION),
    ],
};

static EXEC_ACTION: Message = Message {
    name: "ExecAction",
    fields: &[string(1, "command").repeated()],
};

static HTTP_GET_ACTION: Message = Message {
    name: "HTTPGetAction",
    fields: &[
        string(1, "path"),
        int_or_string(2, "port"),
        string(3, "host"),
        string(4, "scheme"),
        message(5, "httpHeaders", &NAME_VALUE).repeated(),
    ],
};

static TCP_SOCKET_ACTION: Message = Message {
    name: "TCPSocketAction",
    fields: &[int_or_string(1, "port"), string(2, "host")],
};

static SECURITY_CONTEXT: Message = Message {
    name: "SecurityContext",
    fields: &[
        message(1, "capabilities", &CAPABILITIES),
        boolean(2, "privileged").keep(),
        int64(4, "runAsUser").keep(),
        int64(8, "runAsGroup").keep(),
        boolean(5, "runAsNonRoot").keep(),
        boolean(6, "readOnlyRootFilesystem").keep(),
        boolean(7, "allowPrivilegeEscalation").keep(),
        string(9, "procMount").keep(),
        message(11, "seccompProfile", &SECCOMP_PROFILE),
    ],
};

static CAPABILITIES: Message = Message {
    name: "Capabilities",
    fields: &[string(1, "add").repeated(), string(2, "drop").repeated()],
};

/// `v1.Volume`: a name and an embedded `VolumeSource`.
pub static VOLUME: Message = Message {
    name: "Volume",
    fields: &[
        string(1, "name").keep(),
        message(2, "volumeSource", &VOLUME_SOURCE).inline(),
    ],
};

static VOLUME_SOURCE: Message = Message {
    name: "VolumeSource",
    fields: &[
        message(1, "hostPath", &HOST_PATH_VOLUME_SOURCE),
        message(2, "emptyDir", &EMPTY_DIR_VOLUME_SOURCE),
        message(6, "secret", &SECRET_VOLUME_SOURCE),
        message(10, "persistentVolumeClaim", &PVC_VOLUME_SOURCE),
        message(19, "configMap", &CONFIG_MAP_VOLUME_SOURCE),
        message(26, "projected", &PROJECTED_VOLUME_SOURCE),
    ],
};

static HOST_PATH_VOLUME_SOURCE: Message = Message {
    name: "HostPathVolumeSource",
    fields: &[string(1, "path").keep(), string(2, "type").keep()],
};

static EMPTY_DIR_VOLUME_SOURCE: Message = Message {
    name: "EmptyDirVolumeSource",
    fields: &[string(1, "medium"), quantity(2, "sizeLimit")],
};

static SECRET_VOLUME_SOURCE: Message = Message {
    name: "SecretVolumeSource",
    fields: &[
        string(1, "secretName"),
        message(2, "items", &KEY_TO_PATH).repeated(),
        int32(3, "defaultMode").keep(),
        boolean(4, "optional").keep(),
    ],
};

static PVC_VOLUME_SOURCE: Message = Message {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[string(1, "claimName").keep(), boolean(2, "readOnly")],
};

static CONFIG_MAP_VOLUME_SOURCE: Message = Message {
    name: "ConfigMapVolumeSource",
    fields: &[
        message(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE).inline(),
        message(2, "items", &KEY_TO_PATH).repeated(),
        int32(3, "defaultMode").keep(),
        boolean(4, "optional").keep(),
    ],
};

static KEY_TO_PATH: Message = Message {
    name: "KeyToPath",
    fields: &[
        string(1, "key").keep(),
        string(2, "path").keep(),
        int32(3, "mode").keep(),
    ],
};

static PROJECTED_VOLUME_SOURCE: Message = Message {
    name: "ProjectedVolumeSource",
    fields: &[
        message(1, "sources", &VOLUME_PROJECTION).repeated(),
        int32(2, "defaultMode").keep(),
    ],
};

static VOLUME_PROJECTION: Message = Message {
    name: "VolumeProjection",
    fields: &[
        message(1, "secret", &OBJECT_PROJECTION),
        message(3, "configMap", &OBJECT_PROJECTION),
        message(4, "serviceAccountToken", &SERVICE_ACCOUNT_TOKEN_PROJECTION),
    ],
};

/// `SecretProjection` and `ConfigMapProjection` share their layout.
static OBJECT_PROJECTION: Message = Message {
    name: "SecretProjection",
    fields: &[
        message(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE).inline(),
        message(2, "items", &KEY_TO_PATH).repeated(),
        boolean(4, "optional").keep(),
    ],
};

static SERVICE_ACCOUNT_TOKEN_PROJECTION: Message = Message {
    name: "ServiceAccountTokenProjection",
    fields: &[
        string(1, "audience"),
        int64(2, "expirationSeconds").keep(),
        string(3, "path").keep(),
    ],
};
