//! A small in-memory cloud for controller tests: three instance types in two zones, launches
//! that pick the cheapest allowed type, terminations that complete on the next call, and an
//! insufficient-capacity switch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_cloud::{
    CloudError, CloudProvider, Instance, InstanceState, Launched, ReconciledNodeClass,
    RegisteredInstance, Registration, ReservationEnd, annotations,
};
use nodewright_core::labels;
use nodewright_core::model::{CapacityType, InstanceType, Overhead};
use nodewright_core::requirements::Requirement;
use nodewright_core::resources::Resources;
use nodewright_core::testkit::{instance_type, offering};

#[derive(Default)]
struct Inner {
    instances: BTreeMap<String, Instance>,
    next: u32,
    ice: bool,
    fail: bool,
    class_not_ready: Option<String>,
    drift: Option<String>,
    registration: Option<Result<Registration, String>>,
    hook_calls: usize,
    instance_type_calls: usize,
    create_calls: usize,
    reservations: Vec<ReservationEnd>,
    reservation_lookups: Vec<Vec<String>>,
    /// Marker annotations of a tagged claim; empty: this cloud does not tag.
    tag_markers: BTreeMap<String, String>,
    tagged: Vec<RegisteredInstance>,
    /// Each class reconcile: the class and the pools it was given (`name{labels}`).
    class_reconciles: Vec<(String, Vec<String>)>,
    /// The zones `zonal_shifts` answers, or the error it fails with.
    zonal_shifts: Vec<String>,
    zonal_shift_error: Option<String>,
}

pub struct TestCloud {
    inner: Mutex<Inner>,
}

fn it(name: &str, cpu: i64, mem_gi: i64, price: f64) -> InstanceType {
    let capacity = Resources::new()
        .with("cpu", cpu * 1000)
        .with("memory", mem_gi << 30)
        .with("pods", 110);
    let offerings =
        ["us-east-1a", "us-east-1b"].map(|z| offering(z, CapacityType::OnDemand, price));
    InstanceType {
        requirements: vec![
            Requirement::single(labels::INSTANCE_TYPE, name),
            Requirement::single(labels::ARCH, "amd64"),
            Requirement::single(labels::OS, "linux"),
        ],
        overhead: Overhead {
            kube_reserved: Resources::new().with("cpu", 80),
            ..Overhead::default()
        },
        ..instance_type(name, capacity, offerings.into())
    }
}

/// A stand-in class hash: the role, so tests change the hash by changing the role.
pub fn class_hash(class: &EC2NodeClass) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            annotations::NODECLASS_HASH.to_string(),
            format!("role-{}", class.spec.role.as_deref().unwrap_or_default()),
        ),
        (
            annotations::NODECLASS_HASH_VERSION.to_string(),
            "test1".to_string(),
        ),
    ])
}

pub fn catalog() -> Vec<InstanceType> {
    vec![
        it("m5.large", 2, 8, 0.096),
        it("m5.xlarge", 4, 16, 0.192),
        it("m5.2xlarge", 8, 32, 0.384),
    ]
}

