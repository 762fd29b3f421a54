//! A terminated reserved instance gives its place back to the reservation at once, not at the
//! next DescribeCapacityReservations. moto models neither capacity reservations nor an
//! instance's reservation, so a proxy on 127.0.0.1 answers DescribeCapacityReservations with
//! recorded EC2 XML and adds the reservation id to moto's DescribeInstances answer for the
//! launched instance; launching and terminating are moto's.

#[macro_use]
mod support;

use std::sync::{Arc, Mutex};

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::CloudProvider;
use nodewright_cloud_aws::{AwsClients, ClientOptions, StaticCredentials};

use support::{DISCOVERY, Moto, proxy};

fn reservations_xml(zone: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeCapacityReservationsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
<requestId>7c5b4a4e-0000-4000-8000-000000000004</requestId><capacityReservationSet><item>\
<capacityReservationId>cr-0rel</capacityReservationId><ownerId>123456789012</ownerId>\
<instanceType>m5.large</instanceType><instancePlatform>Linux/UNIX</instancePlatform>\
<availabilityZone>{zone}</availabilityZone><tenancy>default</tenancy>\
<totalInstanceCount>4</totalInstanceCount><availableInstanceCount>3</availableInstanceCount>\
<state>active</state><startDate>2026-01-01T00:00:00.000Z</startDate>\
<endDate>2027-01-01T00:00:00.000Z</endDate><endDateType>limited</endDateType>\
<instanceMatchCriteria>targeted</instanceMatchCriteria>\
<tagSet><item><key>team</key><value>ml</value></item></tagSet>\
<reservationType>default</reservationType></item></capacityReservationSet>\
</DescribeCapacityReservationsResponse>"
    )
}

#[tokio::test]
async fn terminating_a_reserved_instance_frees_its_place_right_away() {
    let moto = moto_or_skip!("reservation_release");
    let name = support::unique("release");
    let seed = support::seed(&moto.clients, &name).await;
    let zone = seed.subnets[0].1.clone();
    let reserved_instance: Arc<Mutex<Option<String>>> = Arc::default();
    let answers = {
        let xml = reservations_xml(&zone);
        Arc::new(move |form: &str| {
            form.contains("Action=DescribeCapacityReservations")
                .then(|| xml.clone())
        }) as proxy::Answer
    };
    let rewrite = {
        let reserved = reserved_instance.clone();
        Arc::new(move |form: &str, body: String| {
            let Some(id) = reserved.lock().unwrap().clone() else {
                return body;
            };
            if !form.contains("Action=DescribeInstances") {
                return body;
            }
            let tag = format!("<instanceId>{id}</instanceId>");
            body.replace(
                &tag,
                &format!("{tag}<capacityReservationId>cr-0rel</capacityReservationId>"),
            )
        }) as proxy::Rewrite
    };
    let p = proxy::start(&moto.url, answers, rewrite).await;
    let via = Moto {
        url: p.url.clone(),
        clients: AwsClients::new(&ClientOptions {
            region: support::REGION.into(),
            endpoint_url: Some(p.url.clone()),
            credentials: Some(StaticCredentials {
                access_key_id: "testing".into(),
                secret_access_key: "testing".into(),
            }),
        })
        .await,
    };
    let prefix = format!("/{name}");
    support::publish_al2023(&moto.clients, &name, &prefix).await;
    let cloud = support::cloud(&via, &name, &prefix, "1.32").with_cluster_info(
        nodewright_cloud_aws::launch::ClusterInfo {
            endpoint: "https://api.example.internal".into(),
            service_cidr: Some("10.100.0.0/16".into()),
            ..Default::default()
        },
    );
    let mut class = support::class(&format!(
        "metadata: {{name: rel}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {name}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {name}}}}}]\n  amiSelectorTerms: [{{alias: 'al2023@latest'}}]\n  role: {role}\n  capacityReservationSelectorTerms:\n    - tags: {{team: ml}}\n",
        role = seed.role
    ));
    class.metadata.uid = Some(support::unique("uid"));
    let reconciled = cloud.reconcile_node_class(&class).await.expect("reconcile");
    class.status = Some(reconciled.status);
    assert_eq!(cloud.launch.reservations().free("cr-0rel"), Some(3));

    let claim: NodeClaim = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: rel-1\n  labels: {karpenter.sh/nodepool: default}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: rel}\n  requirements:\n    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}\n    - {key: karpenter.sh/capacity-type, operator: In, values: [reserved]}\n",
    )
    .unwrap();
    let got = cloud
        .create(&claim, Some(&class))
        .await
        .expect("reserved launch");
    assert_eq!(
        got.labels["karpenter.k8s.aws/capacity-reservation-id"],
        "cr-0rel"
    );
    assert_eq!(cloud.launch.reservations().free("cr-0rel"), Some(2));
    let id = got
        .instance
        .provider_id
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    *reserved_instance.lock().unwrap() = Some(id);

    cloud
        .delete(&got.instance.provider_id)
        .await
        .expect("terminate");
    assert_eq!(
        cloud.launch.reservations().free("cr-0rel"),
        Some(3),
        "the place is free again without asking EC2"
    );
    // Asking again finds the instance gone (or going): no second place is handed back.
    let _ = cloud.delete(&got.instance.provider_id).await;
    assert_eq!(cloud.launch.reservations().free("cr-0rel"), Some(3));
    assert!(
        !p.sent("Action=TerminateInstances").is_empty(),
        "terminated through moto"
    );
}
