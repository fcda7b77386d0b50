//! In-memory storage of the simulated cluster's objects.
//!
//! Objects are kept per resource type (group + plural) in a sorted map behind
//! that type's own `RwLock`, as `Arc<Value>`, so reads never take a global
//! lock and never copy an object. Writes are serialized by one store-wide
//! mutex, which gives the cluster one monotonic resourceVersion counter, like
//! etcd's revision.
//!
//! Each write stamps the metadata the API server owns: `uid` (UUID v4),
//! `creationTimestamp`, `resourceVersion` and, for objects with a `spec`,
//! `generation` (bumped when `spec` changes). Watch fan-out is in [`watch`].
//!
//! # Known differences from kube-apiserver
//!
//! - Deletion is immediate: no `deletionTimestamp`, graceful periods or
//!   finalizers. Deleting a namespace deletes its objects at once.
//!
//! A new namespace gets its `default` ServiceAccount at once, where
//! kube-controller-manager's ServiceAccount controller adds it moments later.
//! - Objects are stored per group + plural, not per version: an object
//!   written through one version is read back through another unchanged
//!   (apart from `apiVersion`, which the handlers rewrite).
//! - Dry-run creates return no `resourceVersion` (as the API server) and
//!   dry-run updates keep the current one.

// Errors are `Status` by value, the contract between the simulator's
// parts; the error path is cold, so boxing would buy nothing.
#![allow(clippy::result_large_err)]

mod meta;
pub mod watch;

use crate::rbac::RbacObjects;
use crate::registry::{self, ResourceType};
use crate::status::Status;
use dashmap::DashMap;
use meta::stamp;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use watch::{EventLog, EventType, WatchEvent};

pub use meta::{meta_str, next_generation, now_timestamp, resource_version, set_meta};
pub use watch::Subscription;

/// `(group, plural)`: where a resource type's objects live.
type TypeKey = (&'static str, &'static str);

/// `(namespace, name)`, empty namespace for cluster-scoped objects; the map
/// order is the list order.
type ObjectKey = (String, String);

/// What a write closure decides to do with the current object.
#[derive(Debug)]
pub enum Change {
    /// Store this object (create or replace); the store stamps its metadata.
    Put(Value),
    /// Delete the current object.
    Delete,
    /// Leave the current object as it is (a no-op update): no new
    /// resourceVersion, no event.
    Keep,
    /// Store this object keeping the uid and creationTimestamp it carries
    /// (seeding a cluster whose objects existed before the simulator
    /// started); never used for API requests, where the server sets both.
    Restore(Value),
}

/// The result of a write.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object as stored (or as it would have been, for a dry run); for a
    /// delete, the object as it was deleted.
    pub object: Arc<Value>,
    /// True when the write created the object.
    pub created: bool,
}

/// One resource type's objects and event history.
#[derive(Default)]
struct TypeStore {
    objects: RwLock<BTreeMap<ObjectKey, Arc<Value>>>,
    log: Mutex<EventLog>,
}

/// The simulated cluster's storage. Share it as `Arc<Store>`.
#[derive(Default)]
pub struct Store {
    types: DashMap<TypeKey, Arc<TypeStore>>,
    /// The last resourceVersion handed to a write.
    revision: AtomicU64,
    /// The last resourceVersion whose write is complete (object stored and
    /// event sent): what lists and bookmarks report.
    committed: AtomicU64,
    /// Serializes writes so resourceVersions and events stay in order.
    write_lock: Mutex<()>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("types", &self.types.len())
            .field("revision", &self.current_revision())
            .finish()
    }
}

