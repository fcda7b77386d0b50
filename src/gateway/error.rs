//! Why portcullis itself refused or failed a request, as one enum, and the
//! one place ([`RequestError::status`]) that turns it into the Kubernetes
//! Status the caller reads and ([`RequestError::refused`]) the audit row's
//! refusal reason (a [`Refusal`], from the audit's one list of them).
//! Stages return it; only the edge (`trace::refuse`) turns it into a
//! Status. The cluster's own Status bodies pass through untouched;
//! MCP tools map the enum itself to their tool errors (`crate::mcp::error`).

use super::hold::{answer, ApprovalRefusal, HeldNotice};
use crate::audit::read::AuditReadError;
use crate::audit::refusal::Refusal;
use crate::document::DocumentError;
use crate::identity::authenticate::AuthError;
use crate::status::Status;
use std::time::Duration;

/// What went wrong on the request path, named for what happened.
#[derive(Debug)]
pub enum RequestError {
    /// The path matches no door.
    PathNotFound,
    /// `/clusters/<name>`: the name is not a valid cluster name.
    InvalidClusterName {
        /// The name as written.
        name: String,
    },
    /// The path holds an encoded slash (`%2F`, `%5C`) or a backslash.
    EncodedSlash,
    /// The path is not UTF-8 once percent-decoded.
    PathNotUtf8,
    /// The path holds a `.` or `..` segment.
    DotSegment,
    /// The path holds an empty segment (`//`).
    EmptySegment,
    /// The query has more parameters than Go's `net/url` reads.
    TooManyQueryParameters,
    /// The path names a cluster this portcullis does not serve.
    UnknownCluster {
        /// The name as written.
        cluster: String,
    },
    /// The client sent an `Impersonate-*` header.
    IdentityHeader {
        /// The header's name.
        header: String,
    },
    /// `/audit` was asked with another method than GET.
    AuditNotGet,
    /// `/audit` was asked by someone not an admin, with filters that do not
    /// parse, or when the audit could not be read.
    AuditQuery(AuditReadError),
    /// The bearer token was missing, unknown, expired or revoked, or
    /// credentials could not be checked.
    Unauthenticated(AuthError),
    /// The grants in effect could not be read.
    GrantsUnavailable {
        /// Why.
        cause: String,
    },
    /// A write or a Secret reveal could not be committed to the audit, so
    /// it was not sent.
    AuditUnavailable,
    /// A request's row could not be kept: the audit spool is past its bound
    /// (the store does not commit) or cannot be written, or a write's intent
    /// cannot be committed while the audit store is unreachable; so it was
    /// not sent.
    AuditSpoolUnavailable {
        /// Why, in the audit's words.
        cause: String,
    },
    /// An approved write could not be committed to the audit, so it was not
    /// sent.
    ApprovedWriteUnrecorded,
    /// An upgrade was asked for a request that is not exec, attach or
    /// port-forward.
    UpgradeNotStream,
    /// An upgrade protocol other than WebSocket and SPDY/3.1.
    UpgradeProtocol {
        /// The protocol asked for, lower-cased.
        wanted: String,
    },
    /// The request body is over the limit.
    RequestTooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The request body, read whole before it is sent on, did not arrive
    /// within the request timeout.
    BodyTimedOut {
        /// The request timeout.
        timeout: std::time::Duration,
    },
    /// The path and query cannot make an upstream URI.
    Unforwardable,
    /// The caller already has `[limits] streams_per_caller` long-running
    /// requests open on this cluster.
    TooManyStreams {
        /// The limit.
        most: usize,
    },
    /// The cluster's response is over the limit.
    ResponseTooLarge {
        /// Its `Content-Length`.
        len: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The cluster did not answer in time.
    UpstreamTimeout {
        /// The cluster.
        cluster: String,
        /// The request timeout.
        timeout: Duration,
    },
    /// The cluster could not be connected to.
    UpstreamUnavailable {
        /// The cluster.
        cluster: String,
    },
    /// The connection to the cluster failed after it was made.
    UpstreamFailed {
        /// The cluster.
        cluster: String,
    },
    /// A Secret request asked only for media types portcullis cannot redact.
    NotAcceptable {
        /// Why, for the caller.
        message: String,
    },
    /// A Secret response, read whole to redact it, did not end in time.
    SecretsTimedOut {
        /// The deadline's own message.
        cause: String,
    },
    /// A Secret response, read whole to redact it, was over the cap.
    SecretsTooLarge {
        /// The cap's own message.
        cause: String,
    },
    /// The Secret values in a response could not be hidden: refused.
    Unredactable {
        /// Why.
        cause: String,
    },
    /// A JSON Patch of a Secret from a caller who sees its values hidden:
    /// `copy`, `move` and `test` read values the caller may not see (into
    /// an annotation, or into a field whose refusal quotes the value).
    SecretJsonPatch,
    /// A Secret write from a caller who sees values hidden carries a
    /// redaction marker back in place of a value.
    SecretMarkerWritten,
    /// `read_secret` where none of the grants in effect is of a role that
    /// reveals Secrets (its person would see the values hidden).
    RevealNotGranted {
        /// The Secret's namespace.
        namespace: String,
    },
    /// A RoleBinding or ClusterRoleBinding write names one of portcullis's
    /// identities (`user:…`, `bot:…`, `portcullis:grant:…`, or
    /// `system:authenticated`, which the API server adds to each).
    BindsIdentity {
        /// The name, as the caller wrote it.
        name: String,
    },
    /// A RoleBinding or ClusterRoleBinding write whose subjects portcullis
    /// cannot read.
    BindingUnreadable {
        /// Why, completing "the binding …".
        why: String,
    },
    /// A write needs a person's approval, but no `[approvals] key_file` is
    /// set to hold it.
    WritesNotHeld,
    /// No key to seal a held write's body with.
    HoldUnavailable,
    /// The requester already has the most held writes open at once.
    TooManyHeld {
        /// The most.
        limit: usize,
    },
    /// A held write's preview is over its limit.
    PreviewTooLarge {
        /// Why, for the caller.
        message: String,
    },
    /// A held Secret write's preview could not be redacted: not stored.
    PreviewUnredactable {
        /// Why, for the caller.
        message: String,
    },
    /// One of the hold stage's own requests got an answer cut short or over
    /// the response cap.
    AnswerCutShort,
    /// The held writes store could not be reached.
    StoreUnavailable,
    /// The write is held for a person's approval, or was denied, expired or
    /// already run: the caller is told so instead of the cluster's answer.
    Held {
        /// The held write, as the caller is told of it.
        notice: Box<HeldNotice>,
        /// How long a repeated call waits for the decision.
        wait: Duration,
    },
    /// The call names an approval it may not run (none of the caller's, or
    /// one held for another write): nothing ran.
    Approval(ApprovalRefusal),
    /// Waiting for a held write's decision failed.
    WaitFailed {
        /// Why.
        cause: String,
    },
    /// A held request could not be rebuilt.
    Unrebuildable,
    /// A write waiting for approval has a body portcullis would refuse to
    /// parse when it runs it.
    UnreadableHeldBody(DocumentError),
    /// The stored body of an approved write is refused by the parser.
    HeldBodyRefused(DocumentError),
    /// A write to hold whose body portcullis cannot write its run's
    /// precondition into (protobuf, CBOR): it would run unguarded.
    UnguardableHeldBody {
        /// The body's media type, as sent.
        content_type: String,
    },
    /// The approved write's body is no longer stored.
    HeldBodyGone,
    /// The dry run tried again before an approved write was refused by the
    /// cluster (a grant not bound yet, a quota): the write was not sent.
    DryRunAgainRefused {
        /// The dry run's code.
        code: u16,
    },
    /// An approved write's call no longer holds what let it through (its
    /// credential, its grants): it was not run.
    AskerGone {
        /// Why.
        why: &'static str,
    },
    /// An approved write without a precondition the API server takes found
    /// the cluster changed since its dry run: it was not sent.
    ChangedSinceApproval {
        /// What changed.
        message: &'static str,
    },
    /// The approved write's stored method is not a method.
    StoredMethod,
    /// A failure of portcullis itself (sealing, encoding, headers).
    Internal {
        /// Why.
        cause: String,
    },
}

impl RequestError {
    /// The Status the caller is sent.
    pub fn status(&self) -> Status {
        use RequestError as E;
        match self {
            E::PathNotFound => Status::path_not_found(),
            E::InvalidClusterName { name } => Status::bad_request(format!(
                "invalid cluster name {name:?} in the path: use /clusters/<name>/… with the name from your kubeconfig"
            )),
            E::EncodedSlash => Status::bad_request(
                "the path contains an encoded slash or a backslash, which portcullis does not forward",
            ),
            E::PathNotUtf8 => Status::bad_request("the path is not valid UTF-8 once percent-decoded"),
            E::DotSegment => Status::bad_request(
                "the path contains a dot segment ('.' or '..'), which portcullis does not forward",
            ),
            E::EmptySegment => Status::bad_request("the path contains an empty segment ('//')"),
            E::TooManyQueryParameters => Status::bad_request(format!(
                "the query has more than {} parameters, which the API server would ignore all of",
                super::router::MAX_QUERY_PARAMETERS
            )),
            E::UnknownCluster { cluster } => Status::failure(
                404,
                "NotFound",
                format!("cluster \"{cluster}\" is not served by this portcullis"),
            ),
            E::IdentityHeader { header } => Status::bad_request(format!(
                "portcullis refuses requests carrying {header}: your credential decides who you are; ask for a grant instead"
            )),
            E::AuditNotGet => Status::failure(405, "MethodNotAllowed", "the audit is read with GET"),
            E::AuditQuery(error) => error.status(),
            E::Unauthenticated(error) => unauthenticated(error),
            _ => self.stage_status(),
        }
    }

