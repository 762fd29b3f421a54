//! The cluster-state families: node and NodePool gauges, utilisation and pod states.

use super::*;
use crate::metrics::{Metrics, has, samples};

pub(crate) fn node(name: &str, cpu: f64, requested: f64) -> NodeGauge {
    NodeGauge {
        labels: Arc::new(vec![
            ("managed", "true".into()),
            ("node_name", name.into()),
            ("zone", "us-east-1a".into()),
        ]),
        allocatable: vec![("cpu".into(), cpu)],
        pod_requests: vec![("cpu".into(), requested)],
        ..NodeGauge::default()
    }
}

#[test]
fn gauges_hold_the_latest_value() {
    let m = Metrics::new();
    m.state.cluster_state(true, 12);
    m.state.nodepool_usage("default", "cpu", 16.0);
    m.state.nodepool_limit("default", "ephemeral-storage", 1e12);
    m.state.pod_startup(42.0);
    assert!(has(&m, "karpenter_cluster_state_synced 1.0"));
    assert!(has(&m, "karpenter_cluster_state_node_count 12.0"));
    assert!(has(
        &m,
        r#"karpenter_nodepools_usage{resource_type="cpu",nodepool="default"} 16.0"#
    ));
    assert!(has(
        &m,
        r#"karpenter_nodepools_limit{resource_type="ephemeral_storage",nodepool="default"} 1000000000000.0"#
    ));
    assert!(has(&m, "karpenter_pods_startup_duration_seconds_count 1"));
    assert!(has(&m, "karpenter_pods_startup_duration_seconds_sum 42.0"));
    m.state.cluster_state(false, 0);
    assert!(has(&m, "karpenter_cluster_state_synced 0.0"));
}

