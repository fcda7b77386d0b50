//! Micro-benchmarks of the pieces every request pays for: classification,
//! credential checks and the cached lookup, impersonation headers, the
//! audit row's encoding (chain hash, export line), and the simulated cluster's
//! RBAC check (which must stay well under 100 µs so the simulator is never
//! the bottleneck of portcullis's benchmarks).
//!
//! `cargo bench --bench hot_paths`

use criterion::{criterion_group, criterion_main, Criterion};
use http::{HeaderMap, Method};
use portcullis::gateway::{classify, headers};
use portcullis::identity::credential;
use portcullis_sim::rbac::{self, StaticObjects};
use portcullis_sim::UserInfo;
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

fn credential_lookup(c: &mut Criterion) {
    use portcullis::identity::authenticate::Authenticator;
    use portcullis::identity::Principal;
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = portcullis::store::Store::open(&dir.path().join("bench.db")).unwrap();
    let person = Principal::person("ana");
    store.add_principal(&person, false).unwrap();
    let (_, token) = store.issue_credential(&person, "bench", None).unwrap();
    let authenticator = Authenticator::new(store);
    let mut headers = HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    // The first call reads the store; every measured one is a cache hit, as
    // all but one request in two seconds are.
    runtime
        .block_on(authenticator.authenticate(&headers, "127.0.0.1"))
        .unwrap();
    c.bench_function("authenticate a cached credential", |b| {
        b.iter(|| {
            runtime
                .block_on(authenticator.authenticate(black_box(&headers), "127.0.0.1"))
                .unwrap()
        })
    });
}

fn audit_row_encoding(c: &mut Criterion) {
    use portcullis::audit::chain;
    use portcullis::audit::row::AuditRow;
    let mut row = AuditRow::new(uuid::Uuid::now_v7(), chrono::Utc::now());
    row.cluster = "prod".into();
    row.principal_kind = "person".into();
    row.login = "ana".into();
    row.credential_id = uuid::Uuid::now_v7().to_string();
    row.client = "10.0.0.7".into();
    row.method = "GET".into();
    row.path = "/apis/apps/v1/namespaces/shop/deployments/web".into();
    row.verb = "get".into();
    row.api_group = "apps".into();
    row.api_version = "v1".into();
    row.resource = "deployments".into();
    row.namespace = "shop".into();
    row.name = "web".into();
    row.code = 200;
    row.bytes_out = 4096;
    row.finish(chrono::Utc::now());
    let prev = chain::Anchor::default();
    c.bench_function("audit row: chain hash over its JSON", |b| {
        b.iter(|| chain::link(black_box(41), &prev.hash, black_box(&row)))
    });
    let chained = chain::append(&prev, row);
    c.bench_function("audit row: JSON line for the export", |b| {
        b.iter(|| serde_json::to_vec(black_box(&chained)).unwrap())
    });
}

fn impersonation(c: &mut Criterion) {
    let groups: Vec<String> = (0..3)
        .map(|i| format!("portcullis:grant:0190c0de-0000-7000-8000-00000000000{i}"))
        .collect();
    c.bench_function("build impersonation headers", |b| {
        b.iter(|| {
            let mut map = HeaderMap::new();
            // The user name is made for each request, as `kube_user` does.
            headers::impersonate(
                &mut map,
                "user:ana".to_string(),
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
    let info =
        portcullis_sim::request_info::classify(&Method::GET, "/apis/apps/v1/namespaces/shop/deployments/web", None)
            .unwrap();
    c.bench_function("simulated RBAC check among 50 bindings", |b| {
        b.iter(|| assert!(rbac::allowed(&objects, black_box(&user), black_box(&info))))
    });
}

fn simulated_get(c: &mut Criterion) {
    use http_body_util::{BodyExt, Empty};
    use portcullis_sim::handlers::{handle, Settings};
    use portcullis_sim::store::Store;
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
    let info = portcullis_sim::request_info::classify(&Method::GET, path, None).unwrap();
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
    credential_lookup,
    impersonation,
    audit_row_encoding,
    simulated_rbac,
    simulated_get
);
criterion_main!(benches);
