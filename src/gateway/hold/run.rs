//! A repeated call: wait for the decision, then run the stored request
//! exactly once (a compare-and-set in the store picks the one call that
//! runs it), with preconditions, so an object changed meanwhile answers 409.

use super::answer::ApprovedRun;
use super::intake::kept_headers;
use super::{blocking, request_with, Buffered, HoldCtx};
use crate::approvals::{HeldState, HeldWrite, Outcome, Precondition};
use crate::body::{self, Body};
use crate::document::{self, Bounds, DocumentError};
use crate::gateway::classify::classify;
use crate::gateway::error::RequestError;
use crate::gateway::metrics::Counted;
use crate::gateway::query::Query;
use crate::gateway::{Pipeline, Trace};
use crate::secrets::{redact_json, Target};
use bytes::Bytes;
use http::Response;
use serde_json::{json, Value};

/// A kept outcome's body is cut here: it is a reminder, not the object.
const OUTCOME_LIMIT: usize = 64 * 1024;

impl Pipeline {
    /// Wait (if asked to) for the decision on `held`, then answer it or run it.
    pub(super) async fn resume(
        &self,
        ctx: &HoldCtx<'_>,
        held: HeldWrite,
        waits: bool,
        request: Buffered,
        trace: &mut Trace,
    ) -> Result<Response<Body>, RequestError> {
        let store = self.approvals.store.clone();
        let wait = if waits {
            self.approvals.wait
        } else {
            std::time::Duration::ZERO
        };
        // Counted as waiting (also if its caller goes away meanwhile).
        let waiting = waits.then(|| Counted::in_gauge(self.metrics.held_writes_waiting.clone()));
        let held = crate::approvals::wait::until_decided(&store, &held.id, wait)
            .await
            .map_err(|e| RequestError::WaitFailed { cause: e.to_string() })?
            .unwrap_or(held);
        drop(waiting);
        if held.state == HeldState::Approved {
            // The wait may have lasted minutes: what let this call through
            // must still hold before the write runs under it.
            self.still_let_through(ctx, &request).await?;
            // Its checks' dry runs send the body as intake read it: a YAML
            // body as its JSON, as it was tried and is kept.
            let request = match super::intake::is_tried(ctx.info) {
                true => super::intake::as_json(request),
                false => request,
            };
            let id = held.id.clone();
            let store2 = store.clone();
            if blocking(move || store2.claim_held(&id, chrono::Utc::now())).await? {
                return self.execute(ctx, held, request, trace).await;
            }
            // Another call runs it: wait for its outcome, then report it.
            let ran = crate::approvals::wait::until_decided(&store, &held.id, self.approvals.wait)
                .await
                .map_err(|e| RequestError::WaitFailed { cause: e.to_string() })?
                .unwrap_or(held);
            return Err(self.answer(&ran));
        }
        if matches!(held.state, HeldState::Denied | HeldState::Expired | HeldState::Executed) {
            let id = held.id.clone();
            blocking(move || store.mark_held_answered(&id)).await?;
        }
        Err(self.answer(&held))
    }