    /// The Status of a failure after authentication.
    fn stage_status(&self) -> Status {
        use RequestError as E;
        match self {
            E::GrantsUnavailable { cause } => {
                Status::unavailable(format!("portcullis cannot read grants now ({cause}); try again"))
            }
            E::AuditUnavailable => Status::unavailable(
                "portcullis cannot record this request in its audit now, so it was not sent; try again",
            ),
            E::AuditSpoolUnavailable { cause } => Status::unavailable(format!(
                "portcullis cannot record this request in its audit now ({cause}), so it was not sent; try again"
            )),
            E::ApprovedWriteUnrecorded => Status::unavailable(
                "portcullis cannot record this write in its audit now, so it was not sent; try again",
            ),
            E::UpgradeNotStream => {
                Status::bad_request("portcullis upgrades only exec, attach and port-forward requests")
            }
            E::UpgradeProtocol { wanted } => Status::bad_request(format!(
                "upgrade protocol {wanted:?} is not allowed: only WebSocket and SPDY/3.1"
            )),
            E::RequestTooLarge { limit } => Status::too_large(format!(
                "the request body is larger than portcullis's limit of {limit} bytes"
            )),
            E::BodyTimedOut { timeout } => Status::failure(
                408,
                "Timeout",
                format!(
                    "the request body did not arrive within {}",
                    humantime::format_duration(*timeout)
                ),
            ),
            E::Unforwardable => Status::bad_request("the request path cannot be forwarded"),
            // No Retry-After: the places come back only as the caller's own
            // streams close, and client-go would retry blindly meanwhile.
            E::TooManyStreams { most } => Status::failure(
                429,
                "TooManyRequests",
                format!(
                    "you already have {most} long-running requests (watch, exec, attach, port-forward, proxy, logs -f) \
                     open on this cluster, portcullis's limit (a person's or bot's, its agents' included; an agent's alone is half): \
                     close some, then retry"
                ),
            ),
            _ => self.upstream_status(),
        }
    }

