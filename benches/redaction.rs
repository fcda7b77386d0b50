//! Secret redaction throughput (MB/s) against passing the same bytes
//! through, as the forward stage does: one Secret, a list of 500 Secrets
//! (whole, and in 16 KiB frames as it comes from the cluster), and a watch
//! of 500 events, each through `Transform::apply` and read to the end.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use http_body_util::{BodyExt, StreamBody};
use portcullis::gateway::redact::Transform;
use portcullis::secrets::Target;
use serde_json::{json, Value};

const LIMIT: u64 = 8 << 20;

fn secret(i: usize) -> Value {
    let last_applied = format!(
        r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"db-{i}","namespace":"shop"}},"stringData":{{"password":"s3cr3t-Pa55w0rd-{i}"}}}}"#
    );
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": format!("db-{i}"), "namespace": "shop", "uid": format!("0b7c5f3e-{i:04}-4c1e-9a57-6f1d2e3c4b5a"),
            "resourceVersion": format!("{}", 1000 + i), "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "shop", "tier": "db"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied}},
        "data": {"password": "czNjcjN0LVBhNTV3MHJk", "url": "cG9zdGdyZXM6Ly9zaG9wQGRiLnNob3Auc3ZjOjU0MzIvc2hvcA==",
            "username": "c2hvcA==", "tls.key": tls_key()}
    })
}

/// A key-sized value that is base64 (a value that is not would be refused,
/// and the benchmark would measure the refusal).
fn tls_key() -> String {
    use base64::Engine;
    let pem = "-----BEGIN PRIVATE KEY-----\nMIGHsimulated\n".repeat(8);
    base64::engine::general_purpose::STANDARD.encode(pem)
}

fn one_secret() -> Bytes {
    Bytes::from(serde_json::to_vec(&secret(0)).expect("serialises"))
}

fn secret_list() -> Bytes {
    let items: Vec<Value> = (0..500).map(secret).collect();
    let list =
        json!({"apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": "2000"}, "items": items});
    Bytes::from(serde_json::to_vec(&list).expect("serialises"))
}

/// 16 KiB frames, as a body might arrive from the cluster.
fn frames(body: &[u8]) -> Vec<Bytes> {
    body.chunks(16 * 1024).map(Bytes::copy_from_slice).collect()
}

/// 500 events in 16 KiB frames.
fn watch_frames() -> Vec<Bytes> {
    let mut stream = Vec::new();
    for i in 0..500 {
        stream.extend(serde_json::to_vec(&json!({"type": "MODIFIED", "object": secret(i)})).expect("serialises"));
        stream.push(b'\n');
    }
    frames(&stream)
}

async fn relay(transform: Transform, frames: Vec<Bytes>) -> (http::StatusCode, Bytes) {
    let parts = http::Response::new(()).into_parts().0;
    let frames = frames
        .into_iter()
        .map(|f| Ok::<_, std::convert::Infallible>(http_body::Frame::data(f)));
    let body = StreamBody::new(futures_util::stream::iter(frames));
    let response = transform.apply(parts, body, LIMIT).await;
    let status = response.status();
    (
        status,
        response.into_body().collect().await.expect("relayed").to_bytes(),
    )
}

/// A refusal (or a watch ended by an ERROR event) is not a measure of
/// redaction: check each case once before timing it.
fn check(runtime: &tokio::runtime::Runtime, transform: Transform, frames: &[Bytes]) {
    let (status, bytes) = runtime.block_on(relay(transform, frames.to_vec()));
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        status.is_success() && !text.contains("\"ERROR\""),
        "{status}: {text:.300}"
    );
    assert!(
        text.contains("<redacted, ") && !text.contains("czNjcjN0"),
        "{text:.300}"
    );
}

fn redaction(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let whole = Transform::Redact {
        target: Target::Secrets,
        watch: false,
    };
    let watch = Transform::Redact {
        target: Target::Secrets,
        watch: true,
    };
    let cases = [
        ("one Secret", vec![one_secret()], whole),
        ("500 Secrets", vec![secret_list()], whole),
        ("500 Secrets in 16 KiB frames", frames(&secret_list()), whole),
        ("watch of 500 events", watch_frames(), watch),
    ];
    let mut group = c.benchmark_group("redaction");
    for (name, frames, transform) in cases {
        check(&runtime, transform, &frames);
        group.throughput(Throughput::Bytes(frames.iter().map(|f| f.len() as u64).sum()));
        group.bench_with_input(BenchmarkId::new("pass through", name), &frames, |b, frames| {
            b.iter(|| runtime.block_on(relay(Transform::Pass, frames.clone())))
        });
        group.bench_with_input(BenchmarkId::new("redact", name), &frames, |b, frames| {
            b.iter(|| runtime.block_on(relay(transform, frames.clone())))
        });
    }
    group.finish();
}

criterion_group!(benches, redaction);
criterion_main!(benches);