    /// Run the approved write (this call won the claim).
    async fn execute(
        &self,
        ctx: &HoldCtx<'_>,
        held: HeldWrite,
        request: Buffered,
        trace: &mut Trace,
    ) -> Result<Response<Body>, RequestError> {
        // Whatever happens from here (an error, or the caller going away and
        // dropping this future), the claimed write must not stay "executing".
        let mut unfinished = Unfinished {
            store: self.approvals.store.clone(),
            id: held.id.clone(),
            done: false,
            sent: false,
        };
        let body = self.approved_body(&held).await?;
        trace.row.approved = true;
        if let Err(changed) = self.still_as_approved(ctx, &held, &request).await {
            // Nothing was sent: the outcome is the refusal, kept and answered.
            let (parts, answer) = self.refusal(trace, &changed).into_parts();
            let answer = super::read_limited(answer, usize::MAX).await.unwrap_or_default();
            let outcome = outcome(parts.status.as_u16(), &answer, None);
            let (store, id) = (self.approvals.store.clone(), held.id.clone());
            blocking(move || store.finish_held(&id, &outcome, chrono::Utc::now(), true)).await?;
            unfinished.done = true;
            return Ok(Response::from_parts(parts, body::full(answer)));
        }
        // The approved write is on record before the cluster sees it.
        self.audit
            .writer()
            .commit_intent((*trace.row).clone())
            .await
            .map_err(|error| {
                tracing::error!(%error, "the audit cannot commit: approved write not sent");
                RequestError::ApprovedWriteUnrecorded
            })?;
        unfinished.sent = true;
        let (parts, answer) = self.run_stored(ctx, &held, &request, body, trace).await?;
        // Known now, though the caller may leave before it is answered.
        trace.row.code = parts.status.as_u16();
        let now = chrono::Utc::now();
        let outcome = outcome(parts.status.as_u16(), &answer.0, answer.1);
        let (store, id) = (self.approvals.store.clone(), held.id.clone());
        blocking(move || store.finish_held(&id, &outcome, now, true)).await?;
        unfinished.done = true;
        tracing::info!(held = %held.id, code = parts.status.as_u16(), "approved write ran");
        let mut response = Response::from_parts(parts, body::full(answer.0));
        response.extensions_mut().insert(ApprovedRun {
            by: held.decided_by.clone().unwrap_or_default(),
            at: held.decided_at.unwrap_or(now),
        });
        Ok(response)
    }

    /// Does what let this call through still hold: its token (revoked,
    /// expired, its person, bot or agent disabled since it arrived) and the
    /// grants whose groups it would be sent with? A store that cannot say
    /// is a 503: the write is not run on a guess, and stays approved for a
    /// call that can be checked.
    async fn still_let_through(&self, ctx: &HoldCtx<'_>, request: &Buffered) -> Result<(), RequestError> {
        use crate::identity::authenticate::CredentialSource;
        let gone = |why: &'static str| RequestError::AskerGone { why };
        let unknown = |why: &str| RequestError::GrantsUnavailable { cause: why.into() };
        if let Some(token) = crate::identity::authenticate::bearer_token(&request.parts.headers) {
            let (store, hash) = (self.approvals.store.clone(), crate::identity::credential::hash(token));
            let found = blocking(move || {
                store
                    .find(&hash)
                    .map_err(|e| crate::store::StoreError::Invalid(e.to_string()))
            })
            .await
            .map_err(|_| unknown("portcullis could not check this call's credential"))?;
            let works = found.is_some_and(|(lookup, agent)| lookup.works(agent.as_ref(), chrono::Utc::now()));
            if !works {
                return Err(gone(
                    "the credential of this call was revoked, expired or disabled while it waited",
                ));
            }
        }
        match self
            .policy
            .still_granted(ctx.identity, &ctx.upstream.name, ctx.groups)
            .await
        {
            Some(true) => Ok(()),
            Some(false) => Err(gone("a grant this call was let through by ended while it waited")),
            None => Err(unknown("portcullis could not check this call's grants")),
        }
    }

    /// A deletecollection deletes what its selector matches when it runs,
    /// and an update or apply whose dry run created its object would change
    /// one made since: the API server takes no precondition for either, so
    /// the dry run is tried again and must find what the person approved
    /// (the same objects listed; the object still created). What is left is
    /// the moment between the two requests, not the minutes of a decision.
    async fn still_as_approved(
        &self,
        ctx: &HoldCtx<'_>,
        held: &HeldWrite,
        request: &Buffered,
    ) -> Result<(), RequestError> {
        let precondition = &held.request.precondition;
        let listing = held.request.verb == "deletecollection" && precondition.uids.is_some();
        if !listing && !precondition.creates {
            return Ok(());
        }
        let (parts, answer) = self.dry_run(ctx, request).await?;
        if !parts.status.is_success() {
            // Refused now (a grant not bound, a quota): that, not a change.
            return Err(RequestError::DryRunAgainRefused {
                code: parts.status.as_u16(),
            });
        }
        let same = if listing {
            let listed: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
            Some(super::intake::listed_uids(&listed)) == precondition.uids
        } else {
            parts.status == http::StatusCode::CREATED
        };
        if same {
            return Ok(());
        }
        Err(RequestError::ChangedSinceApproval {
            message: if listing {
                "the objects this deletecollection matches are not the ones approved: nothing was deleted; ask again"
            } else {
                "the object this write would have created exists now: nothing was changed; ask again"
            },
        })
    }

