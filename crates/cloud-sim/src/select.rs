//! Which offering a launch lands on, as pure data: the claim's requirements are checked
//! against each instance type's labels and each offering's zone and capacity type, the
//! instance type must hold the claim's requests, and among what remains the capacity type is
//! chosen as Karpenter does (reserved, then spot, then on-demand) and the cheapest offering of
//! that type wins (ties: instance type name, then zone).

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::labels;
use nodewright_core::model::{CapacityType, InstanceType, Offering};
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::Resources;

/// One offering a launch may use.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
}

/// The labels a node of `it` carries, for requirement checks: single-valued `In`
/// requirements become labels, `DoesNotExist` ones stay absent; `defined` lists every key the
/// type speaks for.
fn type_labels(it: &InstanceType) -> (BTreeMap<&str, &str>, BTreeSet<&str>) {
    let mut labels = BTreeMap::new();
    let mut defined = BTreeSet::new();
    for r in &it.requirements {
        defined.insert(r.key.as_str());
        if r.operator == Operator::In && r.values.len() == 1 {
            labels.insert(r.key.as_str(), r.values[0].as_str());
        }
    }
    labels.insert(labels::INSTANCE_TYPE, it.name.as_str());
    defined.insert(labels::INSTANCE_TYPE);
    (labels, defined)
}

/// Whether the requirements on the offering's own keys (zone, capacity type) admit it.
fn offering_ok(offering: &Offering, requirements: &[Requirement]) -> bool {
    requirements
        .iter()
        .all(|r| match labels::normalize_key(&r.key) {
            labels::ZONE => r.admits(Some(&offering.zone)),
            labels::CAPACITY_TYPE => r.admits(Some(offering.capacity_type.as_str())),
            _ => true,
        })
}

/// Whether the requirements on keys the instance type defines admit it. Other keys (the
/// NodePool label, custom labels) become node labels and do not constrain the type, as
/// upstream's compatibility check allows.
fn type_ok(it: &InstanceType, requirements: &[Requirement]) -> bool {
    let (labels, defined) = type_labels(it);
    requirements.iter().all(|r| {
        let key = labels::normalize_key(&r.key);
        // Zone and capacity type belong to offerings, whatever the type lists for them.
        let offering_key = key == labels::ZONE || key == labels::CAPACITY_TYPE;
        offering_key || !defined.contains(key) || r.admits(labels.get(key).copied())
    })
}

/// Whether `offering` of `it` satisfies the requirements.
pub fn compatible(it: &InstanceType, offering: &Offering, requirements: &[Requirement]) -> bool {
    type_ok(it, requirements) && offering_ok(offering, requirements)
}

