//! The operator settings the provisioner takes: `MIN_VALUES_POLICY`, `PREFERENCE_POLICY` and
//! `CPU_REQUESTS`, each shown to change what a pass does.

use std::sync::Arc;
use std::time::Duration;

use nodewright_api::v1::nodeclaim::NodeClaim;
use serde_json::json;

use super::{Harness, pending_pod_json};
use crate::context::Context;
use crate::provisioner::Provisioner;
use crate::settings::Settings;
use crate::state::Kind;
use crate::write::KubeWriter;
use crate::write::counting::CountingWriter;

fn provisioner(h: &Harness, settings: &Settings) -> Provisioner {
    h.provisioner()
        .with_options(settings.scheduling_options())
        .with_cpus(settings.cpus())
}

fn settings(apply: impl FnOnce(&mut Settings)) -> Settings {
    let mut s = Settings::with_cluster_name("test");
    apply(&mut s);
    s
}

/// A NodePool asking for more instance types than the catalog's three.
fn pool_wanting_five_types(h: &Harness) {
    h.nodepool("default", None);
    h.edit_nodepool("default", |v| {
        v["spec"]["template"]["spec"]["requirements"]
            .as_array_mut()
            .unwrap()
            .push(json!({"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 5}));
    });
}

#[tokio::test(start_paused = true)]
async fn min_values_best_effort_launches_where_strict_waits() {
    for (policy, launched) in [("Strict", 0), ("BestEffort", 1)] {
        let h = Harness::new();
        pool_wanting_five_types(&h);
        h.pending_pod("web-1", "1500m");
        h.api.mark_synced();
        let s = settings(|s| s.min_values_policy = policy.into());
        let p = provisioner(&h, &s).provision().await.unwrap();
        assert_eq!(p.created.len(), launched, "{policy}: {p:?}");
        if launched == 0 {
            assert!(!p.unplaced.is_empty(), "{policy}: {p:?}");
        }
    }
}

/// The zones a claim may launch in.
fn zones(c: &NodeClaim) -> Vec<String> {
    c.spec
        .requirements
        .iter()
        .find(|r| r.key == "topology.kubernetes.io/zone")
        .map(|r| r.values().to_vec())
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn preference_policy_ignore_drops_a_preferred_zone() {
    for (policy, want_only_b) in [("Respect", true), ("Ignore", false)] {
        let h = Harness::new();
        h.nodepool("default", None);
        let mut pod = pending_pod_json("web-1", "1500m");
        pod["spec"]["affinity"] = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}]}}]}});
        h.api.put_value(Kind::Pod, pod);
        h.api.mark_synced();
        let s = settings(|s| s.preference_policy = policy.into());
        let p = provisioner(&h, &s).provision().await.unwrap();
        assert_eq!(p.created.len(), 1, "{policy}: {p:?}");
        let zones = zones(&h.claims()[0]);
        assert_eq!(zones == ["us-east-1b"], want_only_b, "{policy}: {zones:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn cpu_requests_scale_the_creates_in_flight() {
    let mut took = Vec::new();
    for cpu_requests in [1000, 2000] {
        let h = Harness::new();
        h.nodepool("default", None);
        // Each pod fills an m5.2xlarge: 64 claims.
        for i in 0..64 {
            h.pending_pod(&format!("big-{i}"), "5");
        }
        h.api.mark_synced();
        let slow: Arc<dyn KubeWriter> =
            Arc::new(CountingWriter::new(h.api.clone()).with_latency(Duration::from_secs(1)));
        let s = settings(|s| s.cpu_requests = cpu_requests);
        let prov = Provisioner::new(&Context {
            writer: slow,
            ..h.context()
        })
        .with_cpus(s.cpus());
        let start = tokio::time::Instant::now();
        let p = prov.provision().await.unwrap();
        assert_eq!(p.created.len(), 64, "{p:?}");
        took.push(start.elapsed());
    }
    // 64 one-second creates, 16 at a time per CPU: 4 s with one CPU, 2 s with two.
    assert_eq!(
        took.iter().map(|d| d.as_secs()).collect::<Vec<_>>(),
        [4, 2],
        "{took:?}"
    );
}
