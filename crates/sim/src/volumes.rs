//! Persistent volumes for StatefulSet replicas: each `volumeClaimTemplates` entry gives every
//! replica its own PersistentVolumeClaim (`<template>-<pod>`), kept when the pod goes.
//!
//! When the volume is made depends on the StorageClass's `volumeBindingMode`:
//! - `WaitForFirstConsumer`: the first time a pod with the unbound claim is bound to a node, the
//!   CSI driver provisions the volume in that node's zone;
//! - `Immediate`: the volume is provisioned when the claim is created, before any pod needs
//!   it, in a zone chosen without a node, as the CSI external-provisioner does: among the zones
//!   the class's `allowedTopologies` names, or else every zone the NodePools' instance types
//!   are offered in (sorted), the one at a stable hash of the claim's name, with a StatefulSet
//!   claim's ordinal added so the replicas of one set go round the zones. A claim created
//!   while no zone is known (no NodePool applied) or before its class exists waits for its
//!   first consumer instead.
//!
//! From then on the volume's node affinity pins every placement of the pod to that zone: the
//! kube-scheduler refuses other nodes, and the provisioner and disruption planner see the
//! volume in their snapshot, so (as Karpenter does with a bound volume's node affinity) new
//! capacity for the pod is only launched in that zone.

use std::collections::BTreeSet;

use nodewright_core::labels;
use nodewright_core::model::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use nodewright_core::requirements::{NodeSelectorTerm, Operator, Requirement};

use crate::cluster::Cluster;

/// One `spec.volumeClaimTemplates` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimTemplate {
    pub name: String,
    pub storage_class: Option<String>,
}

/// The claim a replica named `pod` gets from `template`.
pub fn claim_name(template: &ClaimTemplate, pod: &str) -> String {
    format!("{}-{pod}", template.name)
}

/// A provisioned volume, for the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provisioned {
    pub claim: String,
    pub volume: String,
    pub zone: String,
    /// The pod and node of the first placement that provisioned it; `None` for a claim
    /// bound at once (`Immediate`).
    pub placement: Option<(String, String)>,
}

fn terms_match(terms: &[NodeSelectorTerm], node: &Node) -> bool {
    terms.is_empty()
        || terms.iter().any(|t| {
            t.match_expressions
                .iter()
                .all(|r| r.admits_labels(&node.labels))
        })
}

/// Why the pod's volumes keep it off `node`, or `None`.
pub fn unfit(cluster: &Cluster, pod: &Pod, node: &Node) -> Option<String> {
    for claim in &pod.volume_claims {
        let Some(pvc) = cluster.pvcs.get(&(pod.namespace.clone(), claim.clone())) else {
            return Some(format!("persistentvolumeclaim {claim} not found"));
        };
        match &pvc.volume_name {
            Some(pv) => {
                let Some(v) = cluster.pvs.get(pv) else {
                    return Some(format!("persistentvolume {pv} not found"));
                };
                if !terms_match(&v.node_affinity, node) {
                    return Some(format!("volume node affinity conflict ({claim} on {pv})"));
                }
            }
            None => {
                let Some(class) = pvc.storage_class.as_ref() else {
                    continue;
                };
                let Some(sc) = cluster.storage_classes.get(class) else {
                    return Some(format!("storageclass {class} not found"));
                };
                if !terms_match(&sc.allowed_topologies, node) {
                    return Some(format!(
                        "storageclass {class} does not allow the node's topology"
                    ));
                }
            }
        }
    }
    None
}

/// Provisions a volume in `node`'s zone for every unbound claim of the pod `key`.
pub fn provision_at_first_bind(cluster: &mut Cluster, key: &str, node: &str) {
    let Some(pod) = cluster.pods().get(key) else {
        return;
    };
    let Some(zone) = cluster
        .claims()
        .get(node)
        .and_then(|c| c.node.as_ref())
        .and_then(|n| n.labels.get(labels::ZONE))
        .cloned()
    else {
        return;
    };
    let ns = pod.namespace.clone();
    let claims = pod.volume_claims.clone();
    for claim in claims {
        let Some(pvc) = cluster.pvcs.get_mut(&(ns.clone(), claim.clone())) else {
            continue;
        };
        if pvc.volume_name.is_some() || pvc.storage_class.is_none() {
            continue;
        }
        let volume = format!("pv-{ns}-{claim}");
        pvc.volume_name = Some(volume.clone());
        create_volume(cluster, &volume, &zone);
        cluster.provisioned.push(Provisioned {
            claim: format!("{ns}/{claim}"),
            volume,
            zone: zone.clone(),
            placement: Some((key.to_string(), node.to_string())),
        });
    }
}

