//! NodePools that can launch nothing: upstream checks each pool's instance types against its
//! template's requirements before a scheduling pass, leaves a pool with none out, and says so
//! with `NoCompatibleInstanceTypes` on the NodePool. The solve leaves such a pool out by
//! itself; this finds them so the event can be written.

use nodewright_core::labels;
use nodewright_core::model::{InstanceType, NodePool, Snapshot};

/// Whether `it` could be launched for `pool`: its labels admitted by the template's
/// requirements, and one of its offerings available in a zone and capacity type they admit.
fn launchable(it: &InstanceType, pool: &NodePool) -> bool {
    let reqs = &pool.template.requirements;
    let admits = |key: &str, v: &str| {
        reqs.iter()
            .filter(|r| labels::normalize_key(&r.key) == key)
            .all(|r| r.admits(Some(v)))
    };
    it.compatible_with(reqs)
        && it.offerings.iter().any(|o| {
            o.available
                && admits(labels::ZONE, &o.zone)
                && admits(labels::CAPACITY_TYPE, o.capacity_type.as_str())
        })
}

/// The names of the snapshot's dynamic NodePools none of whose instance types could be
/// launched (static pools keep their replicas whatever the pending pods).
pub fn pools_without_instance_types(snap: &Snapshot) -> Vec<String> {
    snap.nodepools
        .iter()
        .filter(|p| p.replicas.is_none())
        .filter(|p| {
            let types = snap.instance_types.get(&p.name);
            !types.is_some_and(|ts| ts.iter().any(|it| launchable(it, p)))
        })
        .map(|p| p.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use nodewright_core::model::{CapacityType, Offering};
    use nodewright_core::requirements::{Operator, Requirement};
    use nodewright_core::testkit::{instance_type, offering};

    use super::*;

    fn it(name: &str, zone: &str, available: bool) -> InstanceType {
        let offering = Offering {
            available,
            ..offering(zone, CapacityType::OnDemand, 0.1)
        };
        InstanceType {
            requirements: vec![Requirement::single(labels::INSTANCE_TYPE, name)],
            ..instance_type(name, Default::default(), vec![offering])
        }
    }

    fn pool(name: &str, reqs: Vec<Requirement>) -> NodePool {
        let mut p = NodePool {
            name: name.into(),
            ..NodePool::default()
        };
        p.template.requirements = reqs;
        p
    }

    fn snapshot(pools: Vec<NodePool>, types: Vec<InstanceType>) -> Snapshot {
        let types = Arc::new(types);
        Snapshot {
            instance_types: pools
                .iter()
                .map(|p| (p.name.clone(), types.clone()))
                .collect::<BTreeMap<_, _>>(),
            nodepools: pools,
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_pool_whose_requirements_admit_no_type_or_offering_is_named() {
        let types = vec![
            it("c5.large", "us-east-1a", true),
            it("m5.large", "us-east-1b", false),
        ];
        let only = |key: &str, v: &str| vec![Requirement::new(key, Operator::In, &[v])];
        let snap = snapshot(
            vec![
                pool("any", vec![]),
                pool("m5", only(labels::INSTANCE_TYPE, "m5.large")),
                pool("gpu", only(labels::INSTANCE_TYPE, "p5.48xlarge")),
                pool("zone-a", only(labels::ZONE, "us-east-1a")),
                pool("spot", only(labels::CAPACITY_TYPE, "spot")),
            ],
            types,
        );
        // m5.large's one offering is unavailable; nothing offers spot.
        assert_eq!(pools_without_instance_types(&snap), ["m5", "gpu", "spot"]);
    }

    #[test]
    fn static_pools_and_pools_with_types_are_not_named() {
        let mut fixed = pool("fixed", vec![]);
        fixed.replicas = Some(2);
        let snap = snapshot(vec![fixed], vec![]);
        assert!(pools_without_instance_types(&snap).is_empty());
    }
}
