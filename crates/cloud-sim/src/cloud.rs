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
use nodewright_core::model::InstanceType;
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
    /// Well-known labels of the type and offering.
    pub labels: BTreeMap<String, String>,
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
            labels,
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
                values: r.values().to_vec(),
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
    /// A cloud over the embedded AWS catalog.
    pub fn new(config: SimCloudConfig) -> Result<Self, CloudError> {
        let catalog = nodewright_aws_model::catalog::embedded()
            .map_err(|e| api_error("LoadCatalog", &e.to_string(), false))?;
        Ok(Self::with_catalog(config, Arc::new(catalog)))
    }

    pub fn with_catalog(config: SimCloudConfig, catalog: Arc<Catalog>) -> Self {
        let seed = config.seed;
        SimCloud {
            state: Mutex::new(State {
                fleet: Fleet::new(config.fleet.clone(), seed),
                instances: BTreeMap::new(),
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
        let record = SimInstance {
            instance: instance.clone(),
            capacity: it.capacity.clone(),
            allocatable: it.allocatable(),
            labels: node_labels.clone(),
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
mod tests {
    use super::*;
    use crate::fleet::OfferingPattern;
    use nodewright_core::model::CapacityType;
    use nodewright_testkit::json::merge;
    use nodewright_testkit::{k8s, nodeclaim};
    use serde_json::json;
    use std::sync::OnceLock;

    fn catalog() -> Arc<Catalog> {
        static CATALOG: OnceLock<Arc<Catalog>> = OnceLock::new();
        CATALOG
            .get_or_init(|| Arc::new(nodewright_aws_model::catalog::embedded().unwrap()))
            .clone()
    }

    fn cloud(config: SimCloudConfig) -> SimCloud {
        SimCloud::with_catalog(config, catalog())
    }

    fn faults(fleet: FleetConfig) -> SimCloudConfig {
        SimCloudConfig {
            fleet,
            ..Default::default()
        }
    }

    fn claim(name: &str, reqs: serde_json::Value, cpu: &str) -> NodeClaim {
        let claim = merge(
            k8s::nodeclaim(name),
            json!({"metadata": {"labels": {"karpenter.sh/nodepool": "default"}},
                "spec": {"requirements": reqs}}),
        );
        serde_json::from_value(nodeclaim::requests(claim, json!({"cpu": cpu}))).unwrap()
    }

    fn on_demand_amd64() -> serde_json::Value {
        serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]}
        ])
    }

    #[tokio::test(start_paused = true)]
    async fn launches_the_cheapest_compatible_offering_and_reports_states() {
        let c = cloud(SimCloudConfig::default());
        let launched = c
            .create(&claim("nc-1", on_demand_amd64(), "3"), None)
            .await
            .unwrap();
        let i = &launched.instance;
        assert_eq!(
            i.instance_type, "c5.xlarge",
            "the cheapest m5/c5 with 3 cpu allocatable"
        );
        assert_eq!(i.capacity_type, CapacityType::OnDemand);
        assert_eq!(i.state, InstanceState::Pending);
        let (zone, id) = parse_provider_id(&i.provider_id).unwrap();
        assert_eq!(zone, i.zone);
        assert_eq!(id.len(), 2 + 17);
        assert!(id[2..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(i.nodeclaim(), Some("nc-1"));
        assert_eq!(
            i.tags.get("karpenter.sh/nodepool").map(String::as_str),
            Some("default")
        );
        assert_eq!(
            i.tags
                .get("kubernetes.io/cluster/nodewright")
                .map(String::as_str),
            Some("owned")
        );
        assert_eq!(
            launched.labels.get(labels::INSTANCE_TYPE),
            Some(&"c5.xlarge".to_string())
        );
        assert_eq!(
            launched.labels.get(labels::ARCH).map(String::as_str),
            Some("amd64")
        );
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(
            c.get(&i.provider_id).await.unwrap().state,
            InstanceState::Running
        );
        c.delete(&i.provider_id).await.unwrap();
        assert_eq!(
            c.get(&i.provider_id).await.unwrap().state,
            InstanceState::ShuttingDown
        );
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert!(c.get(&i.provider_id).await.unwrap_err().is_not_found());
        assert!(c.delete(&i.provider_id).await.unwrap_err().is_not_found());
        assert!(c.list().await.unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_terminated_instance_is_listed_for_a_while_then_forgotten() {
        let c = cloud(SimCloudConfig::default());
        let gone = c
            .create(&claim("gone", on_demand_amd64(), "1"), None)
            .await
            .unwrap()
            .instance
            .provider_id;
        let kept = c
            .create(&claim("kept", on_demand_amd64(), "1"), None)
            .await
            .unwrap()
            .instance
            .provider_id;
        c.delete(&gone).await.unwrap();
        let states = |c: &SimCloud| {
            c.instances()
                .into_iter()
                .map(|i| (i.instance.provider_id, i.instance.state))
                .collect::<BTreeMap<_, _>>()
        };
        // Terminated after 30 s, still listed (the node agent deletes its Node from this).
        tokio::time::sleep(Duration::from_secs(31) + TERMINATED_LISTED_FOR / 2).await;
        assert_eq!(states(&c).get(&gone), Some(&InstanceState::Terminated));
        tokio::time::sleep(TERMINATED_LISTED_FOR / 2).await;
        let left = states(&c);
        assert_eq!(left.keys().collect::<Vec<_>>(), [&kept]);
        assert_eq!(c.lock().instances.len(), 1, "the record itself is dropped");
        assert!(c.get(&gone).await.unwrap_err().is_not_found());
        assert!(c.delete(&gone).await.unwrap_err().is_not_found());
        assert_eq!(c.list().await.unwrap().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn ids_are_deterministic_from_the_seed() {
        let ids = |seed| async move {
            let c = cloud(SimCloudConfig {
                seed,
                ..Default::default()
            });
            let mut out = Vec::new();
            for n in 0..3 {
                out.push(
                    c.create(&claim(&format!("nc-{n}"), on_demand_amd64(), "1"), None)
                        .await
                        .unwrap()
                        .instance
                        .provider_id,
                );
            }
            out
        };
        assert_eq!(ids(7).await, ids(7).await);
        assert_ne!(ids(7).await, ids(8).await);
    }

    #[tokio::test(start_paused = true)]
    async fn spot_is_preferred_when_allowed() {
        let c = cloud(SimCloudConfig::default());
        let reqs = serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
        ]);
        let l = c.create(&claim("a", reqs, "1"), None).await.unwrap();
        assert_eq!(l.instance.capacity_type, CapacityType::Spot);
    }

    #[tokio::test(start_paused = true)]
    async fn insufficient_capacity_falls_through_then_fails_and_is_remembered() {
        let reqs = serde_json::json!([
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
        ]);
        let c = cloud(faults(FleetConfig {
            insufficient_capacity: vec![OfferingPattern {
                instance_type: Some("m5.large".into()),
                zone: Some("us-east-1a".into()),
                capacity_type: None,
            }],
            ..Default::default()
        }));
        let l = c
            .create(&claim("a", reqs.clone(), "1"), None)
            .await
            .unwrap();
        assert_ne!(l.instance.zone, "us-east-1a");
        let types = c.instance_types(None).await.unwrap();
        let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
        let a = m5
            .offerings
            .iter()
            .find(|o| o.zone == "us-east-1a" && o.capacity_type == CapacityType::OnDemand)
            .unwrap();
        assert!(
            !a.available,
            "an offering that ran out is marked unavailable"
        );

        let none = cloud(faults(FleetConfig {
            insufficient_capacity: vec![OfferingPattern {
                instance_type: Some("m5.large".into()),
                ..Default::default()
            }],
            ..Default::default()
        }));
        match none.create(&claim("b", reqs.clone(), "1"), None).await {
            Err(CloudError::InsufficientCapacity { offerings, .. }) => {
                assert!(
                    offerings
                        .iter()
                        .all(|(t, _, ct)| t == "m5.large" && ct == "on-demand")
                );
                assert_eq!(offerings.len(), 3);
            }
            other => panic!("expected ICE, got {other:?}"),
        }
        // Within the TTL the offerings stay out; the next attempt finds nothing to try, which
        // upstream's provider also answers with insufficient capacity.
        match none.create(&claim("b", reqs.clone(), "1"), None).await {
            Err(CloudError::InsufficientCapacity { offerings, .. }) => {
                assert!(offerings.is_empty())
            }
            other => panic!("expected ICE with nothing tried, got {other:?}"),
        }
        tokio::time::sleep(Duration::from_secs(181)).await;
        assert!(matches!(
            none.create(&claim("b", reqs, "1"), None).await,
            Err(CloudError::InsufficientCapacity { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn api_errors_are_injected_at_the_configured_rate() {
        let c = cloud(faults(FleetConfig {
            api_error_rate: 1.0,
            ..Default::default()
        }));
        let e = c
            .create(&claim("a", on_demand_amd64(), "1"), None)
            .await
            .unwrap_err();
        assert!(e.is_retryable());
        let c = cloud(faults(FleetConfig {
            api_error_rate: 0.5,
            ..Default::default()
        }));
        let mut failures = 0;
        for n in 0..100 {
            if c.create(&claim(&format!("n{n}"), on_demand_amd64(), "1"), None)
                .await
                .is_err()
            {
                failures += 1;
            }
        }
        assert!((25..75).contains(&failures), "{failures} of 100");
    }

    #[tokio::test(start_paused = true)]
    async fn impossible_requests_are_invalid_or_find_no_capacity() {
        let c = cloud(SimCloudConfig::default());
        // No type holds the requests: as upstream, no capacity rather than a bad request.
        let e = c
            .create(&claim("a", on_demand_amd64(), "1000"), None)
            .await
            .unwrap_err();
        assert!(
            matches!(e, CloudError::InsufficientCapacity { ref offerings, .. } if offerings.is_empty()),
            "{e:?}"
        );
        let bad = serde_json::json!([{"key": "k", "operator": "Near", "values": ["x"]}]);
        assert!(matches!(
            c.create(&claim("b", bad, "1"), None).await,
            Err(CloudError::InvalidRequest(_))
        ));
        assert!(matches!(
            c.get("i-123").await,
            Err(CloudError::InvalidRequest(_))
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn node_class_status_is_ready_and_drift_follows_its_images() {
        let c = cloud(SimCloudConfig::default());
        let class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
                     "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
        }))
        .unwrap();
        let reconciled = c.reconcile_node_class(&class).await.unwrap();
        let status = reconciled.status;
        assert_eq!(status.subnets.as_ref().unwrap().len(), 3);
        assert_eq!(status.conditions.as_ref().unwrap()[0].status, "True");
        let l = c
            .create(&claim("a", on_demand_amd64(), "1"), Some(&class))
            .await
            .unwrap();
        let mut nc = claim("a", on_demand_amd64(), "1");
        nc.status = Some(nodewright_api::v1::nodeclaim::NodeClaimStatus {
            provider_id: Some(l.instance.provider_id.clone()),
            ..Default::default()
        });
        let mut ready = class.clone();
        ready.status = Some(status);
        assert_eq!(c.is_drifted(&nc, Some(&ready)).await.unwrap(), None);
        ready.status.as_mut().unwrap().amis.as_mut().unwrap()[0].id = "ami-new".into();
        assert_eq!(
            c.is_drifted(&nc, Some(&ready)).await.unwrap().as_deref(),
            Some("AMIDrift")
        );
    }

    #[tokio::test]
    async fn claims_carry_the_class_hash_and_drift_when_the_class_spec_changes() {
        use nodewright_cloud::annotations::{NODECLASS_HASH, NODECLASS_HASH_VERSION};
        let c = cloud(SimCloudConfig::default());
        let class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
                     "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
        }))
        .unwrap();
        let reconciled = c.reconcile_node_class(&class).await.unwrap();
        let hash = reconciled.annotations[NODECLASS_HASH].clone();
        assert_eq!(reconciled.annotations[NODECLASS_HASH_VERSION], "sim1");
        let l = c
            .create(&claim("a", on_demand_amd64(), "1"), Some(&class))
            .await
            .unwrap();
        assert_eq!(l.annotations, reconciled.annotations);
        let unclassed = c
            .create(&claim("b", on_demand_amd64(), "1"), None)
            .await
            .unwrap();
        assert!(unclassed.annotations.is_empty());

        let mut nc = claim("a", on_demand_amd64(), "1");
        nc.metadata.annotations = Some(l.annotations.clone());
        nc.status = Some(nodewright_api::v1::nodeclaim::NodeClaimStatus {
            provider_id: Some(l.instance.provider_id.clone()),
            ..Default::default()
        });
        let mut current = class.clone();
        current.status = Some(reconciled.status);
        assert_eq!(c.is_drifted(&nc, Some(&current)).await.unwrap(), None);
        current.spec.role = Some("other-role".into());
        assert_ne!(
            c.reconcile_node_class(&current).await.unwrap().annotations[NODECLASS_HASH],
            hash
        );
        assert_eq!(
            c.is_drifted(&nc, Some(&current)).await.unwrap().as_deref(),
            Some("NodeClassDrift")
        );
    }
}
