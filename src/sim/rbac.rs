//! RBAC evaluation from stored Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding objects. (Interface stub: owned by the auth/RBAC work.)

use super::UserInfo;
use crate::gateway::classify::RequestInfo;
use crate::status::Status;
use serde_json::Value;
use std::sync::Arc;

/// Where RBAC objects come from (the store implements it).
pub trait RbacObjects: Send + Sync {
    /// All ClusterRoles.
    fn cluster_roles(&self) -> Vec<Arc<Value>>;
    /// All ClusterRoleBindings.
    fn cluster_role_bindings(&self) -> Vec<Arc<Value>>;
    /// Roles in `namespace`.
    fn roles(&self, namespace: &str) -> Vec<Arc<Value>>;
    /// RoleBindings in `namespace`.
    fn role_bindings(&self, namespace: &str) -> Vec<Arc<Value>>;
}

/// Is `user` allowed to do what `info` describes?
pub fn allowed(objects: &dyn RbacObjects, user: &UserInfo, info: &RequestInfo) -> bool {
    let _ = (objects, user, info);
    false
}

/// The 403 Status kube-apiserver returns for this denial.
pub fn forbidden(user: &UserInfo, info: &RequestInfo) -> Status {
    let _ = info;
    Status::forbidden(format!("forbidden: User \"{}\"", user.name), "", "", "")
}

/// System ClusterRoles and bindings every cluster starts with.
pub fn bootstrap_objects() -> Vec<Value> {
    Vec::new()
}
