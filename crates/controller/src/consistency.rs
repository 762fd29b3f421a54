//! NodeClaim consistency (upstream's `nodeclaim.consistency`): at most every [`SCAN_EVERY`] per
//! claim, from when it is initialized or deleting, a claim and its Node are compared. An initialized claim whose Node has less
//! than 90% of the capacity the claim expected of a resource it requested (an instance type
//! smaller than its catalog entry, a kubelet reserving more than modelled) is an issue; so is
//! a deleting claim whose Node cannot be drained because a PodDisruptionBudget allows no
//! eviction. Each issue is a `FailedConsistencyCheck` event; the claim's
//! `ConsistentStateFound` condition is `False` (`ConsistencyCheckFailed`) while there are
//! issues and `True` otherwise. Nothing else is acted on: the check informs, the other loops
//! decide.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use nodewright_api::quantity;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_core::model::PodDisruptionBudget;
use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::{error, warn};

use crate::clock::Clock;
use crate::conditions::{self as cond, INITIALIZED};
use crate::context::Context;
use crate::events::{EventSink, ObjectRef};
use crate::lifecycle::events::failed_consistency_check;
use crate::state::{ClusterState, SharedState, convert, lock};
use crate::write::KubeWriter;
use crate::write::claim_status::write_status;

/// Upstream's scan period: a claim is checked again this long after its last check.
pub const SCAN_EVERY: Duration = Duration::from_secs(10 * 60);

/// How often the loop looks for claims that are due.
const LOOK_EVERY: Duration = Duration::from_secs(10);

pub const CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";

/// A Node with less than this share of an expected resource is inconsistent.
const MIN_SHARE: f64 = 0.9;

fn initialized(claim: &NodeClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|c| cond::is_true(c, INITIALIZED))
}

/// The shape check of an initialized, live claim: one issue per requested resource of which
/// the Node has under 90% of the claim's expected capacity.
pub fn node_shape(claim: &NodeClaim, node: &Node) -> Vec<String> {
    let status = claim.status.as_ref();
    if claim.metadata.deletion_timestamp.is_some() || !initialized(claim) {
        return Vec::new();
    }
    let requests = claim
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    let expected = status.and_then(|s| s.capacity.as_ref());
    let found = node.status.as_ref().and_then(|s| s.capacity.as_ref());
    let mut issues = Vec::new();
    for (name, requested) in requests.into_iter().flatten() {
        let amount = |text: &str| quantity::parse_resource(name, text).unwrap_or(0);
        let Some(want) = expected.and_then(|e| e.get(name)) else {
            continue;
        };
        let (want_text, requested_text) = (want.text(), requested.text());
        if amount(&requested_text) == 0 || amount(&want_text) == 0 {
            continue;
        }
        let have_text = found
            .and_then(|f| f.get(name))
            .map_or_else(|| "0".to_string(), |q| q.0.clone());
        let share = amount(&have_text) as f64 / amount(&want_text) as f64;
        if share < MIN_SHARE {
            issues.push(format!(
                "expected {want_text} of resource {name}, but found {have_text} ({:.1}% of expected)",
                share * 100.0
            ));
        }
    }
    issues
}

/// The termination check of a deleting claim: the PodDisruptionBudget that allows no eviction
/// of a pod on its Node, by name.
pub fn termination(s: &ClusterState, claim: &NodeClaim, node: &Node) -> Vec<String> {
    if claim.metadata.deletion_timestamp.is_none() {
        return Vec::new();
    }
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let pdbs: Vec<PodDisruptionBudget> = s
        .pdbs
        .values()
        .filter_map(|b| convert::pdb(b).ok())
        .collect();
    let blocking = s.pods_on(node_name).into_iter().find_map(|p| {
        if p.finished() {
            return None;
        }
        let labels = p.labels();
        pdbs.iter().find(|b| {
            b.namespace == p.namespace()
                && b.disruptions_allowed <= 0
                && b.selector.as_ref().is_some_and(|sel| sel.matches(&labels))
        })
    });
    blocking
        .map(|b| {
            format!(
                "can't drain node, PDB \"{}/{}\" is blocking evictions",
                b.namespace, b.name
            )
        })
        .into_iter()
        .collect()
}

pub struct Consistency {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    clock: Clock,
    events: Arc<dyn EventSink>,
    leader: Option<watch::Receiver<bool>>,
    /// When each claim (by uid) was last checked.
    scanned: Mutex<HashMap<String, Timestamp>>,
}

impl Consistency {
    pub fn new(ctx: &Context) -> Self {
        Consistency {
            state: ctx.state.clone(),
            writer: ctx.writer.clone(),
            clock: ctx.clock,
            events: ctx.events.clone(),
            leader: None,
            scanned: Mutex::new(HashMap::new()),
        }
    }

