//! [`SimCloud`]: the [`CloudProvider`] contract over the embedded AWS catalog. The launch
//! decision, its faults, the ICE memory, instance ids and instance states are the
//! [`Fleet`]'s, which the simulator runs too; this wraps it for the async trait, reading
//! tokio's clock as milliseconds since the cloud was made, and adds what only a real cluster
//! needs: tags, node labels, node class status and drift.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use nodewright_api::aws::common::{AmiStatus, Condition, SecurityGroupStatus, SubnetStatus};
use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_api::quantity;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_aws_model::class_input::node_class_input;
use nodewright_aws_model::{AmiFamily, Catalog, NodeClassInput, Settings, SpotPrices, Zone};
use nodewright_cloud::{
    CloudError, CloudProvider, Instance, InstanceState, Launched, ReconciledNodeClass, tags,
};
use nodewright_core::labels;
use nodewright_core::model::{InstanceType, Shared};
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::Resources;
use nodewright_core::time::Timestamp;
use tokio::time::Instant;

use crate::fleet::{Fleet, FleetConfig, LaunchError};
use crate::hash::{hash_annotations, static_drift};
use crate::marked::MarkedCatalogs;

#[derive(Clone, Debug, PartialEq)]
pub struct SimCloudConfig {
    pub cluster_name: String,
    pub region: String,
    /// Zones the simulated subnets cover.
    pub zones: Vec<String>,
    /// Timings and faults.
    pub fleet: FleetConfig,
    pub seed: u64,
}

impl Default for SimCloudConfig {
    fn default() -> Self {
        SimCloudConfig {
            cluster_name: "nodewright".into(),
            region: "us-east-1".into(),
            zones: vec![
                "us-east-1a".into(),
                "us-east-1b".into(),
                "us-east-1c".into(),
            ],
            fleet: FleetConfig::default(),
            seed: 1,
        }
    }
}

/// An instance as the simulated cloud keeps it: what [`Instance`] reports plus what a node
/// agent needs to register it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimInstance {
    pub instance: Instance,
    pub capacity: Resources,
    pub allocatable: Resources,
    /// Well-known labels of the type and offering, shared by the instances of one offering.
    pub labels: Arc<BTreeMap<String, String>>,
    pub price: f64,
    launched: Instant,
}

impl SimInstance {
    /// A record as the cloud would hold it; for tests of code that consumes instances.
    pub fn for_tests(
        instance: Instance,
        capacity: Resources,
        allocatable: Resources,
        labels: BTreeMap<String, String>,
        launched: Instant,
    ) -> Self {
        SimInstance {
            instance,
            capacity,
            allocatable,
            labels: Arc::new(labels),
            price: 0.0,
            launched,
        }
    }

    /// When the launch call returned (on tokio's clock).
    pub fn launched_at(&self) -> Instant {
        self.launched
    }
}

struct State {
    fleet: Fleet,
    /// What a node agent needs of each instance the fleet launched, by provider id.
    instances: BTreeMap<String, SimInstance>,
    /// One copy of each offering's labels, which its instances share.
    labels: Shared<BTreeMap<String, String>>,
}

/// How long a terminated instance is still listed (with state `Terminated`) before the cloud
/// forgets it. Without a bound the cloud kept a record of every instance it ever launched
/// (about 6 KiB each), so a controller on it grew with every Node a churning cluster had
/// ever had. EC2 lists a terminated instance for about an hour, but nothing here reads one
/// once its Node is gone (the node agent deletes a Node within seconds of its instance's
/// end, and `get` already answers not-found), and these records live in the controller's
/// process where EC2's do not, so they are kept only a few minutes.
pub const TERMINATED_LISTED_FOR: Duration = Duration::from_secs(300);

/// The simulated cloud.
pub struct SimCloud {
    config: SimCloudConfig,
    /// The fleet's clock starts here.
    origin: Instant,
    catalog: Arc<Catalog>,
    spot: SpotPrices,
    state: Mutex<State>,
    types: Mutex<Vec<(NodeClassInput, Arc<Vec<InstanceType>>)>>,
    /// The catalogs as last offered, marked, per class input.
    marked: Mutex<MarkedCatalogs>,
}

fn class_input(class: Option<&EC2NodeClass>) -> Result<NodeClassInput, CloudError> {
    match class {
        Some(c) => node_class_input(c).map_err(|e| CloudError::NodeClassNotReady {
            name: e.class.clone(),
            reason: e.to_string(),
        }),
        None => Ok(NodeClassInput::new(AmiFamily::AL2023)),
    }
}

fn family_of(class: Option<&EC2NodeClass>) -> AmiFamily {
    class
        .and_then(|c| c.spec.resolved_ami_family())
        .and_then(|f| AmiFamily::from_name(&f))
        .unwrap_or(AmiFamily::AL2023)
}

