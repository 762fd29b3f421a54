//! The Node registered for a simulated instance and the register, heartbeat and delete plan.

use super::*;
use nodewright_cloud::Instance;
use nodewright_core::model::CapacityType;
use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;

fn instance(
    provider_id: &str,
    claim: &str,
    state: InstanceState,
    launched: Instant,
) -> SimInstance {
    SimInstance::for_tests(
        Instance {
            provider_id: provider_id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            image_id: None,
            state,
            launched_at: None,
            tags: BTreeMap::from([("karpenter.sh/nodeclaim".to_string(), claim.to_string())]),
        },
        Resources::new()
            .with("cpu", 2000)
            .with("memory", 8 << 30)
            .with("pods", 29),
        Resources::new()
            .with("cpu", 1930)
            .with("memory", 7 << 30)
            .with("pods", 29),
        BTreeMap::from([
            (labels::INSTANCE_TYPE.to_string(), "m5.large".to_string()),
            (labels::ZONE.to_string(), "us-east-1a".to_string()),
            (labels::CAPACITY_TYPE.to_string(), "spot".to_string()),
            (labels::ARCH.to_string(), "amd64".to_string()),
        ]),
        launched,
    )
}

fn claim(name: &str) -> NodeClaim {
    let extra = serde_json::json!({
        "metadata": {"labels": {"karpenter.sh/nodepool": "default", "team": "web"}},
        "spec": {
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "cni-not-ready", "effect": "NoSchedule"}]
        }
    });
    serde_json::from_value(merge(k8s::nodeclaim(name), extra)).unwrap()
}

fn wall() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

#[test]
fn names_look_like_eks_and_are_stable() {
    let a = node_name("aws:///us-east-1a/i-0123456789abcdef0");
    assert_eq!(a, node_name("aws:///us-east-1a/i-0123456789abcdef0"));
    assert_ne!(a, node_name("aws:///us-east-1a/i-0123456789abcdef1"));
    let parts: Vec<&str> = a.trim_end_matches(".ec2.internal").split('-').collect();
    assert_eq!(parts[..2], ["ip", "10"]);
    assert!(parts[2..].iter().all(|p| p.parse::<u8>().is_ok()));
    assert!(a.ends_with(".ec2.internal"));
}

#[test]
fn the_node_carries_labels_taints_capacity_and_ready() {
    let i = instance(
        "aws:///us-east-1a/i-0abc",
        "nc-1",
        InstanceState::Running,
        Instant::now(),
    );
    let node = desired_node(&i, &claim("nc-1"), wall());
    let name = node.metadata.name.clone().unwrap();
    let l = node.metadata.labels.as_ref().unwrap();
    assert_eq!(l["karpenter.sh/nodepool"], "default");
    assert_eq!(l["team"], "web");
    assert_eq!(l[labels::INSTANCE_TYPE], "m5.large");
    assert_eq!(l[labels::CAPACITY_TYPE], "spot");
    assert_eq!(l[labels::HOSTNAME], name);
    assert_eq!(l[labels::OS], "linux");
    let spec = node.spec.as_ref().unwrap();
    assert_eq!(
        spec.provider_id.as_deref(),
        Some("aws:///us-east-1a/i-0abc")
    );
    let taints: Vec<(String, String)> = spec
        .taints
        .iter()
        .flatten()
        .map(|t| (t.key.clone(), t.effect.clone()))
        .collect();
    assert_eq!(
        taints,
        [
            (
                "karpenter.sh/unregistered".to_string(),
                "NoExecute".to_string()
            ),
            ("dedicated".to_string(), "NoSchedule".to_string()),
            ("cni-not-ready".to_string(), "NoSchedule".to_string()),
        ]
    );
    let status = node.status.as_ref().unwrap();
    assert_eq!(status.capacity.as_ref().unwrap()["cpu"].0, "2");
    assert_eq!(status.allocatable.as_ref().unwrap()["cpu"].0, "1930m");
    assert_eq!(status.allocatable.as_ref().unwrap()["memory"].0, "7Gi");
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "True");
    assert_eq!(status.node_info.as_ref().unwrap().architecture, "amd64");
}

#[test]
fn plan_registers_heartbeats_and_deletes() {
    let t0 = Instant::now();
    let later = t0 + Duration::from_secs(30);
    let claims = BTreeMap::from([
        ("a".to_string(), Arc::new(claim("a"))),
        ("b".to_string(), Arc::new(claim("b"))),
    ]);
    let a = instance("aws:///z/i-a", "a", InstanceState::Running, t0);
    let b = instance("aws:///z/i-b", "b", InstanceState::Running, t0);
    let gone = instance("aws:///z/i-c", "c", InstanceState::Terminated, t0);
    let orphan = instance("aws:///z/i-d", "missing", InstanceState::Running, t0);
    let young = instance("aws:///z/i-e", "a", InstanceState::Running, later);
    let registered = BTreeSet::from([
        node_name("aws:///z/i-b"),
        node_name("aws:///z/i-c"),
        "ip-10-9-9-9.ec2.internal".to_string(),
    ]);
    let actions = plan(
        &[a, b, gone, orphan, young],
        &claims,
        &registered,
        later,
        Duration::from_secs(13),
        wall(),
    );
    let mut summary: Vec<String> = actions
        .iter()
        .map(|a| match a {
            Action::Register(n) => format!(
                "register {}",
                n.spec.as_ref().unwrap().provider_id.as_ref().unwrap()
            ),
            Action::Heartbeat(n) => format!("heartbeat {n}"),
            Action::Delete(n) => format!("delete {n}"),
        })
        .collect();
    summary.sort();
    let mut expected = vec![
        "register aws:///z/i-a".to_string(),
        format!("heartbeat {}", node_name("aws:///z/i-b")),
        format!("delete {}", node_name("aws:///z/i-c")),
        "delete ip-10-9-9-9.ec2.internal".to_string(),
    ];
    expected.sort();
    assert_eq!(summary, expected);
}

#[test]
fn a_shutting_down_instance_keeps_its_node_without_heartbeats() {
    let t0 = Instant::now();
    let i = instance("aws:///z/i-a", "a", InstanceState::ShuttingDown, t0);
    let registered = BTreeSet::from([node_name("aws:///z/i-a")]);
    let claims = BTreeMap::from([("a".to_string(), Arc::new(claim("a")))]);
    assert!(plan(&[i], &claims, &registered, t0, Duration::ZERO, wall()).is_empty());
}
