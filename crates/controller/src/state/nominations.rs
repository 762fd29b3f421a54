//! What the provisioner made of each pending pod, kept in the index beside the pods: when it
//! first saw the pod and decided on it (for the pod metrics), and the claim it nominated the
//! pod to, which holds the pod until the claim's node has had its chance.

use std::sync::Arc;

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_core::time::Timestamp;

use super::{ClusterState, PodKey};

/// When the provisioner first saw a pod pending, first decided on it, and first found it room,
/// as upstream's cluster state keeps them (pod acks and scheduling decisions) for the pod
/// metrics: `karpenter_pods_provisioning_*` count from the last, and
/// `_scheduling_undecided_time_seconds` from the first until the second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PodScheduling {
    pub acked: Option<Timestamp>,
    pub decided: Option<Timestamp>,
    pub schedulable: Option<Timestamp>,
}

/// How long a nomination outlives its claim's initialization: upstream's
/// max(2 × BATCH_MAX_DURATION, 10 s) with the default batch window.
pub const NOMINATION_WINDOW: std::time::Duration = std::time::Duration::from_secs(20);

/// A pending pod placed on a claim by the provisioner.
#[derive(Clone, Debug, PartialEq)]
pub struct Nomination {
    pub nodeclaim: String,
    pub at: Timestamp,
}

impl ClusterState {
    /// Records that the provisioner first saw the pending pod `pod` at `now` (kept if it saw
    /// it earlier).
    pub fn ack_pod(&mut self, pod: &str, now: Timestamp) {
        if let Some(key) = self.pod_key(pod) {
            let s = self.pod_scheduling.entry(key).or_default();
            s.acked.get_or_insert(now);
        }
    }

    /// Records a provisioning pass's decision on `pod` at `now`: whether the solve found it
    /// room. The first decision and the first room found are kept; a pod found no room loses
    /// the room it had, as upstream forgets a pod's schedulable time when it errors.
    pub fn mark_scheduling_decision(&mut self, pod: &str, placed: bool, now: Timestamp) {
        let Some(key) = self.pod_key(pod) else {
            return;
        };
        let s = self.pod_scheduling.entry(key).or_default();
        s.decided.get_or_insert(now);
        if placed {
            s.schedulable.get_or_insert(now);
        } else {
            s.schedulable = None;
        }
    }

    /// What the provisioner made of `pod` so far.
    pub fn pod_scheduling(&self, pod: &str) -> PodScheduling {
        self.pod_scheduling.get(pod).copied().unwrap_or_default()
    }

    /// Records that the provisioner placed the pending pod `pod` on the claim `nodeclaim` at
    /// `now`, so later batches leave it there instead of launching for it again. A pod the
    /// index no longer holds (deleted while the pass that placed it ran) is not recorded:
    /// nothing would remove its nomination.
    pub fn nominate(&mut self, pod: &str, nodeclaim: &str, now: Timestamp) {
        let Some(key) = self.pod_key(pod) else {
            return;
        };
        self.changed();
        self.nominations.insert(
            key,
            Nomination {
                nodeclaim: nodeclaim.to_string(),
                at: now,
            },
        );
    }

    /// The index's copy of the key of the pod `pod`, for a map beside the pods to hold.
    fn pod_key(&self, pod: &str) -> Option<PodKey> {
        self.pods.get_key_value(pod).map(|(k, _)| Arc::clone(k))
    }

    /// The claim `pod` is nominated to at `now`, while the nomination holds: the claim exists
    /// and is not being deleted, and it is either still in flight (not initialized) or the
    /// nomination (or the claim's initialization) is younger than [`NOMINATION_WINDOW`]. After
    /// that the pod, if still pending, is the provisioner's again: kube-scheduler had its
    /// chance on the new node.
    pub fn nominated_claim(&self, pod: &str, now: Timestamp) -> Option<&NodeClaim> {
        let n = self.nominations.get(pod)?;
        let claim = self.claim_named(&n.nodeclaim)?;
        if claim.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let conds = (claim.status.as_ref()).and_then(|s| s.conditions.as_deref());
        let Some(init) =
            crate::conditions::find(conds.unwrap_or_default(), crate::conditions::INITIALIZED)
                .filter(|c| c.status == "True")
        else {
            return Some(claim);
        };
        let initialized_at = init
            .last_transition_time
            .as_deref()
            .and_then(crate::clock::parse_rfc3339)
            .unwrap_or(n.at);
        let since = if initialized_at > n.at {
            initialized_at
        } else {
            n.at
        };
        (now.since(since) < NOMINATION_WINDOW).then_some(claim)
    }
}