/// Locks survive a panicking holder: the data are plain maps that a panic
/// cannot leave half-written in a way that matters to a simulator.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The newest resourceVersion whose write is complete (0 before any
    /// write). Every event up to it has been sent to watchers.
    pub fn current_revision(&self) -> u64 {
        self.committed.load(Ordering::SeqCst)
    }

    /// Allocate the next resourceVersion (write lock held).
    fn next_revision(&self) -> u64 {
        self.revision.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn type_store(&self, key: TypeKey) -> Option<Arc<TypeStore>> {
        self.types.get(&key).map(|t| Arc::clone(&t))
    }

    fn type_store_or_insert(&self, key: TypeKey) -> Arc<TypeStore> {
        Arc::clone(&self.types.entry(key).or_default())
    }

    /// The object `name` in `namespace` (empty for cluster-scoped types).
    pub fn get(&self, rt: &ResourceType, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let ts = self.type_store((rt.group, rt.plural))?;
        let objects = ts.objects.read().unwrap_or_else(PoisonError::into_inner);
        objects.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    /// All objects of `rt`, in `namespace` or everywhere, sorted by
    /// namespace then name.
    pub fn list(&self, rt: &ResourceType, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.list_with_revision(rt, namespace).0
    }

    /// Like [`Store::list`], with the resourceVersion the list is current at.
    pub fn list_with_revision(&self, rt: &ResourceType, namespace: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        self.list_key((rt.group, rt.plural), namespace)
    }

    fn list_key(&self, key: TypeKey, namespace: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let Some(ts) = self.type_store(key) else {
            return (Vec::new(), self.current_revision());
        };
        let objects = ts.objects.read().unwrap_or_else(PoisonError::into_inner);
        // Read under the type's lock: no write to this type can slip between.
        let revision = self.current_revision();
        let items = match namespace {
            None => objects.values().cloned().collect(),
            Some(ns) => objects
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| Arc::clone(v))
                .collect(),
        };
        (items, revision)
    }

    /// Does namespace `name` exist?
    pub fn namespace_exists(&self, name: &str) -> bool {
        self.type_store(NAMESPACES).is_some_and(|ts| {
            ts.objects
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&(String::new(), name.to_string()))
        })
    }

    /// Read-modify-write of one object, atomically with respect to every
    /// other write. `decide` sees the current object and returns the change
    /// (or an error Status, which is returned as it is). With `dry_run`
    /// nothing is stored and no event is sent.
    pub fn write<F>(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        dry_run: bool,
        decide: F,
    ) -> Result<Written, Status>
    where
        F: FnOnce(Option<&Arc<Value>>) -> Result<Change, Status>,
    {
        let _serialized = lock(&self.write_lock);
        if rt.namespaced && !self.namespace_exists(namespace) {
            return Err(Status::not_found("", "namespaces", namespace));
        }
        let key = (rt.group, rt.plural);
        let current = self.get(rt, namespace, name);
        let decided = decide(current.as_ref())?;
        let keep_identity = matches!(decided, Change::Restore(_));
        match decided {
            Change::Put(object) | Change::Restore(object) => Ok(self.put_locked(
                key,
                (namespace, name),
                current.as_deref(),
                object,
                keep_identity,
                dry_run,
            )),
            Change::Keep => match current {
                Some(object) => Ok(Written { object, created: false }),
                None => Err(Status::not_found(rt.group, rt.plural, name)),
            },
            Change::Delete => match current {
                Some(current) => Ok(self.delete_locked(key, namespace, name, current, dry_run)),
                None => Err(Status::not_found(rt.group, rt.plural, name)),
            },
        }
    }

    /// Store `object` in place of `current` (write lock held), stamped with
    /// the next resourceVersion and sent to watchers; a dry run stamps it
    /// without a resourceVersion and stores nothing.
    fn put_locked(
        &self,
        key: TypeKey,
        (namespace, name): (&str, &str),
        current: Option<&Value>,
        mut object: Value,
        keep_identity: bool,
        dry_run: bool,
    ) -> Written {
        let created = current.is_none();
        let revision = if dry_run { None } else { Some(self.next_revision()) };
        stamp(&mut object, current, revision, keep_identity);
        let object = Arc::new(object);
        if let Some(revision) = revision {
            let kind = if created { EventType::Added } else { EventType::Modified };
            let event = WatchEvent {
                kind,
                object: Arc::clone(&object),
                revision,
            };
            self.commit(key, (namespace, name), Some(&object), event);
            if created && key == NAMESPACES {
                self.add_default_service_account(&object);
            }
        }
        Written { object, created }
    }

    /// kube-controller-manager's ServiceAccount controller gives every new
    /// namespace a `default` ServiceAccount (pods cannot be created before
    /// it exists); here it is there as soon as the namespace is, as old as
    /// the namespace, and like the controller's it has no managedFields.
    fn add_default_service_account(&self, namespace: &Value) {
        let ns = meta_str(namespace, "name");
        if self
            .list_key(SERVICE_ACCOUNTS, Some(ns))
            .0
            .iter()
            .any(|sa| meta_str(sa, "name") == "default")
        {
            return;
        }
        let account = serde_json::json!({
            "kind": "ServiceAccount",
            "apiVersion": "v1",
            "metadata": {
                "name": "default",
                "namespace": ns,
                "creationTimestamp": namespace["metadata"]["creationTimestamp"],
            },
        });
        self.put_locked(SERVICE_ACCOUNTS, (ns, "default"), None, account, true, false);
    }

    /// Delete `current` (write lock held), and with a namespace everything
    /// in it; a dry run deletes nothing.
    fn delete_locked(&self, key: TypeKey, namespace: &str, name: &str, current: Arc<Value>, dry_run: bool) -> Written {
        if dry_run {
            return Written {
                object: current,
                created: false,
            };
        }
        let object = self.remove_locked(key, namespace, name, &current);
        if key == NAMESPACES {
            self.delete_namespace_contents(name);
        }
        Written { object, created: false }
    }

    /// Remove an object (write lock held): the DELETED event carries the
    /// deletion's resourceVersion, as etcd's watch does.
    fn remove_locked(&self, key: TypeKey, ns: &str, name: &str, current: &Value) -> Arc<Value> {
        let revision = self.next_revision();
        let mut deleted = current.clone();
        set_meta(&mut deleted, "resourceVersion", Value::String(revision.to_string()));
        let deleted = Arc::new(deleted);
        let event = WatchEvent {
            kind: EventType::Deleted,
            object: Arc::clone(&deleted),
            revision,
        };
        self.commit(key, (ns, name), None, event);
        deleted
    }

    /// Store (`Some`) or remove (`None`) an object and record its event
    /// under the type's log lock, so a watch starting meanwhile sees either
    /// the old state and the event, or the new state and no event.
    fn commit(&self, key: TypeKey, (ns, name): (&str, &str), stored: Option<&Arc<Value>>, event: WatchEvent) {
        let ts = self.type_store_or_insert(key);
        let mut log = lock(&ts.log);
        let object_key = (ns.to_string(), name.to_string());
        {
            let mut objects = ts.objects.write().unwrap_or_else(PoisonError::into_inner);
            match stored {
                Some(object) => objects.insert(object_key, Arc::clone(object)),
                None => objects.remove(&object_key),
            };
        }
        let revision = event.revision;
        log.push(event);
        self.committed.fetch_max(revision, Ordering::SeqCst);
    }

    /// Delete every namespaced object in namespace `ns` (write lock held).
    fn delete_namespace_contents(&self, ns: &str) {
        let keys: Vec<TypeKey> = self.types.iter().map(|e| *e.key()).collect();
        for key in keys {
            if key == NAMESPACES {
                continue;
            }
            let (objects, _) = self.list_key(key, Some(ns));
            for object in objects {
                let name = meta_str(&object, "name").to_string();
                self.remove_locked(key, ns, &name, &object);
            }
        }
    }

    /// Create `obj`, finding its type from `apiVersion` and `kind` (for
    /// seeding and tests): a uid and creationTimestamp it carries are kept.
    /// 409 if it exists; 404 if its namespace does not.
    pub fn create(&self, obj: Value) -> Result<Arc<Value>, Status> {
        let (rt, ns, name) = locate(&obj)?;
        let (group, plural) = (rt.group, rt.plural);
        self.write(rt, &ns, &name, false, |current| match current {
            Some(_) => Err(Status::already_exists(group, plural, &name)),
            None => Ok(Change::Restore(obj)),
        })
        .map(|w| w.object)
    }

    /// Create or replace `obj` (for tests), keeping an existing object's uid
    /// and creationTimestamp.
    pub fn put(&self, obj: Value) -> Result<Arc<Value>, Status> {
        let (rt, ns, name) = locate(&obj)?;
        self.write(rt, &ns, &name, false, |_| Ok(Change::Put(obj)))
            .map(|w| w.object)
    }

    /// Delete an object; 404 Status if it does not exist.
    pub fn delete(&self, rt: &ResourceType, namespace: &str, name: &str) -> Result<Arc<Value>, Status> {
        self.write(rt, namespace, name, false, |_| Ok(Change::Delete))
            .map(|w| w.object)
    }

    /// Start watching `rt` (in `namespace`, or everywhere): from `since`
    /// (replaying later events) or, with `None`, from the current state
    /// (every object as `initial`). 410 Gone when `since` is older than the
    /// retained history.
    pub fn watch(&self, rt: &ResourceType, since: Option<u64>) -> Result<Subscription, Status> {
        let ts = self.type_store_or_insert((rt.group, rt.plural));
        let log = lock(&ts.log);
        let current = self.current_revision();
        match since {
            None => {
                let objects = ts.objects.read().unwrap_or_else(PoisonError::into_inner);
                Ok(Subscription {
                    initial: objects.values().cloned().collect(),
                    replay: Vec::new(),
                    events: log.subscribe(),
                    revision: current,
                })
            }
            Some(since) => Ok(Subscription {
                initial: Vec::new(),
                replay: log.since(since, current)?,
                events: log.subscribe(),
                revision: current,
            }),
        }
    }

    /// Forget all event history, as an etcd compaction does: a watch from
    /// any earlier resourceVersion then gets 410 Gone.
    pub fn compact(&self) {
        let _serialized = lock(&self.write_lock);
        let current = self.current_revision();
        for entry in self.types.iter() {
            lock(&entry.value().log).compact(current);
        }
    }
}