impl TestCloud {
    pub fn new() -> Self {
        TestCloud {
            inner: Mutex::new(Inner::default()),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_ice(&self, on: bool) {
        self.inner().ice = on;
    }

    pub fn set_failing(&self, on: bool) {
        self.inner().fail = on;
    }

    /// Makes node class resolution fail with `reason` (`None`: classes resolve Ready).
    pub fn set_class_not_ready(&self, reason: Option<&str>) {
        self.inner().class_not_ready = reason.map(str::to_string);
    }

    /// The drift reason every launched claim reports (`None`: not drifted).
    pub fn set_drift(&self, reason: Option<&str>) {
        self.inner().drift = reason.map(str::to_string);
    }

    /// What the registration hooks answer from now on (`None`: nothing to do; `Err`: the
    /// hook fails with that message).
    pub fn set_registration(&self, r: Option<Result<Registration, String>>) {
        self.inner().registration = r;
    }

    /// How often the registration hooks ran.
    pub fn hook_calls(&self) -> usize {
        self.inner().hook_calls
    }

    /// How many launches were asked for.
    pub fn create_calls(&self) -> usize {
        self.inner().create_calls
    }

    /// How often the instance types were asked for.
    pub fn instance_type_calls(&self) -> usize {
        self.inner().instance_type_calls
    }

    /// The reservations the cloud knows by id.
    pub fn set_reservations(&self, r: Vec<ReservationEnd>) {
        self.inner().reservations = r;
    }

    /// The zones the cloud reports shifted from now on, or (`Err`) the error it fails with.
    pub fn set_zonal_shifts(&self, shifts: Result<&[&str], &str>) {
        let mut inner = self.inner();
        match shifts {
            Ok(zones) => {
                inner.zonal_shifts = zones.iter().map(|z| z.to_string()).collect();
                inner.zonal_shift_error = None;
            }
            Err(e) => inner.zonal_shift_error = Some(e.to_string()),
        }
    }

    /// The ids each reservation lookup asked for.
    pub fn reservation_lookups(&self) -> Vec<Vec<String>> {
        self.inner().reservation_lookups.clone()
    }

    /// Makes the cloud tag registered instances, marking claims with `markers`.
    pub fn set_tagging(&self, markers: &[(&str, &str)]) {
        self.inner().tag_markers = markers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Every instance the tagging hook was asked to tag, in order.
    pub fn tagged(&self) -> Vec<RegisteredInstance> {
        self.inner().tagged.clone()
    }

    /// An instance no claim knows about, as a crashed launch leaves behind.
    pub fn leak(&self, id: &str, launched_at: Option<nodewright_core::time::Timestamp>) -> String {
        let instance = Instance {
            provider_id: format!("aws:///us-east-1a/{id}"),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::OnDemand,
            image_id: Some("ami-123".into()),
            state: InstanceState::Running,
            launched_at,
            tags: BTreeMap::new(),
        };
        let pid = instance.provider_id.clone();
        self.inner().instances.insert(pid.clone(), instance);
        pid
    }

    /// The instance disappears without the controller asking (terminated out of band).
    /// The class reconciles so far: each class with the pools it was validated with.
    pub fn class_reconciles(&self) -> Vec<(String, Vec<String>)> {
        self.inner().class_reconciles.clone()
    }

    pub fn vanish(&self, provider_id: &str) {
        self.inner().instances.remove(provider_id);
    }

    pub fn running(&self) -> Vec<Instance> {
        self.inner()
            .instances
            .values()
            .filter(|i| i.state == InstanceState::Running)
            .cloned()
            .collect()
    }
}

#[async_trait]
impl CloudProvider for TestCloud {
    fn name(&self) -> &'static str {
        "test"
    }

    /// One policy, as upstream's fake provider has: `Ready=False` for 30 minutes.
    fn repair_policies(&self) -> Vec<nodewright_core::repair::Policy> {
        vec![nodewright_core::repair::Policy {
            condition: "Ready".into(),
            status: "False".into(),
            toleration: std::time::Duration::from_secs(30 * 60),
        }]
    }

    async fn reconcile_node_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<ReconciledNodeClass, CloudError> {
        if let Some(reason) = self.inner().class_not_ready.clone() {
            return Err(CloudError::NodeClassNotReady {
                name: class.metadata.name.clone().unwrap_or_default(),
                reason,
            });
        }
        let status: EC2NodeClassStatus = serde_json::from_value(serde_json::json!({
            "subnets": [{"id": "subnet-1", "zone": "us-east-1a"}],
            "securityGroups": [{"id": "sg-1"}],
            "amis": [{"id": "ami-123"}],
            "instanceProfile": "test-node",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]
        }))
        .unwrap_or_default();
        Ok(ReconciledNodeClass {
            status,
            annotations: class_hash(class),
        })
    }

    async fn reconcile_node_class_for(
        &self,
        class: &EC2NodeClass,
        nodepools: &[NodePool],
    ) -> Result<ReconciledNodeClass, CloudError> {
        let pools = nodepools
            .iter()
            .map(|np| {
                let labels = np
                    .spec
                    .template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.clone())
                    .unwrap_or_default();
                format!(
                    "{}{labels:?}",
                    np.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        self.inner()
            .class_reconciles
            .push((class.metadata.name.clone().unwrap_or_default(), pools));
        self.reconcile_node_class(class).await
    }

    async fn instance_types(
        &self,
        _class: Option<&EC2NodeClass>,
    ) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        self.inner().instance_type_calls += 1;
        Ok(Arc::new(catalog()))
    }

    async fn create(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Launched, CloudError> {
        let mut inner = self.inner();
        inner.create_calls += 1;
        if inner.fail {
            return Err(CloudError::Api {
                operation: "CreateFleet".into(),
                message: "service unavailable".into(),
                retryable: true,
            });
        }
        if inner.ice {
            return Err(CloudError::InsufficientCapacity {
                message: "no capacity".into(),
                offerings: vec![],
            });
        }
        let allowed: Vec<&str> = claim
            .spec
            .requirements
            .iter()
            .filter(|r| r.key == labels::INSTANCE_TYPE && r.operator == "In")
            .flat_map(|r| r.values().iter().map(String::as_str))
            .collect();
        let choice = catalog()
            .into_iter()
            .filter(|t| allowed.contains(&t.name.as_str()))
            .min_by(|a, b| a.offerings[0].price.total_cmp(&b.offerings[0].price))
            .ok_or_else(|| CloudError::InvalidRequest("no allowed instance type".into()))?;
        inner.next += 1;
        let id = format!("i-{:04}", inner.next);
        let zone = "us-east-1a".to_string();
        let mut tags = BTreeMap::new();
        tags.insert(
            nodewright_cloud::tags::NODECLAIM.to_string(),
            claim.metadata.name.clone().unwrap_or_default(),
        );
        let instance = Instance {
            provider_id: format!("aws:///{zone}/{id}"),
            instance_type: choice.name.clone(),
            zone: zone.clone(),
            capacity_type: CapacityType::OnDemand,
            image_id: Some("ami-123".into()),
            state: InstanceState::Running,
            launched_at: None,
            tags,
        };
        inner
            .instances
            .insert(instance.provider_id.clone(), instance.clone());
        let mut l = BTreeMap::new();
        l.insert(labels::ARCH.to_string(), "amd64".to_string());
        Ok(Launched {
            instance,
            capacity: choice.capacity.clone(),
            allocatable: choice.allocatable(),
            labels: l,
            annotations: class.map(class_hash).unwrap_or_default(),
        })
    }

    async fn registration_hooks(
        &self,
        _claim: &NodeClaim,
        _class: Option<&EC2NodeClass>,
    ) -> Result<Registration, CloudError> {
        let mut inner = self.inner();
        inner.hook_calls += 1;
        match inner.registration.clone() {
            None => Ok(Registration::done()),
            Some(Ok(r)) => Ok(r),
            Some(Err(message)) => Err(CloudError::Api {
                operation: "DescribeInstances".into(),
                message,
                retryable: true,
            }),
        }
    }

    async fn zonal_shifts(&self) -> Result<Vec<String>, CloudError> {
        let inner = self.inner();
        match &inner.zonal_shift_error {
            Some(e) => Err(CloudError::Api {
                operation: "GetManagedResource".into(),
                message: e.clone(),
                retryable: true,
            }),
            None => Ok(inner.zonal_shifts.clone()),
        }
    }

    async fn capacity_reservations(
        &self,
        ids: &[String],
    ) -> Result<Vec<ReservationEnd>, CloudError> {
        let mut inner = self.inner();
        inner.reservation_lookups.push(ids.to_vec());
        Ok(inner
            .reservations
            .iter()
            .filter(|r| ids.contains(&r.id))
            .cloned()
            .collect())
    }

    fn tagged_annotations(&self) -> BTreeMap<String, String> {
        self.inner().tag_markers.clone()
    }

    /// Records the request and puts the node's name on the instance, as EC2 would.
    async fn tag_registered(&self, instance: &RegisteredInstance) -> Result<(), CloudError> {
        let mut inner = self.inner();
        inner.tagged.push(instance.clone());
        let Some(i) = inner.instances.get_mut(&instance.provider_id) else {
            return Err(CloudError::NotFound {
                provider_id: instance.provider_id.clone(),
            });
        };
        i.tags.insert(
            nodewright_cloud::tags::NAME.into(),
            instance.node_name.clone(),
        );
        Ok(())
    }

    async fn delete(&self, provider_id: &str) -> Result<(), CloudError> {
        let mut inner = self.inner();
        if inner.fail {
            return Err(CloudError::Api {
                operation: "TerminateInstances".into(),
                message: "service unavailable".into(),
                retryable: true,
            });
        }
        match inner.instances.get_mut(provider_id) {
            Some(i) if i.state == InstanceState::Running => {
                i.state = InstanceState::ShuttingDown;
                Ok(())
            }
            Some(_) => {
                inner.instances.remove(provider_id);
                Err(CloudError::NotFound {
                    provider_id: provider_id.into(),
                })
            }
            None => Err(CloudError::NotFound {
                provider_id: provider_id.into(),
            }),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<Instance, CloudError> {
        self.inner()
            .instances
            .get(provider_id)
            .cloned()
            .ok_or_else(|| CloudError::NotFound {
                provider_id: provider_id.into(),
            })
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        Ok(self.inner().instances.values().cloned().collect())
    }

    async fn is_drifted(
        &self,
        _claim: &NodeClaim,
        _class: Option<&EC2NodeClass>,
    ) -> Result<Option<String>, CloudError> {
        Ok(self.inner().drift.clone())
    }
}
