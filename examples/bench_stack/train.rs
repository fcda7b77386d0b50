//! `train DIR`: the requests a profile-guided build learns from
//! (`scripts/pgo-build`), sent to the `portcullis serve` that `setup DIR`
//! configured, over HTTP/2 as kubectl sends them: the kinds users send
//! most (GETs, LISTs, discovery), an agent's Secrets (redacted), a
//! person's writes (create, patch, delete) and refusals (an unknown
//! object, an unknown token). Watches and MCP calls are trained by the
//! `watch` and `mcp` parts. Any answer other than the one expected fails
//! the run, so that a broken stack never trains a profile.

use super::tls::{Sender, Target};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

/// Command-line arguments of `train`.
#[derive(clap::Args)]
pub struct Args {
    /// The directory `setup` wrote `stack.json` to.
    dir: PathBuf,
    /// Rounds of the mix on each connection.
    #[arg(long, default_value_t = 400)]
    rounds: usize,
    /// Concurrent HTTP/2 connections.
    #[arg(long, default_value_t = 16)]
    connections: usize,
}

/// What every connection sends to.
struct Stack {
    target: Target,
    /// `/clusters/sim`.
    prefix: String,
    person: String,
    agent: String,
}

/// One request of the mix and the status it must get.
struct Step<'a> {
    method: Method,
    path: String,
    token: &'a str,
    body: Option<String>,
    expect: StatusCode,
}

/// Send the mix; print how many requests were answered as expected.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(args.dir.join("stack.json"))?;
    let stack: serde_json::Value = serde_json::from_str(&text)?;
    let field = |key: &str| {
        stack[key]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow::anyhow!("stack.json has no {key}"))
    };
    let ca = PathBuf::from(field("ca_file")?);
    let stack = Arc::new(Stack {
        target: Target::new(&field("url")?, Some(&ca), false)?,
        prefix: field("cluster_path")?,
        person: field("person_token")?,
        agent: field("agent_token")?,
    });
    let mut tasks = tokio::task::JoinSet::new();
    for connection in 0..args.connections {
        let stack = stack.clone();
        let rounds = args.rounds;
        tasks.spawn(async move { connection_rounds(&stack, connection, rounds).await });
    }
    let mut answered = 0;
    while let Some(done) = tasks.join_next().await {
        answered += done??;
    }
    println!("{}", json!({ "requests": answered }));
    Ok(())
}

/// `rounds` of the mix on one connection; the requests answered.
async fn connection_rounds(stack: &Stack, connection: usize, rounds: usize) -> anyhow::Result<usize> {
    let mut sender = stack.target.connect(true).await?;
    let mut answered = 0;
    for round in 0..rounds {
        for step in mix(stack, &format!("train-{connection}-{round}")) {
            send(stack, &mut sender, step).await?;
            answered += 1;
        }
    }
    Ok(answered)
}

/// One round: mostly reads, as kubectl's traffic is.
fn mix<'a>(stack: &'a Stack, name: &str) -> Vec<Step<'a>> {
    let ns = format!("{}/api/v1/namespaces/{}", stack.prefix, super::objects::NAMESPACE);
    let person = |method: Method, path: String, body: Option<String>, expect: StatusCode| Step {
        method,
        path,
        token: &stack.person,
        body,
        expect,
    };
    let get = |path: String| person(Method::GET, path, None, StatusCode::OK);
    let agent_get = |path: String| Step {
        token: &stack.agent,
        ..get(path)
    };
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}});
    let mut steps: Vec<Step> = (0..6).map(|_| get(format!("{ns}/configmaps/small"))).collect();
    steps.extend([
        get(format!("{ns}/pods/web-0001")),
        get(format!("{ns}/pods?limit=20")),
        get(format!("{}/api", stack.prefix)),
        get(format!("{}/apis", stack.prefix)),
        agent_get(format!("{ns}/secrets?limit=20")),
        agent_get(format!("{ns}/secrets/credentials-0001")),
        person(
            Method::POST,
            format!("{ns}/configmaps"),
            Some(config_map.to_string()),
            StatusCode::CREATED,
        ),
        person(
            Method::PATCH,
            format!("{ns}/configmaps/{name}"),
            Some(json!({"data": {"k": "w"}}).to_string()),
            StatusCode::OK,
        ),
        person(Method::DELETE, format!("{ns}/configmaps/{name}"), None, StatusCode::OK),
        Step {
            expect: StatusCode::NOT_FOUND,
            ..get(format!("{ns}/configmaps/absent"))
        },
        Step {
            token: "ptk_unknown",
            expect: StatusCode::UNAUTHORIZED,
            ..get(format!("{ns}/configmaps/small"))
        },
    ]);
    steps
}

/// Send `step` and read its whole answer.
async fn send(stack: &Stack, sender: &mut Sender, step: Step<'_>) -> anyhow::Result<()> {
    let mut request = stack
        .target
        .request(step.method.clone(), &step.path, Some(step.token), false);
    if step.body.is_some() {
        let content_type = match step.method {
            Method::PATCH => "application/merge-patch+json",
            _ => "application/json",
        };
        request = request.header(http::header::CONTENT_TYPE, content_type);
    }
    let request = request.body(step.body.map(Full::from).unwrap_or_default())?;
    let response = sender.send(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    anyhow::ensure!(
        status == step.expect,
        "{} {}: {status}, expected {}: {}",
        step.method,
        step.path,
        step.expect,
        String::from_utf8_lossy(&body[..body.len().min(300)])
    );
    Ok(())
}
