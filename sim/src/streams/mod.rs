//! pods/log, exec, attach and port-forward: the kubelet's streams, served
//! by the simulator itself.
//!
//! [`handle`] takes a request the server already authenticated and
//! authorized, finds the pod and the container the way kube-apiserver does
//! (`container x is not valid for pod y`, `a container name must be
//! specified for pod y, choose one of: [a b]`, `pod y does not have a host
//! assigned`), then:
//!
//! - `log` ([`log`]): deterministic access-log lines, `tailLines`,
//!   `sinceSeconds`/`sinceTime`, `timestamps`, `limitBytes`, `previous`
//!   and `follow` (a body frame per live line).
//! - `exec` / `attach` ([`exec`]): WebSocket (`v5.channel.k8s.io` …
//!   `channel.k8s.io`, [`exec::ws`]) or SPDY/3.1 (`X-Stream-Protocol-Version`,
//!   [`exec::spdy`], framing in [`spdy`]); the processes are simulated
//!   ([`exec::commands`]) on a per-container in-memory filesystem, enough
//!   for `kubectl cp` both ways.
//! - `portforward` ([`portforward`]): declared container ports echo what
//!   they receive, over SPDY, SPDY tunnelled in WebSocket, or the kubelet's
//!   WebSocket channels.
//!
//! A stream request without an upgrade is `400 Upgrade request required`,
//! and a refused upgrade is an ordinary (non-101) answer, so kubectl falls
//! back from WebSocket to SPDY as it does against a real cluster.
//!
//! # Known differences from kube-apiserver
//!
//! - Processes are simulated: a fixed set of busybox-like commands (`echo`,
//!   `cat`, `sh -c` with `;` `&&` `||` `|` `>`, `env`, `hostname`, `ls`,
//!   `tar`, `test`, `tail`, `sleep`, …). Any other command fails with exit
//!   code 127 and `sh: <cmd>: not found` on stderr, where a real runtime
//!   would report an OCI "executable file not found" error.
//! - `attach` with stdin behaves like `cat` on the main process and ends
//!   when stdin ends; without stdin it prints live log lines until the
//!   client leaves.
//! - Over `v4.channel.k8s.io` (and older) WebSocket protocols stdin cannot
//!   be half-closed, so `cat`-like commands end only when the client
//!   disconnects; `v5` and SPDY have the close signal. The `base64.*`
//!   WebSocket protocols are not served.
//! - Log lines are generated, not recorded; a container younger than its
//!   50-line history has that history shifted into the past.
//!   `previous=true` needs `restartCount > 0` (else the kubelet's 400).
//! - A terminal (`tty=true`) turns `\n` into `\r\n` and echoes input lines
//!   to an interactive `sh`, but there is no line editing; resize events
//!   are accepted and ignored.
//! - Port-forward targets are echo servers on the declared
//!   `containerPort`s; stream pairs are not timed out, and an undeclared
//!   port fails like a refused connection.
//! - The SPDY server acknowledges data with WINDOW_UPDATE but does not
//!   hold its own output to the client's window (spdystream never grows it).
//! - Streams have no idle timeout (the kubelet's is 4 h).

// Status is the error currency of the simulator: built once per failed
// request, so its size in a Result does not matter.
#![allow(clippy::result_large_err)]

pub mod exec;
pub mod log;
pub mod pod;
pub mod portforward;
pub mod spdy;
pub mod upgrade;

use crate::body::Body;
use crate::registry::{self, ResourceType};
use crate::request_info::RequestInfo;
use crate::status::Status;
use exec::ExecOptions;
use http::Method;
use pod::PodInfo;
use portforward::Transport;
use std::sync::Arc;

/// core/v1 pods, for when the registry table does not list them (the
/// store keys objects by group and plural only).
static PODS: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Pod",
    plural: "pods",
    singular: "pod",
    namespaced: true,
    verbs: registry::ALL_VERBS,
    short_names: &["po"],
    categories: &["all"],
    subresources: &[],
    stored: true,
};

