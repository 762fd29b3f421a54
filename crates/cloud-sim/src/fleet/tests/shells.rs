//! The controller's cloud and the simulator's are one: the same catalog, seed and faults give
//! the same choices, failures, ids and instance states through the async `CloudProvider`
//! ([`crate::SimCloud`]) as through [`Fleet::launch`], the call the simulator's engine makes
//! on its virtual clock. If either shell grew its own launch logic again, this would see it.

use std::sync::Arc;

use nodewright_cloud::{CloudError, CloudProvider};
use nodewright_testkit::json::merge;
use nodewright_testkit::{k8s, nodeclaim};

use super::*;
use crate::{SimCloud, SimCloudConfig, claim_requests, claim_requirements};

fn claim(n: usize) -> nodewright_api::v1::nodeclaim::NodeClaim {
    // Spot or on-demand, small or large, one zone or any, so that faults hit different
    // offerings and some claims find nothing with capacity.
    let (types, cpu) = match n % 3 {
        0 => (serde_json::json!(["m5.large", "c5.large"]), "1"),
        1 => (
            serde_json::json!(["m5.xlarge", "c5.xlarge", "m6i.xlarge"]),
            "3",
        ),
        _ => (serde_json::json!(["m5.large"]), "1"),
    };
    let capacity = match n % 2 {
        0 => serde_json::json!(["spot", "on-demand"]),
        _ => serde_json::json!(["on-demand"]),
    };
    let mut requirements = vec![
        serde_json::json!({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}),
        serde_json::json!({"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity}),
    ];
    if n.is_multiple_of(5) {
        requirements.push(serde_json::json!(
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}
        ));
    }
    let claim = merge(
        k8s::nodeclaim(&format!("nc-{n}")),
        serde_json::json!({"spec": {"requirements": requirements}}),
    );
    serde_json::from_value(nodeclaim::requests(claim, serde_json::json!({"cpu": cpu}))).unwrap()
}

/// What a launch came to, in terms both shells share.
#[derive(Debug, PartialEq)]
enum Outcome {
    Launched {
        provider_id: String,
        instance_type: String,
        capacity_type: CapacityType,
    },
    Api,
    NoCapacity(Vec<(String, String, String)>),
}

fn outcome(l: Result<Launch, LaunchError>) -> Outcome {
    match l {
        Ok(l) => Outcome::Launched {
            provider_id: l.provider_id(),
            instance_type: l.instance_type,
            capacity_type: l.capacity_type,
        },
        Err(LaunchError::Api(_)) => Outcome::Api,
        Err(LaunchError::InsufficientCapacity(tried)) => Outcome::NoCapacity(
            tried
                .into_iter()
                .map(|c| (c.instance_type, c.zone, c.capacity_type.to_string()))
                .collect(),
        ),
    }
}

fn cloud_outcome(r: Result<nodewright_cloud::Launched, CloudError>) -> Outcome {
    match r {
        Ok(l) => Outcome::Launched {
            provider_id: l.instance.provider_id,
            instance_type: l.instance.instance_type,
            capacity_type: l.instance.capacity_type,
        },
        Err(e @ CloudError::Api { .. }) if e.is_retryable() => Outcome::Api,
        Err(CloudError::InsufficientCapacity { offerings, .. }) => Outcome::NoCapacity(offerings),
        Err(e) => panic!("an error the fleet does not give: {e:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn the_controllers_cloud_and_the_simulators_give_the_same_launches() {
    let faults = FleetConfig {
        api_error_rate: 0.2,
        insufficient_capacity: vec![
            OfferingPattern {
                instance_type: Some("c5.large".into()),
                capacity_type: Some(CapacityType::Spot),
                ..Default::default()
            },
            OfferingPattern {
                zone: Some("us-east-1a".into()),
                capacity_type: Some(CapacityType::OnDemand),
                ..Default::default()
            },
        ],
        ..FleetConfig::default()
    };
    let catalog = Arc::new(nodewright_aws_model::catalog::embedded().unwrap());
    let cloud = SimCloud::with_catalog(
        SimCloudConfig {
            fleet: faults.clone(),
            seed: 11,
            ..SimCloudConfig::default()
        },
        catalog,
    );
    let types = cloud.class_types(None).unwrap();
    let mut fleet = Fleet::new(faults, 11);
    let mut launched = Vec::new();
    let (mut failed, mut no_capacity) = (0, 0);
    for n in 0..60 {
        // A minute apart, so ICE marks run out (3 minutes) during the run.
        let now = Timestamp(60_000 * n as i64);
        let c = claim(n);
        let ours = outcome(fleet.launch(
            &types,
            &claim_requirements(&c).unwrap(),
            &claim_requests(&c).unwrap(),
            now,
        ));
        let theirs = cloud_outcome(cloud.create(&c, None).await);
        assert_eq!(ours, theirs, "launch {n}");
        match ours {
            Outcome::Launched { provider_id, .. } => launched.push(provider_id),
            Outcome::Api => failed += 1,
            Outcome::NoCapacity(_) => no_capacity += 1,
        }
        tokio::time::advance(std::time::Duration::from_secs(60)).await;
    }
    assert!(
        launched.len() > 20 && failed > 3 && no_capacity > 0,
        "{} launched, {failed} API errors, {no_capacity} out of capacity",
        launched.len()
    );
    // The same instances, in the same states, as time goes on.
    let at = Timestamp(60_000 * 60);
    for pid in &launched[..5] {
        assert!(fleet.terminate(pid, at));
        cloud.delete(pid).await.unwrap();
    }
    for later in [0, 31_000] {
        tokio::time::advance(std::time::Duration::from_millis(later)).await;
        let states: BTreeMap<String, InstanceState> = cloud
            .instances()
            .into_iter()
            .map(|i| (i.instance.provider_id, i.instance.state))
            .collect();
        for pid in &launched {
            assert_eq!(
                fleet.state(pid, Timestamp(at.0 + later as i64)),
                states.get(pid).copied(),
                "{pid} {later}ms after the terminations"
            );
        }
    }
    assert_eq!(cloud.list().await.unwrap().len(), launched.len() - 5);
}