    /// The Status of a failure reaching the cluster or reading its answer.
    fn upstream_status(&self) -> Status {
        use RequestError as E;
        match self {
            E::ResponseTooLarge { len, limit } => Status::failure(
                502,
                "BadGateway",
                format!(
                    "the cluster's response ({len} bytes) is larger than portcullis's limit of {limit} bytes: ask for fewer objects at a time (kubectl --chunk-size, or limit and continue in the API)"
                ),
            ),
            E::UpstreamTimeout { cluster, timeout } => Status::failure(
                504,
                "Timeout",
                format!(
                    "cluster \"{cluster}\" did not answer within {}",
                    humantime::format_duration(*timeout)
                ),
            ),
            E::UpstreamUnavailable { cluster } => Status::unavailable(format!("cluster \"{cluster}\" is unreachable")),
            E::UpstreamFailed { cluster } => Status::failure(
                502,
                "BadGateway",
                format!("the connection to cluster \"{cluster}\" failed"),
            ),
            E::NotAcceptable { message } => Status::failure(406, "NotAcceptable", message.clone()),
            E::SecretsTimedOut { cause } => Status::failure(
                504,
                "Timeout",
                format!("{cause}; Secret responses are read whole to redact them"),
            ),
            E::SecretsTooLarge { cause } => {
                Status::failure(502, "BadGateway", format!("{cause}: ask for fewer Secrets at a time"))
            }
            E::RevealNotGranted { namespace } => Status::failure(
                403,
                "Forbidden",
                format!(
                    "none of the grants in effect here is of a role that reveals Secret values in {}: an agent \
                     reads a Secret's values only as far as its person's grants would show them",
                    crate::text::escape_control(namespace)
                ),
            ),
            E::SecretJsonPatch => Status::failure(
                403,
                "Forbidden",
                "a Secret is patched for a caller who sees its values hidden only by a merge patch, a strategic \
                 merge patch or server-side apply: a JSON Patch's copy, move and test operations would read them",
            ),
            E::BindsIdentity { name } => Status::failure(
                403,
                "Forbidden",
                format!(
                    "portcullis refuses a binding that names one of its identities ({name:?}): its people, bots and \
                     grants get access only by grants, which end; ask for a grant instead"
                ),
            ),
            E::BindingUnreadable { why } => Status::bad_request(format!(
                "portcullis reads a binding's subjects before it is written, and the binding {why}"
            )),
            E::SecretMarkerWritten => Status::bad_request(
                "this Secret write carries a <redacted, N bytes> marker back in place of a value: the cluster would \
                 store the marker and lose the value; send only what you change (a merge patch or server-side apply)",
            ),
            E::Unredactable { cause } => Status::failure(
                502,
                "BadGateway",
                format!("portcullis refused the cluster's response because it could not hide the Secret values in it: {cause}"),
            ),
            _ => self.hold_status(),
        }
    }

