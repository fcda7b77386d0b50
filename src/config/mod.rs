//! One typed configuration tree, read once at start.
//!
//! The TOML file is read, then every `PORTCULLIS_*` variable is laid over it
//! by path: `PORTCULLIS_LISTEN`, `PORTCULLIS_LIMITS__RESPONSE_BYTES`,
//! `PORTCULLIS_CLUSTERS__0__TOKEN_FILE` (`__` separates levels, a number
//! indexes an array, names are lower-cased). Values are read as TOML
//! (`8388608`, `true`, `["a"]`) and otherwise taken as strings.
//! `PORTCULLIS_CONFIG`, `PORTCULLIS_LOG`, `PORTCULLIS_SERVER`,
//! `PORTCULLIS_TOKEN` and `PORTCULLIS_CA_FILE` belong to the command line,
//! the variables Kubernetes gives a pod for each Service of its namespace
//! (`PORTCULLIS_SERVICE_HOST`, `PORTCULLIS_PORT_443_TCP`, … for a Service
//! named `portcullis`) are not portcullis's, and any other unknown name is
//! refused like an unknown field. Nothing
//! reads the environment after start: [`Config::from_sources`] takes the
//! variables as an argument so parsing is testable.
//!
//! The configuration sits below everything else: it imports no other module
//! of portcullis, so the sections other modules read (`[approvals]`,
//! custom `[[roles]]`, `[reconcile]`) are declared here, in [`approvals`],
//! [`roles`] and [`reconcile`].

pub mod approvals;
pub mod audit;
pub mod ci;
pub mod cluster;
pub mod oauth;
pub mod reconcile;
pub mod roles;
pub mod signin;
pub mod store;

pub use cluster::ClusterConfig;

pub use audit::AuditConfig;
use ipnet::IpNet;
pub use reconcile::{valid_instance_id, ReconcileConfig, MAX_INSTANCE_ID};
use roles::Role;
use serde::{Deserialize, Serialize};
pub use signin::{OidcConfig, SessionsConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The whole configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on, e.g. `0.0.0.0:8443`.
    pub listen: String,
    /// URL clients reach portcullis at (for kubeconfigs and links).
    pub public_url: String,
    /// Serving certificate and key.
    pub tls: TlsConfig,
    /// Where the embedded store lives.
    pub data_dir: PathBuf,
    /// Peers whose `X-Forwarded-For` is believed (load balancers).
    #[serde(default)]
    pub trusted_proxies: Vec<IpNet>,
    /// Namespaces where no grant applies.
    #[serde(default)]
    pub protected_namespaces: Vec<String>,
    /// Size and time limits.
    #[serde(default)]
    pub limits: Limits,
    /// The clusters portcullis fronts.
    #[serde(default)]
    pub clusters: Vec<ClusterConfig>,
    /// Custom roles, alongside the built-in ones.
    #[serde(default)]
    pub roles: Vec<Role>,
    /// The audit's export sink and retention.
    #[serde(default)]
    pub audit: AuditConfig,
    /// The MCP server for AI agents (`/mcp`).
    #[serde(default)]
    pub mcp: McpConfig,
    /// How the clusters' RBAC objects are kept in step.
    #[serde(default)]
    pub reconcile: ReconcileConfig,
    /// Access requests.
    #[serde(default)]
    pub access: AccessConfig,
    /// Held writes: the sealing key, the approval wait, the expiry.
    #[serde(default)]
    pub approvals: approvals::ApprovalsConfig,
    /// Sign-in with the company's OpenID Connect provider; unset: people
    /// sign in to the web pages with a portcullis token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcConfig>,
    /// Web sign-in sessions: lifetime, attempts per address.
    #[serde(default)]
    pub sessions: SessionsConfig,
    /// OAuth for agents' MCP clients: client metadata, endpoint limits.
    #[serde(default)]
    pub oauth: oauth::OAuthConfig,
    /// CI jobs' token exchange: how their issuers are reached.
    #[serde(default)]
    pub ci: ci::CiConfig,
    /// The database: the embedded SQLite, or PostgreSQL for replicas.
    #[serde(default)]
    pub store: store::StoreConfig,
}

