//! `portcullis kubeconfig`: a context `portcullis-<cluster>` for every
//! cluster the person has a grant on, merged into their kubeconfig
//! (`$KUBECONFIG`'s first file, else `~/.kube/config`) beside whatever else
//! is there. The contexts' user runs `portcullis credential-plugin`
//! ([`super::plugin`]), so the file never holds a token and a new login is
//! picked up without writing it again.

use super::access::{io, s};
use super::remote::{PersonEnv, Remote};
use super::CliError;
use crate::doors::web::console::kubeconfig_text;
use crate::text::escape_control as esc;
use serde_yaml::{Mapping, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

/// The lists of a kubeconfig whose entries are named.
const NAMED: [&str; 3] = ["clusters", "contexts", "users"];

/// Write the person's contexts into their kubeconfig and say which.
pub async fn run(remote: &Remote, env: &PersonEnv, out: &mut dyn Write) -> Result<(), CliError> {
    let me = remote.get("whoami").await?;
    let clusters: BTreeSet<String> = me["grants"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| s(&g["cluster"]).to_string())
        .filter(|c| !c.is_empty())
        .collect();
    if clusters.is_empty() {
        return Err(CliError::Message(
            "you have no grant on any cluster yet: ask for one with `portcullis access request`".into(),
        ));
    }
    let clusters: Vec<String> = clusters.into_iter().collect();
    let ca_pem = match remote.ca_file() {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| CliError::Message(format!("cannot read the CA file {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let ours = kubeconfig_text(remote.server(), ca_pem.as_deref(), &clusters);
    let path = env
        .kubeconfig
        .as_deref()
        .ok_or_else(|| CliError::Message("neither KUBECONFIG nor HOME is set: nowhere to write a kubeconfig".into()))?;
    let existing = read(path)?;
    write(path, &merge(existing.as_deref(), &ours)?, false)?;
    let names: Vec<String> = clusters.iter().map(|c| format!("portcullis-{c}")).collect();
    writeln!(
        out,
        "wrote {} to {}; kubectl asks `portcullis credential-plugin` for your credential \
         (switch with `kubectl config use-context {}`)",
        esc(&names.join(", ")),
        path.display(),
        esc(&names[0])
    )
    .map_err(io)
}

/// `ours` merged into the kubeconfig `existing`: each of our clusters,
/// contexts and users replaces the entry of its name or is added; every
/// other entry, and the current context if there is one, stays as it was.
pub fn merge(existing: Option<&str>, ours: &str) -> Result<String, CliError> {
    let bad = |e: serde_yaml::Error| CliError::Message(format!("the kubeconfig cannot be read as YAML: {e}"));
    let ours: Value = serde_yaml::from_str(ours).map_err(bad)?;
    let mut merged: Value = match existing {
        Some(text) if !text.trim().is_empty() => serde_yaml::from_str(text).map_err(bad)?,
        _ => return serde_yaml::to_string(&ours).map_err(bad),
    };
    let Some(file) = merged.as_mapping_mut() else {
        return Err(CliError::Message("the kubeconfig is not a YAML mapping".into()));
    };
    for list in NAMED {
        let theirs = entries(file, list)?;
        for entry in ours.get(list).and_then(Value::as_sequence).into_iter().flatten() {
            match theirs.iter_mut().find(|e| e.get("name") == entry.get("name")) {
                Some(same) => *same = entry.clone(),
                None => theirs.push(entry.clone()),
            }
        }
    }
    let current = file.get("current-context").and_then(Value::as_str).unwrap_or_default();
    if current.is_empty() {
        if let Some(first) = ours.get("current-context") {
            file.insert("current-context".into(), first.clone());
        }
    }
    for (key, value) in [("apiVersion", "v1"), ("kind", "Config")] {
        if !file.contains_key(key) {
            file.insert(key.into(), value.into());
        }
    }
    serde_yaml::to_string(&merged).map_err(bad)
}

/// The list `name` of a kubeconfig, made if it is missing or null.
fn entries<'a>(file: &'a mut Mapping, name: &str) -> Result<&'a mut Vec<Value>, CliError> {
    let slot = file.entry(name.into()).or_insert(Value::Sequence(Vec::new()));
    if slot.is_null() {
        *slot = Value::Sequence(Vec::new());
    }
    slot.as_sequence_mut()
        .ok_or_else(|| CliError::Message(format!("the kubeconfig's {name} is not a list")))
}

fn read(path: &Path) -> Result<Option<String>, CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::Message(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Write `text` to `path`; a new file is its owner's only (0600), as the
/// other credentials a kubeconfig may hold want; an existing one keeps its
/// mode (and, where this user may, its owner) unless `owner_only` (the
/// file holds a token itself). Written to a file beside it and renamed
/// over it, so a crash, a full disk or an interrupt leaves the old file
/// whole, never a kubeconfig cut short; a symbolic link's target is what is
/// replaced (made, if the link dangles). Where a rename cannot replace it
/// (a file mounted on its own, a directory this user may not write), it is
/// written in place as before.
pub(super) fn write(path: &Path, text: &str, owner_only: bool) -> Result<(), CliError> {
    let fail = |e: std::io::Error| CliError::Message(format!("cannot write {}: {e}", path.display()));
    let target = link_target(path);
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let existing = std::fs::metadata(&target).ok();
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        match &existing {
            Some(existing) if !owner_only => existing.permissions().mode() & 0o7777,
            _ => 0o600,
        }
    };
    #[cfg(not(unix))]
    let _ = owner_only;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let replaced = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temporary)?;
        file.write_all(text.as_bytes())?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            if let Some(existing) = &existing {
                // Best effort: only root may give a file away.
                let _ = std::os::unix::fs::fchown(&file, Some(existing.uid()), Some(existing.gid()));
            }
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        file.sync_all()?;
        std::fs::rename(&temporary, &target)
    })();
    if replaced.is_ok() {
        return Ok(());
    }
    let _ = std::fs::remove_file(&temporary);
    // In place, as before: a file mounted on its own cannot be renamed
    // over, nor one in a directory this user may not write.
    if owner_only {
        return super::write_private(&target, text).map_err(fail);
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(&target)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(fail)
}

