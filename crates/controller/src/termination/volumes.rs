//! The volume-detach wait, as upstream's node termination does it: once a node is drained,
//! its instance is not terminated while a VolumeAttachment still ties one of its persistent
//! volumes to it, so a volume is detached cleanly before its next pod mounts it elsewhere.
//! Attachments of volumes that pods the drain leaves on the node still use (they tolerate the
//! disrupted taint, are mirror pods, or are stuck terminating) are not waited for: those pods
//! stay until the instance goes, and so do their volumes. Attachments that name no persistent
//! volume are not waited for either. The node's termination deadline ends the wait.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use nodewright_core::time::Timestamp;

use super::waits_for;
use crate::state::PodRecord;

/// Names of the attachments on `node` the termination waits for, sorted. `pods` are the
/// pods bound to the node; `pvcs` are keyed `namespace/name`.
pub fn blocking<'a>(
    node: &str,
    attachments: impl IntoIterator<Item = &'a VolumeAttachment>,
    pods: &[&PodRecord],
    pvcs: &BTreeMap<String, PersistentVolumeClaim>,
    now: Timestamp,
) -> Vec<String> {
    let staying: BTreeSet<&str> = pods
        .iter()
        .filter(|p| !waits_for(p, now))
        .flat_map(|p| volumes_of(p, pvcs))
        .collect();
    let mut names: Vec<String> = attachments
        .into_iter()
        .filter(|a| a.spec.node_name == node)
        .filter(|a| {
            a.spec
                .source
                .persistent_volume_name
                .as_deref()
                .is_some_and(|pv| !staying.contains(pv))
        })
        .filter_map(|a| a.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// The persistent volumes `pod` mounts through its claims.
fn volumes_of<'a>(
    pod: &PodRecord,
    pvcs: &'a BTreeMap<String, PersistentVolumeClaim>,
) -> impl Iterator<Item = &'a str> {
    let ns = pod.namespace();
    let claims: Vec<String> = pod
        .shape
        .claims
        .iter()
        .map(|c| format!("{ns}/{c}"))
        .collect();
    claims
        .into_iter()
        .filter_map(move |k| pvcs.get(&k)?.spec.as_ref()?.volume_name.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attachment(name: &str, node: &str, pv: Option<&str>) -> VolumeAttachment {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node,
                "source": {"persistentVolumeName": pv}}
        }))
        .unwrap()
    }

    fn pod(name: &str, claim: &str, tolerates: bool) -> PodRecord {
        let tolerations = if tolerates {
            json!([{"key": "karpenter.sh/disrupted", "operator": "Exists"}])
        } else {
            json!([])
        };
        PodRecord::from_api(
            &serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [], "tolerations": tolerations,
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
                "status": {"phase": "Running"}
            }))
            .unwrap(),
        )
    }

    fn pvcs() -> BTreeMap<String, PersistentVolumeClaim> {
        ["a", "b"]
            .iter()
            .map(|c| {
                let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
                    "metadata": {"name": c, "namespace": "default"},
                    "spec": {"volumeName": format!("pv-{c}")}
                }))
                .unwrap();
                (format!("default/{c}"), pvc)
            })
            .collect()
    }

    #[test]
    fn waits_for_the_nodes_attachments_of_volumes_no_staying_pod_uses() {
        let atts = [
            attachment("va-a", "n1", Some("pv-a")),
            attachment("va-b", "n1", Some("pv-b")),
            attachment("va-other-node", "n2", Some("pv-x")),
            attachment("va-inline", "n1", None),
        ];
        let now = Timestamp(0);
        // Nothing left on the node: both of its persistent-volume attachments hold it.
        assert_eq!(
            blocking("n1", &atts, &[], &pvcs(), now),
            vec!["va-a", "va-b"]
        );
        // A pod that tolerates the disrupted taint stays with its volume: not waited for.
        let stays = pod("agent", "b", true);
        assert_eq!(blocking("n1", &atts, &[&stays], &pvcs(), now), vec!["va-a"]);
        // A pod the drain still waits for does not excuse its volume.
        let leaving = pod("web", "a", false);
        assert_eq!(
            blocking("n1", &atts, &[&leaving, &stays], &pvcs(), now),
            vec!["va-a"]
        );
    }
}
