//! Placement groups and tenancy: what a resolved placement group adds to a class's instance
//! types (its id, and for a partition group the partitions 1..N, as requirements), which types
//! a cluster group cannot hold, and which placement (tenancy, group, partition) a claim
//! launches with.

use nodewright_core::labels::aws;
use nodewright_core::model::InstanceType;
use nodewright_core::requirements::{Operator, Requirement};

use crate::info::InstanceTypeInfo;

/// `Placement.Tenancy` values a node can be launched with, as the label spells them.
pub const TENANCY_DEFAULT: &str = "default";
pub const TENANCY_DEDICATED: &str = "dedicated";
/// Every tenancy an instance type offers (the label's values).
pub const TENANCIES: &[&str] = &[TENANCY_DEFAULT, TENANCY_DEDICATED];

/// How EC2 places a group's instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Strategy {
    /// Close together in one zone, for low latency.
    Cluster,
    /// Split into numbered partitions that share no racks.
    Partition,
    /// Every instance on distinct hardware (at most seven per zone).
    Spread,
}

impl Strategy {
    pub fn parse(s: &str) -> Option<Strategy> {
        match s {
            "cluster" => Some(Strategy::Cluster),
            "partition" => Some(Strategy::Partition),
            "spread" => Some(Strategy::Spread),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Cluster => "cluster",
            Strategy::Partition => "partition",
            Strategy::Spread => "spread",
        }
    }
}

/// A placement group as `DescribePlacementGroups` reports it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlacementGroup {
    pub id: String,
    pub name: String,
    pub strategy: Strategy,
    /// Partitions of a partition group (0 for the other strategies).
    pub partition_count: u32,
    /// `rack` or `host` for spread groups.
    pub spread_level: Option<String>,
}

impl PlacementGroup {
    /// The partition numbers a node may land in, `1..=N`, as label values.
    pub fn partitions(&self) -> Vec<String> {
        if self.strategy != Strategy::Partition {
            return Vec::new();
        }
        (1..=self.partition_count).map(|p| p.to_string()).collect()
    }

    /// The requirements every instance type of a class in this group gains: the group id,
    /// and for a partition group `placement-group-partition In 1..N` so the scheduler sees
    /// each partition as a topology domain.
    pub fn requirements(&self) -> Vec<Requirement> {
        let mut out = vec![Requirement::single(aws::PLACEMENT_GROUP_ID, &self.id)];
        let partitions = self.partitions();
        if !partitions.is_empty() {
            let values: Vec<&str> = partitions.iter().map(String::as_str).collect();
            out.push(Requirement::new(
                aws::PLACEMENT_GROUP_PARTITION,
                Operator::In,
                &values,
            ));
        }
        out
    }

    /// Whether EC2 can put the type into this group. A cluster group holds neither burstable
    /// types, nor Mac instances, nor the `-flex` families; the other strategies take any type.
    pub fn admits(&self, info: &InstanceTypeInfo) -> bool {
        if self.strategy != Strategy::Cluster {
            return true;
        }
        let family = info.family_and_size().map(|(f, _)| f).unwrap_or_default();
        !(info.burstable || family.starts_with("mac") || family.contains("-flex"))
    }
}

/// Adds `group`'s requirements to every type (replacing any earlier placement-group ones),
/// and makes every offering of a type the group cannot hold unavailable. `infos` looks a
/// type's facts up by name; a type it does not know keeps its offerings. EC2 puts no
/// Dedicated Instance into a spread group, so in one the types offer shared tenancy only.
pub fn apply_placement_group<'a>(
    types: &mut [InstanceType],
    group: &PlacementGroup,
    info: impl Fn(&str) -> Option<&'a InstanceTypeInfo>,
) {
    let added = group.requirements();
    let shared_only = group.strategy == Strategy::Spread;
    for it in types {
        it.requirements.retain(|r| {
            r.key != aws::PLACEMENT_GROUP_ID && r.key != aws::PLACEMENT_GROUP_PARTITION
        });
        it.requirements.extend(added.iter().cloned());
        if shared_only {
            for r in it
                .requirements
                .iter_mut()
                .filter(|r| r.key == aws::INSTANCE_TENANCY)
            {
                r.values = r
                    .values
                    .iter()
                    .filter(|v| *v == TENANCY_DEFAULT)
                    .cloned()
                    .collect();
            }
        }
        if info(&it.name).is_some_and(|i| !group.admits(i)) {
            for o in &mut it.offerings {
                o.available = false;
            }
        }
    }
}

/// Whether `requirements` (a claim's) admit `value` for `key`; a key they do not mention
/// admits anything.
fn admits(requirements: &[Requirement], key: &str, value: &str) -> bool {
    requirements
        .iter()
        .filter(|r| r.key == key)
        .all(|r| r.admits(Some(value)))
}

/// The tenancy a claim launches with: shared (`default`) whenever its requirements allow it,
/// `dedicated` only when they rule shared out.
pub fn launch_tenancy(requirements: &[Requirement]) -> &'static str {
    if admits(requirements, aws::INSTANCE_TENANCY, TENANCY_DEFAULT) {
        TENANCY_DEFAULT
    } else {
        TENANCY_DEDICATED
    }
}

/// The partition a claim is pinned to: set only when its requirements allow exactly one of
/// `group`'s partitions (otherwise EC2 picks, and the node learns its partition after launch).
pub fn launch_partition(requirements: &[Requirement], group: &PlacementGroup) -> Option<u32> {
    let allowed: Vec<String> = group
        .partitions()
        .into_iter()
        .filter(|p| admits(requirements, aws::PLACEMENT_GROUP_PARTITION, p))
        .collect();
    match allowed.as_slice() {
        [one] => one.parse().ok(),
        _ => None,
    }
}

/// Where one launch goes: its tenancy, and the placement group (with partition) if the
/// class has one. This is the template's `Placement` and part of its identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LaunchPlacement {
    pub tenancy: &'static str,
    pub group_id: Option<String>,
    pub partition: Option<u32>,
}

impl LaunchPlacement {
    pub fn new(requirements: &[Requirement], group: Option<&PlacementGroup>) -> Self {
        LaunchPlacement {
            tenancy: launch_tenancy(requirements),
            group_id: group.map(|g| g.id.clone()),
            partition: group.and_then(|g| launch_partition(requirements, g)),
        }
    }

    /// Whether the template needs a `Placement` block at all.
    pub fn is_default(&self) -> bool {
        self.tenancy == TENANCY_DEFAULT && self.group_id.is_none()
    }

    /// The labels a node launched this way carries: its tenancy, and the group id and pinned
    /// partition when it is in a group.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![(aws::INSTANCE_TENANCY, self.tenancy.to_string())];
        if let Some(id) = &self.group_id {
            out.push((aws::PLACEMENT_GROUP_ID, id.clone()));
        }
        if let Some(p) = self.partition {
            out.push((aws::PLACEMENT_GROUP_PARTITION, p.to_string()));
        }
        out
    }

    /// The unavailable-offerings scope of a launch in a group: `<group id>[:<partition>]`, so
    /// capacity errors inside a group do not hide the same offering outside it.
    pub fn ice_scope(&self) -> Option<String> {
        let id = self.group_id.as_ref()?;
        Some(match self.partition {
            Some(p) => format!("{id}:{p}"),
            None => id.clone(),
        })
    }
}

#[cfg(test)]
mod tests;