/// The file `path` names once every symbolic link is followed, whether it
/// exists or not (a dangling link names the file to make).
fn link_target(path: &Path) -> std::path::PathBuf {
    let mut target = path.to_path_buf();
    // A bound, against a loop of links.
    for _ in 0..40 {
        match std::fs::read_link(&target) {
            Ok(next) => {
                target = match target.parent() {
                    Some(dir) if next.is_relative() => dir.join(next),
                    _ => next,
                }
            }
            Err(_) => return target,
        }
    }
    target
}

#[cfg(test)]
mod tests {
    use super::*;

    const THEIRS: &str = "apiVersion: v1\nkind: Config\ncurrent-context: work\nclusters:\n\
        - name: work\n  cluster:\n    server: https://work.example\n\
        - name: portcullis-prod\n  cluster:\n    server: https://old.example/clusters/prod\n\
        contexts:\n- name: work\n  context:\n    cluster: work\n    user: me\n\
        users:\n- name: me\n  user:\n    token: keep-me\npreferences: {}\n";

    fn yaml(text: &str) -> Value {
        serde_yaml::from_str(text).unwrap()
    }

    #[test]
    fn merging_replaces_our_entries_by_name_and_leaves_every_other_one_as_it_was() {
        let ours = kubeconfig_text("https://p.example", None, &["prod".into()]);
        let merged = yaml(&merge(Some(THEIRS), &ours).unwrap());
        let before = yaml(THEIRS);
        assert_eq!(merged["current-context"], "work");
        assert_eq!(merged["clusters"][0], before["clusters"][0]);
        assert_eq!(merged["contexts"][0], before["contexts"][0]);
        assert_eq!(merged["users"][0], before["users"][0]);
        assert_eq!(merged["preferences"], before["preferences"]);
        let clusters = merged["clusters"].as_sequence().unwrap();
        assert_eq!(clusters.len(), 2, "{clusters:?}");
        assert_eq!(clusters[1]["cluster"]["server"], "https://p.example/clusters/prod");
        assert_eq!(merged["contexts"][1]["name"], "portcullis-prod");
        assert_eq!(merged["users"][1]["user"]["exec"]["args"][0], "credential-plugin");
    }

