//! k8s.io/api `core/v1`: the objects kubectl creates (ConfigMap, Secret,
//! Namespace, ServiceAccount, Pod, Service, ResourceQuota). The pod spec
//! is in `pod`.

use super::meta::OBJECT_META;
use super::pod::POD_SPEC;
use super::{boolean, bytes, int32, int_or_string, message, quantity, string, Message};

/// `v1.ConfigMap`.
pub static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        boolean(4, "immutable").keep(),
        string(2, "data").map(),
        bytes(3, "binaryData").map(),
    ],
};

/// `v1.Secret`.
pub static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        boolean(5, "immutable").keep(),
        bytes(2, "data").map(),
        string(4, "stringData").map(),
        string(3, "type"),
    ],
};

/// `v1.Namespace`.
pub static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &NAMESPACE_SPEC),
        message(3, "status", &NAMESPACE_STATUS),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[string(1, "finalizers").repeated()],
};

static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[string(1, "phase")],
};

/// `v1.ServiceAccount`.
pub static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "secrets", &OBJECT_REFERENCE).repeated(),
        message(3, "imagePullSecrets", &LOCAL_OBJECT_REFERENCE).repeated(),
        boolean(4, "automountServiceAccountToken").keep(),
    ],
};

/// `v1.ObjectReference`.
pub static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        string(1, "kind"),
        string(2, "namespace"),
        string(3, "name"),
        string(4, "uid"),
        string(5, "apiVersion"),
        string(6, "resourceVersion"),
        string(7, "fieldPath"),
    ],
};

/// `v1.LocalObjectReference`.
pub static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[string(1, "name")],
};

/// `v1.Pod`.
pub static POD: Message = Message {
    name: "Pod",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &POD_SPEC),
        message(3, "status", &POD_STATUS),
    ],
};

static POD_STATUS: Message = Message {
    name: "PodStatus",
    fields: &[
        string(1, "phase"),
        string(3, "message"),
        string(4, "reason"),
        string(5, "hostIP"),
        string(6, "podIP"),
        string(9, "qosClass"),
    ],
};

/// `v1.Service`.
pub static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &SERVICE_SPEC),
        message(3, "status", &SERVICE_STATUS),
    ],
};

static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        message(1, "ports", &SERVICE_PORT).repeated(),
        string(2, "selector").map(),
        string(3, "clusterIP"),
        string(18, "clusterIPs").repeated(),
        string(4, "type"),
        string(5, "externalIPs").repeated(),
        string(7, "sessionAffinity"),
        string(8, "loadBalancerIP"),
        string(9, "loadBalancerSourceRanges").repeated(),
        string(10, "externalName"),
        string(11, "externalTrafficPolicy"),
        int32(12, "healthCheckNodePort"),
        boolean(13, "publishNotReadyAddresses"),
        message(14, "sessionAffinityConfig", &SESSION_AFFINITY_CONFIG),
        string(19, "ipFamilies").repeated(),
        string(17, "ipFamilyPolicy").keep(),
        boolean(20, "allocateLoadBalancerNodePorts").keep(),
        string(21, "loadBalancerClass").keep(),
        string(22, "internalTrafficPolicy").keep(),
    ],
};

static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        string(1, "name"),
        string(2, "protocol"),
        string(6, "appProtocol").keep(),
        int32(3, "port").keep(),
        int_or_string(4, "targetPort"),
        int32(5, "nodePort"),
    ],
};

static SESSION_AFFINITY_CONFIG: Message = Message {
    name: "SessionAffinityConfig",
    fields: &[message(1, "clientIP", &CLIENT_IP_CONFIG)],
};

static CLIENT_IP_CONFIG: Message = Message {
    name: "ClientIPConfig",
    fields: &[int32(1, "timeoutSeconds").keep()],
};

static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[message(1, "loadBalancer", &LOAD_BALANCER_STATUS)],
};

/// `v1.LoadBalancerStatus` (and networking's `IngressLoadBalancerStatus`,
/// which has the same fields).
pub static LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[message(1, "ingress", &LOAD_BALANCER_INGRESS).repeated()],
};

static LOAD_BALANCER_INGRESS: Message = Message {
    name: "LoadBalancerIngress",
    fields: &[string(1, "ip"), string(2, "hostname")],
};

/// `v1.ResourceQuota`.
pub static RESOURCE_QUOTA: Message = Message {
    name: "ResourceQuota",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &RESOURCE_QUOTA_SPEC),
        message(3, "status", &RESOURCE_QUOTA_STATUS),
    ],
};

static RESOURCE_QUOTA_SPEC: Message = Message {
    name: "ResourceQuotaSpec",
    fields: &[
        quantity(1, "hard").map(),
        string(2, "scopes").repeated(),
        message(3, "scopeSelector", &SCOPE_SELECTOR),
    ],
};

static SCOPE_SELECTOR: Message = Message {
    name: "ScopeSelector",
    fields: &[message(1, "matchExpressions", &SCOPED_RESOURCE_SELECTOR_REQUIREMENT).repeated()],
};

static SCOPED_RESOURCE_SELECTOR_REQUIREMENT: Message = Message {
    name: "ScopedResourceSelectorRequirement",
    fields: &[
        string(1, "scopeName").keep(),
        string(2, "operator").keep(),
        string(3, "values").repeated(),
    ],
};

static RESOURCE_QUOTA_STATUS: Message = Message {
    name: "ResourceQuotaStatus",
    fields: &[quantity(1, "hard").map(), quantity(2, "used").map()],
};
