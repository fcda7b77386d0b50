//! The kubeconfig a person downloads (and `portcullis kubeconfig` writes):
//! a context `portcullis-<cluster>` per cluster, whose user runs the exec
//! plugin `portcullis credential-plugin`, so no token is ever in the file
//! and kubectl, k9s and helm pick up a new credential by themselves.

/// The kubeconfig text for `clusters` behind portcullis at `public_url`,
/// trusting `ca_pem` when portcullis's certificate is not from a public CA.
/// Every value is quoted as a YAML string, so no name can break the file.
pub fn kubeconfig(public_url: &str, ca_pem: Option<&str>, clusters: &[String]) -> String {
    use base64::Engine;
    let base = public_url.trim_end_matches('/');
    let ca = ca_pem
        .map(|pem| {
            let data = base64::engine::general_purpose::STANDARD.encode(pem);
            format!("\n    certificate-authority-data: {}", quoted(&data))
        })
        .unwrap_or_default();
    let user = quoted(&user_name("portcullis", base));
    let mut text = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for name in clusters {
        text.push_str(&format!(
            "- name: {}\n  cluster:\n    server: {}{ca}\n",
            quoted(&format!("portcullis-{name}")),
            quoted(&format!("{base}/clusters/{name}"))
        ));
    }
    text.push_str("contexts:\n");
    for name in clusters {
        let context = quoted(&format!("portcullis-{name}"));
        text.push_str(&format!(
            "- name: {context}\n  context:\n    cluster: {context}\n    user: {user}\n"
        ));
    }
    if let Some(first) = clusters.first() {
        text.push_str(&format!(
            "current-context: {}\n",
            quoted(&format!("portcullis-{first}"))
        ));
    }
    text.push_str(&format!(
        "users:\n- name: {user}\n  user:\n    exec:\n      apiVersion: \"client.authentication.k8s.io/v1\"\n      \
         command: \"portcullis\"\n      args: [\"credential-plugin\", \"--server\", {}]\n      \
         interactiveMode: \"IfAvailable\"\n      provideClusterInfo: false\n",
        quoted(base)
    ));
    text
}

/// The kubeconfig user of the portcullis at `base`: `<prefix>@<host>`. One
/// name per server, so that merging a second portcullis's contexts into
/// the same kubeconfig cannot point the first's contexts at a user that
/// hands them the second's token.
pub fn user_name(prefix: &str, base: &str) -> String {
    let rest = base.split_once("://").map_or(base, |(_, rest)| rest);
    let rest = rest.split(['?', '#']).next().unwrap_or_default().trim_end_matches('/');
    // The host in any case is the same server; its path is not.
    let (host, path) = rest.split_once('/').map_or((rest, ""), |(host, path)| (host, path));
    match path {
        "" => format!("{prefix}@{}", host.to_ascii_lowercase()),
        path => format!("{prefix}@{}/{path}", host.to_ascii_lowercase()),
    }
}

/// A double-quoted YAML (and JSON) string.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cluster_gets_a_context_whose_user_runs_the_exec_plugin_and_no_token() {
        let text = kubeconfig("https://p.example.com/", Some("PEM"), &["prod".into(), "dev".into()]);
        let parsed: serde_json::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(parsed["current-context"], "portcullis-prod");
        assert_eq!(
            parsed["clusters"][1]["cluster"]["server"],
            "https://p.example.com/clusters/dev"
        );
        assert_eq!(parsed["contexts"][0]["context"]["user"], "portcullis@p.example.com");
        assert_eq!(parsed["users"][0]["name"], "portcullis@p.example.com");
        assert_eq!(user_name("p", "https://H.example:8443/a/"), "p@h.example:8443/a");
        assert_ne!(user_name("p", "https://h/a"), user_name("p", "https://h/b"));
        let exec = &parsed["users"][0]["user"]["exec"];
        assert_eq!(exec["command"], "portcullis");
        assert_eq!(exec["args"][0], "credential-plugin");
        assert_eq!(exec["interactiveMode"], "IfAvailable");
        assert!(!text.contains("token"), "{text}");
    }
}
