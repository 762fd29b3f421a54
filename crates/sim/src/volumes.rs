//! Persistent volumes for StatefulSet replicas: each `volumeClaimTemplates` entry gives every
//! replica its own PersistentVolumeClaim (`<template>-<pod>`), kept when the pod goes. The
//! first time a pod with an unbound claim is bound to a node, the CSI driver provisions the
//! volume in that node's zone (WaitForFirstConsumer; an Immediate class is provisioned the same
//! way here, at the first consumer), and from then on the volume's node affinity pins every
//! later placement of the pod to that zone: the kube-scheduler refuses other nodes and the
//! provisioner and disruption planner see the volume in their snapshot.

use nodewright_core::labels;
use nodewright_core::model::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use nodewright_core::requirements::{NodeSelectorTerm, Operator, Requirement};

use crate::cluster::{Cluster, label_matches};

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

/// A volume provisioned at a pod's first placement, for the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provisioned {
    pub claim: String,
    pub volume: String,
    pub zone: String,
    pub pod: String,
    pub node: String,
}

fn terms_match(terms: &[NodeSelectorTerm], node: &Node) -> bool {
    terms.is_empty()
        || terms.iter().any(|t| {
            t.match_expressions
                .iter()
                .all(|r| label_matches(r, &node.labels))
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
        cluster.pvs.insert(
            volume.clone(),
            PersistentVolume {
                name: volume.clone(),
                node_affinity: vec![NodeSelectorTerm {
                    match_expressions: vec![Requirement::new(
                        labels::ZONE,
                        Operator::In,
                        &[zone.as_str()],
                    )],
                }],
                local_or_host_path: false,
            },
        );
        cluster.provisioned.push(Provisioned {
            claim: format!("{ns}/{claim}"),
            volume,
            zone: zone.clone(),
            pod: key.to_string(),
            node: node.to_string(),
        });
    }
}

/// Creates the replica's claims that do not exist yet.
pub fn ensure_claims(
    cluster: &mut Cluster,
    namespace: &str,
    templates: &[ClaimTemplate],
    pod: &str,
) {
    for t in templates {
        let name = claim_name(t, pod);
        cluster
            .pvcs
            .entry((namespace.to_string(), name.clone()))
            .or_insert_with(|| PersistentVolumeClaim {
                namespace: namespace.to_string(),
                name,
                volume_name: None,
                storage_class: t.storage_class.clone(),
            });
    }
}

/// The zone a volume is pinned to, if its node affinity names exactly one.
pub fn volume_zone(v: &PersistentVolume) -> Option<&str> {
    v.node_affinity
        .iter()
        .flat_map(|t| t.match_expressions.iter())
        .find(|r| r.key == labels::ZONE && r.operator == Operator::In && r.values.len() == 1)
        .map(|r| r.values[0].as_str())
}
