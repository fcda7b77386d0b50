//! The person API: JSON under `/api/portcullis/v1/`, for the command line
//! a person runs on their own machine (`portcullis whoami`, `access …`,
//! `approvals …`, `credential list|revoke`).
//!
//! Every call is authenticated with the person's own bearer credential;
//! an agent's or a bot's is refused (403, `not_person` in the audit). The
//! caller is the decider: decisions go through [`crate::access`] and
//! [`crate::approvals::decide`] with the authenticated person, exactly as
//! the web pages decide, so a person refused there is refused here with
//! the same words. Every call is its request's audit row (the door sits
//! inside the record layer); decisions add their own rows, as on the web.
//! Errors are JSON: `{"error": "<message>", "code": <status>}`.
//!
//! | call | what |
//! | --- | --- |
//! | `GET whoami` | the person, their credential, admin or not, grants in effect |
//! | `GET access-requests` | their own requests and those they may decide |
//! | `POST access-requests` | ask: `{cluster, role, namespace?, duration_seconds, reason}` |
//! | `POST access-requests/<id>/approve` | approve; the grant is bound before the answer |
//! | `POST access-requests/<id>/deny` | deny: `{reason?}` |
//! | `GET held-writes[?pending=true]` | held writes waiting on them, and their own |
//! | `GET held-writes/<id>` | one, with its text (diff, dry run) |
//! | `POST held-writes/<id>/approve`, `…/deny` | decide: `{reason?}` |
//! | `GET credentials` | their own credentials (never a token) |
//! | `POST credentials/<id>/revoke` | revoke one of their own |
//! | `GET group-rules` | admins only: the group rules |
//! | `POST group-rules` | admins only: add `{group, cluster, role, namespace?}` |
//! | `POST group-rules/<id>/remove` | admins only: remove; its grants are revoked |
//! | `GET trust-rules[?bot=<bot>]` | admins only: bots' trust rules for CI tokens |
//! | `POST trust-rules` | admins only: add `{bot, issuer, audience, claims: ["name=value"], duration_seconds?, max_token_age_seconds?}` |
//! | `POST trust-rules/<id>/remove` | admins only: remove |

mod access;
mod held;
mod me;
mod rules;
mod trust;

use crate::audit::refusal::Refusal;
use crate::audit::row::AuditRow;
use crate::body::ReadError;
use crate::body::{self, Body};
use crate::config::Config;
use crate::identity::authenticate::Authenticator;
use crate::identity::{Identity, PrincipalKind};
use crate::reconcile::Reconciler;
use crate::store::Store;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};

/// The largest request body accepted.
const BODY_LIMIT: usize = 16 * 1024;

/// What the API needs: the store, the configuration (roles, limits) and,
/// once the server has one, the reconciler that binds approved grants.
#[derive(Debug)]
pub struct Api {
    store: Store,
    config: Arc<Config>,
    reconciler: OnceLock<Arc<Reconciler>>,
}

/// A refused or failed call: its status, the message for the person, and
/// the refusal for the audit row when portcullis refused it.
#[derive(Debug)]
pub struct ApiError {
    code: StatusCode,
    message: String,
    refusal: Option<Refusal>,
}

impl ApiError {
    fn new(code: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            refusal: None,
        }
    }

    fn refused(code: StatusCode, message: impl Into<String>, refusal: Refusal) -> ApiError {
        ApiError {
            refusal: Some(refusal),
            ..ApiError::new(code, message)
        }
    }

    fn not_found() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "no such call in the portcullis API")
    }

    /// The store or a worker failed: said plainly, the cause logged.
    fn unavailable(cause: impl std::fmt::Display) -> ApiError {
        tracing::warn!(%cause, "person API call failed");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "portcullis cannot answer now; try again",
        )
    }
}

