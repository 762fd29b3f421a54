//! The narrow write interface: exactly the writes the controller makes, nothing else. Loops
//! take `Arc<dyn KubeWriter>`; a cluster gets [`kube::KubeApi`], tests get
//! [`crate::memory::MemoryApi`], and [`LeaderGate`] wraps either so only the lease holder
//! writes.

pub mod claim_status;
pub mod counting;
pub mod kube;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use nodewright_api::aws::v1::EC2NodeClassStatus;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::nodepool::NodePoolStatus;
use serde_json::{Map, Value, json};
use thiserror::Error;
use tokio::sync::watch;

#[derive(Clone, Debug, Error, PartialEq)]
pub enum WriteError {
    #[error("{kind} {name} not found")]
    NotFound { kind: String, name: String },
    #[error("{kind} {name} already exists")]
    AlreadyExists { kind: String, name: String },
    #[error("conflict writing {kind} {name}: {message}")]
    Conflict {
        kind: String,
        name: String,
        message: String,
    },
    #[error("not the leader: writes are disabled")]
    NotLeader,
    #[error("api error {code}: {message}")]
    Api { code: u16, message: String },
    #[error("{0}")]
    Transport(String),
}

impl WriteError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, WriteError::NotFound { .. })
    }

    pub fn is_conflict(&self) -> bool {
        matches!(self, WriteError::Conflict { .. })
    }

    /// A failure the same write may not meet again: throttling (429), a server error (5xx)
    /// or a transport failure (a timeout, a dropped connection).
    pub fn is_transient(&self) -> bool {
        match self {
            WriteError::Api { code, .. } => *code == 429 || *code >= 500,
            WriteError::Transport(_) => true,
            _ => false,
        }
    }
}

/// Tries an idempotent write up to `attempts` times while it fails transiently, waiting 100 ms
/// before the second try and twice as long before each next one. For writes that are one step
/// of several a caller needs together (marking every target of a disruption command), where
/// one throttled call would otherwise undo the rest and put the whole command off.
pub async fn retry_transient<T, F, Fut>(attempts: u32, mut write: F) -> Result<T, WriteError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, WriteError>>,
{
    let mut wait = std::time::Duration::from_millis(100);
    let mut tried = 1;
    loop {
        match write().await {
            Err(e) if e.is_transient() && tried < attempts => {
                tokio::time::sleep(wait).await;
                wait *= 2;
                tried += 1;
            }
            r => return r,
        }
    }
}

/// Metadata changes: `Some(v)` sets a key, `None` removes it. `finalizers` replaces the list.
///
/// A merge patch replaces a list whole, so a finalizer change computed from a stale read
/// would drop a finalizer another controller added meanwhile. `resource_version`, when set,
/// guards against that: the API server refuses the patch with a conflict (409) unless the
/// object is still at that version (upstream's optimistic lock on finalizer writes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetaPatch {
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
    pub finalizers: Option<Vec<String>>,
    pub resource_version: Option<String>,
}

impl MetaPatch {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty() && self.finalizers.is_none()
    }

    /// The JSON merge patch (RFC 7386) for `metadata`.
    pub fn to_merge_patch(&self) -> Value {
        let mut meta = Map::new();
        let kv = |m: &BTreeMap<String, Option<String>>| {
            Value::Object(
                m.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.clone().map(Value::String).unwrap_or(Value::Null),
                        )
                    })
                    .collect(),
            )
        };
        if !self.labels.is_empty() {
            meta.insert("labels".into(), kv(&self.labels));
        }
        if !self.annotations.is_empty() {
            meta.insert("annotations".into(), kv(&self.annotations));
        }
        if let Some(f) = &self.finalizers {
            meta.insert("finalizers".into(), json!(f));
        }
        if let Some(v) = &self.resource_version {
            meta.insert("resourceVersion".into(), json!(v));
        }
        json!({ "metadata": meta })
    }
}

/// A Node change: metadata plus, when set, the whole taint list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePatch {
    pub meta: MetaPatch,
    pub taints: Option<Vec<k8s_openapi::api::core::v1::Taint>>,
}

impl NodePatch {
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty() && self.taints.is_none()
    }

    pub fn to_merge_patch(&self) -> Value {
        let mut p = self.meta.to_merge_patch();
        if let Some(t) = &self.taints {
            p["spec"] = json!({ "taints": t });
        }
        p
    }
}

/// What an eviction request came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Eviction {
    /// Accepted: the pod is being deleted.
    Evicted,
    /// 429: a PodDisruptionBudget forbids it now; try again later.
    Blocked(String),
    /// 404 or 409: the pod is already gone (or replaced).
    Gone,
}

