//! The cluster-state metrics loop's clocks: `karpenter_cluster_state_unsynced_time_seconds`
//! (how long the state has been unsynced, 0 while synced, as upstream's),
//! `karpenter_nodes_current_lifetime_seconds` (each node's age, by the node labels of the
//! other `karpenter_nodes_*` gauges), and `karpenter_pods_unbound_time_seconds` and
//! `karpenter_pods_unstarted_time_seconds` (how long each pod seen pending has waited to be
//! bound, and to be Ready, by name and namespace), and their `karpenter_pods_provisioning_*`
//! twins counted from when the provisioner first found the pod room instead of from its
//! creation, with `karpenter_pods_provisioning_scheduling_undecided_time_seconds` (from when
//! the provisioner first saw the pod until its first decision on it). The per-object families
//! are replaced as a whole with the other node and pod gauges, so an object that went, or
//! stopped waiting, leaves no series. Each object's label set is built once and shared by its
//! families (and, for a node, with its resource gauges' row) rather than copied into each.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use nodewright_core::time::Timestamp;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::ClusterState;
use crate::clock::from_time;
use crate::metrics::{Metrics, Shared, SharedGauges, registered};

pub(crate) struct AgeMetrics {
    unsynced: Gauge<f64, AtomicU64>,
    lifetime: SharedGauges<super::metrics::NodeDims>,
    unbound: PodGauges,
    unstarted: PodGauges,
    provisioning_unbound: PodGauges,
    provisioning_unstarted: PodGauges,
    undecided: PodGauges,
}

/// A waiting pod's series: its name and namespace, built once a refresh and shared by its up
/// to five families. A label list each per family was 13.8 MiB at the peak of the 20,000-pod
/// bench, shared 6.3.
type PodGauges = SharedGauges<[(&'static str, String); 2]>;

impl AgeMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        let unsynced = registered(
            r,
            "karpenter_cluster_state_unsynced_time_seconds",
            "Seconds the in-memory cluster state has disagreed with the API server's NodeClaims and Nodes; 0 when they agree.",
        );
        let lifetime = registered(
            r,
            "karpenter_nodes_current_lifetime_seconds",
            "Seconds since each node was created.",
        );
        let mut gauges = |name: &str, help: &str| -> PodGauges { registered(r, name, help) };
        AgeMetrics {
            unsynced,
            lifetime,
            unbound: gauges(
                "karpenter_pods_unbound_time_seconds",
                "Seconds from a pod's creation to its binding to a node.",
            ),
            unstarted: gauges(
                "karpenter_pods_unstarted_time_seconds",
                "Seconds from a pod's creation until it is running.",
            ),
            provisioning_unbound: gauges(
                "karpenter_pods_provisioning_unbound_time_seconds",
                "Seconds from this controller first deciding a pod can be placed to the pod's binding; measured from that in-memory moment, not the pod's creation.",
            ),
            provisioning_unstarted: gauges(
                "karpenter_pods_provisioning_unstarted_time_seconds",
                "Seconds from this controller first deciding a pod can be placed until the pod runs; measured from that in-memory moment, not the pod's creation.",
            ),
            undecided: gauges(
                "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
                "Seconds a pod this controller has seen has waited for its first scheduling decision; measured from when it was first seen, not the pod's creation.",
            ),
        }
    }
}

/// When the state last stopped being synced.
#[derive(Debug, Default)]
pub struct Ages {
    unsynced_since: Option<Instant>,
}

impl Ages {
    pub fn tick(&mut self, synced: bool, metrics: &Metrics, now: Instant) {
        let seconds = if synced {
            self.unsynced_since = None;
            0.0
        } else {
            let since = *self.unsynced_since.get_or_insert(now);
            now.duration_since(since).as_secs_f64()
        };
        metrics.ages.unsynced.set(seconds);
    }
}

/// Replaces every node's current-lifetime series with its age at `now`.
pub fn set_lifetimes(s: &ClusterState, metrics: &Metrics, now: Timestamp) {
    let family = &metrics.ages.lifetime;
    family.clear();
    let rows = metrics.state.gauge_rows().lock();
    let mut rows = rows.unwrap_or_else(|e| e.into_inner());
    for (name, n) in &s.nodes {
        let Some(created) = n.metadata.creation_timestamp.as_ref().map(from_time) else {
            continue;
        };
        // Built from the rows' values, so the comparison below mostly compares pointers.
        let dims = super::metrics::node_dimensions(n, s.node_labels(name), rows.texts());
        // Its labels shared with its resource gauges' row, so that 2,000 Nodes do not hold
        // their forty labels twice; that row is as fresh as the index when the state loop
        // has just set it, as it has.
        let dims = match rows.dims(name) {
            Some(shared) if *shared == dims => shared,
            _ => Arc::new(dims),
        };
        family
            .get_or_create(&Shared(dims))
            .set(now.since(created).as_secs_f64());
    }
}

