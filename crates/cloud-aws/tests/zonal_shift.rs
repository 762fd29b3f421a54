//! ARC zonal shift through the real SDK: moto has no ARC API, so a proxy in front of moto
//! answers `GET /managedresources/{arn}` with JSON in ARC's shape, shifting traffic away from
//! the zone id of one seeded subnet (or from nothing). EKS DescribeCluster (the cluster's ARN),
//! DescribeAvailabilityZones, launches and terminations go to moto.

#[macro_use]
mod support;

use std::sync::{Arc, Mutex};

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::{CloudProvider, InstanceState};
use nodewright_cloud_aws::AwsCloud;
use nodewright_testkit::nodeclaim;
use support::proxy::{self, Proxy};
use support::{DISCOVERY, Moto, Seed, ZONES};

/// What the proxy answers for the cluster: an applied zonal shift away from this zone id, an
/// ARC error (`Err(code)`), or no shift.
type Answer = Arc<Mutex<Result<Option<String>, String>>>;

struct Env {
    moto: Moto,
    seed: Seed,
    proxy: Proxy,
    answer: Answer,
    cloud: AwsCloud,
    class: EC2NodeClass,
    /// The zone id EC2 gives the first seeded subnet's zone.
    shifted_id: String,
}

fn managed_resource(arn: &str, answer: &Result<Option<String>, String>) -> (u16, String) {
    let away = match answer {
        Err(code) => {
            let body = serde_json::json!({"__type": code, "message": "refused by the test"});
            return (403, body.to_string());
        }
        Ok(away) => away,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let shifts: Vec<serde_json::Value> = away
        .iter()
        .map(|zone_id| {
            serde_json::json!({
                "appliedStatus": "APPLIED",
                "zonalShiftId": "91a1a1a1-0000-4000-8000-000000000001",
                "resourceIdentifier": arn,
                "awayFrom": zone_id,
                "expiryTime": now + 3600,
                "startTime": now - 60,
                "comment": "zone impaired",
            })
        })
        .collect();
    let body = serde_json::json!({
        "arn": arn,
        "name": arn.rsplit('/').next().unwrap_or_default(),
        "appliedWeights": {},
        "zonalShifts": shifts,
        "autoshifts": [],
        "zonalAutoshiftStatus": "DISABLED",
    });
    (200, body.to_string())
}

async fn zone_id_of_subnet(moto: &Moto, subnet: &str) -> String {
    moto.clients
        .ec2
        .describe_subnets()
        .subnet_ids(subnet)
        .send()
        .await
        .expect("DescribeSubnets")
        .subnets()[0]
        .availability_zone_id()
        .expect("zone id")
        .to_string()
}

/// A seeded VPC and EKS cluster, an AL2023 image, and a provider talking to the proxy with
/// zonal shift on (`enabled`).
async fn env(moto: Moto, name: &str, enabled: bool) -> Env {
    let cluster = support::unique(name);
    let seed = support::seed(&moto.clients, &cluster).await;
    let subnet_ids: Vec<String> = seed.subnets.iter().map(|(s, _)| s.clone()).collect();
    support::create_eks_cluster(&moto, &cluster, &subnet_ids, "10.100.0.0/16").await;
    let prefix = format!("/{cluster}");
    support::publish_al2023(&moto.clients, &cluster, &prefix).await;
    let shifted_id = zone_id_of_subnet(&moto, &seed.subnets[0].0).await;

    let answer: Answer = Arc::new(Mutex::new(Ok(None)));
    let a = answer.clone();
    let arn = format!(
        "arn:aws:eks:{}:123456789012:cluster/{cluster}",
        support::REGION
    );
    let proxy = proxy::start_rest(
        &moto.url,
        Arc::new(move |line: &str| {
            line.starts_with("GET /managedresources/")
                .then(|| managed_resource(&arn, &a.lock().unwrap()))
        }),
    )
    .await;
    let via = Moto {
        url: proxy.url.clone(),
        clients: support::clients_via(&proxy.url).await,
    };
    let mut cloud = support::cloud(&via, &cluster, &prefix, "1.32");
    cloud.settings.enable_zonal_shift = enabled;
    let mut class = support::class(&format!(
        "metadata: {{name: {cluster}}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{alias: 'al2023@latest'}}]\n  role: {role}\n",
        role = seed.role
    ));
    class.metadata.uid = Some(support::unique("uid"));
    Env {
        moto,
        seed,
        proxy,
        answer,
        cloud,
        class,
        shifted_id,
    }
}

impl Env {
    fn shift(&self, answer: Result<Option<&str>, &str>) {
        *self.answer.lock().unwrap() = answer
            .map(|a| a.map(str::to_string))
            .map_err(str::to_string);
    }

    fn claim(&self, name: &str, zones: &[&str]) -> NodeClaim {
        let class = self.class.metadata.name.as_deref().unwrap();
        let claim = nodeclaim::aws(name, class, &["m5.large"], "on-demand");
        let claim = nodeclaim::require(claim, "topology.kubernetes.io/zone", zones);
        serde_json::from_value(nodeclaim::requests(
            claim,
            serde_json::json!({"cpu": "500m"}),
        ))
        .expect("NodeClaim")
    }

    /// Whether m5.large on-demand is offered as available in `zone`.
    async fn offered(&self, zone: &str) -> bool {
        let types = self
            .cloud
            .instance_types(Some(&self.class))
            .await
            .expect("instance types");
        let m5 = types
            .iter()
            .find(|t| t.name == "m5.large")
            .expect("m5.large");
        m5.offerings
            .iter()
            .find(|o| o.zone == zone)
            .unwrap_or_else(|| panic!("no offering in {zone}"))
            .available
    }

    async fn state(&self, provider_id: &str) -> aws_sdk_ec2::types::InstanceStateName {
        let id = provider_id.rsplit('/').next().unwrap();
        self.moto
            .clients
            .ec2
            .describe_instances()
            .instance_ids(id)
            .send()
            .await
            .unwrap()
            .reservations()[0]
            .instances()[0]
            .state()
            .and_then(|s| s.name())
            .cloned()
            .unwrap()
    }
}

#[tokio::test]
async fn a_shifted_zone_takes_no_launches_and_keeps_its_instances_until_the_shift_ends() {
    let moto = moto_or_skip!("zonal_shift_lifecycle");
    let env = env(moto, "zonal-shift", true).await;
    let (shifted, other) = (env.seed.subnets[0].1.as_str(), ZONES[1]);

    // No shift yet: an instance lands in the zone that is about to be shifted.
    assert!(env.cloud.refresh_zonal_shifts().await.unwrap().is_empty());
    let before = env
        .cloud
        .create(&env.claim("before", &[shifted]), Some(&env.class))
        .await
        .expect("launch before the shift");
    assert_eq!(before.instance.zone, shifted);
    assert!(env.offered(shifted).await);

    // ARC shifts traffic away from the zone's id; the provider maps it to the zone's name.
    env.shift(Ok(Some(&env.shifted_id)));
    let now = env.cloud.refresh_zonal_shifts().await.unwrap();
    assert_eq!(
        now.into_iter().collect::<Vec<_>>(),
        vec![shifted.to_string()]
    );
    let asked = env.proxy.requested("/managedresources/");
    assert!(
        asked.last().unwrap().contains(&env.seed.cluster),
        "ARC is asked about the cluster's ARN: {asked:?}"
    );
    assert!(!env.offered(shifted).await, "{shifted} is shifted");
    assert!(env.offered(other).await);

    let elsewhere = env
        .cloud
        .create(&env.claim("elsewhere", &[shifted, other]), Some(&env.class))
        .await
        .expect("launch during the shift");
    assert_eq!(elsewhere.instance.zone, other);
    let pinned = env
        .cloud
        .create(&env.claim("pinned", &[shifted]), Some(&env.class))
        .await;
    assert!(pinned.is_err(), "no launch in {shifted}: {pinned:?}");

    let refused = env
        .cloud
        .delete(&before.instance.provider_id)
        .await
        .expect_err("termination in a shifted zone waits");
    assert!(refused.is_retryable(), "{refused:?}");
    assert!(refused.to_string().contains(shifted), "{refused}");
    assert_eq!(
        env.state(&before.instance.provider_id).await,
        aws_sdk_ec2::types::InstanceStateName::Running
    );
    // An instance outside the shifted zone terminates as usual.
    env.cloud
        .delete(&elsewhere.instance.provider_id)
        .await
        .expect("delete outside the shifted zone");

    // The shift ends: launches and terminations in the zone resume.
    env.shift(Ok(None));
    assert!(env.cloud.refresh_zonal_shifts().await.unwrap().is_empty());
    assert!(env.offered(shifted).await);
    let after = env
        .cloud
        .create(&env.claim("after", &[shifted]), Some(&env.class))
        .await
        .expect("launch after the shift");
    assert_eq!(after.instance.zone, shifted);
    env.cloud
        .delete(&before.instance.provider_id)
        .await
        .expect("delete after the shift");
    let gone = env.cloud.get(&before.instance.provider_id).await;
    assert!(
        gone.as_ref().is_err_and(|e| e.is_not_found())
            || gone
                .as_ref()
                .is_ok_and(|i| i.state != InstanceState::Running),
        "{gone:?}"
    );
}

#[tokio::test]
async fn a_failed_arc_call_keeps_the_last_known_shifts() {
    let moto = moto_or_skip!("zonal_shift_arc_fails");
    let env = env(moto, "zonal-shift-fails", true).await;
    let shifted = env.seed.subnets[0].1.clone();
    env.shift(Ok(Some(&env.shifted_id)));
    env.cloud.refresh_zonal_shifts().await.unwrap();

    env.shift(Err("AccessDeniedException"));
    let e = env.cloud.refresh_zonal_shifts().await.unwrap_err();
    assert_eq!(e.code.as_deref(), Some("AccessDeniedException"), "{e}");
    assert_eq!(
        env.cloud.shifted_zones().into_iter().collect::<Vec<_>>(),
        vec![shifted.clone()]
    );
    assert!(!env.offered(&shifted).await);
}

#[tokio::test]
async fn without_the_setting_arc_is_never_asked() {
    let moto = moto_or_skip!("zonal_shift_off");
    let env = env(moto, "zonal-shift-off", false).await;
    let shifted = env.seed.subnets[0].1.clone();
    env.shift(Ok(Some(&env.shifted_id)));
    assert!(env.cloud.refresh_zonal_shifts().await.unwrap().is_empty());
    assert!(env.cloud.zonal_shifts().await.unwrap().is_empty());
    assert!(env.offered(&shifted).await);
    assert!(
        env.proxy.requested("/managedresources/").is_empty(),
        "{:?}",
        env.proxy.lines.lock().unwrap()
    );
}
