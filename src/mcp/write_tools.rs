//! The tools that write: apply (server-side apply, field manager
//! `portcullis-mcp`), delete_resource, scale, rollout_restart; and
//! request_access, which asks a person for a grant.
//!
//! Every write goes through [`execute`]; a write of an agent whose writes
//! need a person's approval is held by the gateway's hold stage, and comes
//! back held ([`super::held`] turns that into the client's answer).

use super::args::{Apply, DeleteResource, RequestAccess, RolloutRestart, Scale};
use super::context::{Answer, ClusterRequest, ToolContext};
use super::error::ToolError;
use super::held::{self, Repeat};
use super::read_tools::{json, namespace_of};
use super::render;
use super::server::{outcome, Tools};
use crate::access::{AccessAsk, AccessError, Requester};
use crate::document::{self, Bounds};
use http::Method;
use rmcp::handler::server::tool::{Extension, InputResponses, RequestState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResponse, CallToolResult};
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use rmcp::{tool, tool_router};
use serde_json::{json, Value};

/// The field manager of `apply`.
pub const FIELD_MANAGER: &str = "portcullis-mcp";

type Parts = http::request::Parts;

#[tool_router(router = write_router, vis = "pub(super)")]
impl Tools {
    /// Create or update one object by server-side apply: give the whole object as you want it. Answers with the object as stored (Secret values hidden). May wait for a person's approval (see the instructions).
    #[tool(annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true))]
    async fn apply(
        &self,
        Parameters(args): Parameters<Apply>,
        Extension(parts): Extension<Parts>,
        context: RequestContext<RoleServer>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> CallToolResponse {
        let repeat = held::repeat(args.approval_id.as_deref(), state, responses, &context);
        match self.context(&parts, "apply", &args.cluster) {
            Ok(ctx) => held::respond(apply(&ctx, args, &repeat).await, &repeat),
            Err(error) => error.into_result().into(),
        }
    }

    /// Delete one object. May wait for a person's approval (see the instructions).
    #[tool(annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false))]
    async fn delete_resource(
        &self,
        Parameters(args): Parameters<DeleteResource>,
        Extension(parts): Extension<Parts>,
        context: RequestContext<RoleServer>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> CallToolResponse {
        let repeat = held::repeat(args.approval_id.as_deref(), state, responses, &context);
        match self.context(&parts, "delete_resource", &args.object.cluster) {
            Ok(ctx) => held::respond(delete_resource(&ctx, args, &repeat).await, &repeat),
            Err(error) => error.into_result().into(),
        }
    }

    /// Set the number of replicas of a Deployment, StatefulSet or ReplicaSet. May wait for a person's approval (see the instructions).
    #[tool(annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true))]
    async fn scale(
        &self,
        Parameters(args): Parameters<Scale>,
        Extension(parts): Extension<Parts>,
        context: RequestContext<RoleServer>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> CallToolResponse {
        let repeat = held::repeat(args.approval_id.as_deref(), state, responses, &context);
        match self.context(&parts, "scale", &args.cluster) {
            Ok(ctx) => held::respond(scale(&ctx, args, &repeat).await, &repeat),
            Err(error) => error.into_result().into(),
        }
    }

    /// Restart the pods of a Deployment, StatefulSet or DaemonSet by a rolling update, as `kubectl rollout restart` does. May wait for a person's approval (see the instructions).
    #[tool(annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false))]
    async fn rollout_restart(
        &self,
        Parameters(args): Parameters<RolloutRestart>,
        Extension(parts): Extension<Parts>,
        context: RequestContext<RoleServer>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> CallToolResponse {
        let repeat = held::repeat(args.approval_id.as_deref(), state, responses, &context);
        match self.context(&parts, "rollout_restart", &args.cluster) {
            Ok(ctx) => held::respond(rollout_restart(&ctx, args, &repeat).await, &repeat),
            Err(error) => error.into_result().into(),
        }
    }

    /// Ask a person for a role on a cluster (a namespace, or the whole cluster) for a while, saying why. A person decides; nothing changes until then.
    #[tool(annotations(
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn request_access(
        &self,
        Parameters(args): Parameters<RequestAccess>,
        Extension(parts): Extension<Parts>,
    ) -> CallToolResult {
        match self.context(&parts, "request_access", &args.cluster) {
            Ok(ctx) => outcome(request_access(&ctx, args).await),
            Err(error) => error.into_result(),
        }
    }
}

/// Send a write. A held write (its caller's writes need a person's
/// approval) comes back as [`ToolError::Held`]; a write that ran after
/// approval says so first.
async fn execute(ctx: &ToolContext, request: ClusterRequest, repeat: &Repeat) -> Result<Answer, ToolError> {
    ctx.send(request.approval(repeat.approval.clone())).await
}

/// `approved by <login> at <RFC 3339 UTC>` for a write that ran after approval.
fn approved_line(answer: &Answer) -> String {
    answer
        .approved
        .as_ref()
        .map(|run| format!("approved by {} at {}\n", run.by, crate::approvals::rfc3339(run.at)))
        .unwrap_or_default()
}

async fn apply(ctx: &ToolContext, args: Apply, repeat: &Repeat) -> Result<String, ToolError> {
    // Bounded before anything is built: an alias bomb would expand here.
    let manifest = document::parse_json_or_yaml(args.manifest.as_bytes(), Bounds::MANIFEST)
        .map_err(|e| ToolError::invalid("manifest", format!("the manifest {e}")))?;
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(&manifest, |v, k| v.get(k))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let (Some(api_version), Some(kind), Some(name)) =
        (field(&["apiVersion"]), field(&["kind"]), field(&["metadata", "name"]))
    else {
        return Err(ToolError::invalid(
            "manifest",
            "the manifest needs apiVersion, kind and metadata.name",
        ));
    };
    let resource = ctx.shared.kinds.resolve(ctx, &kind, Some(&api_version)).await?;
    let namespace = field(&["metadata", "namespace"]);
    // apply has no namespace argument: the manifest names its namespace.
    let namespace = namespace_of(&resource, namespace.as_deref()).map_err(|_| {
        ToolError::invalid(
            "manifest",
            format!(
                "{} are namespaced: set metadata.namespace in the manifest",
                resource.plural
            ),
        )
    })?;
    let force = if args.force == Some(true) { "&force=true" } else { "" };
    let path = format!(
        "{}?fieldManager={FIELD_MANAGER}{force}",
        resource.path(namespace, Some(&name), None)?
    );
    // JSON is YAML: the apply body is the manifest as parsed.
    let body =
        serde_json::to_vec(&manifest).map_err(|_| ToolError::invalid("manifest", "the manifest cannot be encoded"))?;
    let request = ClusterRequest::new(Method::PATCH, path)
        .body("application/apply-patch+yaml", body)
        .in_namespace(namespace);
    let answer = execute(ctx, request, repeat).await?;
    let head = format!(
        "{}applied {}/{name}{}\n",
        approved_line(&answer),
        resource.qualified(),
        in_namespace(namespace)
    );
    Ok(render::cut(
        head + &render::object_yaml(json(&answer.body)?),
        "the object is applied; get_resource shows it",
    ))
}

async fn delete_resource(ctx: &ToolContext, args: DeleteResource, repeat: &Repeat) -> Result<String, ToolError> {
    let object = &args.object;
    let resource = ctx
        .shared
        .kinds
        .resolve(ctx, &object.kind, object.api_version.as_deref())
        .await?;
    let namespace = namespace_of(&resource, object.namespace.as_deref())?;
    let path = resource.path(namespace, Some(&object.name), None)?;
    let request = ClusterRequest::new(Method::DELETE, path).in_namespace(namespace);
    let answer = execute(ctx, request, repeat).await?;
    Ok(format!(
        "{}deleted {}/{}{}\n",
        approved_line(&answer),
        resource.qualified(),
        object.name,
        in_namespace(namespace)
    ))
}

async fn scale(ctx: &ToolContext, args: Scale, repeat: &Repeat) -> Result<String, ToolError> {
    let range = &ctx.shared.scale;
    let replicas = u32::try_from(args.replicas)
        .ok()
        .filter(|r| range.contains(r))
        .ok_or_else(|| {
            ToolError::invalid(
                "replicas",
                format!(
                    "replicas must be {} to {} on this portcullis",
                    range.start(),
                    range.end()
                ),
            )
        })?;
    let resource = ctx.shared.kinds.resolve(ctx, &args.kind, None).await?;
    if !resource.subresources.iter().any(|s| s == "scale") {
        return Err(ToolError::invalid(
            "kind",
            format!("{} cannot be scaled", resource.qualified()),
        ));
    }
    let path = resource.path(Some(&args.namespace), Some(&args.name), Some("scale"))?;
    let body = json!({"spec": {"replicas": replicas}}).to_string();
    let request = ClusterRequest::new(Method::PATCH, path)
        .body("application/merge-patch+json", body)
        .in_namespace(Some(&args.namespace));
    let answer = execute(ctx, request, repeat).await?;
    Ok(format!(
        "{}scaled {}/{} in {} to {replicas} replicas\n",
        approved_line(&answer),
        resource.qualified(),
        args.name,
        args.namespace
    ))
}

async fn rollout_restart(ctx: &ToolContext, args: RolloutRestart, repeat: &Repeat) -> Result<String, ToolError> {
    let resource = ctx.shared.kinds.resolve(ctx, &args.kind, None).await?;
    if resource.group != "apps" || !["deployments", "statefulsets", "daemonsets"].contains(&resource.plural.as_str()) {
        return Err(ToolError::invalid(
            "kind",
            "only a Deployment, StatefulSet or DaemonSet can be restarted",
        ));
    }
    let path = resource.path(Some(&args.namespace), Some(&args.name), None)?;
    // What kubectl sets: a changed pod template annotation rolls the pods.
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let body = json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": now}}}}});
    let request = ClusterRequest::new(Method::PATCH, path)
        .body("application/strategic-merge-patch+json", body.to_string())
        .in_namespace(Some(&args.namespace));
    // The time differs from a held write's, which is still the same write
    // (the hold stage's digest leaves it out): the stored body runs.
    let answer = execute(ctx, request, repeat).await?;
    Ok(format!(
        "{}restarted {}/{} in {} (rolling update started at {now})\n",
        approved_line(&answer),
        resource.qualified(),
        args.name,
        args.namespace
    ))
}

async fn request_access(ctx: &ToolContext, args: RequestAccess) -> Result<String, ToolError> {
    let duration = humantime::parse_duration(args.duration.trim()).map_err(|e| {
        ToolError::invalid(
            "duration",
            format!("duration {:?} is not like 2h or 30m: {e}", args.duration),
        )
    })?;
    let ask = AccessAsk {
        cluster: args.cluster,
        role: args.role,
        namespace: args.namespace,
        duration,
        reason: args.reason,
    };
    let requester = Requester::from(&ctx.caller.identity);
    let (store, config) = (ctx.shared.store.clone(), ctx.shared.config.clone());
    let asked = tokio::task::spawn_blocking(move || crate::access::request_access(&store, &config, &requester, &ask))
        .await
        .map_err(|_| ToolError::Unavailable("portcullis could not record the request; try again".into()))?;
    let request = asked.map_err(|error| match error {
        AccessError::Invalid(message) => ToolError::Refused {
            code: "access.invalid",
            message,
            audit_id: String::new(),
        },
        other => ToolError::Unavailable(format!("portcullis could not record the request ({other}); try again")),
    })?;
    let scope = request
        .namespace
        .as_deref()
        .map_or("the whole cluster".to_string(), |ns| format!("namespace {ns}"));
    Ok(format!(
        "access request {id} is pending: {role} on {scope} of cluster {cluster} for {duration}.\n\
         A person decides it (`portcullis access approve {id}`); nobody deciding, it expires at {expires}.\n\
         Nothing changes until then. Once approved, `whoami` shows the new grant and the same calls work.\n",
        id = request.id,
        role = request.role,
        cluster = request.cluster,
        duration = humantime::format_duration(request.duration),
        expires = request.expires_at.format("%Y-%m-%dT%H:%M:%SZ"),
    ))
}

fn in_namespace(namespace: Option<&str>) -> String {
    namespace.map(|ns| format!(" in {ns}")).unwrap_or_default()
}
