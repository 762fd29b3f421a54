//! Launch planning for one NodeClaim, as Karpenter's AWS provider does it before CreateFleet:
//! filter the claim's instance types to what can be launched now, keep the 60 cheapest, pick
//! the capacity type, and lay out one fleet override per (instance type, zone) with the zone's
//! subnet. The result is plain data; the SDK layer turns it into a CreateFleet call.
//!
//! ICE fallback needs nothing special: record the error in
//! [`UnavailableOfferings`](crate::ice::UnavailableOfferings), apply it to the instance types
//! and plan again; the failed offering is gone and the next one leads.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use nodewright_core::labels::{self, aws};
use nodewright_core::model::{CapacityType, InstanceType, Offering};
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::Resources;

use crate::resources::{AMD_GPU, AWS_NEURON, AWS_NEURON_CORE, HABANA_GAUDI, NVIDIA_GPU};

/// CreateFleet takes at most this many instance types per launch.
pub const MAX_INSTANCE_TYPES: usize = 60;
/// Fewer types than this when a spot-flexible claim falls back to on-demand earns a warning.
pub const ON_DEMAND_FALLBACK_WARN_TYPES: usize = 5;

/// What the claim asks for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaunchInput {
    pub nodeclaim: String,
    pub nodepool: String,
    pub nodeclass: String,
    pub cluster_name: String,
    /// The claim's instance-type options, offerings already marked by the ICE cache.
    pub instance_types: Vec<InstanceType>,
    /// The claim's requirements (capacity type, zone, instance labels, minValues).
    pub requirements: Vec<Requirement>,
    /// Resources the claim's pods need; a type must have this much allocatable.
    pub requests: Resources,
    /// The chosen subnet of each zone the NodeClass can launch into.
    pub subnets: BTreeMap<String, String>,
    /// The NodeClass's `spec.tags`.
    pub user_tags: BTreeMap<String, String>,
    /// The node's name when known, tagged as `Name`.
    pub node_name: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocationStrategy {
    PriceCapacityOptimized,
    LowestPrice,
}

impl AllocationStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            AllocationStrategy::PriceCapacityOptimized => "price-capacity-optimized",
            AllocationStrategy::LowestPrice => "lowest-price",
        }
    }
}

/// One launch-template override: an instance type in a zone's subnet.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetOverride {
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: String,
    /// The offering's price; lower is tried first.
    pub priority: f64,
    pub reservation_id: Option<String>,
    /// The image for this type (`ImageId`), chosen by architecture and variant once the
    /// class's images are known; the plan leaves it empty.
    pub image_id: Option<String>,
}

/// An instant CreateFleet for one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetRequest {
    pub capacity_type: CapacityType,
    /// `DefaultTargetCapacityType`.
    pub default_target_capacity_type: &'static str,
    pub allocation_strategy: AllocationStrategy,
    pub total_target_capacity: u32,
    /// Cheapest first.
    pub overrides: Vec<FleetOverride>,
    /// For instance, volume and fleet.
    pub tags: BTreeMap<String, String>,
    /// Zone → the addresses a launch there is expected to take (see
    /// [`predicted_usage`](crate::subnets::predicted_usage)), for each zone with an override.
    pub predicted_ips: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchError {
    /// Nothing is left after a filter; Karpenter reports insufficient capacity.
    InsufficientCapacity { stage: &'static str },
    /// The cheapest types cover too few values of a key with `minValues`.
    MinValues { key: String, want: u32, got: usize },
    /// A user tag uses a key Karpenter sets itself.
    RestrictedTag { key: String },
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::InsufficientCapacity { stage } => {
                write!(
                    f,
                    "insufficient capacity: no instance type left after {stage}"
                )
            }
            LaunchError::MinValues { key, want, got } => write!(
                f,
                "insufficient capacity: minValues {want} for {key} but the {MAX_INSTANCE_TYPES} cheapest types cover {got}"
            ),
            LaunchError::RestrictedTag { key } => {
                write!(f, "tag {key:?} is restricted: it is set by the controller")
            }
        }
    }
}

impl std::error::Error for LaunchError {}

