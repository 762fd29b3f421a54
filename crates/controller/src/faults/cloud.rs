//! The cloud edge: a [`CloudProvider`] in front of the real one that fails the calls its
//! [`Injector`] picks, the way EC2 fails them: `RequestLimitExceeded` and `InternalError`
//! (retryable, nothing done), a timeout, or a dropped connection after the call was carried
//! out (an instance launched or terminated that the controller is not told of). Methods that
//! make no cloud call (names, tag lists, the observer) pass straight through.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_cloud::{
    CloudError, CloudProvider, Instance, InstanceHealth, Launched, ProviderObserver,
    ReconciledNodeClass, RegisteredInstance, Registration, ReservationEnd,
};
use nodewright_core::model::InstanceType;

use super::{Fault, Injected, Injector};

pub struct FaultyCloud {
    inner: Arc<dyn CloudProvider>,
    injector: Arc<Injector>,
}

impl FaultyCloud {
    pub fn wrap(inner: Arc<dyn CloudProvider>, injector: Arc<Injector>) -> Arc<dyn CloudProvider> {
        Arc::new(FaultyCloud { inner, injector })
    }

    /// Runs `call` (an unstarted future: dropping it unpolled sends nothing) unless the draw
    /// fails it.
    async fn call<T>(
        &self,
        operation: &str,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        let fail = |message: String| CloudError::Api {
            operation: operation.to_owned(),
            message,
            retryable: true,
        };
        match self.injector.draw() {
            None => call.await,
            Some(Fault::Throttled) => Err(fail(format!(
                "RequestLimitExceeded: Request limit exceeded. ({})",
                Injected::of(Fault::Throttled)
            ))),
            Some(Fault::ServerError) => Err(fail(format!(
                "InternalError: An internal error has occurred. ({})",
                Injected::of(Fault::ServerError)
            ))),
            Some(Fault::Timeout) => {
                tokio::time::sleep(self.injector.timeout).await;
                Err(fail(Injected::of(Fault::Timeout).to_string()))
            }
            Some(Fault::Dropped) => {
                let _ = call.await;
                Err(fail(Injected::of(Fault::Dropped).to_string()))
            }
        }
    }
}

#[async_trait]
impl CloudProvider for FaultyCloud {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn reconcile_node_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<ReconciledNodeClass, CloudError> {
        self.call("ReconcileNodeClass", self.inner.reconcile_node_class(class))
            .await
    }

    async fn reconcile_node_class_for(
        &self,
        class: &EC2NodeClass,
        nodepools: &[NodePool],
    ) -> Result<ReconciledNodeClass, CloudError> {
        let call = self.inner.reconcile_node_class_for(class, nodepools);
        self.call("ReconcileNodeClass", call).await
    }

    async fn finalize_node_class(&self, class: &EC2NodeClass) -> Result<Vec<String>, CloudError> {
        self.call("FinalizeNodeClass", self.inner.finalize_node_class(class))
            .await
    }

    async fn instance_types(
        &self,
        class: Option<&EC2NodeClass>,
    ) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        self.call("GetInstanceTypes", self.inner.instance_types(class))
            .await
    }

    async fn create(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Launched, CloudError> {
        self.call("Create", self.inner.create(claim, class)).await
    }

    async fn delete(&self, provider_id: &str) -> Result<(), CloudError> {
        self.call("Delete", self.inner.delete(provider_id)).await
    }

    async fn get(&self, provider_id: &str) -> Result<Instance, CloudError> {
        self.call("Get", self.inner.get(provider_id)).await
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        self.call("List", self.inner.list()).await
    }

    async fn is_drifted(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Option<String>, CloudError> {
        self.call("IsDrifted", self.inner.is_drifted(claim, class))
            .await
    }

    async fn registration_hooks(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Registration, CloudError> {
        let call = self.inner.registration_hooks(claim, class);
        self.call("RegistrationHooks", call).await
    }

    fn tagged_annotations(&self) -> BTreeMap<String, String> {
        self.inner.tagged_annotations()
    }

    fn tagged_node_classes(&self) -> &'static [(&'static str, &'static str)] {
        self.inner.tagged_node_classes()
    }

    async fn tag_registered(&self, instance: &RegisteredInstance) -> Result<(), CloudError> {
        self.call("TagRegistered", self.inner.tag_registered(instance))
            .await
    }

    async fn capacity_reservations(
        &self,
        ids: &[String],
    ) -> Result<Vec<ReservationEnd>, CloudError> {
        let call = self.inner.capacity_reservations(ids);
        self.call("CapacityReservations", call).await
    }

    async fn unhealthy_instances(&self) -> Result<Vec<InstanceHealth>, CloudError> {
        self.call("UnhealthyInstances", self.inner.unhealthy_instances())
            .await
    }

    async fn zonal_shifts(&self) -> Result<Vec<String>, CloudError> {
        self.call("ZonalShifts", self.inner.zonal_shifts()).await
    }

    fn repair_policies(&self) -> Vec<nodewright_core::repair::Policy> {
        self.inner.repair_policies()
    }

    fn observe_with(&self, observer: Arc<dyn ProviderObserver>) {
        self.inner.observe_with(observer);
    }
}
