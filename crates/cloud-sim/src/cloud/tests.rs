use super::*;
use crate::fleet::OfferingPattern;
use nodewright_core::model::CapacityType;
use nodewright_testkit::json::merge;
use nodewright_testkit::{k8s, nodeclaim};
use serde_json::json;
use std::sync::OnceLock;

fn catalog() -> Arc<Catalog> {
    static CATALOG: OnceLock<Arc<Catalog>> = OnceLock::new();
    CATALOG
        .get_or_init(|| Arc::new(nodewright_aws_model::catalog::embedded().unwrap()))
        .clone()
}

fn cloud(config: SimCloudConfig) -> SimCloud {
    SimCloud::with_catalog(config, catalog())
}

fn faults(fleet: FleetConfig) -> SimCloudConfig {
    SimCloudConfig {
        fleet,
        ..Default::default()
    }
}

fn claim(name: &str, reqs: serde_json::Value, cpu: &str) -> NodeClaim {
    let claim = merge(
        k8s::nodeclaim(name),
        json!({"metadata": {"labels": {"karpenter.sh/nodepool": "default"}},
                "spec": {"requirements": reqs}}),
    );
    serde_json::from_value(nodeclaim::requests(claim, json!({"cpu": cpu}))).unwrap()
}

fn on_demand_amd64() -> serde_json::Value {
    serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]}
    ])
}

