//! k8s.io/apimachinery `pkg/apis/meta/v1`: ObjectMeta, LabelSelector,
//! DeleteOptions and their parts.

use super::{boolean, int64, message, string, time, Message};

/// `metav1.ObjectMeta`. `managedFields` (17) is left out: clients do not
/// send it on create, and the server owns it.
pub static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        string(1, "name"),
        string(2, "generateName"),
        string(3, "namespace"),
        string(4, "selfLink"),
        string(5, "uid"),
        string(6, "resourceVersion"),
        int64(7, "generation"),
        time(8, "creationTimestamp"),
        time(9, "deletionTimestamp"),
        int64(10, "deletionGracePeriodSeconds").keep(),
        string(11, "labels").map(),
        string(12, "annotations").map(),
        message(13, "ownerReferences", &OWNER_REFERENCE).repeated(),
        string(14, "finalizers").repeated(),
    ],
};

/// `metav1.OwnerReference`.
pub static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        string(5, "apiVersion").keep(),
        string(1, "kind").keep(),
        string(3, "name").keep(),
        string(4, "uid").keep(),
        boolean(6, "controller").keep(),
        boolean(7, "blockOwnerDeletion").keep(),
    ],
};

/// `metav1.LabelSelector`.
pub static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        string(1, "matchLabels").map(),
        message(2, "matchExpressions", &LABEL_SELECTOR_REQUIREMENT).repeated(),
    ],
};

/// `metav1.LabelSelectorRequirement`.
pub static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        string(1, "key").keep(),
        string(2, "operator").keep(),
        string(3, "values").repeated(),
    ],
};

/// `metav1.DeleteOptions`.
pub static DELETE_OPTIONS: Message = Message {
    name: "DeleteOptions",
    fields: &[
        int64(1, "gracePeriodSeconds").keep(),
        message(2, "preconditions", &PRECONDITIONS),
        boolean(3, "orphanDependents").keep(),
        string(4, "propagationPolicy").keep(),
        string(5, "dryRun").repeated(),
        boolean(6, "ignoreStoreReadErrorWithClusterBreakingPotential").keep(),
    ],
};

/// `metav1.Preconditions`: both fields are pointers.
pub static PRECONDITIONS: Message = Message {
    name: "Preconditions",
    fields: &[string(1, "uid").keep(), string(2, "resourceVersion").keep()],
};