impl LaunchError {
    /// Karpenter treats these as insufficient capacity: the claim is deleted and the pods are
    /// scheduled again, rather than the launch being retried as is.
    pub fn is_insufficient_capacity(&self) -> bool {
        matches!(
            self,
            LaunchError::InsufficientCapacity { .. } | LaunchError::MinValues { .. }
        )
    }
}

/// Every requirement on `key` admits `v`; a deprecated beta key names its stable label.
fn all_allow(reqs: &[Requirement], key: &str, v: Option<&str>) -> bool {
    reqs.iter()
        .filter(|r| labels::normalize_key(&r.key) == key)
        .all(|r| r.admits(v))
}

/// The type's labels are compatible with the claim: core's [`InstanceType::compatible_with`].
/// Zone and capacity type are offering properties, checked there.
pub fn type_compatible(it: &InstanceType, reqs: &[Requirement]) -> bool {
    it.compatible_with(reqs)
}

/// The offering is available and in a zone and capacity type (and reservation) `reqs` admit.
pub fn offering_compatible(o: &Offering, reqs: &[Requirement]) -> bool {
    o.available
        && all_allow(reqs, labels::ZONE, Some(&o.zone))
        && all_allow(reqs, labels::CAPACITY_TYPE, Some(o.capacity_type.as_str()))
        && (o.capacity_type != CapacityType::Reserved
            || all_allow(
                reqs,
                aws::CAPACITY_RESERVATION_ID,
                o.reservation_id.as_deref(),
            ))
}

/// The type's single value for `key`, if it has one.
fn label<'a>(it: &'a InstanceType, key: &str) -> Option<&'a str> {
    it.requirements
        .iter()
        .find(|r| r.key == key && r.operator == Operator::In && r.values.len() == 1)
        .map(|r| r.values[0].as_str())
}

fn is_exotic(it: &InstanceType) -> bool {
    label(it, aws::INSTANCE_SIZE).is_some_and(|s| s.contains("metal"))
        || [
            NVIDIA_GPU,
            AMD_GPU,
            AWS_NEURON,
            AWS_NEURON_CORE,
            HABANA_GAUDI,
        ]
        .iter()
        .any(|r| it.capacity.get(r) > 0)
}

/// Whether the launch `input` describes could use offering `o` of `it`: the type suits the
/// claim's requirements and requests, and the offering is available, allowed and in a zone
/// with a subnet.
pub fn usable_offering(input: &LaunchInput, it: &InstanceType, o: &Offering) -> bool {
    type_compatible(it, &input.requirements)
        && input.requests.fits_in(&it.allocatable())
        && offering_compatible(o, &input.requirements)
        && input.subnets.contains_key(&o.zone)
}

/// CreateFleet takes one reservation per (type, zone) pool: keep the one with the most free
/// capacity. Types without a reserved offering go, unless no type has one.
fn keep_one_reservation_per_zone(types: &mut Vec<InstanceType>) {
    let mut reserved: Vec<InstanceType> = Vec::new();
    for it in types.iter() {
        let mut by_zone: BTreeMap<&str, &Offering> = BTreeMap::new();
        for o in it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Reserved)
        {
            let room = |o: &Offering| o.reservation_capacity.unwrap_or(0);
            let better = by_zone
                .get(o.zone.as_str())
                .is_none_or(|cur| room(o) > room(cur));
            if better {
                by_zone.insert(&o.zone, o);
            }
        }
        if !by_zone.is_empty() {
            let mut kept = it.clone();
            kept.offerings = by_zone.into_values().cloned().collect();
            reserved.push(kept);
        }
    }
    if !reserved.is_empty() {
        *types = reserved;
    }
}

/// For a claim that may be spot or on-demand: drop spot offerings dearer than the cheapest
/// on-demand offering of any type, so spot never buys a bigger, dearer machine than on-demand
/// would. Karpenter drops such types whole, which can drop the type holding the cheapest
/// on-demand offering itself (when its spot price is above its on-demand price) and leave
/// nothing; removing offerings instead always leaves that on-demand offering.
fn drop_overpriced_spot(types: &mut Vec<InstanceType>) {
    let cheapest_od = types
        .iter()
        .flat_map(|it| &it.offerings)
        .filter(|o| o.capacity_type == CapacityType::OnDemand)
        .map(|o| o.price)
        .fold(f64::INFINITY, f64::min);
    if cheapest_od.is_infinite() {
        return;
    }
    for it in types.iter_mut() {
        it.offerings
            .retain(|o| o.capacity_type != CapacityType::Spot || o.price <= cheapest_od);
    }
    types.retain(|it| !it.offerings.is_empty());
}

