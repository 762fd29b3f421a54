//! The zone a pending pod can go to, as upstream's scheduler counts pending pods in
//! `karpenter_scheduler_pending_pods_by_effective_zone_count`: the zones its own required
//! zone allows (node selector and first required node-affinity term), narrowed by the zones
//! its volumes allow. One zone is named; several are `flexible`, as is a pod nothing pins; no
//! zone at all is `none` (a misconfiguration, not a shortage). Upstream narrows by the zones
//! a zonal topology spread leaves open too; the solver decides those per placement here, so a
//! spread pod counts by its own and its volumes' zones.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::setup::volume_alternatives;
use crate::labels;
use crate::model::{Pod, Snapshot};
use crate::requirements::{Operator, Requirement};

/// A pod whose zone nothing narrows to one.
pub(crate) const FLEXIBLE: &str = "flexible";
/// A pod no zone can take.
pub(crate) const NONE: &str = "none";

/// The pod's own zone requirements: its node selector's, then its first required
/// node-affinity term's, as upstream's strict pod requirements read them.
fn own_zone(pod: &Pod) -> Vec<Requirement> {
    let mut out: Vec<Requirement> = pod
        .node_selector
        .get(labels::ZONE)
        .map(|z| Requirement {
            key: labels::ZONE.to_string(),
            operator: Operator::In,
            values: Arc::from([z.clone()]),
            min_values: None,
        })
        .into_iter()
        .collect();
    if let Some(term) = pod.required_node_affinity.first() {
        out.extend(
            term.match_expressions
                .iter()
                .filter(|r| r.key == labels::ZONE)
                .cloned(),
        );
    }
    out
}

/// The zones the pod's volumes allow, each alternative's listed ones together; `None` when
/// one alternative leaves the zone open (or the pod has no volume that pins one).
fn volume_zones(s: &Snapshot, pod: &Pod) -> Option<Vec<String>> {
    let alternatives = volume_alternatives(s, pod).ok()?;
    let mut zones = Vec::new();
    for alt in &alternatives {
        let pinned: Vec<&Requirement> = alt
            .iter()
            .filter(|r| r.key == labels::ZONE && r.operator == Operator::In)
            .collect();
        if pinned.is_empty() {
            return None;
        }
        zones.extend(pinned.iter().flat_map(|r| r.values.iter().cloned()));
    }
    zones.sort();
    zones.dedup();
    Some(zones)
}

/// The effective zone of `pod`: a zone name, [`FLEXIBLE`] or [`NONE`].
pub(crate) fn effective_zone(s: &Snapshot, pod: &Pod) -> String {
    let own = own_zone(pod);
    let volumes = volume_zones(s, pod);
    let listed: Vec<String> = match (own.iter().find(|r| r.operator == Operator::In), &volumes) {
        (Some(r), _) => r.values.to_vec(),
        (None, Some(v)) => v.clone(),
        (None, None) => return FLEXIBLE.to_string(),
    };
    let mut matched = listed.into_iter().filter(|z| {
        own.iter().all(|r| r.admits(Some(z))) && volumes.as_ref().is_none_or(|v| v.contains(z))
    });
    match (matched.next(), matched.next()) {
        (None, _) => NONE.to_string(),
        (Some(z), None) => z,
        (Some(_), Some(_)) => FLEXIBLE.to_string(),
    }
}

/// The pending (unbound) pods of `s` counted by their effective zone.
pub fn pending_by_zone(s: &Snapshot) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in s.pods.iter().filter(|p| p.node_name.is_none()) {
        *out.entry(effective_zone(s, p)).or_default() += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PersistentVolume, PersistentVolumeClaim};
    use crate::requirements::NodeSelectorTerm;
    use crate::testkit::pod;

    fn zone_in(values: &[&str]) -> Requirement {
        Requirement {
            key: labels::ZONE.into(),
            operator: Operator::In,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    #[test]
    fn selectors_affinity_and_volumes_narrow_the_zone() {
        let mut s = Snapshot::default();
        let free = pod("free", 0, 0);
        let mut pinned = pod("pinned", 0, 0);
        pinned
            .node_selector
            .insert(labels::ZONE.into(), "us-east-1a".into());
        let mut two = pod("two", 0, 0);
        two.required_node_affinity = vec![NodeSelectorTerm {
            match_expressions: vec![zone_in(&["us-east-1a", "us-east-1b"])],
        }];
        let mut clash = two.clone();
        clash.name = "clash".into();
        clash.volume_claims = vec!["data".into()];
        let mut narrowed = two.clone();
        narrowed.name = "narrowed".into();
        narrowed.volume_claims = vec!["logs".into()];
        for (claim, volume, zone) in [
            ("data", "pv-c", "us-east-1c"),
            ("logs", "pv-b", "us-east-1b"),
        ] {
            s.persistent_volume_claims.push(PersistentVolumeClaim {
                namespace: "default".into(),
                name: claim.into(),
                volume_name: Some(volume.into()),
                ..PersistentVolumeClaim::default()
            });
            s.persistent_volumes.push(PersistentVolume {
                name: volume.into(),
                node_affinity: vec![NodeSelectorTerm {
                    match_expressions: vec![zone_in(&[zone])],
                }],
                ..PersistentVolume::default()
            });
        }
        let zones: Vec<String> = [&free, &pinned, &two, &clash, &narrowed]
            .iter()
            .map(|p| effective_zone(&s, p))
            .collect();
        assert_eq!(
            zones,
            ["flexible", "us-east-1a", "flexible", "none", "us-east-1b"]
        );
        s.pods = vec![free, pinned, two, clash, narrowed]
            .into_iter()
            .map(Into::into)
            .collect();
        let counts = pending_by_zone(&s);
        assert_eq!(counts["flexible"], 2);
        assert_eq!(counts.len(), 4);
    }
}