#[tokio::test(start_paused = true)]
async fn launches_the_cheapest_compatible_offering_and_reports_states() {
    let c = cloud(SimCloudConfig::default());
    let launched = c
        .create(&claim("nc-1", on_demand_amd64(), "3"), None)
        .await
        .unwrap();
    let i = &launched.instance;
    assert_eq!(
        i.instance_type, "c5.xlarge",
        "the cheapest m5/c5 with 3 cpu allocatable"
    );
    assert_eq!(i.capacity_type, CapacityType::OnDemand);
    assert_eq!(i.state, InstanceState::Pending);
    let (zone, id) = parse_provider_id(&i.provider_id).unwrap();
    assert_eq!(zone, i.zone);
    assert_eq!(id.len(), 2 + 17);
    assert!(id[2..].chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(i.nodeclaim(), Some("nc-1"));
    assert_eq!(
        i.tags.get("karpenter.sh/nodepool").map(String::as_str),
        Some("default")
    );
    assert_eq!(
        i.tags
            .get("kubernetes.io/cluster/nodewright")
            .map(String::as_str),
        Some("owned")
    );
    assert_eq!(
        launched.labels.get(labels::INSTANCE_TYPE),
        Some(&"c5.xlarge".to_string())
    );
    assert_eq!(
        launched.labels.get(labels::ARCH).map(String::as_str),
        Some("amd64")
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        c.get(&i.provider_id).await.unwrap().state,
        InstanceState::Running
    );
    c.delete(&i.provider_id).await.unwrap();
    assert_eq!(
        c.get(&i.provider_id).await.unwrap().state,
        InstanceState::ShuttingDown
    );
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert!(c.get(&i.provider_id).await.unwrap_err().is_not_found());
    assert!(c.delete(&i.provider_id).await.unwrap_err().is_not_found());
    assert!(c.list().await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn instances_of_one_offering_share_its_labels() {
    let c = cloud(SimCloudConfig::default());
    for name in ["nc-1", "nc-2", "nc-3"] {
        let cpu = if name == "nc-3" { "30" } else { "3" };
        c.create(&claim(name, on_demand_amd64(), cpu), None)
            .await
            .unwrap();
    }
    let all = c.instances();
    let of = |name: &str| {
        all.iter()
            .find(|i| i.instance.nodeclaim() == Some(name))
            .unwrap()
    };
    let (one, two, big) = (of("nc-1"), of("nc-2"), of("nc-3"));
    assert_eq!(one.instance.instance_type, two.instance.instance_type);
    assert_eq!(one.instance.zone, two.instance.zone);
    assert!(Arc::ptr_eq(&one.labels, &two.labels));
    assert_ne!(big.instance.instance_type, one.instance.instance_type);
    assert!(!Arc::ptr_eq(&one.labels, &big.labels));
    assert_eq!(
        big.labels[labels::INSTANCE_TYPE],
        big.instance.instance_type
    );
}

#[tokio::test(start_paused = true)]
async fn a_terminated_instance_is_listed_for_a_while_then_forgotten() {
    let c = cloud(SimCloudConfig::default());
    let gone = c
        .create(&claim("gone", on_demand_amd64(), "1"), None)
        .await
        .unwrap()
        .instance
        .provider_id;
    let kept = c
        .create(&claim("kept", on_demand_amd64(), "1"), None)
        .await
        .unwrap()
        .instance
        .provider_id;
    c.delete(&gone).await.unwrap();
    let states = |c: &SimCloud| {
        c.instances()
            .into_iter()
            .map(|i| (i.instance.provider_id, i.instance.state))
            .collect::<BTreeMap<_, _>>()
    };
    // Terminated after 30 s, still listed (the node agent deletes its Node from this).
    tokio::time::sleep(Duration::from_secs(31) + TERMINATED_LISTED_FOR / 2).await;
    assert_eq!(states(&c).get(&gone), Some(&InstanceState::Terminated));
    tokio::time::sleep(TERMINATED_LISTED_FOR / 2).await;
    let left = states(&c);
    assert_eq!(left.keys().collect::<Vec<_>>(), [&kept]);
    assert_eq!(c.lock().instances.len(), 1, "the record itself is dropped");
    assert!(c.get(&gone).await.unwrap_err().is_not_found());
    assert!(c.delete(&gone).await.unwrap_err().is_not_found());
    assert_eq!(c.list().await.unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn ids_are_deterministic_from_the_seed() {
    let ids = |seed| async move {
        let c = cloud(SimCloudConfig {
            seed,
            ..Default::default()
        });
        let mut out = Vec::new();
        for n in 0..3 {
            out.push(
                c.create(&claim(&format!("nc-{n}"), on_demand_amd64(), "1"), None)
                    .await
                    .unwrap()
                    .instance
                    .provider_id,
            );
        }
        out
    };
    assert_eq!(ids(7).await, ids(7).await);
    assert_ne!(ids(7).await, ids(8).await);
}

#[tokio::test(start_paused = true)]
async fn spot_is_preferred_when_allowed() {
    let c = cloud(SimCloudConfig::default());
    let reqs = serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
    ]);
    let l = c.create(&claim("a", reqs, "1"), None).await.unwrap();
    assert_eq!(l.instance.capacity_type, CapacityType::Spot);
}

#[tokio::test(start_paused = true)]
async fn insufficient_capacity_falls_through_then_fails_and_is_remembered() {
    let reqs = serde_json::json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
    ]);
    let c = cloud(faults(FleetConfig {
        insufficient_capacity: vec![OfferingPattern {
            instance_type: Some("m5.large".into()),
            zone: Some("us-east-1a".into()),
            capacity_type: None,
        }],
        ..Default::default()
    }));
    let l = c
        .create(&claim("a", reqs.clone(), "1"), None)
        .await
        .unwrap();
    assert_ne!(l.instance.zone, "us-east-1a");
    let types = c.instance_types(None).await.unwrap();
    let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
    let a = m5
        .offerings
        .iter()
        .find(|o| o.zone == "us-east-1a" && o.capacity_type == CapacityType::OnDemand)
        .unwrap();
    assert!(
        !a.available,
        "an offering that ran out is marked unavailable"
    );

    let none = cloud(faults(FleetConfig {
        insufficient_capacity: vec![OfferingPattern {
            instance_type: Some("m5.large".into()),
            ..Default::default()
        }],
        ..Default::default()
    }));
    match none.create(&claim("b", reqs.clone(), "1"), None).await {
        Err(CloudError::InsufficientCapacity { offerings, .. }) => {
            assert!(
                offerings
                    .iter()
                    .all(|(t, _, ct)| t == "m5.large" && ct == "on-demand")
            );
            assert_eq!(offerings.len(), 3);
        }
        other => panic!("expected ICE, got {other:?}"),
    }
    // Within the TTL the offerings stay out; the next attempt finds nothing to try, which
    // upstream's provider also answers with insufficient capacity.
    match none.create(&claim("b", reqs.clone(), "1"), None).await {
        Err(CloudError::InsufficientCapacity { offerings, .. }) => {
            assert!(offerings.is_empty())
        }
        other => panic!("expected ICE with nothing tried, got {other:?}"),
    }
    tokio::time::sleep(Duration::from_secs(181)).await;
    assert!(matches!(
        none.create(&claim("b", reqs, "1"), None).await,
        Err(CloudError::InsufficientCapacity { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn api_errors_are_injected_at_the_configured_rate() {
    let c = cloud(faults(FleetConfig {
        api_error_rate: 1.0,
        ..Default::default()
    }));
    let e = c
        .create(&claim("a", on_demand_amd64(), "1"), None)
        .await
        .unwrap_err();
    assert!(e.is_retryable());
    let c = cloud(faults(FleetConfig {
        api_error_rate: 0.5,
        ..Default::default()
    }));
    let mut failures = 0;
    for n in 0..100 {
        if c.create(&claim(&format!("n{n}"), on_demand_amd64(), "1"), None)
            .await
            .is_err()
        {
            failures += 1;
        }
    }
    assert!((25..75).contains(&failures), "{failures} of 100");
}

#[tokio::test(start_paused = true)]
async fn impossible_requests_are_invalid_or_find_no_capacity() {
    let c = cloud(SimCloudConfig::default());
    // No type holds the requests: as upstream, no capacity rather than a bad request.
    let e = c
        .create(&claim("a", on_demand_amd64(), "1000"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(e, CloudError::InsufficientCapacity { ref offerings, .. } if offerings.is_empty()),
        "{e:?}"
    );
    let bad = serde_json::json!([{"key": "k", "operator": "Near", "values": ["x"]}]);
    assert!(matches!(
        c.create(&claim("b", bad, "1"), None).await,
        Err(CloudError::InvalidRequest(_))
    ));
    assert!(matches!(
        c.get("i-123").await,
        Err(CloudError::InvalidRequest(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn node_class_status_is_ready_and_drift_follows_its_images() {
    let c = cloud(SimCloudConfig::default());
    let class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
                     "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
        }))
        .unwrap();
    let reconciled = c.reconcile_node_class(&class).await.unwrap();
    let status = reconciled.status;
    assert_eq!(status.subnets.as_ref().unwrap().len(), 3);
    assert_eq!(status.conditions.as_ref().unwrap()[0].status, "True");
    let l = c
        .create(&claim("a", on_demand_amd64(), "1"), Some(&class))
        .await
        .unwrap();
    let mut nc = claim("a", on_demand_amd64(), "1");
    nc.status = Some(nodewright_api::v1::nodeclaim::NodeClaimStatus {
        provider_id: Some(l.instance.provider_id.clone()),
        ..Default::default()
    });
    let mut ready = class.clone();
    ready.status = Some(status);
    assert_eq!(c.is_drifted(&nc, Some(&ready)).await.unwrap(), None);
    ready.status.as_mut().unwrap().amis.as_mut().unwrap()[0].id = "ami-new".into();
    assert_eq!(
        c.is_drifted(&nc, Some(&ready)).await.unwrap().as_deref(),
        Some("AMIDrift")
    );
}

#[tokio::test]
async fn claims_carry_the_class_hash_and_drift_when_the_class_spec_changes() {
    use nodewright_cloud::annotations::{NODECLASS_HASH, NODECLASS_HASH_VERSION};
    let c = cloud(SimCloudConfig::default());
    let class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
                     "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}
        }))
        .unwrap();
    let reconciled = c.reconcile_node_class(&class).await.unwrap();
    let hash = reconciled.annotations[NODECLASS_HASH].clone();
    assert_eq!(reconciled.annotations[NODECLASS_HASH_VERSION], "sim1");
    let l = c
        .create(&claim("a", on_demand_amd64(), "1"), Some(&class))
        .await
        .unwrap();
    assert_eq!(l.annotations, reconciled.annotations);
    let unclassed = c
        .create(&claim("b", on_demand_amd64(), "1"), None)
        .await
        .unwrap();
    assert!(unclassed.annotations.is_empty());

    let mut nc = claim("a", on_demand_amd64(), "1");
    nc.metadata.annotations = Some(l.annotations.clone());
    nc.status = Some(nodewright_api::v1::nodeclaim::NodeClaimStatus {
        provider_id: Some(l.instance.provider_id.clone()),
        ..Default::default()
    });
    let mut current = class.clone();
    current.status = Some(reconciled.status);
    assert_eq!(c.is_drifted(&nc, Some(&current)).await.unwrap(), None);
    current.spec.role = Some("other-role".into());
    assert_ne!(
        c.reconcile_node_class(&current).await.unwrap().annotations[NODECLASS_HASH],
        hash
    );
    assert_eq!(
        c.is_drifted(&nc, Some(&current)).await.unwrap().as_deref(),
        Some("NodeClassDrift")
    );
}