fn cheapest(it: &InstanceType) -> f64 {
    it.offerings
        .iter()
        .map(|o| o.price)
        .fold(f64::INFINITY, f64::min)
}

/// The instance types a launch may use: compatible and available, one reservation per zone,
/// exotic types only when nothing else remains and spot only where it beats on-demand (both
/// skipped under minValues), then the 60 cheapest. Offerings that
/// cannot be used are removed from the returned types.
pub fn filter_instance_types(input: &LaunchInput) -> Result<Vec<InstanceType>, LaunchError> {
    let reqs = &input.requirements;
    let mut types: Vec<InstanceType> = input
        .instance_types
        .iter()
        .filter(|it| type_compatible(it, reqs) && input.requests.fits_in(&it.allocatable()))
        .map(|it| {
            let mut it = it.clone();
            // A zone without a usable subnet cannot be launched into.
            it.offerings
                .retain(|o| offering_compatible(o, reqs) && input.subnets.contains_key(&o.zone));
            it
        })
        .filter(|it| !it.offerings.is_empty())
        .collect();
    if types.is_empty() {
        return Err(LaunchError::InsufficientCapacity {
            stage: "filtering for compatible, available offerings in zones with a subnet",
        });
    }

    let has_min_values = reqs.iter().any(|r| r.min_values.is_some());
    let allows_ct = |ct: CapacityType| all_allow(reqs, labels::CAPACITY_TYPE, Some(ct.as_str()));

    if allows_ct(CapacityType::Reserved) {
        keep_one_reservation_per_zone(&mut types);
    }
    // With minValues every type may count towards the minimum, so none is dropped for taste.
    if !has_min_values {
        if types.iter().any(|it| !is_exotic(it)) {
            types.retain(|it| !is_exotic(it));
        }
        if allows_ct(CapacityType::Spot) && allows_ct(CapacityType::OnDemand) {
            drop_overpriced_spot(&mut types);
        }
    }

    types.sort_by(|a, b| {
        cheapest(a)
            .total_cmp(&cheapest(b))
            .then_with(|| a.name.cmp(&b.name))
    });
    types.truncate(MAX_INSTANCE_TYPES);

    for r in reqs {
        let Some(want) = r.min_values else { continue };
        let got = if r.key == labels::INSTANCE_TYPE {
            types.len()
        } else {
            types
                .iter()
                .filter_map(|it| label(it, &r.key))
                .collect::<BTreeSet<_>>()
                .len()
        };
        if got < want as usize {
            return Err(LaunchError::MinValues {
                key: r.key.clone(),
                want,
                got,
            });
        }
    }
    Ok(types)
}

/// Reserved, then spot, then on-demand: the first the claim allows with an offering left.
pub fn choose_capacity_type(types: &[InstanceType]) -> Option<CapacityType> {
    [
        CapacityType::Reserved,
        CapacityType::Spot,
        CapacityType::OnDemand,
    ]
    .into_iter()
    .find(|ct| {
        types
            .iter()
            .any(|it| it.offerings.iter().any(|o| o.capacity_type == *ct))
    })
}

const RESTRICTED_TAGS: &[&str] = &[
    labels::NODEPOOL,
    "eks:eks-cluster-name",
    aws::EC2NODECLASS,
    "karpenter.sh/nodeclaim",
];