    /// The held write's stored body, opened, with the dry run's
    /// preconditions.
    async fn approved_body(&self, held: &HeldWrite) -> Result<Bytes, RequestError> {
        let (store, id) = (self.approvals.store.clone(), held.id.clone());
        let sealed = blocking(move || store.held_body(&id)).await?;
        let body = match (sealed, self.approvals.key.as_ref()) {
            (Some(sealed), Some(key)) => key
                .open(&held.id, &sealed)
                .map_err(|e| RequestError::Internal { cause: e.to_string() })?,
            _ => return Err(RequestError::HeldBodyGone),
        };
        let stored = &held.request;
        with_precondition(
            &stored.precondition,
            &stored.content_type,
            &stored.query,
            Bytes::from(body),
        )
    }

    /// Send exactly the stored request, read whole: its answer (a failure
    /// as its refusal, noted in `trace`), and whether it is about Secrets.
    async fn run_stored(
        &self,
        ctx: &HoldCtx<'_>,
        held: &HeldWrite,
        request: &Buffered,
        body: Bytes,
        trace: &mut Trace,
    ) -> Result<(http::response::Parts, (Bytes, Option<Target>)), RequestError> {
        let r = &held.request;
        let method = http::Method::from_bytes(r.method.as_bytes()).map_err(|_| RequestError::StoredMethod)?;
        // Exactly the stored request: its path, not this call's (which
        // `existing` found to be the same), is what the forward stage sends.
        let info = classify(&method, &r.path, Some(r.query.as_str()).filter(|q| !q.is_empty()));
        let stored = HoldCtx {
            path: &r.path,
            info: &info,
            ..*ctx
        };
        let uri = if r.query.is_empty() {
            r.path.clone()
        } else {
            format!("{}?{}", r.path, r.query)
        };
        let outgoing = request_with(method, &uri, &stored_headers(held, request), body)?;
        let (parts, answer) = match self.send_read(&stored, &info, outgoing, ctx.reveal_secrets).await {
            Ok(read) => read,
            // The run failed: it is refused where every refusal is, and
            // that answer is the outcome kept as well as the one sent.
            Err(error) => {
                let (parts, answer) = self.refusal(trace, &error).into_parts();
                (parts, super::read_limited(answer, usize::MAX).await.unwrap_or_default())
            }
        };
        // What the store must never keep: a Secret's values, a minted
        // token (whoever asked: this is a copy kept for the record).
        let hidden = if info.is_secrets() {
            Some(Target::Secrets)
        } else {
            info.is_token_request().then_some(Target::Token)
        };
        Ok((parts, (answer, hidden)))
    }
}

/// This call's headers worth repeating, with the stored content type.
fn stored_headers(held: &HeldWrite, request: &Buffered) -> Vec<(http::HeaderName, http::HeaderValue)> {
    let mut headers = kept_headers(&request.parts.headers, false);
    headers.retain(|(name, _)| name != http::header::CONTENT_TYPE);
    if let Ok(value) = http::HeaderValue::from_str(&held.request.content_type) {
        headers.push((http::header::CONTENT_TYPE, value));
    }
    headers
}