    /// Replaced whole, by a rename: a link to the old file still reads
    /// the old text (written in place, it would read the new or half of
    /// it); the mode of an existing kubeconfig stays unless it holds a
    /// token.
    #[cfg(unix)]
    #[test]
    fn a_kubeconfig_is_replaced_whole_and_keeps_its_mode_unless_it_holds_a_token() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, THEIRS).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let old = dir.path().join("old");
        std::fs::hard_link(&path, &old).unwrap();
        write(&path, "new: text\n", false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new: text\n");
        assert_eq!(
            std::fs::read_to_string(&old).unwrap(),
            THEIRS,
            "the old file was not written into"
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o640);
        write(&path, "token: t\n", true).unwrap();
        assert_eq!(mode(&path), 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 2, "no temporary file is left: {leftovers:?}");
        // A kubeconfig that is a link: its target is replaced, the link kept;
        // a dangling link's target is made.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        write(&link, "via: link\n", false).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "via: link\n");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink("made", &dangling).unwrap();
        write(&dangling, "made: yes\n", false).unwrap();
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(dir.path().join("made")).unwrap(), "made: yes\n");
    }

    /// Two portcullis servers in one kubeconfig: each context's user asks
    /// its own server for the token, so one server's token is never sent
    /// to the other.
    #[test]
    fn contexts_of_two_servers_each_keep_a_user_of_their_own_server() {
        let a = kubeconfig_text("https://a.example", None, &["prod".into()]);
        let b = kubeconfig_text("https://b.example:8443", None, &["dev".into()]);
        let merged = yaml(&merge(Some(&merge(None, &a).unwrap()), &b).unwrap());
        let server_of = |kind: &str, name: &str| -> String {
            let entry = merged[kind]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .unwrap();
            match kind {
                "clusters" => entry["cluster"]["server"].as_str().unwrap().to_string(),
                _ => entry["user"]["exec"]["args"][2].as_str().unwrap().to_string(),
            }
        };
        for context in merged["contexts"].as_sequence().unwrap() {
            let cluster = server_of("clusters", context["context"]["cluster"].as_str().unwrap());
            let user = server_of("users", context["context"]["user"].as_str().unwrap());
            assert!(
                cluster.starts_with(&format!("{user}/clusters/")),
                "{cluster} asks {user} for its token"
            );
        }
        assert_eq!(merged["users"].as_sequence().unwrap().len(), 2);
    }

    #[test]
    fn an_empty_or_missing_kubeconfig_becomes_ours_with_our_current_context() {
        let ours = kubeconfig_text("https://p.example", None, &["dev".into()]);
        for existing in [None, Some(""), Some("\n")] {
            let merged = yaml(&merge(existing, &ours).unwrap());
            assert_eq!(merged["current-context"], "portcullis-dev");
            assert_eq!(merged["kind"], "Config");
        }
        let merged = yaml(&merge(Some("clusters: null\ncurrent-context: \"\"\n"), &ours).unwrap());
        assert_eq!(merged["current-context"], "portcullis-dev");
        assert_eq!(merged["clusters"][0]["name"], "portcullis-dev");
    }

    #[test]
    fn a_kubeconfig_that_is_not_a_mapping_is_refused_rather_than_overwritten() {
        let ours = kubeconfig_text("https://p.example", None, &["dev".into()]);
        assert!(merge(Some("- a\n- b\n"), &ours).is_err());
        assert!(merge(Some("clusters: 3\n"), &ours).is_err());
    }
}
