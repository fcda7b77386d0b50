//! `authentication.k8s.io/v1` and `authorization.k8s.io/v1`: TokenRequest,
//! the reviews, and their specs. Statuses are the server's answer and are
//! described only as far as a client might echo them back.

use super::meta::{LABEL_SELECTOR_REQUIREMENT, OBJECT_META};
use super::{boolean, int64, message, string, string_list, time, Message};

/// `TokenRequest`, the `serviceaccounts/token` subresource's object.
pub static TOKEN_REQUEST: Message = Message {
    name: "TokenRequest",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &TOKEN_REQUEST_SPEC),
        message(3, "status", &TOKEN_REQUEST_STATUS),
    ],
};

static TOKEN_REQUEST_SPEC: Message = Message {
    name: "TokenRequestSpec",
    fields: &[
        string(1, "audiences").repeated(),
        int64(4, "expirationSeconds").keep(),
        message(3, "boundObjectRef", &BOUND_OBJECT_REFERENCE),
    ],
};

static BOUND_OBJECT_REFERENCE: Message = Message {
    name: "BoundObjectReference",
    fields: &[
        string(1, "kind"),
        string(2, "apiVersion"),
        string(3, "name"),
        string(4, "uid"),
    ],
};

static TOKEN_REQUEST_STATUS: Message = Message {
    name: "TokenRequestStatus",
    fields: &[string(1, "token"), time(2, "expirationTimestamp")],
};

/// `TokenReview`.
pub static TOKEN_REVIEW: Message = Message {
    name: "TokenReview",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &TOKEN_REVIEW_SPEC),
        message(3, "status", &EMPTY_STATUS),
    ],
};

static TOKEN_REVIEW_SPEC: Message = Message {
    name: "TokenReviewSpec",
    fields: &[string(1, "token"), string(2, "audiences").repeated()],
};

/// `SelfSubjectReview`: a client sends it empty and reads `status`.
pub static SELF_SUBJECT_REVIEW: Message = Message {
    name: "SelfSubjectReview",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "status", &SELF_SUBJECT_REVIEW_STATUS),
    ],
};

static SELF_SUBJECT_REVIEW_STATUS: Message = Message {
    name: "SelfSubjectReviewStatus",
    fields: &[message(1, "userInfo", &USER_INFO)],
};

static USER_INFO: Message = Message {
    name: "UserInfo",
    fields: &[
        string(1, "username"),
        string(2, "uid"),
        string(3, "groups").repeated(),
        string_list(4, "extra").map(),
    ],
};

/// `SelfSubjectAccessReview`.
pub static SELF_SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "SelfSubjectAccessReview",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &SELF_SUBJECT_ACCESS_REVIEW_SPEC),
        message(3, "status", &SUBJECT_ACCESS_REVIEW_STATUS),
    ],
};

static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        message(1, "resourceAttributes", &RESOURCE_ATTRIBUTES),
        message(2, "nonResourceAttributes", &NON_RESOURCE_ATTRIBUTES),
    ],
};

/// `SubjectAccessReview` and `LocalSubjectAccessReview` share their layout.
pub static SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "SubjectAccessReview",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &SUBJECT_ACCESS_REVIEW_SPEC),
        message(3, "status", &SUBJECT_ACCESS_REVIEW_STATUS),
    ],
};

static SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "SubjectAccessReviewSpec",
    fields: &[
        message(1, "resourceAttributes", &RESOURCE_ATTRIBUTES),
        message(2, "nonResourceAttributes", &NON_RESOURCE_ATTRIBUTES),
        string(3, "user"),
        string(4, "groups").repeated(),
        string_list(5, "extra").map(),
        string(6, "uid"),
    ],
};

static RESOURCE_ATTRIBUTES: Message = Message {
    name: "ResourceAttributes",
    fields: &[
        string(1, "namespace"),
        string(2, "verb"),
        string(3, "group"),
        string(4, "version"),
        string(5, "resource"),
        string(6, "subresource"),
        string(7, "name"),
        message(8, "fieldSelector", &FIELD_SELECTOR_ATTRIBUTES),
        message(9, "labelSelector", &LABEL_SELECTOR_ATTRIBUTES),
    ],
};

static FIELD_SELECTOR_ATTRIBUTES: Message = Message {
    name: "FieldSelectorAttributes",
    fields: &[
        string(1, "rawSelector"),
        message(2, "requirements", &FIELD_SELECTOR_REQUIREMENT).repeated(),
    ],
};

static FIELD_SELECTOR_REQUIREMENT: Message = Message {
    name: "FieldSelectorRequirement",
    fields: &[
        string(1, "key").keep(),
        string(2, "operator").keep(),
        string(3, "values").repeated(),
    ],
};

static LABEL_SELECTOR_ATTRIBUTES: Message = Message {
    name: "LabelSelectorAttributes",
    fields: &[
        string(1, "rawSelector"),
        message(2, "requirements", &LABEL_SELECTOR_REQUIREMENT).repeated(),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Message = Message {
    name: "NonResourceAttributes",
    fields: &[string(1, "path"), string(2, "verb")],
};

static SUBJECT_ACCESS_REVIEW_STATUS: Message = Message {
    name: "SubjectAccessReviewStatus",
    fields: &[
        boolean(1, "allowed").keep(),
        boolean(4, "denied"),
        string(2, "reason"),
        string(3, "evaluationError"),
    ],
};

/// `SelfSubjectRulesReview`.
pub static SELF_SUBJECT_RULES_REVIEW: Message = Message {
    name: "SelfSubjectRulesReview",
    fields: &[
        message(1, "metadata", &OBJECT_META),
        message(2, "spec", &SELF_SUBJECT_RULES_REVIEW_SPEC),
        message(3, "status", &EMPTY_STATUS),
    ],
};

static SELF_SUBJECT_RULES_REVIEW_SPEC: Message = Message {
    name: "SelfSubjectRulesReviewSpec",
    fields: &[string(1, "namespace")],
};

/// A status the server fills in and ignores on input.
static EMPTY_STATUS: Message = Message {
    name: "Status",
    fields: &[],
};
