//! Micro-benchmarks of the pieces every request pays for: classification,
//! credential checks, impersonation headers, and the simulated cluster's
//! RBAC check (which must stay well under 100 µs so the simulator is never
//! the bottleneck of portcullis's benchmarks).
//!
//! `cargo bench --bench hot_paths`

use criterion::{criterion_group, criterion_main, Criterion};
use http::{HeaderMap, Method};
use portcullis::gateway::{classify, headers};
use portcullis::identity::credential;
use portcullis::sim::rbac::{self, StaticObjects};
use portcullis::sim::UserInfo;
use serde_json::json;
use std::hint::black_box;

fn classification(c: &mut Criterion) {
    c.bench_function("classify a namespaced get", |b| {
        b.iter(|| {
            classify::classify(
                &Method::GET,
                black_box("/apis/apps/v1/namespaces/shop/deployments/web"),
                None,
            )
        })
    });
    c.bench_function("classify a watch", |b| {
        b.iter(|| {
            classify::classify(
                &Method::GET,
                black_box("/api/v1/namespaces/shop/pods"),
                Some("watch=1&resourceVersion=10"),
            )
        })
    });
}

fn credentials(c: &mut Criterion) {
    let token = credential::mint().token;
    c.bench_function("check a token's shape and checksum, then hash it", |b| {
        b.iter(|| {
            credential::check(black_box(&token)).unwrap();
            credential::hash(black_box(&token))
        })
    });
}

fn impersonation(c: &mut Criterion) {
    let groups: Vec<String> = (0..3)
        .map(|i| format!("portcullis:grant:0190c0de-0000-7000-8000-00000000000{i}"))
        .collect();
    c.bench_function("build impersonation headers", |b| {
        b.iter(|| {
            let mut map = HeaderMap::new();
            headers::impersonate(
                &mut map,
                "user:ana",
                &groups,
                &[("portcullis.dev/credential-id", "0190c0de")],
            )
            .unwrap();
            map
        })
    });
}

fn simulated_rbac(c: &mut Criterion) {
    let mut objects = rbac::bootstrap_objects();
    for i in 0..50 {
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("b{i}"), "namespace": "shop"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Group", "name": format!("portcullis:grant:{i}")}],
        }));
    }
    let objects = StaticObjects::new(objects);
    let user = UserInfo {
        name: "user:ana".into(),
        groups: vec!["portcullis:grant:49".into(), "system:authenticated".into()],
        ..Default::default()
    };
    let info = classify::classify(&Method::GET, "/apis/apps/v1/namespaces/shop/deployments/web", None);
    c.bench_function("simulated RBAC check among 50 bindings", |b| {
        b.iter(|| assert!(rbac::allowed(&objects, black_box(&user), black_box(&info))))
    });
}

fn simulated_get(c: &mut Criterion) {
    use http_body_util::{BodyExt, Empty};
    use portcullis::sim::handlers::{handle, Settings};
    use portcullis::sim::store::Store;
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let store = std::sync::Arc::new(Store::new());
    store
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}))
        .unwrap();
    store
        .create(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flags", "namespace": "shop"},
            "data": {"payload": "x".repeat(1024)}}),
        )
        .unwrap();
    let settings = Settings::default();
    let path = "/api/v1/namespaces/shop/configmaps/flags";
    let info = classify::classify(&Method::GET, path, None);
    c.bench_function("simulated GET of a 1 KiB ConfigMap (handler, no TLS)", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let request = http::Request::get(path).body(Empty::<bytes::Bytes>::new()).unwrap();
                let response = handle(&store, &settings, request, &info).await;
                response.into_body().collect().await.unwrap().to_bytes()
            })
        })
    });
}

criterion_group!(
    benches,
    classification,
    credentials,
    impersonation,
    simulated_rbac,
    simulated_get
);
criterion_main!(benches);