/// A claimed write whose run did not reach its recorded outcome. On drop,
/// if the write may have been sent, it is finished with an unknown
/// outcome: it may or may not have reached the cluster, so it is never run
/// again, and whoever asks is told to look. If nothing was sent, it is
/// approved again, so that "try again" is true.
struct Unfinished {
    store: crate::store::Store,
    id: String,
    done: bool,
    sent: bool,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (store, id, sent) = (self.store.clone(), std::mem::take(&mut self.id), self.sent);
        let outcome = Outcome::interrupted();
        let finish = move || {
            let ended = match sent {
                true => store.finish_held(&id, &outcome, chrono::Utc::now(), false),
                false => store.unclaim_held(&id),
            };
            if let Err(error) = ended {
                tracing::error!(%error, held = %id, "an interrupted approved write stays executing");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(finish)),
            Err(_) => finish(),
        }
    }
}

/// What the write answered, kept with Secret values and minted tokens
/// (`hidden`) hidden.
fn outcome(code: u16, answer: &[u8], hidden: Option<Target>) -> Outcome {
    let kept = match hidden {
        Some(target) => match redact_json(answer, target) {
            Ok(Some(redacted)) => redacted,
            Ok(None) => answer.to_vec(),
            Err(_) => b"(an answer holding a Secret or a token, not kept)".to_vec(),
        },
        None => answer.to_vec(),
    };
    let mut body = String::from_utf8_lossy(&kept).into_owned();
    body.truncate(crate::text::floor_char_boundary(&body, OUTCOME_LIMIT));
    Outcome { code, body }
}

/// The stored body with the dry run's preconditions: `resourceVersion` in
/// the object (apply, update, merge and strategic patches) or a JSON patch
/// `test`, the `uid` in DeleteOptions; in a protobuf body, a field of its
/// own appended (see [`super::protobuf`]). A body that needs one and
/// cannot take it (CBOR, a shape with no place for it) is refused, not
/// sent unguarded: the approved write would then run on whatever the
/// object has become. The intake asks the same of the body before it holds
/// it, so only a write held by an older release meets this at its run.
pub(super) fn with_precondition(
    precondition: &Precondition,
    content_type: &str,
    query: &str,
    body: Bytes,
) -> Result<Bytes, RequestError> {
    let Precondition {
        resource_version, uid, ..
    } = precondition;
    let parse = |body: &[u8]| parse_body(content_type, body).map_err(RequestError::HeldBodyRefused);
    let unguardable = || RequestError::UnguardableHeldBody {
        content_type: content_type.to_string(),
    };
    let protobuf = content_type
        .to_ascii_lowercase()
        .starts_with("application/vnd.kubernetes.protobuf");
    if protobuf && !body.is_empty() {
        let addition = match (uid, resource_version) {
            (Some(uid), _) => super::protobuf::uid_precondition(uid),
            (None, Some(rv)) => super::protobuf::resource_version(rv),
            (None, None) => return Ok(body),
        };
        return super::protobuf::with_appended(&body, &addition)
            .map(Bytes::from)
            .ok_or_else(unguardable);
    }
    let encoded = |value: Value| {
        serde_json::to_vec(&value)
            .map(Bytes::from)
            .map_err(|e| RequestError::Internal { cause: e.to_string() })
    };
    if let Some(uid) = uid {
        // A delete's options come from its body whenever it has one: a
        // bodiless delete's, from its query, go into the body the uid
        // makes, or the run would drop them (`propagationPolicy=Orphan`
        // approved, the dependents deleted).
        let parsed = match body.is_empty() {
            true => Some(Value::Object(query_delete_options(Query::parse(Some(query))))),
            // A `null` body is options with nothing set (the server then
            // reads none from the query either): it takes the guard too.
            false => match parse(&body)? {
                Some(Value::Null) => Some(json!({})),
                parsed => parsed,
            },
        };
        let Some(mut options) = parsed.filter(Value::is_object) else {
            return Err(unguardable());
        };
        return match set(&mut options, "preconditions", "uid", uid) {
            true => encoded(options),
            false => Err(unguardable()),
        };
    }
    let Some(rv) = resource_version else {
        return Ok(body);
    };
    match parse(&body)? {
        Some(Value::Array(mut ops)) if content_type.starts_with("application/json-patch") => {
            ops.insert(
                0,
                json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}),
            );
            encoded(Value::Array(ops))
        }
        Some(mut object) => match set(&mut object, "metadata", "resourceVersion", rv) {
            true => encoded(object),
            false => Err(unguardable()),
        },
        None => Err(unguardable()),
    }
}