/// The simulated image for a family; drift is a class whose resolved images no longer
/// include the instance's.
fn image_for(family: AmiFamily) -> String {
    format!("ami-sim-{}", format!("{family:?}").to_lowercase())
}

fn wall_now() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    Timestamp(ms)
}

fn api_error(operation: &str, message: &str, retryable: bool) -> CloudError {
    CloudError::Api {
        operation: operation.into(),
        message: message.into(),
        retryable,
    }
}

/// A failed launch as the AWS provider reports it: injected API errors are retryable, and
/// insufficient capacity lists the offerings tried.
fn cloud_error(e: &LaunchError) -> CloudError {
    match e {
        LaunchError::Api(message) => api_error("CreateFleet", message, true),
        LaunchError::InsufficientCapacity(tried) => CloudError::InsufficientCapacity {
            message: e.to_string(),
            offerings: tried
                .iter()
                .map(|c| {
                    let ct = c.capacity_type.to_string();
                    (c.instance_type.clone(), c.zone.clone(), ct)
                })
                .collect(),
        },
    }
}

/// `aws:///<zone>/<id>` → `(zone, id)`.
pub fn parse_provider_id(provider_id: &str) -> Option<(&str, &str)> {
    let rest = provider_id.strip_prefix("aws:///")?;
    let (zone, id) = rest.split_once('/')?;
    (!zone.is_empty() && id.starts_with("i-")).then_some((zone, id))
}

/// The claim's requirements in core's terms; unknown operators are an invalid request.
pub fn claim_requirements(claim: &NodeClaim) -> Result<Vec<Requirement>, CloudError> {
    claim
        .spec
        .requirements
        .iter()
        .map(|r| {
            let operator = Operator::parse(&r.operator).ok_or_else(|| {
                CloudError::InvalidRequest(format!(
                    "requirement {}: unsupported operator {:?}",
                    r.key, r.operator
                ))
            })?;
            Ok(Requirement {
                key: r.key.clone(),
                operator,
                values: r.values.clone().unwrap_or_default(),
                min_values: r.min_values.and_then(|m| u32::try_from(m).ok()),
            })
        })
        .collect()
}

/// The claim's resource requests, parsed.
pub fn claim_requests(claim: &NodeClaim) -> Result<Resources, CloudError> {
    let mut out = Resources::new();
    let requests = claim
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    for (name, q) in requests.into_iter().flatten() {
        let v = quantity::parse_resource(name, &q.text())
            .map_err(|e| CloudError::InvalidRequest(format!("resources.requests.{name}: {e}")))?;
        out.set(name, v);
    }
    Ok(out)
}

impl SimCloud {
    /// A cloud over the embedded AWS catalog, keeping the offerings of its region alone.
    pub fn new(config: SimCloudConfig) -> Result<Self, CloudError> {
        let catalog = nodewright_aws_model::catalog::embedded()
            .map_err(|e| api_error("LoadCatalog", &e.to_string(), false))?
            .in_region(&config.region);
        Ok(Self::with_catalog(config, Arc::new(catalog)))
    }

    pub fn with_catalog(config: SimCloudConfig, catalog: Arc<Catalog>) -> Self {
        let seed = config.seed;
        SimCloud {
            state: Mutex::new(State {
                fleet: Fleet::new(config.fleet.clone(), seed),
                instances: BTreeMap::new(),
                labels: Shared::default(),
            }),
            config,
            origin: Instant::now(),
            catalog,
            spot: SpotPrices::synthetic(),
            types: Mutex::new(Vec::new()),
            marked: Mutex::new(MarkedCatalogs::default()),
        }
    }

    pub fn config(&self) -> &SimCloudConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The catalog's instance types for a family as this cloud offers them (its region and
    /// zones, synthetic spot prices, every offering available), computed once.
    /// The instance types of an EC2NodeClass of `family` with no other settings.
    pub fn family_types(&self, family: AmiFamily) -> Arc<Vec<InstanceType>> {
        self.types_for(&NodeClassInput::new(family))
    }