/// `[access]`: access requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// A request nobody decided within this long expires (1 h).
    #[serde(with = "humantime_serde")]
    pub request_ttl: Duration,
}

impl Default for AccessConfig {
    fn default() -> Self {
        AccessConfig {
            request_ttl: Duration::from_secs(3600),
        }
    }
}

/// `[mcp]`: the MCP server for AI agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// Sustained `/mcp` requests one agent may send per minute (all its credentials together) (240);
    /// more get 429 before their body is read.
    pub requests_per_minute: u32,
    /// Requests one agent may send at once after a quiet spell (60).
    pub burst: u32,
    /// `scale` refuses fewer replicas than this (0).
    pub scale_min_replicas: u32,
    /// `scale` refuses more replicas than this (50).
    pub scale_max_replicas: u32,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            requests_per_minute: 240,
            burst: 60,
            scale_min_replicas: 0,
            scale_max_replicas: 50,
        }
    }
}

/// Serving certificate and key, re-read when the files change.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert_file: PathBuf,
    /// PEM private key.
    pub key_file: PathBuf,
}

/// The longest `limits.request_timeout`: an approved write's run is bounded
/// by two of it ([`crate::approvals::RUN_BOUND`] is longer), and a request
/// that needs longer is a stream, which has none.
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Limits on requests and responses.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body accepted (3 MiB, as the API server).
    pub request_body_bytes: u64,
    /// Largest non-streaming cluster response relayed (8 MiB).
    pub response_bytes: u64,
    /// Whole-request timeout for requests that are not long-running.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Client connections open at once (10,000); more are closed as they
    /// are accepted. The process's open-file limit must be above it.
    pub connections: usize,
    /// A client connection with no request open this long is closed (90 s,
    /// as kube-apiserver's): a GOAWAY on HTTP/2. HTTP/1.1 connections also
    /// close after waiting 30 s for their next request's headers.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Long-running requests (watch, exec, attach, port-forward, proxy,
    /// logs -f) one person or bot, its agents included, may have open on
    /// one cluster through one replica at once (1,000), one agent half of
    /// that; more are refused with 429. Each replica's streaming connections carry 64 × 250
    /// streams a cluster, so no one caller takes them all.
    pub streams_per_caller: usize,
    /// Tokens unknown to portcullis one client address may present per
    /// minute (60; an IPv6 address counts with its /64). Past it, a token
    /// that has not authenticated here before is refused with 429 before
    /// the store is asked: a flood of made-up tokens costs a lookup in a
    /// map, not a query. Tokens that worked before are not held back.
    pub failed_authentications_per_minute: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_body_bytes: 3 * 1024 * 1024,
            response_bytes: 8 * 1024 * 1024,
            request_timeout: Duration::from_secs(60),
            connections: 10_000,
            idle_timeout: Duration::from_secs(90),
            streams_per_caller: 1000,
            failed_authentications_per_minute: 60,
        }
    }
}