/// A volume pinned to `zone`.
fn create_volume(cluster: &mut Cluster, volume: &str, zone: &str) {
    cluster.pvs.insert(
        volume.to_string(),
        PersistentVolume {
            name: volume.to_string(),
            node_affinity: vec![NodeSelectorTerm {
                match_expressions: vec![Requirement::new(labels::ZONE, Operator::In, &[zone])],
            }],
            local_or_host_path: false,
        },
    );
}

/// Creates the replica's claims that do not exist yet; those of an `Immediate` class are
/// bound to a new volume at once.
pub fn ensure_claims(
    cluster: &mut Cluster,
    namespace: &str,
    templates: &[ClaimTemplate],
    pod: &str,
) {
    for t in templates {
        let name = claim_name(t, pod);
        let key = (namespace.to_string(), name.clone());
        if cluster.pvcs.contains_key(&key) {
            continue;
        }
        let mut pvc = PersistentVolumeClaim {
            namespace: namespace.to_string(),
            name: name.clone(),
            volume_name: None,
            storage_class: t.storage_class.clone(),
        };
        let class = t
            .storage_class
            .as_ref()
            .and_then(|c| cluster.storage_classes.get(c));
        if let Some(zone) = class
            .filter(|c| c.volume_binding_mode == IMMEDIATE)
            .and_then(|c| immediate_zone(&c.allowed_topologies, &offered_zones(cluster), &name))
        {
            let volume = format!("pv-{namespace}-{name}");
            pvc.volume_name = Some(volume.clone());
            create_volume(cluster, &volume, &zone);
            cluster.provisioned.push(Provisioned {
                claim: format!("{namespace}/{name}"),
                volume,
                zone,
                placement: None,
            });
        }
        cluster.pvcs.insert(key, pvc);
    }
}

/// The `volumeBindingMode` that provisions at claim creation.
pub const IMMEDIATE: &str = "Immediate";

/// Every zone an instance type of some NodePool is offered in, sorted.
fn offered_zones(cluster: &Cluster) -> Vec<String> {
    let zones: BTreeSet<&str> = cluster
        .catalog
        .values()
        .flat_map(|types| types.iter())
        .flat_map(|it| it.offerings.iter().map(|o| o.zone.as_str()))
        .collect();
    zones.into_iter().map(str::to_string).collect()
}

/// The zone an `Immediate` claim named `claim` is provisioned in: among the zones
/// `allowed_topologies` names (any term's zone values), or else `offered`, the one at the
/// claim's stable hash. A claim named `<prefix>-<ordinal>` hashes its prefix and adds the
/// ordinal, so a StatefulSet's replicas take the zones in turn. `None` when no zone is known.
pub fn immediate_zone(
    allowed_topologies: &[NodeSelectorTerm],
    offered: &[String],
    claim: &str,
) -> Option<String> {
    let allowed: BTreeSet<&str> = allowed_topologies
        .iter()
        .flat_map(|t| t.match_expressions.iter())
        .filter(|r| r.key == labels::ZONE && r.operator == Operator::In)
        .flat_map(|r| r.values.iter().map(String::as_str))
        .collect();
    let zones: Vec<&str> = if allowed.is_empty() {
        offered.iter().map(String::as_str).collect()
    } else {
        allowed.into_iter().collect()
    };
    if zones.is_empty() {
        return None;
    }
    let (stem, ordinal) = match claim.rsplit_once('-') {
        Some((stem, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (stem, n.parse::<u64>().unwrap_or(0))
        }
        _ => (claim, 0),
    };
    let at = fnv1a(stem).wrapping_add(ordinal) % zones.len() as u64;
    Some(zones[at as usize].to_string())
}

/// FNV-1a, 64-bit: stable across runs and platforms, unlike the standard library's hasher.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The zone a volume is pinned to, if its node affinity names exactly one.
pub fn volume_zone(v: &PersistentVolume) -> Option<&str> {
    v.node_affinity
        .iter()
        .flat_map(|t| t.match_expressions.iter())
        .find(|r| r.key == labels::ZONE && r.operator == Operator::In && r.values.len() == 1)
        .map(|r| r.values[0].as_str())
}

#[cfg(test)]
mod tests;