    /// The instance types `class` shapes (its AMI family, kubelet, block devices...), read as
    /// the AWS provider reads it; without a class, AL2023's defaults.
    pub fn class_types(
        &self,
        class: Option<&EC2NodeClass>,
    ) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        Ok(self.types_for(&class_input(class)?))
    }

    /// The class's catalog as offered at `now`: offerings out of capacity marked
    /// unavailable. The same copy while nothing about availability changed.
    fn offered_types(
        &self,
        class: Option<&EC2NodeClass>,
        now: Instant,
    ) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        let input = class_input(class)?;
        let base = self.types_for(&input);
        let unavailable = self.lock().fleet.unavailable_offerings(self.at(now));
        let mut marked = self.marked.lock().unwrap_or_else(|e| e.into_inner());
        Ok(marked.get(&input, &base, unavailable))
    }

    fn types_for(&self, input: &NodeClassInput) -> Arc<Vec<InstanceType>> {
        // A handful of distinct classes at most: a list searched by equality is enough.
        let mut cache = self.types.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, types)) = cache.iter().find(|(i, _)| i == input) {
            return types.clone();
        }
        let zones: Vec<Zone> = self.config.zones.iter().map(|z| Zone::new(z)).collect();
        let types = Arc::new(self.catalog.instance_types(
            &self.config.region,
            &zones,
            &Settings::default(),
            input,
            &self.spot,
        ));
        cache.push((input.clone(), types.clone()));
        types
    }

    /// `now` on the fleet's clock.
    fn at(&self, now: Instant) -> Timestamp {
        Timestamp(now.saturating_duration_since(self.origin).as_millis() as i64)
    }

    /// Every instance with its current state, terminated ones included until they are
    /// forgotten ([`TERMINATED_LISTED_FOR`]); for the node agent and tests.
    pub fn instances(&self) -> Vec<SimInstance> {
        let now = Instant::now();
        let mut s = self.lock();
        self.forget_terminated(&mut s, now);
        s.instances
            .values()
            .map(|i| self.with_state(&s, i, now))
            .collect()
    }

    /// Drops the records of instances terminated [`TERMINATED_LISTED_FOR`] ago or more.
    fn forget_terminated(&self, s: &mut State, now: Instant) {
        for id in s
            .fleet
            .forget_terminated(self.at(now), TERMINATED_LISTED_FOR)
        {
            s.instances.remove(&id);
        }
    }

    fn with_state(&self, s: &State, i: &SimInstance, now: Instant) -> SimInstance {
        let mut out = i.clone();
        let pid = &i.instance.provider_id;
        out.instance.state = s.fleet.state(pid, self.at(now)).unwrap_or(i.instance.state);
        out
    }

    /// Reclaims an instance as EC2 does for spot interruptions: it starts shutting down now.
    pub fn interrupt(&self, provider_id: &str) -> Result<(), CloudError> {
        let now = self.at(Instant::now());
        if self.lock().fleet.terminate(provider_id, now) {
            return Ok(());
        }
        Err(CloudError::NotFound {
            provider_id: provider_id.into(),
        })
    }
}

