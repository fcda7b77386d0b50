//! `mcp`: latency per MCP tool call, one call at a time, with the rmcp
//! client over the stateless 2026-07-28 protocol.

use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use rustls_pki_types::pem::PemObject;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Command-line arguments of `mcp`.
#[derive(clap::Args)]
pub struct Args {
    /// portcullis's `https://host:port`.
    #[arg(long)]
    base: String,
    /// An agent's token.
    #[arg(long)]
    token: String,
    /// portcullis's CA.
    #[arg(long)]
    ca: PathBuf,
    /// Calls of each tool.
    #[arg(long, default_value_t = 200)]
    calls: usize,
}

/// Time `calls` calls of each tool (after two warm-up calls); print one JSON
/// object with milliseconds per call.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let client = connect(&args).await?;
    let ns = super::objects::NAMESPACE;
    let tools = [
        (
            "get_resource",
            json!({"cluster": "sim", "kind": "configmap", "name": "small", "namespace": ns}),
        ),
        (
            "list_resources",
            json!({"cluster": "sim", "kind": "pods", "namespace": ns}),
        ),
    ];
    let mut result = serde_json::Map::new();
    for (tool, arguments) in tools {
        let mut samples = Vec::with_capacity(args.calls);
        for i in 0..args.calls + 2 {
            let started = Instant::now();
            let text = call(&client, tool, &arguments).await?;
            if i >= 2 {
                samples.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            anyhow::ensure!(
                text.contains("small") || text.contains("web-0000"),
                "{tool} answered something else: {}",
                text.chars().take(200).collect::<String>()
            );
        }
        result.insert(tool.to_string(), super::percentiles(&mut samples));
    }
    println!("{}", Value::Object(result));
    client.cancel().await?;
    Ok(())
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>;

async fn connect(args: &Args) -> anyhow::Result<Client> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(&args.ca)? {
        roots.add(cert?)?;
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let http = reqwest::Client::builder().tls_backend_preconfigured(tls).build()?;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", args.base)).auth_header(&args.token);
    let transport = StreamableHttpClientTransport::with_client(http, config);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    Ok(ClientConfig::default()
        .serve_with_lifecycle(transport, lifecycle)
        .await?)
}

/// Call `tool`; a tool error is an error here.
async fn call(client: &Client, tool: &str, arguments: &Value) -> anyhow::Result<String> {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await?;
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect();
    anyhow::ensure!(result.is_error != Some(true), "{tool} failed: {text}");
    Ok(text)
}