#[async_trait]
pub trait KubeWriter: Send + Sync {
    /// Creates the claim; returns it as stored (uid, resourceVersion, timestamps set).
    async fn create_nodeclaim(&self, claim: &NodeClaim) -> Result<NodeClaim, WriteError>;
    /// Writes the status fields the claim's lifecycle, drift and disruption loops own. Never
    /// `lastPodEventTime`: that is [`KubeWriter::patch_nodeclaim_pod_event_time`]'s alone,
    /// so a status computed from an older copy of the claim cannot put an older time back.
    /// `resource_version`, the version of the copy `status` was computed from, makes the
    /// write conditional (409 Conflict if the claim changed since): the patch replaces
    /// `conditions` whole. Loops write through [`claim_status::write_status`].
    async fn patch_nodeclaim_status(
        &self,
        name: &str,
        status: &NodeClaimStatus,
        resource_version: Option<&str>,
    ) -> Result<(), WriteError>;
    /// Sets `status.lastPodEventTime` (RFC 3339) and nothing else.
    async fn patch_nodeclaim_pod_event_time(
        &self,
        name: &str,
        time: &str,
    ) -> Result<(), WriteError>;
    async fn patch_nodeclaim_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError>;
    async fn delete_nodeclaim(&self, name: &str) -> Result<(), WriteError>;
    async fn patch_node(&self, name: &str, patch: &NodePatch) -> Result<(), WriteError>;
    async fn delete_node(&self, name: &str) -> Result<(), WriteError>;
    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<Eviction, WriteError>;
    async fn update_nodepool_status(
        &self,
        name: &str,
        status: &NodePoolStatus,
    ) -> Result<(), WriteError>;
    /// Labels and annotations of a NodePool (its drift hash).
    async fn patch_nodepool_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError>;
    /// The status subresource of an EC2NodeClass, as the cloud provider resolved it.
    async fn patch_nodeclass_status(
        &self,
        name: &str,
        status: &EC2NodeClassStatus,
    ) -> Result<(), WriteError>;
    /// Labels and annotations of an EC2NodeClass (its drift hash).
    async fn patch_nodeclass_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError>;
    /// Deletes the pod, bypassing PDBs; `grace_period_seconds` overrides the pod's own
    /// `terminationGracePeriodSeconds` (the drain shortens it to meet the node's deadline).
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), WriteError>;
}

/// Refuses every write while `leader` is false, so losing the lease stops all writers at once,
/// whatever loop is mid-flight.
pub struct LeaderGate {
    inner: Arc<dyn KubeWriter>,
    leader: watch::Receiver<bool>,
}

impl LeaderGate {
    pub fn new(inner: Arc<dyn KubeWriter>, leader: watch::Receiver<bool>) -> Self {
        LeaderGate { inner, leader }
    }

    fn check(&self) -> Result<(), WriteError> {
        if *self.leader.borrow() {
            Ok(())
        } else {
            Err(WriteError::NotLeader)
        }
    }
}

#[async_trait]
impl KubeWriter for LeaderGate {
    async fn create_nodeclaim(&self, claim: &NodeClaim) -> Result<NodeClaim, WriteError> {
        self.check()?;
        self.inner.create_nodeclaim(claim).await
    }
    async fn patch_nodeclaim_status(
        &self,
        name: &str,
        status: &NodeClaimStatus,
        resource_version: Option<&str>,
    ) -> Result<(), WriteError> {
        self.check()?;
        self.inner
            .patch_nodeclaim_status(name, status, resource_version)
            .await
    }
    async fn patch_nodeclaim_pod_event_time(
        &self,
        name: &str,
        time: &str,
    ) -> Result<(), WriteError> {
        self.check()?;
        self.inner.patch_nodeclaim_pod_event_time(name, time).await
    }
    async fn patch_nodeclaim_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.check()?;
        self.inner.patch_nodeclaim_meta(name, patch).await
    }
    async fn delete_nodeclaim(&self, name: &str) -> Result<(), WriteError> {
        self.check()?;
        self.inner.delete_nodeclaim(name).await
    }
    async fn patch_node(&self, name: &str, patch: &NodePatch) -> Result<(), WriteError> {
        self.check()?;
        self.inner.patch_node(name, patch).await
    }
    async fn delete_node(&self, name: &str) -> Result<(), WriteError> {
        self.check()?;
        self.inner.delete_node(name).await
    }
    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<Eviction, WriteError> {
        self.check()?;
        self.inner.evict_pod(namespace, name).await
    }
    async fn update_nodepool_status(
        &self,
        name: &str,
        status: &NodePoolStatus,
    ) -> Result<(), WriteError> {
        self.check()?;
        self.inner.update_nodepool_status(name, status).await
    }
    async fn patch_nodepool_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.check()?;
        self.inner.patch_nodepool_meta(name, patch).await
    }
    async fn patch_nodeclass_status(
        &self,
        name: &str,
        status: &EC2NodeClassStatus,
    ) -> Result<(), WriteError> {
        self.check()?;
        self.inner.patch_nodeclass_status(name, status).await
    }
    async fn patch_nodeclass_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.check()?;
        self.inner.patch_nodeclass_meta(name, patch).await
    }
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), WriteError> {
        self.check()?;
        self.inner
            .delete_pod(namespace, name, grace_period_seconds)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn throttled() -> WriteError {
        WriteError::Api {
            code: 429,
            message: "slow down".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_tried_again_and_others_are_not() {
        let calls = Cell::new(0);
        let r = retry_transient(3, || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move { if n < 3 { Err(throttled()) } else { Ok(n) } }
        })
        .await;
        assert_eq!(r.unwrap(), 3);

        calls.set(0);
        let r: Result<(), _> = retry_transient(3, || {
            calls.set(calls.get() + 1);
            async { Err(throttled()) }
        })
        .await;
        assert!(r.unwrap_err().is_transient());
        assert_eq!(calls.get(), 3, "gives up after the attempts");

        calls.set(0);
        let r: Result<(), _> = retry_transient(3, || {
            calls.set(calls.get() + 1);
            async {
                Err(WriteError::NotFound {
                    kind: "Node".into(),
                    name: "n1".into(),
                })
            }
        })
        .await;
        assert!(r.unwrap_err().is_not_found());
        assert_eq!(calls.get(), 1, "a lasting failure is not tried again");
    }
}