    /// The Status of a failure of the hold stage.
    fn hold_status(&self) -> Status {
        use RequestError as E;
        match self {
            E::WritesNotHeld => Status::unavailable(
                "your writes need a person's approval, but this portcullis cannot hold writes ([approvals] key_file is not set): nothing was changed",
            ),
            E::HoldUnavailable => Status::unavailable("portcullis cannot hold writes now"),
            E::PreviewTooLarge { message } => Status::too_large(message.clone()),
            // 403, as a held write is: kubectl and client-go retry a 429.
            E::TooManyHeld { limit } => Status::failure(
                403,
                "Forbidden",
                format!(
                    "you have {limit} writes waiting for a person's approval or to run once approved: run the \
                     approved ones, or wait until a person decides or they expire, before asking for another"
                ),
            ),
            E::PreviewUnredactable { message } => Status::failure(502, "BadGateway", message.clone()),
            E::AnswerCutShort => Status::failure(502, "BadGateway", "the cluster's answer was cut short or too large"),
            E::StoreUnavailable => Status::unavailable("portcullis cannot reach its store now; try again"),
            E::Held { notice, wait } => answer::held_status(notice, *wait),
            E::Approval(refusal) => answer::approval_status(refusal),
            E::WaitFailed { cause } => Status::unavailable(cause.clone()),
            E::Unrebuildable => Status::bad_request("the request cannot be rebuilt"),
            E::UnreadableHeldBody(error) => Status::bad_request(format!(
                "this write waits for a person's approval, so portcullis reads its body, and the request body {error}"
            )),
            E::HeldBodyRefused(error) => Status::bad_request(format!("the held request body {error}")),
            E::UnguardableHeldBody { content_type } => Status::failure(
                415,
                "UnsupportedMediaType",
                format!(
                    "this write waits for a person's approval, and once approved portcullis runs it only on the \
                     object that was approved, with a precondition it writes into the body; it cannot write one \
                     into a body of type '{}': send this write as application/json (kubectl does)",
                    crate::text::Escaped(content_type)
                ),
            ),
            E::HeldBodyGone => Status::internal("the held write's body is gone"),
            E::ChangedSinceApproval { message } => Status::failure(409, "Conflict", *message),
            E::DryRunAgainRefused { code } => Status::failure(
                *code,
                match code {
                    403 => "Forbidden",
                    404 => "NotFound",
                    409 => "Conflict",
                    422 => "Invalid",
                    429 => "TooManyRequests",
                    code if *code >= 500 => "InternalError",
                    _ => "BadRequest",
                },
                format!(
                    "the dry run tried again just before the approved write answered {code}: nothing was sent; ask again"
                ),
            ),
            E::AskerGone { why } => Status::failure(
                403,
                "Forbidden",
                format!("{why}: the approved write was not run"),
            ),
            E::StoredMethod => Status::internal("stored method"),
            E::Internal { cause } => Status::internal(cause.clone()),
            _ => Status::internal("unmapped request error"),
        }
    }