/// One call, parsed: the method, the path after the prefix split at `/`,
/// the query and the JSON body (`null` when there was none), and the
/// authenticator (whose cache a revocation clears at once).
pub(crate) struct Call<'a> {
    authenticator: &'a Authenticator,
    method: Method,
    segments: Vec<&'a str>,
    query: Option<String>,
    body: Value,
}

impl Api {
    /// The API over `store` with `config`'s roles and clusters.
    pub fn new(config: &Config, store: Store) -> Api {
        Api {
            store,
            config: Arc::new(config.clone()),
            reconciler: OnceLock::new(),
        }
    }

    /// Bind approved grants through `reconciler` before answering (the
    /// server sets it once it has built one).
    pub fn set_reconciler(&self, reconciler: Arc<Reconciler>) {
        let _ = self.reconciler.set(reconciler);
    }

    /// Serve `rest` (the path after `/api/portcullis/v1/`); `row` is the
    /// request's audit row.
    pub async fn serve(
        &self,
        authenticator: &Authenticator,
        rest: &str,
        request: Request<Incoming>,
        row: &mut AuditRow,
    ) -> Response<Body> {
        row.verb = request.method().as_str().to_ascii_lowercase();
        let result = self.answer(authenticator, rest, request, row).await;
        match result {
            Ok(value) => json(StatusCode::OK, &value),
            Err(error) => {
                if let Some(why) = error.refusal {
                    row.refuse(why);
                }
                json(
                    error.code,
                    &json!({"error": error.message, "code": error.code.as_u16()}),
                )
            }
        }
    }

    async fn answer(
        &self,
        authenticator: &Authenticator,
        rest: &str,
        request: Request<Incoming>,
        row: &mut AuditRow,
    ) -> Result<Value, ApiError> {
        let identity = person(authenticator, request.headers(), row).await?;
        let method = request.method().clone();
        let query = request.uri().query().map(str::to_string);
        let body = read_json(request).await?;
        let call = Call {
            authenticator,
            method,
            segments: rest.split('/').collect(),
            query,
            body,
        };
        if let Some(id) = call.segments.get(1) {
            row.name = crate::audit::row::bounded(id);
        }
        self.dispatch(&identity, &call).await
    }

    async fn dispatch(&self, identity: &Identity, call: &Call<'_>) -> Result<Value, ApiError> {
        let segments = call.segments.as_slice();
        match (&call.method, segments.first().copied().unwrap_or_default()) {
            (_, "whoami") if segments.len() == 1 => me::whoami(self, identity, call).await,
            (_, "credentials") => me::credentials(self, identity, call).await,
            (_, "access-requests") => access::serve(self, identity, call).await,
            (_, "held-writes") => held::serve(self, identity, call).await,
            (_, "group-rules") => rules::serve(self, identity, call).await,
            (_, "trust-rules") => trust::serve(self, identity, call).await,
            _ => Err(ApiError::not_found()),
        }
    }

    /// Run `work` on the store off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Store, &Config) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let (store, config) = (self.store.clone(), self.config.clone());
        tokio::task::spawn_blocking(move || work(&store, &config))
            .await
            .map_err(ApiError::unavailable)?
    }
}

/// The caller, if they are a person with their own credential; an agent's
/// or a bot's credential, or none, is refused and noted in `row`.
async fn person(
    authenticator: &Authenticator,
    headers: &http::HeaderMap,
    row: &mut AuditRow,
) -> Result<Identity, ApiError> {
    let identity = match authenticator.authenticate(headers, &row.client).await {
        Ok(identity) => identity,
        Err(error) => {
            row.credential_prefix = error.prefix().unwrap_or_default().into();
            let why = Refusal::from(&error);
            if matches!(error, crate::identity::authenticate::AuthError::TooManyFailures { .. }) {
                return Err(ApiError::refused(StatusCode::TOO_MANY_REQUESTS, error.to_string(), why));
            }
            // Not a verdict on the token: `portcullis logout` takes a 401
            // for a credential that is gone.
            if matches!(error, crate::identity::authenticate::AuthError::StoreUnavailable) {
                return Err(ApiError::refused(
                    StatusCode::SERVICE_UNAVAILABLE,
                    error.to_string(),
                    why,
                ));
            }
            let message = format!("not signed in: {error}; run `portcullis login`");
            return Err(ApiError::refused(StatusCode::UNAUTHORIZED, message, why));
        }
    };
    row.identify(&identity);
    if identity.principal.kind != PrincipalKind::Person || identity.is_agent() {
        let what = if identity.is_agent() { "an agent's" } else { "a bot's" };
        let message = format!("the portcullis API is for people: this is {what} credential");
        return Err(ApiError::refused(StatusCode::FORBIDDEN, message, Refusal::NotPerson));
    }
    Ok(identity)
}

