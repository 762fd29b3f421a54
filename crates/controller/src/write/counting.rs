//! A writer that counts the requests passing through it by verb and resource (as the API
//! server's audit log would name them), for benchmarks and tests that bound API traffic.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use nodewright_api::aws::v1::EC2NodeClassStatus;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::nodepool::NodePoolStatus;

use super::{Eviction, KubeWriter, MetaPatch, NodePatch, WriteError};

pub struct CountingWriter {
    inner: Arc<dyn KubeWriter>,
    counts: Mutex<BTreeMap<&'static str, u64>>,
    latency: Duration,
}

impl CountingWriter {
    pub fn new(inner: Arc<dyn KubeWriter>) -> Self {
        CountingWriter {
            inner,
            counts: Mutex::new(BTreeMap::new()),
            latency: Duration::ZERO,
        }
    }

    /// Every request first waits `latency` (on tokio's clock), as a round trip to an API
    /// server does.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    async fn count(&self, request: &'static str) {
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        *self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(request)
            .or_default() += 1;
    }

    /// Requests so far, keyed `verb resource` (`create nodeclaims`, `patch nodes` ...).
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn total(&self) -> u64 {
        self.counts().values().sum()
    }
}

#[async_trait]
impl KubeWriter for CountingWriter {
    async fn create_nodeclaim(&self, claim: &NodeClaim) -> Result<NodeClaim, WriteError> {
        self.count("create nodeclaims").await;
        self.inner.create_nodeclaim(claim).await
    }
    async fn patch_nodeclaim_status(
        &self,
        name: &str,
        status: &NodeClaimStatus,
        resource_version: Option<&str>,
    ) -> Result<(), WriteError> {
        self.count("patch nodeclaims/status").await;
        self.inner
            .patch_nodeclaim_status(name, status, resource_version)
            .await
    }
    async fn patch_nodeclaim_pod_event_time(
        &self,
        name: &str,
        time: &str,
    ) -> Result<(), WriteError> {
        self.count("patch nodeclaims/status").await;
        self.inner.patch_nodeclaim_pod_event_time(name, time).await
    }
    async fn patch_nodeclaim_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.count("patch nodeclaims").await;
        self.inner.patch_nodeclaim_meta(name, patch).await
    }
    async fn delete_nodeclaim(&self, name: &str) -> Result<(), WriteError> {
        self.count("delete nodeclaims").await;
        self.inner.delete_nodeclaim(name).await
    }
    async fn patch_node(&self, name: &str, patch: &NodePatch) -> Result<(), WriteError> {
        self.count("patch nodes").await;
        self.inner.patch_node(name, patch).await
    }
    async fn delete_node(&self, name: &str) -> Result<(), WriteError> {
        self.count("delete nodes").await;
        self.inner.delete_node(name).await
    }
    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<Eviction, WriteError> {
        self.count("create pods/eviction").await;
        self.inner.evict_pod(namespace, name).await
    }
    async fn update_nodepool_status(
        &self,
        name: &str,
        status: &NodePoolStatus,
    ) -> Result<(), WriteError> {
        self.count("patch nodepools/status").await;
        self.inner.update_nodepool_status(name, status).await
    }
    async fn patch_nodepool_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.count("patch nodepools").await;
        self.inner.patch_nodepool_meta(name, patch).await
    }
    async fn patch_nodeclass_status(
        &self,
        name: &str,
        status: &EC2NodeClassStatus,
    ) -> Result<(), WriteError> {
        self.count("patch ec2nodeclasses/status").await;
        self.inner.patch_nodeclass_status(name, status).await
    }
    async fn patch_nodeclass_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.count("patch ec2nodeclasses").await;
        self.inner.patch_nodeclass_meta(name, patch).await
    }
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), WriteError> {
        self.count("delete pods").await;
        self.inner
            .delete_pod(namespace, name, grace_period_seconds)
            .await
    }
}