/// Why the configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("{path} is not valid TOML: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A field is wrong.
    #[error("configuration field `{field}`: {message}")]
    Field {
        /// Path of the field, e.g. `clusters[0].server`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl Config {
    /// Read `path` and apply `PORTCULLIS_*` overrides from `env`.
    pub fn load(path: &Path, env: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        Self::from_sources(&text, env).map_err(|e| match e {
            ConfigError::Syntax { message, .. } => ConfigError::Syntax {
                path: path.into(),
                message,
            },
            other => other,
        })
    }

    /// Parse TOML `text` and apply overrides.
    pub fn from_sources(text: &str, env: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let mut tree: toml::Value = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: PathBuf::new(),
            message: e.to_string(),
        })?;
        for (key, value) in env {
            match key.strip_prefix("PORTCULLIS_") {
                // The command line's own variables, not configuration fields.
                Some("CONFIG" | "LOG" | "SERVER" | "TOKEN" | "CA_FILE") | None => {}
                Some(path) if service_link(path) => {}
                Some(path) => overlay(&mut tree, path, &value)?,
            }
        }
        let config: Config = serde_path_to_error::deserialize(tree).map_err(|e| ConfigError::Field {
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let field = |field: &str, message: String| ConfigError::Field {
            field: field.into(),
            message,
        };
        self.listen
            .parse::<std::net::SocketAddr>()
            .map_err(|e| field("listen", format!("{e} (want host:port)")))?;
        for (i, cluster) in self.clusters.iter().enumerate() {
            if !valid_cluster_name(&cluster.name) {
                return Err(field(
                    &format!("clusters[{i}].name"),
                    format!(
                        "{:?} is not a valid cluster name (lower-case letters, digits and '-')",
                        cluster.name
                    ),
                ));
            }
            if !cluster.server.starts_with("https://") {
                return Err(field(
                    &format!("clusters[{i}].server"),
                    "must be an https:// URL".into(),
                ));
            }
            if self.clusters[..i].iter().any(|c| c.name == cluster.name) {
                return Err(field(
                    &format!("clusters[{i}].name"),
                    format!("{:?} appears twice", cluster.name),
                ));
            }
        }
        for (i, role) in self.roles.iter().enumerate() {
            let at = format!("roles[{i}].name");
            if !valid_role_name(&role.name) {
                let why = format!(
                    "{:?} is not a valid role name (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)",
                    role.name
                );
                return Err(field(&at, why));
            }
            if roles::BUILTIN_NAMES.contains(&role.name.as_str()) {
                return Err(field(&at, format!("{:?} is a built-in role's name", role.name)));
            }
            if self.roles[..i].iter().any(|r| r.name == role.name) {
                return Err(field(&at, format!("{:?} appears twice", role.name)));
            }
        }
        if self.limits.connections == 0 {
            return Err(field("limits.connections", "must be at least 1".into()));
        }
        if self.limits.streams_per_caller == 0 {
            return Err(field("limits.streams_per_caller", "must be at least 1".into()));
        }
        if self.limits.idle_timeout < Duration::from_secs(1) {
            return Err(field("limits.idle_timeout", "must be at least 1s".into()));
        }
        if self.limits.request_timeout.is_zero() || self.limits.request_timeout > MAX_REQUEST_TIMEOUT {
            return Err(field(
                "limits.request_timeout",
                "must be above 0s and at most 5m (watches, exec, logs -f and proxied requests have none)".into(),
            ));
        }
        // Also what keeps `now - grace` from overflowing (a panic, which
        // stopped the bypass check for good).
        if self.audit.bypass_grace > Duration::from_secs(86_400) {
            return Err(field("audit.bypass_grace", "must be at most 1d".into()));
        }
        if self.store.cache_ttl > store::MAX_CACHE_TTL {
            return Err(field("store.cache_ttl", "must be at most 5m".into()));
        }
        self.reconcile
            .validate()
            .map_err(|(name, message)| field(name, message))?;
        self.approvals
            .validate()
            .map_err(|(name, message)| field(name, message))?;
        self.sessions
            .validate()
            .map_err(|(name, message)| field(name, message))?;
        if let Some(oidc) = &self.oidc {
            oidc.validate().map_err(|(name, message)| field(name, message))?;
            // The sign-in state and the forms are signed with that key.
            if self.approvals.key_file.is_none() {
                return Err(field("oidc", "needs [approvals] key_file".into()));
            }
        }
        Ok(())
    }
}

/// A role's name is the value of its ClusterRole's role label, so it
/// follows Kubernetes' rule for label values (mixed case allowed).
pub fn valid_role_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
}