/// Replaces the pods' waiting times with those of `waiting` (pod key, whether bound) at `now`.
pub fn set_pod_waits<'a>(
    s: &ClusterState,
    metrics: &Metrics,
    now: Timestamp,
    waiting: impl Iterator<Item = (&'a str, bool)>,
) {
    let m = &metrics.ages;
    for family in [
        &m.unbound,
        &m.unstarted,
        &m.provisioning_unbound,
        &m.provisioning_unstarted,
        &m.undecided,
    ] {
        family.clear();
    }
    for (key, bound) in waiting {
        let Some(p) = s.pods.get(key) else {
            continue;
        };
        let row = Shared(Arc::new([
            ("name", p.name().to_owned()),
            ("namespace", p.namespace().to_owned()),
        ]));
        if let Some(created) = p.created {
            let seconds = now.since(created).as_secs_f64();
            if !bound {
                m.unbound.get_or_create(&row).set(seconds);
            }
            m.unstarted.get_or_create(&row).set(seconds);
        }
        let scheduling = s.pod_scheduling(key);
        if let Some(room) = scheduling.schedulable {
            let seconds = now.since(room).as_secs_f64();
            if !bound {
                m.provisioning_unbound.get_or_create(&row).set(seconds);
            }
            m.provisioning_unstarted.get_or_create(&row).set(seconds);
        }
        if let (Some(seen), None) = (scheduling.acked, scheduling.decided) {
            m.undecided
                .get_or_create(&row)
                .set(now.since(seen).as_secs_f64());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::state::{Kind, Object, WatchEvent};

    fn samples(m: &Metrics, family: &str) -> Vec<String> {
        m.encode()
            .lines()
            .filter(|l| l.starts_with(family))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn unsynced_time_counts_from_when_sync_was_lost_and_resets() {
        let m = Metrics::new();
        let mut ages = Ages::default();
        let t0 = Instant::now();
        ages.tick(false, &m, t0);
        ages.tick(false, &m, t0 + Duration::from_secs(3));
        let family = "karpenter_cluster_state_unsynced_time_seconds ";
        assert_eq!(samples(&m, family), [format!("{family}3.0")]);
        ages.tick(true, &m, t0 + Duration::from_secs(4));
        assert_eq!(samples(&m, family), [format!("{family}0.0")]);
    }

    #[test]
    fn each_node_has_its_age_until_it_goes() {
        let mut s = ClusterState::default();
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "creationTimestamp": "2024-06-01T00:00:00Z",
                "labels": {"karpenter.sh/nodepool": "default", "topology.kubernetes.io/zone": "z1"}}});
        let node = Object::from_value(Kind::Node, node).unwrap();
        s.apply(WatchEvent::Apply(node.clone()));
        let m = Metrics::new();
        let now = crate::clock::parse_rfc3339("2024-06-01T00:01:30Z").unwrap();
        set_lifetimes(&s, &m, now);
        let rows = samples(&m, "karpenter_nodes_current_lifetime_seconds{");
        assert_eq!(rows.len(), 1, "{rows:?}");
        // The node's dimensions, as on the resource gauges: its name and labels, the rest
        // empty.
        for pair in [
            r#"{arch="","#,
            r#",managed="true","#,
            r#",node_name="n1","#,
            r#",nodepool="default","#,
            r#",phase="","#,
            r#",zone="z1","#,
        ] {
            assert!(rows[0].contains(pair), "{pair} not in {}", rows[0]);
        }
        assert!(rows[0].ends_with("} 90.0"), "{}", rows[0]);
        s.apply(WatchEvent::Delete(node));
        set_lifetimes(&s, &m, now);
        assert!(samples(&m, "karpenter_nodes_current_lifetime_seconds{").is_empty());
    }

    #[test]
    fn a_pod_waits_unbound_until_bound_and_unstarted_until_ready() {
        let mut s = ClusterState::default();
        let pod = |node: Option<&str>, ready: bool| {
            let mut p = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "default",
                    "creationTimestamp": "2024-06-01T00:00:00Z"},
                "spec": {"containers": [{"name": "c"}]},
                "status": {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
            if let Some(n) = node {
                p["spec"]["nodeName"] = json!(n);
                p["status"]["conditions"] = json!([
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-06-01T00:00:05Z"},
                    {"type": "Ready", "status": if ready { "True" } else { "False" },
                        "lastTransitionTime": "2024-06-01T00:00:40Z"}]);
            }
            Object::from_value(Kind::Pod, p).unwrap()
        };
        let m = Metrics::new();
        let mut startup = crate::state::gauges::PodStartup::default();
        let now = crate::clock::parse_rfc3339("2024-06-01T00:01:00Z").unwrap();
        let look = |s: &ClusterState, startup: &mut crate::state::gauges::PodStartup| {
            startup.observe(s, &m);
            set_pod_waits(s, &m, now, startup.waiting());
            (
                samples(&m, "karpenter_pods_unbound_time_seconds{"),
                samples(&m, "karpenter_pods_unstarted_time_seconds{"),
            )
        };
        s.apply(WatchEvent::Apply(pod(None, false)));
        let row = r#"{name="web-1",namespace="default"} 60.0"#;
        assert_eq!(
            look(&s, &mut startup),
            (
                vec![format!("karpenter_pods_unbound_time_seconds{row}")],
                vec![format!("karpenter_pods_unstarted_time_seconds{row}")]
            )
        );
        s.apply(WatchEvent::Apply(pod(Some("n1"), false)));
        let (unbound, unstarted) = look(&s, &mut startup);
        assert!(unbound.is_empty(), "{unbound:?}");
        assert_eq!(unstarted.len(), 1);
        s.apply(WatchEvent::Apply(pod(Some("n1"), true)));
        assert_eq!(look(&s, &mut startup), (vec![], vec![]));
    }
}