#[async_trait]
impl CloudProvider for SimCloud {
    fn name(&self) -> &'static str {
        "sim"
    }

    /// EC2's (this cloud stands in for it), as upstream's AWS provider lists them.
    fn repair_policies(&self) -> Vec<nodewright_core::repair::Policy> {
        nodewright_aws_model::repair::policies()
    }

    async fn reconcile_node_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<ReconciledNodeClass, CloudError> {
        let family = class
            .spec
            .resolved_ami_family()
            .unwrap_or_else(|| "AL2023".into());
        let Some(family) = AmiFamily::from_name(&family) else {
            return Err(CloudError::NodeClassNotReady {
                name: class.metadata.name.clone().unwrap_or_default(),
                reason: format!("unknown AMI family {family:?}"),
            });
        };
        let subnets = self
            .config
            .zones
            .iter()
            .enumerate()
            .map(|(i, z)| SubnetStatus {
                id: format!("subnet-sim{i:04}"),
                zone: Some(z.clone()),
                zone_id: Some(format!("sim-az{}", i + 1)),
                ..Default::default()
            })
            .collect();
        let ready = Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("Ready".into()),
            message: Some(String::new()),
            ..Default::default()
        };
        let status = EC2NodeClassStatus {
            subnets: Some(subnets),
            security_groups: Some(vec![SecurityGroupStatus {
                id: "sg-sim0001".into(),
                name: Some(format!("{}-nodes", self.config.cluster_name)),
                ..Default::default()
            }]),
            amis: Some(vec![AmiStatus {
                id: image_for(family),
                name: Some(format!("{family:?}")),
                ..Default::default()
            }]),
            instance_profile: Some(format!("{}-node", self.config.cluster_name)),
            conditions: Some(vec![ready]),
            ..Default::default()
        };
        Ok(ReconciledNodeClass {
            status,
            annotations: hash_annotations(class),
        })
    }

    async fn instance_types(
        &self,
        class: Option<&EC2NodeClass>,
    ) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        self.offered_types(class, Instant::now())
    }

    async fn create(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Launched, CloudError> {
        let requirements = claim_requirements(claim)?;
        let requests = claim_requests(claim)?;
        let types = self.class_types(class)?;
        let now = Instant::now();
        let mut s = self.lock();
        self.forget_terminated(&mut s, now);
        let choice = s
            .fleet
            .launch(&types, &requirements, &requests, self.at(now))
            .map_err(|e| cloud_error(&e))?;
        let provider_id = choice.provider_id();
        let it = types
            .iter()
            .find(|t| t.name == choice.instance_type)
            .ok_or_else(|| CloudError::InvalidRequest("instance type vanished".into()))?;
        let mut node_labels: BTreeMap<String, String> = it
            .requirements
            .iter()
            .filter(|r| r.operator == Operator::In && r.values.len() == 1)
            .map(|r| (r.key.clone(), r.values[0].clone()))
            .collect();
        for (k, v) in [
            (labels::INSTANCE_TYPE, choice.instance_type.as_str()),
            (labels::ZONE, choice.zone.as_str()),
            (labels::REGION, self.config.region.as_str()),
            (labels::CAPACITY_TYPE, choice.capacity_type.as_str()),
        ] {
            node_labels.insert(k.to_owned(), v.to_owned());
        }
        let claim_labels = claim.metadata.labels.clone().unwrap_or_default();
        let mut instance_tags: BTreeMap<String, String> = class
            .and_then(|c| c.spec.tags.clone())
            .map(|t| t.into_iter().collect())
            .unwrap_or_default();
        instance_tags.insert(tags::cluster(&self.config.cluster_name), "owned".into());
        instance_tags.insert(
            "eks:eks-cluster-name".into(),
            self.config.cluster_name.clone(),
        );
        instance_tags.insert(tags::MANAGED_BY.into(), self.config.cluster_name.clone());
        if let Some(np) = claim_labels.get(labels::NODEPOOL) {
            instance_tags.insert(tags::NODEPOOL.into(), np.clone());
        }
        if let Some(name) = &claim.metadata.name {
            instance_tags.insert(tags::NODECLAIM.into(), name.clone());
        }
        instance_tags.insert(
            tags::NODECLASS.into(),
            claim.spec.node_class_ref.name.clone(),
        );
        let instance = Instance {
            provider_id: provider_id.clone(),
            instance_type: choice.instance_type.clone(),
            zone: choice.zone.clone(),
            capacity_type: choice.capacity_type,
            image_id: Some(image_for(family_of(class))),
            state: InstanceState::Pending,
            launched_at: Some(wall_now()),
            tags: instance_tags,
        };
        let mut shared = Arc::new(node_labels.clone());
        s.labels.share(&mut shared);
        let record = SimInstance {
            instance: instance.clone(),
            capacity: it.capacity.clone(),
            allocatable: it.allocatable(),
            labels: shared,
            price: choice.price,
            launched: now,
        };
        s.instances.insert(provider_id, record);
        Ok(Launched {
            instance,
            capacity: it.capacity.clone(),
            allocatable: it.allocatable(),
            labels: node_labels,
            annotations: class.map(hash_annotations).unwrap_or_default(),
        })
    }

    async fn delete(&self, provider_id: &str) -> Result<(), CloudError> {
        let now = self.at(Instant::now());
        if self.lock().fleet.terminate(provider_id, now) {
            return Ok(());
        }
        Err(CloudError::NotFound {
            provider_id: provider_id.into(),
        })
    }

    async fn get(&self, provider_id: &str) -> Result<Instance, CloudError> {
        if parse_provider_id(provider_id).is_none() {
            return Err(CloudError::InvalidRequest(format!(
                "malformed provider id {provider_id:?}"
            )));
        }
        let now = Instant::now();
        let s = self.lock();
        s.instances
            .get(provider_id)
            .map(|i| self.with_state(&s, i, now).instance)
            .filter(|i| i.state != InstanceState::Terminated)
            .ok_or_else(|| CloudError::NotFound {
                provider_id: provider_id.into(),
            })
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        let now = Instant::now();
        let mut s = self.lock();
        self.forget_terminated(&mut s, now);
        Ok(s.instances
            .values()
            .map(|i| self.with_state(&s, i, now).instance)
            .filter(|i| i.state != InstanceState::Terminated)
            .collect())
    }

    async fn is_drifted(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Option<String>, CloudError> {
        let Some(provider_id) = claim.status.as_ref().and_then(|s| s.provider_id.as_deref()) else {
            return Ok(None);
        };
        let instance = self.get(provider_id).await?;
        let Some(class) = class else {
            return Ok(None);
        };
        if let Some(reason) = static_drift(claim.metadata.annotations.as_ref(), class) {
            return Ok(Some(reason.into()));
        }
        let images: Vec<String> = match class.status.as_ref().and_then(|s| s.amis.as_ref()) {
            Some(amis) => amis.iter().map(|a| a.id.clone()).collect(),
            None => vec![image_for(family_of(Some(class)))],
        };
        Ok(match &instance.image_id {
            Some(id) if !images.contains(id) => Some("AMIDrift".into()),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests;