/// Cluster names are DNS-1123 labels: they appear in paths and kubeconfigs.
pub fn valid_cluster_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Is `PORTCULLIS_<path>` one of the variables the kubelet sets for a
/// Service whose name starts `portcullis` (unless the pod turns service
/// links off)? `<S>_SERVICE_HOST`, `<S>_SERVICE_PORT`,
/// `<S>_SERVICE_PORT_<NAME>`, `<S>_PORT` and `<S>_PORT_<N>_<PROTOCOL>`
/// with `_PROTO`, `_PORT` or `_ADDR`, where `<S>` is the rest of the
/// Service's name (empty for `portcullis` itself). Refused as unknown
/// fields, they kept portcullis from starting beside its own Service. No
/// configuration field is named so (a test keeps it so), and a field's
/// path below the top level has `__`, which these never have. (A Service
/// named with `--` after `portcullis` gives `__` too, and is not
/// recognised: the chart and manifests turn service links off anyway.)
fn service_link(path: &str) -> bool {
    if path.is_empty() || path.contains("__") || path.starts_with('_') || path.ends_with('_') {
        return false;
    }
    let words: Vec<&str> = path.split('_').collect();
    let protocol_port = |(i, w): (usize, &[&str])| {
        w[0] == "PORT"
            && w[1].parse::<u16>().is_ok()
            && matches!(w[2], "TCP" | "UDP" | "SCTP")
            && matches!(words[i + 3..], [] | ["PROTO" | "PORT" | "ADDR"])
    };
    words.ends_with(&["SERVICE", "HOST"])
        || words.ends_with(&["PORT"])
        || words.windows(2).any(|w| w == ["SERVICE", "PORT"])
        || words.windows(3).enumerate().any(protocol_port)
}

/// Set `path` (like `LIMITS__RESPONSE_BYTES`) in `tree` to `value`.
fn overlay(tree: &mut toml::Value, path: &str, value: &str) -> Result<(), ConfigError> {
    let keys: Vec<String> = path.split("__").map(str::to_ascii_lowercase).collect();
    let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    let mut node = tree;
    for (depth, key) in keys.iter().enumerate() {
        let last = depth + 1 == keys.len();
        node = match node {
            toml::Value::Table(table) => {
                if last {
                    table.insert(key.clone(), parsed);
                    return Ok(());
                }
                table
                    .entry(key.clone())
                    .or_insert_with(|| toml::Value::Table(Default::default()))
            }
            toml::Value::Array(items) => {
                let index: usize = key.parse().map_err(|_| ConfigError::Field {
                    field: keys[..depth].join("."),
                    message: format!("PORTCULLIS_{path}: {key:?} is not an array index"),
                })?;
                let slot = items.get_mut(index).ok_or_else(|| ConfigError::Field {
                    field: keys[..depth].join("."),
                    message: format!("PORTCULLIS_{path}: no element {index}"),
                })?;
                if last {
                    *slot = parsed;
                    return Ok(());
                }
                slot
            }
            _ => {
                return Err(ConfigError::Field {
                    field: keys[..depth].join("."),
                    message: format!("PORTCULLIS_{path}: not a table"),
                })
            }
        };
    }
    Ok(())
}

