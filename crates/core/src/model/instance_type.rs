use std::fmt;

use crate::requirements::Requirement;
use crate::resources::Resources;

/// How an instance is paid for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CapacityType {
    /// `on-demand`: bought when launched, at the list price.
    OnDemand,
    /// `spot`: spare capacity, cheaper, that the cloud may take back.
    Spot,
    /// `reserved`: capacity held ahead in a reservation (see [`Offering::reservation_id`]).
    Reserved,
}

impl CapacityType {
    /// The value of the `karpenter.sh/capacity-type` label for this type.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityType::OnDemand => crate::labels::CAPACITY_TYPE_ON_DEMAND,
            CapacityType::Spot => crate::labels::CAPACITY_TYPE_SPOT,
            CapacityType::Reserved => crate::labels::CAPACITY_TYPE_RESERVED,
        }
    }

    /// The capacity type a label value names, if any.
    pub fn parse(s: &str) -> Option<CapacityType> {
        match s {
            "on-demand" => Some(CapacityType::OnDemand),
            "spot" => Some(CapacityType::Spot),
            "reserved" => Some(CapacityType::Reserved),
            _ => None,
        }
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Somewhere an instance type can be bought: a zone and a capacity type, at a price.
#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    /// The zone (`topology.kubernetes.io/zone`) it is sold in.
    pub zone: String,
    /// How it is paid for.
    pub capacity_type: CapacityType,
    /// US dollars per hour.
    pub price: f64,
    /// False while the cloud reports no capacity (for example after an ICE error).
    pub available: bool,
    /// Set for reserved offerings only.
    pub reservation_id: Option<String>,
    /// Instances still free in the reservation (reserved offerings only).
    pub reservation_capacity: Option<u32>,
}

/// Capacity the kubelet holds back from pods.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overhead {
    /// The kubelet's `kubeReserved`: for Kubernetes' own daemons.
    pub kube_reserved: Resources,
    /// The kubelet's `systemReserved`: for the operating system's daemons.
    pub system_reserved: Resources,
    /// The kubelet's hard eviction thresholds, held back as well.
    pub eviction_threshold: Resources,
}

impl Overhead {
    /// Everything reserved: kube, system and the eviction threshold, added up.
    pub fn total(&self) -> Resources {
        let mut t = self.kube_reserved.clone();
        t.add(&self.system_reserved);
        t.add(&self.eviction_threshold);
        t
    }
}

/// A kind of machine the cloud offers, with its capacity, overhead and offerings.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceType {
    /// The name (`m5.large`), as the `node.kubernetes.io/instance-type` label carries it.
    pub name: String,
    /// The labels a node of this type carries, as requirements (usually single-valued `In`;
    /// `DoesNotExist` for labels this type lacks). Zone and capacity type come from offerings.
    pub requirements: Vec<Requirement>,
    /// What a node of this type has, before the kubelet's reservations.
    pub capacity: Resources,
    /// What the kubelet holds back; capacity minus it is allocatable.
    pub overhead: Overhead,
    /// Where and how it can be bought, at what price.
    pub offerings: Vec<Offering>,
}

impl InstanceType {
    /// `capacity - (kube-reserved + system-reserved + eviction threshold)`, floored at zero.
    pub fn allocatable(&self) -> Resources {
        let mut a = self.capacity.clone();
        a.sub(&self.overhead.total());
        let negatives: Vec<String> = a
            .iter()
            .filter(|&(_, v)| v < 0)
            .map(|(k, _)| k.to_string())
            .collect();
        for k in negatives {
            a.set(&k, 0);
        }
        a
    }

    /// Whether a claim with `reqs` may be this type: every label the type describes is one the
    /// claim admits (a multi-valued label by any of its values). Zone and capacity type belong
    /// to offerings and are checked there. The one rule for "this claim allows this type",
    /// which the AWS provider's launch, both simulated clouds and static capacity share.
    pub fn compatible_with(&self, reqs: &[Requirement]) -> bool {
        use crate::requirements::Operator;
        // Deprecated beta keys name the same labels, as upstream's requirements normalize them.
        let all_allow = |key: &str, v: Option<&str>| {
            reqs.iter()
                .filter(|r| crate::labels::normalize_key(&r.key) == key)
                .all(|r| r.admits(v))
        };
        self.requirements.iter().all(|tr| match tr.operator {
            Operator::In => tr.values.iter().any(|v| all_allow(&tr.key, Some(v))),
            Operator::DoesNotExist => all_allow(&tr.key, None),
            _ => true,
        })
    }

    /// The cheapest available offering, ties broken by zone then capacity type.
    pub fn cheapest_available(&self) -> Option<&Offering> {
        self.offerings
            .iter()
            .filter(|o| o.available)
            .min_by(|a, b| {
                a.price
                    .total_cmp(&b.price)
                    .then_with(|| a.zone.cmp(&b.zone))
                    .then_with(|| a.capacity_type.cmp(&b.capacity_type))
            })
    }
}