/// `kubernetes.io/cluster/<name>` with a name of `[0-9A-Za-z][A-Za-z0-9-_]*`.
fn is_cluster_tag(key: &str) -> bool {
    key.strip_prefix("kubernetes.io/cluster/").is_some_and(|n| {
        n.starts_with(|c: char| c.is_ascii_alphanumeric())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// The first of `tags`' keys the controller owns (`karpenter.sh/nodepool`,
/// `kubernetes.io/cluster/<name>` ...), which a class may not set.
pub fn restricted_tag(tags: &BTreeMap<String, String>) -> Option<&str> {
    tags.keys()
        .find(|k| RESTRICTED_TAGS.contains(&k.as_str()) || is_cluster_tag(k))
        .map(String::as_str)
}

/// The tags every launched resource carries: the user's, then the controller's.
pub fn launch_tags(input: &LaunchInput) -> Result<BTreeMap<String, String>, LaunchError> {
    if let Some(key) = restricted_tag(&input.user_tags) {
        return Err(LaunchError::RestrictedTag {
            key: key.to_string(),
        });
    }
    let mut tags = input.user_tags.clone();
    tags.insert(
        format!("kubernetes.io/cluster/{}", input.cluster_name),
        "owned".into(),
    );
    tags.insert(labels::NODEPOOL.into(), input.nodepool.clone());
    tags.insert("karpenter.sh/nodeclaim".into(), input.nodeclaim.clone());
    tags.insert("eks:eks-cluster-name".into(), input.cluster_name.clone());
    tags.insert(aws::EC2NODECLASS.into(), input.nodeclass.clone());
    if let Some(n) = &input.node_name {
        tags.insert("Name".into(), n.clone());
    }
    Ok(tags)
}

/// The CreateFleet request for `input`.
pub fn plan_launch(input: &LaunchInput) -> Result<FleetRequest, LaunchError> {
    let tags = launch_tags(input)?;
    let types = filter_instance_types(input)?;
    let capacity_type = choose_capacity_type(&types).ok_or(LaunchError::InsufficientCapacity {
        stage: "choosing a capacity type",
    })?;

    let mut overrides: Vec<FleetOverride> = Vec::new();
    let mut seen = BTreeSet::new();
    for it in &types {
        let mut offerings: Vec<&Offering> = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == capacity_type)
            .collect();
        offerings.sort_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| a.zone.cmp(&b.zone))
        });
        for o in offerings {
            let Some(subnet) = input.subnets.get(&o.zone) else {
                continue;
            };
            if seen.insert((it.name.clone(), o.zone.clone())) {
                overrides.push(FleetOverride {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    subnet_id: subnet.clone(),
                    priority: o.price,
                    reservation_id: o.reservation_id.clone(),
                    image_id: None,
                });
            }
        }
    }
    overrides.sort_by(|a, b| {
        a.priority
            .total_cmp(&b.priority)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.zone.cmp(&b.zone))
    });

    let predicted_ips = overrides
        .iter()
        .map(|o| o.zone.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|zone| {
            (
                zone.to_string(),
                crate::subnets::predicted_usage(&types, capacity_type, zone),
            )
        })
        .collect();

    let (target, strategy) = match capacity_type {
        CapacityType::Spot => ("spot", AllocationStrategy::PriceCapacityOptimized),
        CapacityType::OnDemand => ("on-demand", AllocationStrategy::LowestPrice),
        // Reservations hold on-demand capacity; a capacity block's launch switches this to
        // `capacity-block` where the reservation's type is known.
        CapacityType::Reserved => ("on-demand", AllocationStrategy::LowestPrice),
    };
    Ok(FleetRequest {
        capacity_type,
        default_target_capacity_type: target,
        allocation_strategy: strategy,
        total_target_capacity: 1,
        overrides,
        tags,
        predicted_ips,
    })
}

/// Upstream warns when a claim that could run on spot launches on-demand with fewer than
/// [`ON_DEMAND_FALLBACK_WARN_TYPES`] instance types: so few types make spot capacity errors,
/// and with them the on-demand fallback, likely. The number of distinct types among
/// `overrides` when the warning is due.
pub fn few_types_on_demand_fallback(
    requirements: &[Requirement],
    capacity_type: CapacityType,
    overrides: &[FleetOverride],
) -> Option<usize> {
    let spot_allowed = all_allow(
        requirements,
        labels::CAPACITY_TYPE,
        Some(CapacityType::Spot.as_str()),
    );
    if capacity_type != CapacityType::OnDemand || !spot_allowed {
        return None;
    }
    let types = overrides
        .iter()
        .map(|o| o.instance_type.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    (types < ON_DEMAND_FALLBACK_WARN_TYPES).then_some(types)
}

pub mod order;
#[cfg(test)]
mod tests;
