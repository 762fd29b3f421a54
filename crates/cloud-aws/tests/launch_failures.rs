//! Launch failures reach the registered observer: a launch whose first CreateFleet answer is
//! `InsufficientInstanceCapacity` for one offering (injected: moto never reports it) reports
//! one failure with that offering's zone, zone id and capacity type, and the fallback launch
//! still succeeds against moto. The launch also reports the size of the user data it rendered
//! for the class, which is what the launch template in moto holds.

#[macro_use]
mod support;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::{CloudProvider, LaunchFailure, ProviderObserver};
use nodewright_cloud_aws::error::AwsError;
use nodewright_cloud_aws::launch::{
    ClusterInfo, FleetApi, FleetCall, FleetFailure, FleetOutcome, SdkFleet,
};

use support::DISCOVERY;

/// CreateFleet through moto, except that `(type, zone)` in `empty` reports no capacity.
struct NoCapacity {
    inner: SdkFleet,
    empty: (String, String),
}

#[async_trait]
impl FleetApi for NoCapacity {
    async fn create_fleet(&self, call: &FleetCall) -> Result<FleetOutcome, AwsError> {
        let errors: Vec<FleetFailure> = call
            .overrides()
            .filter(|o| o.instance_type == self.empty.0 && o.zone == self.empty.1)
            .map(|o| FleetFailure {
                code: "InsufficientInstanceCapacity".into(),
                message: "We currently do not have sufficient capacity.".into(),
                instance_type: Some(o.instance_type.clone()),
                subnet_id: Some(o.subnet_id.clone()),
                zone: Some(o.zone.clone()),
            })
            .collect();
        if errors.is_empty() {
            return self.inner.create_fleet(call).await;
        }
        Ok(FleetOutcome {
            instances: Vec::new(),
            errors,
        })
    }
}

#[derive(Default)]
struct Recorder(Mutex<Vec<LaunchFailure>>, Mutex<Vec<(String, usize)>>);

impl ProviderObserver for Recorder {
    fn launch_failed(&self, failure: &LaunchFailure) {
        self.0.lock().unwrap().push(failure.clone());
    }

    fn user_data_rendered(&self, nodeclass: &str, bytes: usize) {
        self.1.lock().unwrap().push((nodeclass.to_string(), bytes));
    }
}

/// The decoded sizes of the user data of the cluster's launch templates in moto.
async fn template_user_data_sizes(moto: &support::Moto, cluster: &str) -> Vec<usize> {
    let ec2 = &moto.clients.ec2;
    let templates = support::cluster_templates(&moto.clients, cluster).await;
    let mut sizes = Vec::new();
    for t in &templates {
        let versions = ec2
            .describe_launch_template_versions()
            .launch_template_id(t.launch_template_id().unwrap_or_default())
            .send()
            .await
            .unwrap();
        for v in versions.launch_template_versions() {
            let data = v.launch_template_data().and_then(|d| d.user_data());
            let raw = data.and_then(nodewright_aws_model::userdata::base64::decode);
            sizes.push(raw.map_or(0, |r| r.len()));
        }
    }
    sizes.sort();
    sizes.dedup();
    sizes
}

#[tokio::test]
async fn each_fleet_error_is_reported_with_zone_zone_id_and_capacity_type() {
    let moto = moto_or_skip!("launch_failures");
    let cluster = support::unique("launch-fail");
    let seed = support::seed(&moto.clients, &cluster).await;
    let prefix = format!("/{cluster}");
    support::publish_al2023(&moto.clients, &cluster, &prefix).await;
    let (subnet_a, zone_a) = seed.subnets[0].clone();
    let cloud = support::cloud(&moto, &cluster, &prefix, "1.32")
        .with_cluster_info(ClusterInfo {
            endpoint: "https://api.example.internal".into(),
            service_cidr: Some("10.100.0.0/16".into()),
            ..Default::default()
        })
        .with_fleet_api(Arc::new(NoCapacity {
            inner: SdkFleet::new(moto.clients.clone()),
            empty: ("m5.large".into(), zone_a.clone()),
        }));
    let recorder = Arc::new(Recorder::default());
    cloud.observe_with(recorder.clone());
    let mut class = support::class(&format!(
        "metadata: {{name: fail}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{alias: 'al2023@latest'}}]\n  role: {role}\n",
        role = seed.role
    ));
    class.metadata.uid = Some(support::unique("uid"));
    let claim: NodeClaim = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: fail-1\n  labels: {karpenter.sh/nodepool: default}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: fail}\n  requirements:\n    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}\n    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n",
    )
    .unwrap();

    let got = cloud.create(&claim, Some(&class)).await.expect("launch");
    assert_ne!(got.instance.zone, zone_a, "fell back to another zone");

    let zone_id = moto
        .clients
        .ec2
        .describe_subnets()
        .subnet_ids(&subnet_a)
        .send()
        .await
        .unwrap()
        .subnets()[0]
        .availability_zone_id()
        .unwrap_or_default()
        .to_string();
    assert!(!zone_id.is_empty(), "moto reports zone ids");
    let failures = recorder.0.lock().unwrap().clone();
    assert_eq!(
        failures,
        [LaunchFailure {
            zone: zone_a,
            zone_id,
            capacity_type: "on-demand".into(),
            reason: "InsufficientInstanceCapacity".into(),
        }],
        "one failure for the one empty offering; the successful retry reports none"
    );

    let mut rendered = recorder.1.lock().unwrap().clone();
    rendered.sort();
    rendered.dedup();
    let sizes = template_user_data_sizes(&moto, &cluster).await;
    assert!(
        !sizes.is_empty() && sizes[0] > 0,
        "templates in moto: {sizes:?}"
    );
    let want: Vec<(String, usize)> = sizes.into_iter().map(|n| ("fail".to_string(), n)).collect();
    assert_eq!(rendered, want);
}