/// The DeleteOptions in a bodiless delete's query, as kube-apiserver
/// decodes them from it (the first value of each; a flag is false only
/// for `0` or `false`). A value it cannot decode failed the dry run, so
/// the write was never held: such a value is left out.
fn query_delete_options(query: Query<'_>) -> serde_json::Map<String, Value> {
    let mut options = serde_json::Map::new();
    let grace = query.first("gracePeriodSeconds").and_then(|v| v.parse::<i64>().ok());
    if let Some(seconds) = grace {
        options.insert("gracePeriodSeconds".into(), seconds.into());
    }
    if let Some(policy) = query.first("propagationPolicy") {
        options.insert("propagationPolicy".into(), policy.into_owned().into());
    }
    for flag in ["orphanDependents", "ignoreStoreReadErrorWithClusterBreakingPotential"] {
        if query.first(flag).is_some() {
            options.insert(flag.into(), query.flag(flag).into());
        }
    }
    options
}

/// A held write's body as JSON or YAML, parsed within bounds (see
/// [`crate::document`]): `Ok(None)` when it is neither (protobuf), so it is
/// sent as it is; an error when it is refused (anchors, aliases, depth).
pub(super) fn parse_body(content_type: &str, body: &[u8]) -> Result<Option<Value>, DocumentError> {
    if body.is_empty() {
        return Ok(Some(json!({})));
    }
    if content_type.starts_with("application/vnd.kubernetes.protobuf") {
        return Ok(None);
    }
    // The size was bounded when the request was read (the request body limit).
    match document::parse_json_or_yaml(body, Bounds::body(usize::MAX)) {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.is_malformed() => Ok(None),
        Err(error) => Err(error),
    }
}

