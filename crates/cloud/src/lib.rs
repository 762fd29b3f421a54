//! The contract between the controller and a cloud. The controller decides *what* to launch
//! (a NodeClaim with requirements); a provider decides *how* (which offering, which API calls)
//! and reports back what it launched as plain data. The controller alone writes Kubernetes
//! objects, so a provider never touches the API server.
//!
//! Two providers implement this trait: `cloud-aws` (EC2 through aws-sdk-rust) and `cloud-sim`
//! (an in-memory cloud for running the controller on any cluster without an account).

mod error;
mod health;
mod instance;
mod interruption;
mod registration;
mod reservation;
mod tagging;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_core::model::InstanceType;

pub use error::CloudError;
pub use health::{
    BatchFlushed, FailedCheck, HealthCategory, InstanceHealth, LaunchFailure, ProviderObserver,
    TerminationFailure,
};
pub use instance::{Instance, InstanceState, Launched, annotations, tags};
pub use interruption::{
    AckHandle, Delivery, InterruptedOffering, Interruption, InterruptionKind, InterruptionSource,
};
pub use registration::Registration;
pub use reservation::ReservationEnd;
pub use tagging::RegisteredInstance;

/// What reconciling a node class yields: its status and the annotations its own metadata
/// should carry (the class hash), both written by the controller.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReconciledNodeClass {
    pub status: EC2NodeClassStatus,
    pub annotations: BTreeMap<String, String>,
}

/// A cloud the controller can launch nodes in. Implementations must be cheap to share
/// (`Arc<dyn CloudProvider>`) and safe to call concurrently.
#[async_trait]
pub trait CloudProvider: Send + Sync {
    /// `aws` or `sim`; used in metric labels and logs.
    fn name(&self) -> &'static str;

    /// Resolves a node class against the cloud (subnets, security groups, images, instance
    /// profile) and returns the status the controller should write, conditions included,
    /// plus the annotations the class's metadata should carry.
    async fn reconcile_node_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<ReconciledNodeClass, CloudError>;

    /// [`Self::reconcile_node_class`] knowing the NodePools that use the class, so a provider
    /// that checks whether the class can launch checks a launch one of them could make.
    /// Providers that check nothing of the kind need not tell the two apart.
    async fn reconcile_node_class_for(
        &self,
        class: &EC2NodeClass,
        nodepools: &[NodePool],
    ) -> Result<ReconciledNodeClass, CloudError> {
        let _ = nodepools;
        self.reconcile_node_class(class).await
    }

    /// Removes what the provider created for `class` (its instance profile, its launch
    /// templates) once the class is being deleted and no NodeClaim uses it; returns what it
    /// removed, by name. Something already gone is success. A provider that creates nothing
    /// per class has nothing to remove.
    async fn finalize_node_class(&self, class: &EC2NodeClass) -> Result<Vec<String>, CloudError> {
        let _ = class;
        Ok(Vec::new())
    }

    /// Every instance type a NodePool using `class` may launch, with offerings (zone,
    /// capacity type, price, availability) limited to what the class can reach.
    async fn instance_types(
        &self,
        class: Option<&EC2NodeClass>,
    ) -> Result<Arc<Vec<InstanceType>>, CloudError>;

    /// Launches one instance satisfying the claim's requirements and resource requests.
    /// `class` is the claim's resolved node class (`None` when the claim references no class
    /// the controller knows). Insufficient capacity on every allowed offering is
    /// [`CloudError::InsufficientCapacity`].
    async fn create(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Launched, CloudError>;

    /// Terminates the instance. [`CloudError::NotFound`] means it is already gone, which the
    /// controller treats as success.
    async fn delete(&self, provider_id: &str) -> Result<(), CloudError>;

    /// One instance by provider id; [`CloudError::NotFound`] when it no longer exists.
    async fn get(&self, provider_id: &str) -> Result<Instance, CloudError>;

    /// Every instance this controller launched in the cluster (found by tags), for garbage
    /// collection.
    async fn list(&self) -> Result<Vec<Instance>, CloudError>;

    /// A reason when the instance behind `claim` no longer matches its node class (image,
    /// subnet, security groups, class hash); `None` when it still does.
    async fn is_drifted(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Option<String>, CloudError>;

    /// Provider work between a claim's Node appearing and the Node being registered (the
    /// unregistered taint lifted). Labels the result carries go onto the claim and the Node;
    /// a pending result keeps the Node unregistered (`Registered=False`,
    /// `RegistrationHookPending`) and the controller asks again on its next pass. A cloud with
    /// nothing to do at registration has nothing pending.
    async fn registration_hooks(
        &self,
        _claim: &NodeClaim,
        _class: Option<&EC2NodeClass>,
    ) -> Result<Registration, CloudError> {
        Ok(Registration::done())
    }

    /// The annotations a claim carries once [`CloudProvider::tag_registered`] has done its
    /// work on the claim's instance (`karpenter.k8s.aws/tagged` for EC2). Empty for a cloud
    /// with nothing to do after registration: the controller then never calls the hook and
    /// never writes a marker.
    fn tagged_annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// The node classes, as (`group`, `kind`) of a claim's `nodeClassRef`, whose claims
    /// [`CloudProvider::tag_registered`] is for (`karpenter.k8s.aws` `EC2NodeClass` for EC2).
    /// A claim naming any other kind of class belongs to another provider and is left alone.
    /// Empty: every claim.
    fn tagged_node_classes(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// Tags the instance of a registered claim with what registration told (the node's name)
    /// along with the claim's and the cluster's names. Called until it succeeds, then the
    /// controller writes [`CloudProvider::tagged_annotations`] on the claim.
    /// [`CloudError::NotFound`] means the instance is gone and there is nothing to tag.
    async fn tag_registered(&self, _instance: &RegisteredInstance) -> Result<(), CloudError> {
        Ok(())
    }

    /// The capacity reservations `ids` name, as the cloud reports them now (ids it does not
    /// know are left out). The controller asks for reservations its claims sit in that no node
    /// class lists any more, so a capacity block's end is seen however the claim got there.
    async fn capacity_reservations(
        &self,
        _ids: &[String],
    ) -> Result<Vec<ReservationEnd>, CloudError> {
        Ok(Vec::new())
    }

    /// Instances whose health checks currently fail, with when each check started failing.
    /// Healthy instances are left out. A cloud without health checks has no failing ones.
    async fn unhealthy_instances(&self) -> Result<Vec<InstanceHealth>, CloudError> {
        Ok(Vec::new())
    }

    /// The zones the cloud currently moves traffic away from (AWS ARC zonal shifts), by name,
    /// sorted, asked again now. While a zone is listed the provider offers nothing in it and
    /// refuses to delete instances there; a failed call leaves what the provider last knew in
    /// force. A cloud without zonal shifts has none.
    async fn zonal_shifts(&self) -> Result<Vec<String>, CloudError> {
        Ok(Vec::new())
    }

    /// The node conditions that make a node unhealthy, and for how long each is tolerated
    /// before node repair (gate `NodeRepair`) replaces it. A cloud with none gets no repair.
    fn repair_policies(&self) -> Vec<nodewright_core::repair::Policy> {
        Vec::new()
    }

    /// Where to report launch failures and other observations from now on. A cloud that has
    /// nothing to report ignores it.
    fn observe_with(&self, _observer: Arc<dyn ProviderObserver>) {}
}