/// Serve a `pods/{log,exec,attach,portforward}` request that the server has
/// already authenticated and authorized.
pub async fn handle(
    store: Arc<super::store::Store>,
    req: http::Request<hyper::body::Incoming>,
    info: RequestInfo,
) -> http::Response<Body> {
    let pods = registry::find("", "v1", "pods").unwrap_or(&PODS);
    let Some(object) = store.get(pods, &info.namespace, &info.name) else {
        return error_response(Status::not_found("", "pods", &info.name));
    };
    let pod = PodInfo::from_object(&object);
    let result = match (info.subresource.as_str(), req.method()) {
        ("log", &Method::GET | &Method::HEAD) => log::serve(&pod, req.uri().query()),
        ("exec", &Method::GET | &Method::POST) => serve_exec(pod, req, false),
        ("attach", &Method::GET | &Method::POST) => serve_exec(pod, req, true),
        ("portforward", &Method::GET | &Method::POST) => serve_portforward(pod, req),
        ("log" | "exec" | "attach" | "portforward", _) => Err(Status::failure(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )),
        _ => Err(Status::path_not_found()),
    };
    result.unwrap_or_else(error_response)
}

/// A Status as a response whose HTTP code equals the Status code.
fn error_response(status: Status) -> http::Response<Body> {
    status.into_response::<bytes::Bytes>().map(crate::body::full)
}

fn serve_exec(
    pod: PodInfo,
    req: http::Request<hyper::body::Incoming>,
    attach: bool,
) -> Result<http::Response<Body>, Status> {
    let opts = ExecOptions::from_query(req.uri().query(), attach)?;
    let container = pod.container(&opts.container)?;
    pod.require_node()?;
    let runtime = pod.runtime(container, opts.tty);
    let headers = req.headers();
    if upgrade::is_websocket(headers) {
        let offered = upgrade::header_list(headers, "sec-websocket-protocol");
        let protocol = if offered.is_empty() {
            // No subprotocol is the kubelet's original channel protocol.
            String::new()
        } else {
            upgrade::negotiate(&offered, exec::ws::PROTOCOLS)
                .ok_or_else(|| unsupported(&offered, exec::ws::PROTOCOLS))?
        };
        let response = upgrade::websocket_accept(headers, &protocol)?;
        upgrade::on_upgrade(hyper::upgrade::on(req), move |io| async move {
            exec::ws::serve(upgrade::websocket(io).await, protocol, runtime, opts).await;
        });
        return Ok(response);
    }
    if upgrade::is_spdy(headers) {
        let protocol = upgrade::spdy_negotiate(headers, exec::spdy::PROTOCOLS)?;
        let response = upgrade::spdy_accept(&protocol);
        upgrade::on_upgrade(hyper::upgrade::on(req), move |io| {
            exec::spdy::serve(io, protocol, runtime, opts)
        });
        return Ok(response);
    }
    Err(upgrade::upgrade_required())
}

fn unsupported(offered: &[String], supported: &[&str]) -> Status {
    Status::bad_request(format!(
        "requested protocol(s) are not supported: [{}]; supports [{}]",
        offered.join(" "),
        supported.join(" ")
    ))
}

fn serve_portforward(pod: PodInfo, req: http::Request<hyper::body::Incoming>) -> Result<http::Response<Body>, Status> {
    pod.require_node()?;
    let headers = req.headers();
    let (response, transport) = if upgrade::is_websocket(headers) {
        let offered = upgrade::header_list(headers, "sec-websocket-protocol");
        if offered.iter().any(|p| p == portforward::TUNNEL_PROTOCOL) {
            (
                upgrade::websocket_accept(headers, portforward::TUNNEL_PROTOCOL)?,
                Transport::Tunnel,
            )
        } else if offered.is_empty() || offered.iter().any(|p| p == portforward::CHANNEL_PROTOCOL) {
            let ports = portforward::query_ports(req.uri().query()).map_err(Status::bad_request)?;
            let protocol = if offered.is_empty() {
                ""
            } else {
                portforward::CHANNEL_PROTOCOL
            };
            (
                upgrade::websocket_accept(headers, protocol)?,
                Transport::Channels(ports),
            )
        } else {
            return Err(unsupported(
                &offered,
                &[portforward::TUNNEL_PROTOCOL, portforward::CHANNEL_PROTOCOL],
            ));
        }
    } else if upgrade::is_spdy(headers) {
        let protocol = upgrade::spdy_negotiate(headers, &[portforward::SPDY_PROTOCOL])?;
        (upgrade::spdy_accept(&protocol), Transport::Spdy)
    } else {
        return Err(upgrade::upgrade_required());
    };
    upgrade::on_upgrade(hyper::upgrade::on(req), move |io| portforward::run(io, pod, transport));
    Ok(response)
}