/// `object[outer][inner] = value`, when `object[outer]` is absent or an
/// object (never panicking on other shapes).
fn set(object: &mut Value, outer: &str, inner: &str, value: &str) -> bool {
    let Value::Object(fields) = object else {
        return false;
    };
    match fields.entry(outer).or_insert_with(|| json!({})) {
        Value::Object(nested) => {
            nested.insert(inner.into(), json!(value));
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::preview::Preview;
    use crate::audit::row::AuditRow;
    use crate::gateway::fixture::{held_agent, Fixture};
    use crate::status::Status;
    use http::Method;

    #[tokio::test]
    async fn a_call_whose_credential_or_grant_ended_while_it_waited_runs_nothing() {
        let f = Fixture::new("").await;
        let store = f.pipeline.approvals.store.clone();
        let ana = crate::identity::Principal::person("ana");
        store.add_principal(&ana, false).unwrap();
        let now = chrono::Utc::now();
        let grant = crate::identity::Grant {
            id: "g1".into(),
            subject: ana.clone(),
            cluster: "c".into(),
            namespace: Some("shop".into()),
            role: "developer".into(),
            expires_at: now + chrono::TimeDelta::hours(1),
            granted_by: "t".into(),
            created_at: now,
            revoked_at: None,
        };
        store.add_grant(&grant).unwrap();
        let (credential, token) = store.issue_credential(&ana, "laptop", None).unwrap();
        let identity = crate::identity::Identity {
            principal: ana,
            credential_id: credential.id.clone(),
            agent: None,
            origin: None,
        };
        let path = "/api/v1/namespaces/shop/configmaps/flags";
        let info = classify(&Method::PUT, path, None);
        let groups = [grant.group()];
        let ctx = HoldCtx {
            upstream: f.pipeline.upstream("c").unwrap(),
            path,
            identity: &identity,
            info: &info,
            groups: &groups,
            reveal_secrets: false,
            audit_id: uuid::Uuid::now_v7(),
            limits: f.pipeline.limits(),
        };
        let call = |token: &str| {
            let request = http::Request::put(path).header("authorization", format!("Bearer {token}"));
            let (parts, ()) = request.body(()).unwrap().into_parts();
            Buffered {
                parts,
                body: Bytes::new(),
            }
        };
        assert!(f.pipeline.still_let_through(&ctx, &call(&token)).await.is_ok());
        store.revoke_grant("g1").unwrap();
        f.pipeline.policy.forget();
        let refused = f.pipeline.still_let_through(&ctx, &call(&token)).await.unwrap_err();
        assert!(refused
            .status()
            .message
            .contains("a grant this call was let through by ended"));
        let groups_now: [String; 0] = [];
        let without = HoldCtx {
            groups: &groups_now,
            ..ctx
        };
        assert!(f.pipeline.still_let_through(&without, &call(&token)).await.is_ok());
        store.revoke_credential(&credential.id).unwrap();
        let refused = f.pipeline.still_let_through(&without, &call(&token)).await.unwrap_err();
        assert_eq!(refused.status().code, 403);
        assert!(refused.status().message.contains("credential of this call was revoked"));
        assert_eq!(f.connections(), 0, "nothing reached the cluster");
    }

    #[tokio::test]
    async fn an_approved_write_the_cluster_cannot_take_is_answered_and_kept_as_its_refusal() {
        // The fixture's cluster closes every connection: the run fails in
        // portcullis, before the cluster answers anything.
        let f = Fixture::new("").await;
        let identity = held_agent();
        let path = "/api/v1/namespaces/shop/configmaps/flags";
        let info = classify(&Method::PUT, path, None);
        let ctx = HoldCtx {
            upstream: f.pipeline.upstream("c").unwrap(),
            path,
            identity: &identity,
            info: &info,
            groups: &[],
            reveal_secrets: false,
            audit_id: uuid::Uuid::now_v7(),
            limits: f.pipeline.limits(),
        };
        let (parts, ()) = http::Request::builder()
            .method(Method::PUT)
            .uri(path)
            .body(())
            .unwrap()
            .into_parts();
        let asked = Buffered {
            parts,
            body: Bytes::from_static(br#"{"data":{"a":"1"}}"#),
        };
        let mut trace = Trace::new(AuditRow::arrived(ctx.audit_id, &Method::PUT, path, None));
        let held = f.pipeline.held_write(
            &ctx,
            "digest".into(),
            &asked,
            Preview::default(),
            Precondition::default(),
            &trace,
        );
        let (parts, (answer, hidden)) = f
            .pipeline
            .run_stored(&ctx, &held, &asked, asked.body.clone(), &mut trace)
            .await
            .unwrap();
        let status: Status = serde_json::from_slice(&answer).unwrap();
        let expected = RequestError::UpstreamUnavailable { cluster: "c".into() }.status();
        assert_eq!((status.code, &status.message), (expected.code, &expected.message));
        assert_eq!(parts.status.as_u16(), expected.code);
        assert_eq!(
            trace.row.reason, expected.reason,
            "noted in the row where every refusal is"
        );
        assert_eq!(hidden, None);
        assert!(f.connections() > 0, "the run was sent");
    }

    fn rv(rv: &str) -> Precondition {
        Precondition {
            resource_version: Some(rv.into()),
            ..Precondition::default()
        }
    }

    fn json_of(bytes: Bytes) -> Value {
        serde_json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn an_apply_or_merge_body_carries_the_dry_runs_resource_version() {
        let yaml = Bytes::from_static(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n");
        let sent = with_precondition(&rv("41"), "application/apply-patch+yaml", "", yaml).unwrap();
        assert_eq!(json_of(sent)["metadata"]["resourceVersion"], "41");
        let merge = Bytes::from_static(br#"{"spec":{"replicas":2}}"#);
        let sent = with_precondition(&rv("7"), "application/merge-patch+json", "", merge).unwrap();
        assert_eq!(
            json_of(sent),
            json!({"spec": {"replicas": 2}, "metadata": {"resourceVersion": "7"}})
        );
    }

    #[test]
    fn a_json_patch_is_guarded_by_a_test_and_a_delete_by_the_uid() {
        let patch = Bytes::from_static(br#"[{"op":"replace","path":"/data/a","value":"b"}]"#);
        let sent = json_of(with_precondition(&rv("9"), "application/json-patch+json", "", patch).unwrap());
        assert_eq!(
            sent[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "9"})
        );
        assert_eq!(sent.as_array().unwrap().len(), 2);
        let uid = Precondition {
            uid: Some("u-1".into()),
            ..Precondition::default()
        };
        let sent = json_of(with_precondition(&uid, "", "", Bytes::new()).unwrap());
        assert_eq!(sent, json!({"preconditions": {"uid": "u-1"}}));
        // A bodiless delete's options in its query go into the body the
        // uid makes: the server then reads them from there alone.
        let query = "propagationPolicy=Orphan&gracePeriodSeconds=0&orphanDependents=fal%C5%BFe&propagationPolicy=Foreground&x=1";
        let sent = json_of(with_precondition(&uid, "", query, Bytes::new()).unwrap());
        assert_eq!(
            sent,
            json!({"preconditions": {"uid": "u-1"}, "propagationPolicy": "Orphan", "gracePeriodSeconds": 0, "orphanDependents": false})
        );
        let sent = json_of(with_precondition(&uid, "application/json", query, Bytes::from_static(b"null")).unwrap());
        assert_eq!(
            sent["preconditions"],
            json!({"uid": "u-1"}),
            "a null body gets the guard too"
        );
        // A delete with a body keeps its own options: the query is not read.
        let body = Bytes::from_static(br#"{"propagationPolicy":"Background"}"#);
        let sent = json_of(with_precondition(&uid, "application/json", query, body).unwrap());
        assert_eq!(
            sent,
            json!({"preconditions": {"uid": "u-1"}, "propagationPolicy": "Background"})
        );
    }

    #[test]
    fn a_body_with_yaml_aliases_is_refused_instead_of_expanded() {
        let yaml = Bytes::from_static(b"kind: ConfigMap\nx: &a [1, 2]\ny: [*a, *a]\n");
        let refused = with_precondition(&rv("1"), "application/yaml", "", yaml)
            .unwrap_err()
            .status();
        assert_eq!((refused.code, refused.reason.as_str()), (400, "BadRequest"));
        assert!(refused.message.contains("anchors or aliases"), "{}", refused.message);
    }

    /// A guard that cannot be written is a refusal, never a write sent
    /// without it; a body that needs none goes as it is.
    #[test]
    fn a_body_that_cannot_carry_its_precondition_is_refused_not_sent_unguarded() {
        let proto = Bytes::from_static(b"k8s\x00\x01");
        let uid = Precondition {
            uid: Some("u-1".into()),
            ..Precondition::default()
        };
        // `proto` is no envelope: a protobuf body that is one takes its
        // guard (`protobuf`'s tests, and the approvals tests through the
        // simulated cluster).
        for (precondition, content_type, body) in [
            (rv("1"), "application/vnd.kubernetes.protobuf", proto.clone()),
            (rv("1"), "Application/Vnd.Kubernetes.Protobuf", proto.clone()),
            (rv("1"), "application/cbor", Bytes::from_static(b"\xa1\x61a\x01")),
            (
                rv("1"),
                "application/merge-patch+json",
                Bytes::from_static(br#"{"metadata":"x"}"#),
            ),
            (uid.clone(), "application/vnd.kubernetes.protobuf", proto.clone()),
            (
                uid.clone(),
                "application/json",
                Bytes::from_static(br#"{"preconditions":7}"#),
            ),
        ] {
            let refused = with_precondition(&precondition, content_type, "", body)
                .unwrap_err()
                .status();
            assert_eq!(
                (refused.code, refused.reason.as_str()),
                (415, "UnsupportedMediaType"),
                "{content_type}"
            );
            assert!(refused.message.contains("application/json"), "{}", refused.message);
        }
        let create = Precondition::default();
        let sent = with_precondition(&create, "application/vnd.kubernetes.protobuf", "", proto.clone()).unwrap();
        assert_eq!(sent, proto, "a create needs no guard");
    }
}
