//! Every cloud call a loop makes goes through [`MeteredCloud`], which times it and counts its
//! failures under upstream's `karpenter_cloudprovider_duration_seconds` and
//! `karpenter_cloudprovider_errors_total`, labelled with the calling controller, upstream's
//! method name and the provider.

pub mod metrics;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_cloud::{
    BatchFlushed, CloudError, CloudProvider, Instance, InstanceHealth, LaunchFailure, Launched,
    ProviderObserver, ReconciledNodeClass, RegisteredInstance, Registration, ReservationEnd,
    TerminationFailure,
};
use nodewright_core::model::InstanceType;

use crate::metrics::Metrics;

pub struct MeteredCloud {
    inner: Arc<dyn CloudProvider>,
    metrics: Arc<Metrics>,
    controller: &'static str,
}

/// The `error` label: upstream's error type names for the errors the controller branches on.
pub fn error_label(e: &CloudError) -> &'static str {
    match e {
        CloudError::InsufficientCapacity { .. } => "InsufficientCapacityError",
        CloudError::NotFound { .. } => "NodeClaimNotFoundError",
        CloudError::NodeClassNotReady { .. } => "NodeClassNotReadyError",
        CloudError::InvalidRequest(_) => "InvalidRequestError",
        CloudError::Api { .. } => "CloudProviderError",
    }
}

impl MeteredCloud {
    /// Wraps `inner` for the loop named `controller` (upstream's controller names).
    pub fn wrap(
        inner: Arc<dyn CloudProvider>,
        metrics: Arc<Metrics>,
        controller: &'static str,
    ) -> Arc<dyn CloudProvider> {
        Arc::new(MeteredCloud {
            inner,
            metrics,
            controller,
        })
    }

    fn record<T>(&self, method: &str, started: Instant, r: &Result<T, CloudError>) {
        self.metrics.cloud.call(
            self.controller,
            method,
            self.inner.name(),
            started.elapsed().as_secs_f64(),
            r.as_ref().err().map(error_label),
        );
    }
}

#[async_trait]
impl CloudProvider for MeteredCloud {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn reconcile_node_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<ReconciledNodeClass, CloudError> {
        let t = Instant::now();
        let r = self.inner.reconcile_node_class(class).await;
        self.record("ReconcileNodeClass", t, &r);
        r
    }

    async fn reconcile_node_class_for(
        &self,
        class: &EC2NodeClass,
        nodepools: &[NodePool],
    ) -> Result<ReconciledNodeClass, CloudError> {
        let t = Instant::now();
        let r = self.inner.reconcile_node_class_for(class, nodepools).await;
        self.record("ReconcileNodeClass", t, &r);
        r
    }

    async fn finalize_node_class(&self, class: &EC2NodeClass) -> Result<Vec<String>, CloudError> {
        let t = Instant::now();
        let r = self.inner.finalize_node_class(class).await;
        self.record("FinalizeNodeClass", t, &r);
        if r.is_ok() {
            let name = class.metadata.name.as_deref().unwrap_or_default();
            self.metrics.cloud.node_class_finalized(name);
        }
        r
    }

    async fn instance_types(
        &self,
        class: Option<&EC2NodeClass>,
    ) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        let t = Instant::now();
        let r = self.inner.instance_types(class).await;
        self.record("GetInstanceTypes", t, &r);
        r
    }

    async fn create(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Launched, CloudError> {
        let t = Instant::now();
        let r = self.inner.create(claim, class).await;
        self.record("Create", t, &r);
        r
    }

    async fn delete(&self, provider_id: &str) -> Result<(), CloudError> {
        let t = Instant::now();
        let r = self.inner.delete(provider_id).await;
        self.record("Delete", t, &r);
        r
    }

    async fn get(&self, provider_id: &str) -> Result<Instance, CloudError> {
        let t = Instant::now();
        let r = self.inner.get(provider_id).await;
        self.record("Get", t, &r);
        r
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        let t = Instant::now();
        let r = self.inner.list().await;
        self.record("List", t, &r);
        r
    }

    async fn is_drifted(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Option<String>, CloudError> {
        let t = Instant::now();
        let r = self.inner.is_drifted(claim, class).await;
        self.record("IsDrifted", t, &r);
        r
    }

    async fn registration_hooks(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Registration, CloudError> {
        self.inner.registration_hooks(claim, class).await
    }

    async fn capacity_reservations(
        &self,
        ids: &[String],
    ) -> Result<Vec<ReservationEnd>, CloudError> {
        self.inner.capacity_reservations(ids).await
    }

    fn repair_policies(&self) -> Vec<nodewright_core::repair::Policy> {
        self.inner.repair_policies()
    }

    fn tagged_annotations(&self) -> BTreeMap<String, String> {
        self.inner.tagged_annotations()
    }

    fn tagged_node_classes(&self) -> &'static [(&'static str, &'static str)] {
        self.inner.tagged_node_classes()
    }

    /// Not timed: upstream tags through its instance provider, outside the cloud-provider
    /// methods its duration metric lists.
    async fn tag_registered(&self, instance: &RegisteredInstance) -> Result<(), CloudError> {
        self.inner.tag_registered(instance).await
    }

    async fn unhealthy_instances(&self) -> Result<Vec<InstanceHealth>, CloudError> {
        let t = Instant::now();
        let r = self.inner.unhealthy_instances().await;
        self.record("UnhealthyInstances", t, &r);
        r
    }

    async fn zonal_shifts(&self) -> Result<Vec<String>, CloudError> {
        let t = Instant::now();
        let r = self.inner.zonal_shifts().await;
        self.record("ZonalShifts", t, &r);
        r
    }

    fn observe_with(&self, observer: Arc<dyn ProviderObserver>) {
        self.inner.observe_with(observer);
    }
}

/// The provider's launch failures become `karpenter_cloudprovider_instance_launch_failures_total`,
/// its refused terminations `karpenter_cloudprovider_instance_termination_failures_total`, its
/// batches the `karpenter_cloudprovider_batcher_*` histograms, and the user data it rendered
/// `karpenter_ec2nodeclasses_userdata_bytes`.
impl ProviderObserver for Metrics {
    fn launch_failed(&self, f: &LaunchFailure) {
        self.cloud
            .launch_failure(&f.zone, &f.zone_id, &f.capacity_type, &f.reason);
    }

    fn termination_failed(&self, f: &TerminationFailure) {
        self.cloud.termination_failure(&f.zone, &f.zone_id);
    }

    fn batch_flushed(&self, b: &BatchFlushed) {
        self.cloud
            .batch_flushed(b.batcher, b.size, b.window_seconds);
    }

    fn user_data_rendered(&self, nodeclass: &str, bytes: usize) {
        self.cloud.user_data_rendered(nodeclass, bytes);
    }
}