/// Every usable offering for the claim, in launch order (see the module header). `usable`
/// filters offerings further (capacity the cloud has, offerings not recently out of capacity).
pub fn candidates(
    instance_types: &[InstanceType],
    requirements: &[Requirement],
    requests: &Resources,
    usable: impl Fn(&str, &Offering) -> bool,
) -> Vec<Choice> {
    let mut out: Vec<Choice> = Vec::new();
    for it in instance_types {
        if !requests.fits_in(&it.allocatable()) || !type_ok(it, requirements) {
            continue;
        }
        for o in &it.offerings {
            if o.available && usable(&it.name, o) && offering_ok(o, requirements) {
                out.push(Choice {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                    price: o.price,
                });
            }
        }
    }
    let rank = |c: CapacityType| match c {
        CapacityType::Reserved => 0,
        CapacityType::Spot => 1,
        CapacityType::OnDemand => 2,
    };
    let Some(best) = out.iter().map(|c| rank(c.capacity_type)).min() else {
        return out;
    };
    out.retain(|c| rank(c.capacity_type) == best);
    out.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.zone.cmp(&b.zone))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offering(zone: &str, ct: CapacityType, price: f64) -> Offering {
        Offering {
            zone: zone.into(),
            capacity_type: ct,
            price,
            available: true,
            reservation_id: None,
            reservation_capacity: None,
        }
    }

    fn it(name: &str, arch: &str, cpu_m: i64, offerings: Vec<Offering>) -> InstanceType {
        InstanceType {
            name: name.into(),
            requirements: vec![
                Requirement::single(labels::ARCH, arch),
                Requirement::single(
                    "karpenter.k8s.aws/instance-cpu",
                    &(cpu_m / 1000).to_string(),
                ),
                Requirement::new(
                    "karpenter.k8s.aws/instance-gpu-name",
                    Operator::DoesNotExist,
                    &[],
                ),
            ],
            capacity: Resources::new().with("cpu", cpu_m),
            overhead: Default::default(),
            offerings,
        }
    }

    fn catalog() -> Vec<InstanceType> {
        use CapacityType::*;
        vec![
            it(
                "m5.large",
                "amd64",
                2000,
                vec![offering("a", OnDemand, 0.096), offering("b", Spot, 0.04)],
            ),
            it(
                "m6g.large",
                "arm64",
                2000,
                vec![offering("a", OnDemand, 0.077), offering("a", Spot, 0.03)],
            ),
            it(
                "m5.xlarge",
                "amd64",
                4000,
                vec![offering("a", OnDemand, 0.192), offering("b", Spot, 0.07)],
            ),
        ]
    }

    #[test]
    fn spot_wins_when_allowed_and_the_cheapest_compatible_offering_first() {
        let reqs = vec![Requirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            &["spot", "on-demand"],
        )];
        let c = candidates(&catalog(), &reqs, &Resources::new(), |_, _| true);
        assert_eq!(c[0].instance_type, "m6g.large");
        assert!(c.iter().all(|c| c.capacity_type == CapacityType::Spot));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn requirements_and_requests_filter() {
        let reqs = vec![
            Requirement::single(labels::ARCH, "amd64"),
            Requirement::single(labels::CAPACITY_TYPE, "on-demand"),
            Requirement::new("karpenter.k8s.aws/instance-cpu", Operator::Gt, &["2"]),
            Requirement::single(labels::NODEPOOL, "default"),
        ];
        let c = candidates(&catalog(), &reqs, &Resources::new(), |_, _| true);
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].instance_type.as_str(), c[0].zone.as_str()),
            ("m5.xlarge", "a")
        );
        let big = Resources::new().with("cpu", 3000);
        let c = candidates(
            &catalog(),
            &[Requirement::single(labels::CAPACITY_TYPE, "on-demand")],
            &big,
            |_, _| true,
        );
        assert_eq!(
            c.iter()
                .map(|c| c.instance_type.as_str())
                .collect::<Vec<_>>(),
            ["m5.xlarge"]
        );
    }

    #[test]
    fn does_not_exist_and_usable_filters() {
        let gpu = vec![Requirement::new(
            "karpenter.k8s.aws/instance-gpu-name",
            Operator::Exists,
            &[],
        )];
        assert!(candidates(&catalog(), &gpu, &Resources::new(), |_, _| true).is_empty());
        let c = candidates(&catalog(), &[], &Resources::new(), |name, o| {
            !(name == "m6g.large" && o.capacity_type == CapacityType::Spot)
        });
        assert_eq!(c[0].instance_type, "m5.large");
    }

    #[test]
    fn zone_requirements_apply_per_offering() {
        let reqs = vec![Requirement::single(labels::ZONE, "b")];
        let c = candidates(&catalog(), &reqs, &Resources::new(), |_, _| true);
        assert!(c.iter().all(|c| c.zone == "b"));
        assert_eq!(c.len(), 2);
        let types = catalog();
        assert!(!compatible(&types[0], &types[0].offerings[0], &reqs));
        assert!(compatible(&types[0], &types[0].offerings[1], &reqs));
    }
}