async fn read_json(request: Request<Incoming>) -> Result<Value, ApiError> {
    let bytes = crate::body::read_whole(request.into_body(), BODY_LIMIT, crate::body::SMALL_BODY_WITHIN)
        .await
        .map_err(|error| match error {
            ReadError::TooLarge => ApiError::refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is too large",
                Refusal::BodyTooLarge,
            ),
            ReadError::TimedOut => ApiError::refused(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
                Refusal::BodyTimedOut,
            ),
            ReadError::Cut => ApiError::refused(
                StatusCode::BAD_REQUEST,
                "the request body broke off",
                Refusal::BodyCutShort,
            ),
        })?;
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("the request body is not JSON: {e}")))
}

/// A string field of a JSON body, if set and not blank.
fn text_field<'v>(body: &'v Value, name: &str) -> Option<&'v str> {
    body.get(name).and_then(Value::as_str).filter(|s| !s.trim().is_empty())
}

/// The body is a JSON object of no fields but `allowed` (or none at all):
/// a field misspelt is refused, never dropped, as a `namspace` dropped
/// would widen a rule or a request to the whole cluster.
fn only_fields(body: &Value, allowed: &[&str]) -> Result<(), ApiError> {
    let fields = match body {
        Value::Null => return Ok(()),
        Value::Object(fields) => fields,
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "the request body must be a JSON object",
            ))
        }
    };
    match fields.keys().find(|name| !allowed.contains(&name.as_str())) {
        None => Ok(()),
        Some(name) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            match allowed {
                [] => format!(
                    "this call takes no fields, and `{}` was sent",
                    crate::text::Escaped(name)
                ),
                _ => format!(
                    "`{}` is not a field of this call, which takes {}",
                    crate::text::Escaped(name),
                    allowed.join(", ")
                ),
            },
        )),
    }
}

/// A decision's body: `{reason?}`, a text (see [`crate::text::checked_reason`],
/// which the decision checks again).
fn decision_reason(body: &Value) -> Result<Option<String>, ApiError> {
    only_fields(body, &["reason"])?;
    let bad = |why: String| ApiError::new(StatusCode::BAD_REQUEST, format!("`reason`: {why}"));
    match body.get("reason") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(crate::text::checked_reason(Some(text))
            .map_err(bad)?
            .map(str::to_string)),
        Some(_) => Err(bad("must be a text".into())),
    }
}

/// The text field `name` of a JSON body that may be left out (or null):
/// given, it must be a text that is not blank. A blank namespace read as
/// "left out" would have widened a grant to the whole cluster.
fn optional_field(body: &Value, name: &str) -> Result<Option<String>, ApiError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`{name}` is blank or not a text: leave it out instead"),
        )),
    }
}

/// The text field `name` of a JSON body, which must be given.
fn required_field(body: &Value, name: &str) -> Result<String, ApiError> {
    text_field(body, name)
        .map(str::to_string)
        .ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, format!("give `{name}`")))
}