    /// The audit row's refusal reason, when portcullis refused the request
    /// itself (rather than failing it).
    pub fn refused(&self) -> Option<Refusal> {
        use RequestError as E;
        Some(match self {
            E::InvalidClusterName { .. }
            | E::EncodedSlash
            | E::PathNotUtf8
            | E::DotSegment
            | E::EmptySegment
            | E::TooManyQueryParameters => Refusal::Path,
            E::IdentityHeader { .. } => Refusal::IdentityHeader,
            E::AuditQuery(AuditReadError::NotAdmin(_)) => Refusal::NotAdmin,
            E::Unauthenticated(error) => error.into(),
            E::AuditUnavailable | E::AuditSpoolUnavailable { .. } => Refusal::AuditUnavailable,
            E::RequestTooLarge { .. } => Refusal::BodyTooLarge,
            E::BodyTimedOut { .. } => Refusal::BodyTimedOut,
            E::TooManyStreams { .. } => Refusal::TooManyStreams,
            E::WritesNotHeld => Refusal::ApprovalsUnconfigured,
            E::PreviewTooLarge { .. } => Refusal::PreviewTooLarge,
            E::TooManyHeld { .. } => Refusal::TooManyHeld,
            E::PreviewUnredactable { .. } => Refusal::PreviewUnredactable,
            E::SecretsTimedOut { .. } | E::SecretsTooLarge { .. } | E::Unredactable { .. } => Refusal::Unredactable,
            E::SecretJsonPatch => Refusal::SecretJsonPatch,
            E::SecretMarkerWritten => Refusal::SecretMarker,
            E::RevealNotGranted { .. } => Refusal::RevealNotGranted,
            E::BindsIdentity { .. } => Refusal::BindsIdentity,
            E::BindingUnreadable { .. } => Refusal::BindingUnreadable,
            E::UnreadableHeldBody(error) => error.into(),
            E::UnguardableHeldBody { .. } => Refusal::UnguardableHeldBody,
            E::Approval(ApprovalRefusal::Unknown { .. }) => Refusal::ApprovalUnknown,
            E::Approval(ApprovalRefusal::Mismatch { .. }) => Refusal::ApprovalMismatch,
            _ => return None,
        })
    }
}

impl From<RequestError> for Status {
    fn from(error: RequestError) -> Status {
        error.status()
    }
}

/// A refused credential's Status: 503 when credentials cannot be checked.
fn unauthenticated(error: &AuthError) -> Status {
    let message = match error {
        AuthError::StoreUnavailable => {
            return Status::unavailable("portcullis cannot check credentials now; try again")
        }
        AuthError::TooManyFailures { retry_after_secs, .. } => {
            return Status::failure(429, "TooManyRequests", error.to_string()).with_details(
                crate::status::StatusDetails {
                    retry_after_seconds: Some(*retry_after_secs),
                    ..crate::status::StatusDetails::default()
                },
            )
        }
        AuthError::Missing => "Unauthorized: send a portcullis token as 'Authorization: Bearer <token>'".to_string(),
        other => format!("Unauthorized: {other}"),
    };
    Status::unauthorized(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_names_its_reason_in_the_audit_row() {
        assert_eq!(RequestError::DotSegment.refused().map(Refusal::as_str), Some("path"));
        assert_eq!(
            RequestError::IdentityHeader {
                header: "Impersonate-User".into()
            }
            .refused()
            .map(Refusal::as_str),
            Some("identity_header")
        );
        assert_eq!(
            RequestError::AuditUnavailable.refused().map(Refusal::as_str),
            Some("audit_unavailable")
        );
        let deep = DocumentError::TooDeep { limit: 3 };
        assert_eq!(
            RequestError::UnreadableHeldBody(deep).refused().map(Refusal::as_str),
            Some("body_too_deep")
        );
        assert_eq!(
            RequestError::RequestTooLarge { limit: 1 }
                .refused()
                .map(Refusal::as_str),
            Some("body_too_large")
        );
        assert_eq!(RequestError::UpstreamFailed { cluster: "c".into() }.refused(), None);
    }

    #[test]
    fn an_answer_whose_secrets_cannot_be_hidden_is_refused_as_unredactable() {
        let cause = String::from("x");
        for error in [
            RequestError::SecretsTimedOut { cause: cause.clone() },
            RequestError::SecretsTooLarge { cause: cause.clone() },
            RequestError::Unredactable { cause },
        ] {
            assert_eq!(error.refused().map(Refusal::as_str), Some("unredactable"), "{error:?}");
        }
    }

    #[test]
    fn statuses_keep_the_codes_and_reasons_kubernetes_clients_read() {
        let cases = [
            (RequestError::PathNotFound, 404, "NotFound"),
            (RequestError::UnknownCluster { cluster: "x".into() }, 404, "NotFound"),
            (RequestError::AuditNotGet, 405, "MethodNotAllowed"),
            (RequestError::Unauthenticated(AuthError::Missing), 401, "Unauthorized"),
            (
                RequestError::Unauthenticated(AuthError::StoreUnavailable),
                503,
                "ServiceUnavailable",
            ),
            (RequestError::RequestTooLarge { limit: 1 }, 413, "RequestEntityTooLarge"),
            (RequestError::TooManyStreams { most: 1 }, 429, "TooManyRequests"),
            (RequestError::ResponseTooLarge { len: 2, limit: 1 }, 502, "BadGateway"),
            (
                RequestError::UpstreamTimeout {
                    cluster: "c".into(),
                    timeout: Duration::from_secs(1),
                },
                504,
                "Timeout",
            ),
            (
                RequestError::UpstreamUnavailable { cluster: "c".into() },
                503,
                "ServiceUnavailable",
            ),
            (RequestError::HeldBodyGone, 500, "InternalError"),
        ];
        for (error, code, reason) in cases {
            let status = error.status();
            assert_eq!((status.code, status.reason.as_str()), (code, reason), "{error:?}");
        }
        assert_eq!(
            RequestError::UnknownCluster { cluster: "x".into() }.status().message,
            "cluster \"x\" is not served by this portcullis"
        );
    }
}