/// Where namespaces live.
const NAMESPACES: TypeKey = ("", "namespaces");
/// Where ServiceAccounts live.
const SERVICE_ACCOUNTS: TypeKey = ("", "serviceaccounts");

/// Find the type, namespace and name of a whole object.
fn locate(obj: &Value) -> Result<(&'static ResourceType, String, String), Status> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let rt = registry::find_kind(group, kind).ok_or_else(|| {
        Status::bad_request(format!(
            "no kind \"{kind}\" is registered for version \"{api_version}\""
        ))
    })?;
    let name = meta_str(obj, "name").to_string();
    if name.is_empty() {
        return Err(Status::bad_request("metadata.name is required"));
    }
    let ns = if rt.namespaced {
        match meta_str(obj, "namespace") {
            "" => "default".to_string(),
            ns => ns.to_string(),
        }
    } else {
        String::new()
    };
    Ok((rt, ns, name))
}

impl RbacObjects for Store {
    fn cluster_roles(&self) -> Vec<Arc<Value>> {
        self.list_key(("rbac.authorization.k8s.io", "clusterroles"), None).0
    }

    fn cluster_role_bindings(&self) -> Vec<Arc<Value>> {
        self.list_key(("rbac.authorization.k8s.io", "clusterrolebindings"), None)
            .0
    }

    fn roles(&self, namespace: &str) -> Vec<Arc<Value>> {
        self.list_key(("rbac.authorization.k8s.io", "roles"), Some(namespace)).0
    }

    fn role_bindings(&self, namespace: &str) -> Vec<Arc<Value>> {
        self.list_key(("rbac.authorization.k8s.io", "rolebindings"), Some(namespace))
            .0
    }
}

#[cfg(test)]
mod tests;