/// Only an enabled admin may manage `what` (group rules, bots' trust
/// rules: they change who may do what).
fn must_be_admin(store: &crate::store::Store, person: &crate::identity::Principal, what: &str) -> Result<(), ApiError> {
    if store.is_admin(person).map_err(ApiError::unavailable)? {
        return Ok(());
    }
    Err(ApiError::refused(
        StatusCode::FORBIDDEN,
        format!("{person} is not an admin: {what} are managed by admins"),
        Refusal::NotAdmin,
    ))
}

/// The query parameter `name` of `call`.
fn query_param(call: &Call<'_>, name: &str) -> Option<String> {
    crate::doors::web::query_param(call.query.as_deref(), name)
}

fn json(code: StatusCode, value: &Value) -> Response<Body> {
    let mut response = Response::new(body::full(value.to_string()));
    *response.status_mut() = code;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_its_status_and_says_why_in_json() {
        let error = ApiError::refused(StatusCode::FORBIDDEN, "no", Refusal::NotPerson);
        let response = json(
            error.code,
            &json!({"error": error.message, "code": error.code.as_u16()}),
        );
        assert_eq!(response.status(), 403);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(text_field(&json!({"reason": "  "}), "reason"), None);
        assert_eq!(text_field(&json!({"reason": "why"}), "reason"), Some("why"));
    }

    /// A misspelt field is refused: `namspace` dropped would have asked
    /// for the whole cluster.
    #[test]
    fn a_field_a_call_does_not_take_is_refused_not_dropped() {
        let access = ["cluster", "role", "namespace", "duration_seconds", "reason"];
        assert!(only_fields(&json!({"cluster": "c", "namespace": "shop"}), &access).is_ok());
        assert!(only_fields(&Value::Null, &access).is_ok());
        let refused = only_fields(&json!({"cluster": "c", "namspace": "shop"}), &access).unwrap_err();
        assert_eq!(refused.code, StatusCode::BAD_REQUEST);
        assert!(
            refused.message.contains("`namspace` is not a field"),
            "{}",
            refused.message
        );
        assert!(only_fields(&json!(["cluster"]), &access).is_err(), "not an object");
        assert!(only_fields(&json!({"x": 1}), &[])
            .unwrap_err()
            .message
            .contains("takes no fields"));
    }

    #[test]
    fn a_decisions_reason_is_a_bounded_text_without_control_characters() {
        let reason = |body: Value| decision_reason(&body).map_err(|e| e.message);
        assert_eq!(reason(json!({})), Ok(None));
        assert_eq!(reason(json!({"reason": "  "})), Ok(None));
        assert_eq!(
            reason(json!({"reason": " ok\nfor now "})),
            Ok(Some("ok\nfor now".into()))
        );
        assert!(reason(json!({"reason": 5})).unwrap_err().contains("must be a text"));
        assert!(reason(json!({"reason": "a\u{1b}[31m"}))
            .unwrap_err()
            .contains("control"));
        assert!(reason(json!({"reason": "é".repeat(1001)}))
            .unwrap_err()
            .contains("1000"));
        assert!(reason(json!({"reason": "é".repeat(1000)})).is_ok());
        assert!(reason(json!({"reason": "x", "approve": true})).is_err());
    }

    #[test]
    fn a_namespace_given_blank_or_not_as_text_is_refused_not_read_as_the_whole_cluster() {
        let namespace = |body: Value| optional_field(&body, "namespace").map_err(|e| (e.code, e.message));
        assert_eq!(namespace(json!({})), Ok(None));
        assert_eq!(namespace(json!({"namespace": null})), Ok(None));
        assert_eq!(namespace(json!({"namespace": "shop"})), Ok(Some("shop".into())));
        for bad in [json!(""), json!("  "), json!(5), json!(["shop"])] {
            let refused = namespace(json!({ "namespace": bad })).unwrap_err();
            assert_eq!(refused.0, StatusCode::BAD_REQUEST);
            assert_eq!(refused.1, "`namespace` is blank or not a text: leave it out instead");
        }
    }
}