    /// Checks only while `leader` says this replica holds the lease.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = Some(leader);
        self
    }

    /// One pass over the claims due; returns each checked claim's issues, by name.
    pub async fn reconcile(&self) -> Vec<(String, Vec<String>)> {
        let now = self.clock.now();
        let due: Vec<(NodeClaim, Vec<String>)> = {
            let s = lock(&self.state);
            if !s.synced() {
                return Vec::new();
            }
            let mut scanned = self.scanned.lock().unwrap_or_else(|p| p.into_inner());
            // Forget claims that are gone: one pass over the claims, not one per record.
            let live: std::collections::HashSet<&str> = s
                .nodeclaims
                .values()
                .filter_map(|c| c.metadata.uid.as_deref())
                .collect();
            scanned.retain(|uid, _| live.contains(uid.as_str()));
            s.nodeclaims
                .values()
                .filter_map(|c| {
                    let pid = c.status.as_ref()?.provider_id.as_deref()?;
                    let uid = c.metadata.uid.clone()?;
                    // A claim is first checked once there is something to check: its Node
                    // initialized, or the claim deleting.
                    if !initialized(c) && c.metadata.deletion_timestamp.is_none() {
                        return None;
                    }
                    if scanned
                        .get(&uid)
                        .is_some_and(|at| now.since(*at) < SCAN_EVERY)
                    {
                        return None;
                    }
                    // One Node per claim; none or several is the lifecycle's to report.
                    let [node] = s.node_by_provider_id(pid)[..] else {
                        return None;
                    };
                    scanned.insert(uid, now);
                    let mut issues = termination(&s, c, node);
                    issues.extend(node_shape(c, node));
                    Some((NodeClaim::clone(c), issues))
                })
                .collect()
        };
        let mut out = Vec::new();
        for (claim, issues) in due {
            let name = claim.metadata.name.clone().unwrap_or_default();
            for issue in &issues {
                error!(nodeclaim = %name, issue = %issue, "consistency error");
                self.events
                    .publish(failed_consistency_check(ObjectRef::nodeclaim(&name), issue));
            }
            self.write_condition(&claim, issues.is_empty(), now).await;
            out.push((name, issues));
        }
        out
    }

    async fn write_condition(&self, claim: &NodeClaim, consistent: bool, now: Timestamp) {
        let mut conds = claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let changed = if consistent {
            cond::set(&mut conds, CONSISTENT_STATE_FOUND, "True", "", "", now)
        } else {
            cond::set(
                &mut conds,
                CONSISTENT_STATE_FOUND,
                "False",
                "ConsistencyCheckFailed",
                "Consistency Check Failed",
                now,
            )
        };
        if !changed {
            return;
        }
        let status = NodeClaimStatus {
            conditions: Some(conds),
            ..NodeClaimStatus::default()
        };
        if let Err(e) = write_status(&*self.writer, &self.state, claim, &status).await
            && !e.is_not_found()
        {
            let name = claim.metadata.name.as_deref().unwrap_or_default();
            warn!(nodeclaim = %name, error = %e, "writing ConsistentStateFound failed; written again at the next check");
            // Checked again on the next look rather than in ten minutes.
            if let Some(uid) = &claim.metadata.uid {
                self.scanned
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(uid);
            }
        }
    }

    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        loop {
            if self.leader.as_ref().is_none_or(|l| *l.borrow()) {
                r.now(async {
                    self.reconcile().await;
                })
                .await;
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use nodewright_testkit::json::merge;
    use nodewright_testkit::k8s;
    use serde_json::json;

    use super::*;
    use crate::state::{Object, WatchEvent};

    fn claim(initialized: &str, cpu_expected: &str) -> NodeClaim {
        let extra = json!({
            "spec": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            "status": {
                "providerID": "aws:///us-east-1a/i-1",
                "capacity": {"cpu": cpu_expected, "memory": "4Gi", "pods": "29"},
                "conditions": [{"type": "Initialized", "status": initialized,
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Initialized", "message": ""}]
            }
        });
        serde_json::from_value(merge(k8s::nodeclaim("c"), extra)).unwrap()
    }

    fn node(cpu: &str, memory: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "status": {"capacity": {"cpu": cpu, "memory": memory}}
        }))
        .unwrap()
    }

    #[test]
    fn a_node_under_nine_tenths_of_a_requested_resource_is_an_issue() {
        assert_eq!(
            node_shape(&claim("True", "2"), &node("2", "4Gi")),
            Vec::<String>::new()
        );
        // 3.6 of 4 Gi is exactly 90%: consistent.
        assert!(node_shape(&claim("True", "2"), &node("1900m", "3686.4Mi")).is_empty());
        assert_eq!(
            node_shape(&claim("True", "8"), &node("2", "4Gi")),
            vec!["expected 8 of resource cpu, but found 2 (25.0% of expected)".to_string()]
        );
        // pods was not requested; an uninitialized claim is not checked yet.
        assert!(node_shape(&claim("Unknown", "8"), &node("2", "1Gi")).is_empty());
        let issues = node_shape(&claim("True", "2"), &node("2", "1Gi"));
        assert_eq!(
            issues,
            vec!["expected 4Gi of resource memory, but found 1Gi (25.0% of expected)".to_string()]
        );
    }

    #[test]
    fn a_deleting_claim_whose_pod_a_pdb_holds_names_the_pdb() {
        let mut s = ClusterState::default();
        s.apply(WatchEvent::Apply(Object::Pod(
            serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": "shop", "labels": {"app": "web"}},
                "spec": {"nodeName": "n", "containers": []},
                "status": {"phase": "Running"}
            }))
            .unwrap(),
        )));
        s.apply(WatchEvent::Apply(Object::Pdb(
            serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1},
                "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
            }))
            .unwrap(),
        )));
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        let claim = |extra: serde_json::Value| -> NodeClaim {
            serde_json::from_value(merge(k8s::nodeclaim("c"), extra)).unwrap()
        };
        let live = claim(json!({}));
        assert!(termination(&s, &live, &node).is_empty(), "not deleting");
        let claim = claim(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}));
        assert_eq!(
            termination(&s, &claim, &node),
            vec!["can't drain node, PDB \"shop/web\" is blocking evictions".to_string()]
        );
    }
}