#[test]
fn set_nodes_replaces_the_previous_set_and_computes_utilisation() {
    let m = Metrics::new();
    m.state
        .set_nodes(&[Arc::new(node("a", 2.0, 1.0)), Arc::new(node("b", 2.0, 0.0))]);
    assert!(has(
        &m,
        r#"karpenter_nodes_allocatable{managed="true",node_name="a",resource_type="cpu",zone="us-east-1a"} 2.0"#
    ));
    assert!(has(
        &m,
        r#"karpenter_cluster_utilization_percent{resource_type="cpu"} 25.0"#
    ));
    m.state.set_nodes(&[Arc::new(node("b", 2.0, 2.0))]);
    let s = samples(&m);
    assert!(!s.iter().any(|l| l.contains(r#"node_name="a""#)), "{s:?}");
    assert!(has(
        &m,
        r#"karpenter_nodes_total_pod_requests{managed="true",node_name="b",resource_type="cpu",zone="us-east-1a"} 2.0"#
    ));
    assert!(has(
        &m,
        r#"karpenter_cluster_utilization_percent{resource_type="cpu"} 100.0"#
    ));
}

/// Every dimension upstream's AWS build puts on a node gauge, by name: node_name, phase,
/// managed, and one per core and AWS well-known label (the part after the `/`, in
/// snake_case), each with the node's value or empty.
#[test]
fn a_node_has_upstreams_dimensions() {
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ip-10-0-0-1", "labels": {
            "karpenter.sh/nodepool": "default",
            "karpenter.sh/capacity-type": "spot",
            "topology.kubernetes.io/zone": "us-east-1a",
            "topology.kubernetes.io/region": "us-east-1",
            "topology.k8s.aws/zone-id": "use1-az1",
            "node.kubernetes.io/instance-type": "m5.large",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "3100",
            "karpenter.k8s.aws/ec2nodeclass": "default",
            "kubernetes.io/hostname": "ip-10-0-0-1",
            "team": "web"}},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    let dims = node_dimensions(
        &node,
        node.metadata.labels.as_ref(),
        &mut Default::default(),
    );
    let keys: Vec<&str> = dims.iter().map(|(k, _)| *k).collect();
    let want = [
        "arch",
        "capacity_reservation_id",
        "capacity_reservation_interruptible",
        "capacity_reservation_type",
        "capacity_type",
        "instance_accelerator_count",
        "instance_accelerator_manufacturer",
        "instance_accelerator_name",
        "instance_capability_flex",
        "instance_category",
        "instance_cpu",
        "instance_cpu_manufacturer",
        "instance_cpu_sustained_clock_speed_mhz",
        "instance_ebs_bandwidth",
        "instance_encryption_in_transit_supported",
        "instance_family",
        "instance_generation",
        "instance_gpu_count",
        "instance_gpu_manufacturer",
        "instance_gpu_memory",
        "instance_gpu_name",
        "instance_hypervisor",
        "instance_local_nvme",
        "instance_memory",
        "instance_network_bandwidth",
        "instance_size",
        "instance_tenancy",
        "instance_type",
        "managed",
        "node_name",
        "nodepool",
        "os",
        "phase",
        "placement_group_id",
        "placement_group_partition",
        "region",
        "windows_build",
        "zone",
        "zone_id",
    ];
    assert_eq!(keys, want);
    let value = |k: &str| &*dims.iter().find(|(d, _)| *d == k).unwrap().1;
    for (k, v) in [
        ("node_name", "ip-10-0-0-1"),
        ("phase", "Running"),
        ("managed", "true"),
        ("nodepool", "default"),
        ("capacity_type", "spot"),
        ("region", "us-east-1"),
        ("zone_id", "use1-az1"),
        ("os", "linux"),
        ("instance_cpu_sustained_clock_speed_mhz", "3100"),
        ("windows_build", ""),
        ("instance_gpu_name", ""),
    ] {
        assert_eq!(value(k), v, "{k}");
    }
    // resource_type goes in its sorted place on every resource gauge.
    let m = Metrics::new();
    m.state.set_nodes(&[Arc::new(NodeGauge {
        labels: Arc::new(dims),
        allocatable: vec![("ephemeral-storage".into(), 2e10)],
        ..NodeGauge::default()
    })]);
    let line = samples(&m)
        .into_iter()
        .find(|l| l.starts_with("karpenter_nodes_allocatable{"))
        .unwrap();
    assert!(
        line.contains(r#",region="us-east-1",resource_type="ephemeral_storage",windows_build="","#),
        "{line}"
    );
}

#[test]
fn set_pods_replaces_the_previous_set() {
    let m = Metrics::new();
    let pod = |name: &str| PodGauge {
        key: format!("web/{name}").into(),
        owner: "ReplicaSet/web-1".into(),
        node: Arc::new(PodNode {
            name: "n1".into(),
            nodepool: "default".into(),
            ..PodNode::default()
        }),
        phase: "Running".into(),
        scheduled: true,
        ready: true,
    };
    m.state
        .set_pods(&[Arc::new(pod("p1")), Arc::new(pod("p2"))]);
    let rows = |m: &Metrics| -> Vec<String> {
        samples(m)
            .into_iter()
            .filter(|l| l.starts_with("karpenter_pods_state{"))
            .collect()
    };
    assert_eq!(rows(&m).len(), 2);
    m.state.set_pods(&[Arc::new(pod("p2"))]);
    assert_eq!(
        rows(&m),
        vec![
            r#"karpenter_pods_state{name="p2",namespace="web",owner="ReplicaSet/web-1",node="n1",scheduled="true",nodepool="default",zone="",arch="",capacity_type="",instance_type="",phase="Running",ready="true",managed="true"} 1.0"#
        ]
    );
}

#[test]
fn a_pods_row_is_small_and_names_the_pod_by_its_key() {
    // The key, the owner, the phase, the node's part and two flags: the rest is shared.
    assert_eq!(std::mem::size_of::<PodGauge>(), 64);
    let row = |key: &str| PodGauge {
        key: key.into(),
        ..PodGauge::default()
    };
    assert_eq!(row("web/p1").namespace_and_name(), ("web", "p1"));
    assert_eq!(row("p1").namespace_and_name(), ("", "p1"));
}