/// `humantime` (de)serialization for durations (`"60s"`).
/// Durations as humantime text (`50s`, `15m`) in TOML.
pub(crate) mod humantime_serde {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*value).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
listen = "127.0.0.1:8443"
public_url = "https://127.0.0.1:8443"
data_dir = "/tmp/p"
[tls]
cert_file = "c.pem"
key_file = "k.pem"
[[clusters]]
name = "kind-local"
server = "https://127.0.0.1:6443"
ca_file = "ca.pem"
token_file = "token"
"#;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_request_timeout_past_five_minutes_is_refused() {
        let with = |timeout: &str| {
            Config::from_sources(BASE, env(&[("PORTCULLIS_LIMITS__REQUEST_TIMEOUT", timeout)]))
                .map(|c| c.limits.request_timeout)
        };
        assert_eq!(with("5m").unwrap(), MAX_REQUEST_TIMEOUT);
        for refused in ["6m", "0s"] {
            match with(refused) {
                Err(ConfigError::Field { field, .. }) => assert_eq!(field, "limits.request_timeout"),
                other => panic!("{refused}: {other:?}"),
            }
        }
    }

    #[test]
    fn defaults_apply_to_a_minimal_file() {
        let config = Config::from_sources(BASE, env(&[])).unwrap();
        assert_eq!(config.limits.response_bytes, 8 * 1024 * 1024);
        assert_eq!(config.limits.request_timeout, Duration::from_secs(60));
        assert_eq!(config.clusters[0].name, "kind-local");
    }

    #[test]
    fn a_custom_role_may_not_take_a_built_in_roles_name_another_roles_or_an_invalid_one() {
        let role = |name: &str| format!("\n[[roles]]\nname = \"{name}\"\nrules = []\n");
        let refused = |roles: &str| match Config::from_sources(&format!("{BASE}{roles}"), env(&[])) {
            Err(ConfigError::Field { field, message }) => format!("{field}: {message}"),
            other => panic!("{roles}: {other:?}"),
        };
        assert_eq!(
            refused(&role("admin")),
            "roles[0].name: \"admin\" is a built-in role's name"
        );
        assert_eq!(
            refused(&(role("log-reader") + &role("log-reader"))),
            "roles[1].name: \"log-reader\" appears twice"
        );
        // Its name is a label value in the cluster: what the API server
        // would refuse there is refused here.
        for bad in ["log reader", "a/b", "-logs", ""] {
            assert!(refused(&role(bad)).contains("is not a valid role name"), "{bad}");
        }
        for good in ["log_reader", "Logs", "logs.v2"] {
            assert!(
                Config::from_sources(&format!("{BASE}{}", role(good)), env(&[])).is_ok(),
                "{good}"
            );
        }
        let config = Config::from_sources(&format!("{BASE}{}", role("log-reader")), env(&[])).unwrap();
        assert_eq!(config.roles[0].name, "log-reader");
        assert!(
            !config.roles[0].namespaced,
            "a custom role may be granted cluster-wide unless it says"
        );
    }

    #[test]
    fn environment_overrides_any_field_by_path() {
        let config = Config::from_sources(
            BASE,
            env(&[
                ("PORTCULLIS_LISTEN", "0.0.0.0:9443"),
                ("PORTCULLIS_LIMITS__RESPONSE_BYTES", "1024"),
                ("PORTCULLIS_LIMITS__REQUEST_TIMEOUT", "5s"),
                ("PORTCULLIS_CLUSTERS__0__TOKEN_FILE", "/var/run/token"),
                ("PORTCULLIS_PROTECTED_NAMESPACES", r#"["kube-system"]"#),
                ("HOME", "/root"),
                ("PORTCULLIS_CONFIG", "/etc/portcullis.toml"),
                ("PORTCULLIS_LOG", "debug"),
            ]),
        )
        .unwrap();
        assert_eq!(config.listen, "0.0.0.0:9443");
        assert_eq!(config.limits.response_bytes, 1024);
        assert_eq!(config.limits.request_timeout, Duration::from_secs(5));
        assert_eq!(config.clusters[0].token_file, PathBuf::from("/var/run/token"));
        assert_eq!(config.protected_namespaces, ["kube-system"]);
    }

    /// What the kubelet sets in a pod beside Services named `portcullis`
    /// and `portcullis-metrics` (service links), and the command line's
    /// own variables, are not configuration; a misspelt field still is
    /// refused.
    #[test]
    fn service_link_and_command_line_variables_are_not_configuration() {
        let kubelet = [
            ("PORTCULLIS_SERVICE_HOST", "10.96.0.12"),
            ("PORTCULLIS_SERVICE_PORT", "443"),
            ("PORTCULLIS_SERVICE_PORT_HTTPS", "443"),
            ("PORTCULLIS_PORT", "tcp://10.96.0.12:443"),
            ("PORTCULLIS_PORT_443_TCP", "tcp://10.96.0.12:443"),
            ("PORTCULLIS_PORT_443_TCP_PROTO", "tcp"),
            ("PORTCULLIS_PORT_443_TCP_PORT", "443"),
            ("PORTCULLIS_PORT_443_TCP_ADDR", "10.96.0.12"),
            ("PORTCULLIS_METRICS_SERVICE_HOST", "10.96.0.13"),
            ("PORTCULLIS_METRICS_SERVICE_PORT_HTTP_METRICS", "9090"),
            ("PORTCULLIS_METRICS_PORT_9090_UDP_ADDR", "10.96.0.13"),
            ("PORTCULLIS_SERVER", "https://portcullis.example"),
            ("PORTCULLIS_TOKEN", "pcl_x"),
            ("PORTCULLIS_CA_FILE", "/etc/ca.pem"),
            ("PORTCULLIS_LISTEN", "0.0.0.0:9443"),
        ];
        let config = Config::from_sources(BASE, env(&kubelet)).unwrap();
        assert_eq!(config.listen, "0.0.0.0:9443");
        for misspelt in [
            "PORTCULLIS_LISTN",
            "PORTCULLIS_SERVICE",
            "PORTCULLIS_PORT_X_TCP",
            "PORTCULLIS_PORT_443_TCP_X",
        ] {
            let refused = Config::from_sources(BASE, env(&[(misspelt, "1")]));
            assert!(
                matches!(refused, Err(ConfigError::Field { .. })),
                "{misspelt}: {refused:?}"
            );
        }
    }

    /// Were a field named like a service-link variable, its override
    /// would be dropped unsaid.
    #[test]
    fn no_configuration_field_is_named_like_a_service_link_variable() {
        // Every top-level field, as the refusal of an unknown one lists them.
        let message = match Config::from_sources(BASE, env(&[("PORTCULLIS_NO_SUCH_FIELD", "1")])) {
            Err(ConfigError::Field { message, .. }) => message,
            other => panic!("{other:?}"),
        };
        let (_, expected) = message.split_once("expected one of").expect("the fields listed");
        let fields: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        assert!(
            fields.contains(&"listen") && fields.contains(&"store") && fields.contains(&"ci"),
            "{message}"
        );
        for field in fields {
            assert!(!service_link(&field.to_uppercase()), "{field}");
        }
    }

    #[test]
    fn a_bypass_grace_past_a_day_is_refused() {
        let grace = |text: &str| Config::from_sources(BASE, env(&[("PORTCULLIS_AUDIT__BYPASS_GRACE", text)]));
        assert_eq!(grace("1d").unwrap().audit.bypass_grace, Duration::from_secs(86_400));
        match grace("300000y") {
            Err(ConfigError::Field { field, .. }) => assert_eq!(field, "audit.bypass_grace"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_caches_life_is_two_seconds_unless_set_and_at_most_five_minutes() {
        let with = |ttl: &[(&str, &str)]| Config::from_sources(BASE, env(ttl)).map(|c| c.store.cache_ttl);
        assert_eq!(with(&[]).unwrap(), Duration::from_secs(2));
        assert_eq!(
            with(&[("PORTCULLIS_STORE__CACHE_TTL", "5m")]).unwrap(),
            store::MAX_CACHE_TTL
        );
        match with(&[("PORTCULLIS_STORE__CACHE_TTL", "6m")]) {
            Err(ConfigError::Field { field, .. }) => assert_eq!(field, "store.cache_ttl"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_audit_section_has_defaults_and_can_be_set() {
        let config = Config::from_sources(BASE, env(&[])).unwrap();
        assert_eq!(config.audit, AuditConfig::default());
        assert_eq!(config.audit.retention, Duration::from_secs(30 * 86400));
        let text = format!("{BASE}\n[audit]\nexport = \"stdout\"\nretention = \"7d\"\nrotate_bytes = 1024\n");
        let config = Config::from_sources(&text, env(&[])).unwrap();
        assert_eq!(config.audit.export.as_deref(), Some("stdout"));
        assert_eq!(
            (config.audit.retention, config.audit.rotate_bytes),
            (Duration::from_secs(7 * 86400), 1024)
        );
    }

    #[test]
    fn the_reconcile_and_access_sections_have_defaults_and_can_be_set() {
        let config = Config::from_sources(BASE, env(&[])).unwrap();
        assert_eq!(config.reconcile.resync, Duration::from_secs(20));
        assert_eq!(config.access.request_ttl, Duration::from_secs(3600));
        let text = format!("{BASE}\n[reconcile]\nresync = \"5s\"\n[access]\nrequest_ttl = \"10m\"\n");
        let config = Config::from_sources(&text, env(&[("PORTCULLIS_RECONCILE__RESYNC", "7s")])).unwrap();
        assert_eq!(config.reconcile.resync, Duration::from_secs(7), "the environment wins");
        assert_eq!(config.access.request_ttl, Duration::from_secs(600));
    }

    #[test]
    fn the_instance_id_is_unset_by_default_and_must_be_a_lower_case_label_value() {
        assert_eq!(Config::from_sources(BASE, env(&[])).unwrap().reconcile.instance, None);
        let text = format!("{BASE}\n[reconcile]\ninstance = \"staging\"\n");
        let config = Config::from_sources(&text, env(&[])).unwrap();
        assert_eq!(config.reconcile.instance.as_deref(), Some("staging"));
        let config = Config::from_sources(BASE, env(&[("PORTCULLIS_RECONCILE__INSTANCE", "eu-1.prod")])).unwrap();
        assert_eq!(config.reconcile.instance.as_deref(), Some("eu-1.prod"));
        let err = Config::from_sources(BASE, env(&[("PORTCULLIS_RECONCILE__INSTANCE", "Prod")])).unwrap_err();
        assert!(err.to_string().contains("reconcile.instance"), "{err}");
    }

    #[test]
    fn a_bad_field_is_named() {
        let err = Config::from_sources(BASE, env(&[("PORTCULLIS_LIMITS__RESPONSE_BYTES", "\"lots\"")])).unwrap_err();
        assert!(err.to_string().contains("limits.response_bytes"), "{err}");
        let err = Config::from_sources(&BASE.replace("https://127.0.0.1:6443", "http://x"), env(&[])).unwrap_err();
        assert!(err.to_string().contains("clusters[0].server"), "{err}");
        let err = Config::from_sources(&format!("{BASE}\nbogus = 1"), env(&[])).unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
        let err = Config::from_sources(&BASE.replace("kind-local", "Kind Local"), env(&[])).unwrap_err();
        assert!(err.to_string().contains("clusters[0].name"), "{err}");
        let err = Config::from_sources(BASE, env(&[("PORTCULLIS_LIMITS__CONNECTIONS", "0")])).unwrap_err();
        assert!(err.to_string().contains("limits.connections"), "{err}");
        let err = Config::from_sources(BASE, env(&[("PORTCULLIS_LIMITS__STREAMS_PER_CALLER", "0")])).unwrap_err();
        assert!(
            err.to_string()
                .contains("`limits.streams_per_caller`: must be at least 1"),
            "{err}"
        );
        let err = Config::from_sources(BASE, env(&[("PORTCULLIS_LIMITS__IDLE_TIMEOUT", "\"0s\"")])).unwrap_err();
        assert!(
            err.to_string().contains("`limits.idle_timeout`: must be at least 1s"),
            "{err}"
        );
    }
}
