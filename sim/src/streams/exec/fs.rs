//! A tiny in-memory filesystem per container, so files `kubectl cp` puts
//! into a pod can be read back (by `cat`, `ls` or `kubectl cp` out).
//!
//! Each container instance (pod uid + container name) gets its own tree,
//! created on first use with a few familiar directories. Trees live for the
//! life of the process; a recreated pod has a new uid and so a fresh tree.

use bytes::Bytes;
use dashmap::DashMap;
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

/// One file or directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory (its entries are the paths below it in the map).
    Dir,
    /// A regular file with its contents and permission bits.
    File {
        /// Contents.
        data: Bytes,
        /// Permission bits, e.g. 0o644.
        mode: u32,
    },
}

/// A container's filesystem: absolute, normalized paths to nodes.
#[derive(Debug, Clone)]
pub struct Fs {
    nodes: BTreeMap<String, Node>,
}

/// A shared handle on one container's filesystem.
pub type SharedFs = Arc<Mutex<Fs>>;

static FILESYSTEMS: LazyLock<DashMap<String, SharedFs>> = LazyLock::new(DashMap::new);

/// The filesystem of container `container` in the pod with uid `pod_uid`,
/// seeded with `/etc/hostname` = `hostname` on first use.
pub fn for_container(pod_uid: &str, container: &str, hostname: &str) -> SharedFs {
    let key = format!("{pod_uid}/{container}");
    FILESYSTEMS
        .entry(key)
        .or_insert_with(|| Arc::new(Mutex::new(Fs::seeded(hostname))))
        .clone()
}

/// Lock a shared filesystem; a panic elsewhere cannot corrupt a map insert.
pub fn lock(fs: &SharedFs) -> MutexGuard<'_, Fs> {
    fs.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Normalize `path` against working directory `cwd`: absolute, no `.`,
/// `..` resolved, no trailing slash (except `/`).
pub fn normalize(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

impl Fs {
    /// An empty root.
    pub fn empty() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert("/".to_string(), Node::Dir);
        Fs { nodes }
    }

    /// A root with the directories a small Linux image has.
    pub fn seeded(hostname: &str) -> Self {
        let mut fs = Fs::empty();
        for dir in [
            "/bin", "/etc", "/home", "/root", "/tmp", "/usr", "/var", "/var/log", "/app",
        ] {
            fs.nodes.insert(dir.into(), Node::Dir);
        }
        let files = [
            ("/etc/hostname", format!("{hostname}\n")),
            ("/etc/os-release", "NAME=\"Simulated Linux\"\nID=sim\n".to_string()),
            (
                "/app/README",
                "served by the portcullis cluster simulator\n".to_string(),
            ),
        ];
        for (path, text) in files {
            fs.nodes.insert(
                path.into(),
                Node::File {
                    data: Bytes::from(text),
                    mode: 0o644,
                },
            );
        }
        fs
    }

    /// The node at normalized `path`.
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// Is `path` a directory?
    pub fn is_dir(&self, path: &str) -> bool {
        matches!(self.nodes.get(path), Some(Node::Dir))
    }

    /// Create `path` and its missing parents as directories. Fails when a
    /// file is in the way.
    pub fn mkdir_all(&mut self, path: &str) -> Result<(), String> {
        if path != "/" {
            self.mkdir_all(parent(path))?;
        }
        match self.nodes.get(path) {
            Some(Node::Dir) => Ok(()),
            Some(Node::File { .. }) => Err(format!("{path}: Not a directory")),
            None => {
                self.nodes.insert(path.to_string(), Node::Dir);
                Ok(())
            }
        }
    }

    /// Write a file, creating parent directories as `tar x` does.
    pub fn write(&mut self, path: &str, data: Bytes, mode: u32) -> Result<(), String> {
        if self.is_dir(path) {
            return Err(format!("{path}: Is a directory"));
        }
        self.mkdir_all(parent(path))?;
        self.nodes.insert(path.to_string(), Node::File { data, mode });
        Ok(())
    }

    /// Remove `path` and, with `recursive`, everything below it.
    pub fn remove(&mut self, path: &str, recursive: bool) -> Result<(), String> {
        match self.nodes.get(path) {
            None => Err(format!("{path}: No such file or directory")),
            Some(Node::Dir) if !recursive => Err(format!("{path}: Is a directory")),
            Some(_) => {
                let prefix = format!("{}/", path.trim_end_matches('/'));
                self.nodes.retain(|p, _| p != path && !p.starts_with(&prefix));
                self.nodes.entry("/".into()).or_insert(Node::Dir);
                Ok(())
            }
        }
    }

    /// Names directly inside directory `path`, sorted.
    pub fn list(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter_map(|(p, _)| {
                let rest = &p[prefix.len()..];
                (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_string())
            })
            .collect()
    }

    /// `path` and everything below it, in path order (what `tar c` walks).
    pub fn walk(&self, path: &str) -> Vec<(String, Node)> {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        self.nodes
            .iter()
            .filter(|(p, _)| p.as_str() == path || p.starts_with(&prefix))
            .map(|(p, n)| (p.clone(), n.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalize_against_the_working_directory() {
        assert_eq!(normalize("/", "tmp/a"), "/tmp/a");
        assert_eq!(normalize("/tmp", "../etc/./hostname"), "/etc/hostname");
        assert_eq!(normalize("/", "/a/b/"), "/a/b");
        assert_eq!(normalize("/", "/../.."), "/");
    }

    #[test]
    fn written_files_create_parents_and_list_back() {
        let mut fs = Fs::empty();
        fs.write("/data/x/file.txt", Bytes::from_static(b"hi"), 0o600).unwrap();
        assert!(fs.is_dir("/data/x"));
        assert_eq!(fs.list("/data"), vec!["x"]);
        assert_eq!(fs.list("/"), vec!["data"]);
        assert_eq!(fs.walk("/data").len(), 3);
        assert!(fs.write("/data/x/file.txt/y", Bytes::new(), 0o644).is_err());
        fs.remove("/data", true).unwrap();
        assert_eq!(fs.list("/"), Vec::<String>::new());
    }

    #[test]
    fn each_container_instance_has_its_own_tree() {
        let a = for_container("uid-a", "web", "a");
        let b = for_container("uid-b", "web", "b");
        lock(&a).write("/tmp/only-a", Bytes::new(), 0o644).unwrap();
        assert!(lock(&b).get("/tmp/only-a").is_none());
        assert!(lock(&for_container("uid-a", "web", "a")).get("/tmp/only-a").is_some());
    }
}
