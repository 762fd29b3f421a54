//! Putting it together: one [`InstanceTypeInfo`] plus settings, NodeClass, zones and prices
//! becomes one [`InstanceType`].

use nodewright_core::model::{CapacityType, InstanceType, Offering};

use crate::error::BuildError;
use crate::info::InstanceTypeInfo;
use crate::nodeclass::{AmiFamily, NodeClassInput};
use crate::pricing::PriceBook;
use crate::requirements::requirements;
use crate::resources::{capacity, overhead};
use crate::settings::Settings;

/// An availability zone an instance type is offered in, with its zone ID when known
/// (`use1-az1`; account-specific, from the subnets).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Zone {
    pub name: String,
    pub id: Option<String>,
}

impl Zone {
    pub fn new(name: &str) -> Self {
        Zone {
            name: name.to_string(),
            id: None,
        }
    }
}

/// On-demand and spot, as far as `SupportedUsageClasses` allows (reserved capacity comes from
/// capacity reservations, which are not part of the type's facts).
pub fn capacity_types(info: &InstanceTypeInfo) -> Vec<CapacityType> {
    [CapacityType::OnDemand, CapacityType::Spot]
        .into_iter()
        .filter(|ct| info.usage_classes.iter().any(|u| u == ct.as_str()))
        .collect()
}

fn sorted_zones(zones: &[Zone]) -> Vec<Zone> {
    let mut z = zones.to_vec();
    z.sort();
    z.dedup_by(|a, b| a.name == b.name);
    z
}

/// Whether the NodeClass can launch this type at all. Karpenter keeps an incompatible type in
/// the list with every offering unavailable. The checks: AL2023 has no image for the
/// first-generation Graviton `a1` family; nested virtualization needs a type that reports it;
/// connection tracking is a Nitro feature; and every `networkInterfaces` entry must exist on
/// the type (ENA, card and device index, EFA for `efa-only`). Facts the source does not
/// record filter nothing.
pub fn nodeclass_compatible(info: &InstanceTypeInfo, nodeclass: &NodeClassInput) -> bool {
    let family = info.family_and_size().map(|(f, _)| f);
    if nodeclass.ami_family == AmiFamily::AL2023 && family == Some("a1") {
        return false;
    }
    if nodeclass.nested_virtualization && info.nested_virtualization == Some(false) {
        return false;
    }
    if nodeclass.connection_tracking && info.hypervisor != "nitro" {
        return false;
    }
    network_interfaces_fit(info, nodeclass)
}

fn network_interfaces_fit(info: &InstanceTypeInfo, nodeclass: &NodeClassInput) -> bool {
    if nodeclass.network_interfaces.is_empty() {
        return true;
    }
    if info.ena_supported == Some(false) {
        return false;
    }
    nodeclass.network_interfaces.iter().all(|n| {
        let slot_exists = info.network_cards.is_empty()
            || info
                .network_cards
                .get(n.network_card_index as usize)
                .is_some_and(|&max| n.device_index < max);
        slot_exists && (!n.efa_only || info.efa_max_interfaces > 0)
    })
}

/// One offering per zone and capacity type that has a price, available when the NodeClass
/// can launch the type. Without a price there is no offering: a type missing from the
/// on-demand table is not sold on demand.
pub fn build_offerings(
    info: &InstanceTypeInfo,
    nodeclass: &NodeClassInput,
    region: &str,
    zones: &[Zone],
    prices: PriceBook<'_>,
) -> Vec<Offering> {
    let available = nodeclass_compatible(info, nodeclass);
    let mut out = Vec::new();
    for zone in sorted_zones(zones) {
        for ct in capacity_types(info) {
            let price = match ct {
                CapacityType::OnDemand => prices.on_demand(region, &info.name),
                CapacityType::Spot => prices.spot(region, &info.name, &zone.name),
                CapacityType::Reserved => None,
            };
            if let Some(price) = price {
                out.push(Offering {
                    zone: zone.name.clone(),
                    capacity_type: ct,
                    price,
                    available,
                    reservation_id: None,
                    reservation_capacity: None,
                });
            }
        }
    }
    out
}

/// The instance type as Karpenter's AWS provider describes it: labels, capacity, overhead and
/// offerings. `zones` are the zones the type is offered in, already narrowed to the
/// NodeClass's subnet zones.
pub fn build_instance_type(
    info: &InstanceTypeInfo,
    settings: &Settings,
    nodeclass: &NodeClassInput,
    region: &str,
    zones: &[Zone],
    prices: PriceBook<'_>,
) -> Result<InstanceType, BuildError> {
    let arch = info
        .kube_arch()
        .ok_or_else(|| BuildError::UnsupportedArchitecture {
            instance_type: info.name.clone(),
            architectures: info.architectures.clone(),
        })?;
    let zones = sorted_zones(zones);
    let capacity = capacity(info, settings, nodeclass);
    let overhead = overhead(info, nodeclass, &capacity);
    Ok(InstanceType {
        name: info.name.clone(),
        requirements: requirements(
            info,
            arch,
            region,
            &zones,
            &capacity_types(info),
            nodeclass.ami_family,
        ),
        capacity,
        overhead,
        offerings: build_offerings(info, nodeclass, region, &zones, prices),
    })
}
