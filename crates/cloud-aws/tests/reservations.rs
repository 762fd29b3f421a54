//! Capacity reservations end to end through the real SDK. moto 5.2 does not implement
//! DescribeCapacityReservations, so the tests put a small proxy on 127.0.0.1 in front of moto:
//! that one action is answered with a recorded EC2 response (XML in the shape of the EC2 API
//! reference), everything else goes to moto unchanged. The SDK therefore parses real EC2 XML,
//! and the rest of the path (subnets, images, templates, CreateFleet) is moto's.

#[macro_use]
mod support;

use std::sync::{Arc, Mutex};

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud_aws::cloud::now;
use nodewright_core::model::CapacityType;
use nodewright_testkit::nodeclaim;

use support::proxy::{self, Proxy};
use support::{DISCOVERY, Moto};

const AL2023_PARAMETER: &str =
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id";

const YEAR_END: &str = "2027-01-01T00:00:00.000Z";

fn reservation_xml(id: &str, zone: &str, free: u32, team: &str, kind: &str, end: &str) -> String {
    format!(
        "<item>\
<capacityReservationId>{id}</capacityReservationId>\
<ownerId>123456789012</ownerId>\
<capacityReservationArn>arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{id}</capacityReservationArn>\
<availabilityZoneId>use1-az1</availabilityZoneId>\
<instanceType>m5.large</instanceType>\
<instancePlatform>Linux/UNIX</instancePlatform>\
<availabilityZone>{zone}</availabilityZone>\
<tenancy>default</tenancy>\
<totalInstanceCount>4</totalInstanceCount>\
<availableInstanceCount>{free}</availableInstanceCount>\
<ebsOptimized>true</ebsOptimized>\
<ephemeralStorage>false</ephemeralStorage>\
<state>active</state>\
<startDate>2026-01-01T00:00:00.000Z</startDate>\
<endDate>{end}</endDate>\
<endDateType>limited</endDateType>\
<instanceMatchCriteria>targeted</instanceMatchCriteria>\
<createDate>2026-01-01T00:00:00.000Z</createDate>\
<tagSet><item><key>team</key><value>{team}</value></item></tagSet>\
<reservationType>{kind}</reservationType>\
</item>"
    )
}

fn describe_response(items: &[String]) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
<DescribeCapacityReservationsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
<requestId>7c5b4a4e-0000-4000-8000-000000000001</requestId>\
<capacityReservationSet>{}</capacityReservationSet>\
</DescribeCapacityReservationsResponse>",
        items.concat()
    )
}

/// Answers DescribeCapacityReservations with `body` and forwards everything else to moto.
async fn proxy(moto_url: &str, body: String) -> Proxy {
    let answer: proxy::Answer = Arc::new(move |form: &str| {
        form.contains("Action=DescribeCapacityReservations")
            .then(|| body.clone())
    });
    proxy::start(moto_url, answer, proxy::unchanged()).await
}

/// How many DescribeCapacityReservations calls the proxy answered.
fn describe_calls(proxy: &Proxy) -> usize {
    proxy.sent("Action=DescribeCapacityReservations").len()
}

fn claim(name: &str, capacity: &str) -> NodeClaim {
    serde_json::from_value(nodeclaim::aws(name, "gpu", &["m5.large"], capacity)).expect("NodeClaim")
}

#[tokio::test]
async fn reservations_resolve_into_status_offerings_and_targeted_launches() {
    let moto = moto_or_skip!("capacity_reservations");
    let name = support::unique("odcr");
    let seed = support::seed(&moto.clients, &name).await;
    let (zone_a, zone_b) = (seed.subnets[0].1.clone(), seed.subnets[1].1.clone());
    let body = describe_response(&[
        reservation_xml("cr-0aaa", &zone_a, 3, "ml", "default", YEAR_END),
        reservation_xml("cr-0bbb", &zone_b, 0, "ml", "default", YEAR_END),
        reservation_xml("cr-0ccc", &zone_a, 5, "web", "default", YEAR_END),
    ]);
    let proxy = proxy(&moto.url, body).await;
    let via = Moto {
        url: proxy.url.clone(),
        clients: support::clients_via(&proxy.url).await,
    };
    let prefix = format!("/{name}");
    let image = support::copy_image(&moto.clients, &format!("{name}-al2023"), &[]).await;
    support::put_parameter(&moto.clients, &prefix, AL2023_PARAMETER, &image).await;
    let cloud = support::cloud(&via, &name, &prefix, "1.32").with_cluster_info(
        nodewright_cloud_aws::launch::ClusterInfo {
            endpoint: "https://api.example.internal".into(),
            service_cidr: Some("10.100.0.0/16".into()),
            ..Default::default()
        },
    );
    let mut class = support::class(&format!(
        "metadata: {{name: gpu}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {name}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {name}}}}}]\n  amiSelectorTerms: [{{alias: 'al2023@latest'}}]\n  role: {role}\n  capacityReservationSelectorTerms:\n    - tags: {{team: ml}}\n      ownerID: '123456789012'\n",
        role = seed.role
    ));
    class.metadata.uid = Some(support::unique("uid"));

    // Status: the two `team: ml` reservations, parsed from EC2's XML.
    let resolved = cloud
        .resolve_node_class(&class, now())
        .await
        .expect("reconcile");
    assert!(resolved.is_ready(), "{:?}", resolved.status);
    let status = resolved
        .status
        .capacity_reservations
        .clone()
        .expect("status");
    let ids: Vec<&str> = status.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["cr-0aaa", "cr-0bbb"]);
    assert_eq!(
        status[0].availability_zone.as_deref(),
        Some(zone_a.as_str())
    );
    assert_eq!(status[0].instance_type.as_deref(), Some("m5.large"));
    assert_eq!(status[0].owner_id.as_deref(), Some("123456789012"));
    assert_eq!(status[0].reservation_type.as_deref(), Some("default"));
    assert_eq!(
        status[0].instance_match_criteria.as_deref(),
        Some("targeted")
    );
    assert_eq!(status[0].end_time.as_deref(), Some("2027-01-01T00:00:00Z"));
    let sent = proxy.sent("Action=DescribeCapacityReservations");
    assert_eq!(sent.len(), 1, "one call for one term");
    for needle in [
        "Name=state",
        "Value.1=active",
        "Name=owner-id",
        "Name=tag%3Ateam",
        "Value.1=ml",
    ] {
        assert!(
            sent[0].contains(needle),
            "{needle} missing from {}",
            sent[0]
        );
    }

    // Offerings: m5.large gains a reserved offering per reservation, priced far below.
    let types = cloud.instance_types_for(&class, &resolved).await.unwrap();
    let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
    let reserved: Vec<_> = m5
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::Reserved)
        .collect();
    assert_eq!(reserved.len(), 2);
    let a = reserved.iter().find(|o| o.zone == zone_a).unwrap();
    assert_eq!(a.reservation_id.as_deref(), Some("cr-0aaa"));
    assert_eq!(a.reservation_capacity, Some(3));
    assert!(a.available);
    let od = m5
        .offerings
        .iter()
        .find(|o| o.capacity_type == CapacityType::OnDemand && o.zone == zone_a)
        .unwrap();
    assert!(a.price < od.price / 1_000_000.0);
    assert!(
        !reserved
            .iter()
            .find(|o| o.zone == zone_b)
            .unwrap()
            .available
    );
    // With FEATURE_GATES' ReservedCapacity off, the same class offers no reservation.
    let gated = support::cloud_with(&via, &name, &prefix, "1.32", |s| {
        s.reserved_capacity = false
    });
    let types = gated.instance_types_for(&class, &resolved).await.unwrap();
    assert!(
        types
            .iter()
            .flat_map(|t| &t.offerings)
            .all(|o| o.capacity_type != CapacityType::Reserved),
        "reserved offerings with the gate off"
    );

    // A reserved launch goes into cr-0aaa: its template targets that reservation only.
    let got = cloud
        .launch(&claim("gpu-1", "reserved"), Some(&class))
        .await
        .expect("reserved launch");
    assert_eq!(got.instance.capacity_type, CapacityType::Reserved);
    assert_eq!(got.instance.zone, zone_a);
    assert_eq!(got.labels["karpenter.sh/capacity-type"], "reserved");
    assert_eq!(
        got.labels["karpenter.k8s.aws/capacity-reservation-id"],
        "cr-0aaa"
    );
    assert_eq!(
        got.labels["karpenter.k8s.aws/capacity-reservation-type"],
        "default"
    );
    let data = latest_template(&moto, &name).await;
    let crs = data
        .iter()
        .find_map(|d| d.capacity_reservation_specification().cloned())
        .expect("a template with a reservation setting");
    assert_eq!(
        crs.capacity_reservation_preference().map(|p| p.as_str()),
        Some("capacity-reservations-only")
    );
    assert_eq!(
        crs.capacity_reservation_target()
            .and_then(|t| t.capacity_reservation_id()),
        Some("cr-0aaa")
    );

    // An on-demand launch of the same class stays out of reservations.
    cloud
        .launch(&claim("gpu-2", "on-demand"), Some(&class))
        .await
        .expect("on-demand launch");
    let prefs: Vec<String> = latest_template(&moto, &name)
        .await
        .iter()
        .filter_map(|d| d.capacity_reservation_specification())
        .filter_map(|c| {
            c.capacity_reservation_preference()
                .map(|p| p.as_str().to_string())
        })
        .collect();
    assert!(prefs.contains(&"none".to_string()), "{prefs:?}");
}

/// The latest version's data of every launch template tagged for `cluster`.
async fn latest_template(
    moto: &Moto,
    cluster: &str,
) -> Vec<aws_sdk_ec2::types::ResponseLaunchTemplateData> {
    let list = support::cluster_templates(&moto.clients, cluster).await;
    let mut out = Vec::new();
    for t in &list {
        let v = moto
            .clients
            .ec2
            .describe_launch_template_versions()
            .launch_template_name(t.launch_template_name().unwrap())
            .versions("$Latest")
            .send()
            .await
            .unwrap();
        if let Some(d) = v.launch_template_versions()[0].launch_template_data() {
            out.push(d.clone());
        }
    }
    out
}

/// Sends CreateFleet on to moto, except that any call naming reservation `full` is refused
/// for it with `ReservationCapacityExceeded`, as EC2 answers once a reservation is used up.
struct RefuseReservation {
    inner: nodewright_cloud_aws::launch::SdkFleet,
    full: String,
    calls: Mutex<Vec<nodewright_cloud_aws::launch::FleetCall>>,
}

#[async_trait::async_trait]
impl nodewright_cloud_aws::launch::FleetApi for RefuseReservation {
    async fn create_fleet(
        &self,
        call: &nodewright_cloud_aws::launch::FleetCall,
    ) -> Result<nodewright_cloud_aws::launch::FleetOutcome, nodewright_cloud_aws::AwsError> {
        self.calls.lock().unwrap().push(call.clone());
        let errors: Vec<_> = call
            .overrides()
            .filter(|o| o.reservation_id.as_deref() == Some(self.full.as_str()))
            .map(|o| nodewright_cloud_aws::launch::FleetFailure {
                code: "ReservationCapacityExceeded".into(),
                message: "The requested capacity reservation has no available capacity.".into(),
                instance_type: Some(o.instance_type.clone()),
                subnet_id: Some(o.subnet_id.clone()),
                zone: Some(o.zone.clone()),
            })
            .collect();
        if !errors.is_empty() {
            return Ok(nodewright_cloud_aws::launch::FleetOutcome {
                instances: Vec::new(),
                errors,
            });
        }
        self.inner.create_fleet(call).await
    }
}

/// The reserved offerings of m5.large as the scheduler sees them: (id, available, capacity).
fn reserved_of(types: &[nodewright_core::model::InstanceType]) -> Vec<(String, bool, Option<u32>)> {
    let m5 = types
        .iter()
        .find(|t| t.name == "m5.large")
        .expect("m5.large");
    let mut out: Vec<_> = m5
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::Reserved)
        .map(|o| {
            (
                o.reservation_id.clone().unwrap_or_default(),
                o.available,
                o.reservation_capacity,
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn reservation_books_follow_launches_refusals_and_capacity_block_expiry() {
    use nodewright_cloud::CloudProvider;
    let moto = moto_or_skip!("reservation_books");
    let name = support::unique("books");
    let seed = support::seed(&moto.clients, &name).await;
    let (zone_a, zone_b) = (seed.subnets[0].1.clone(), seed.subnets[1].1.clone());
    // A capacity block ending in 20 minutes is inside its 40-minute expiring window.
    let soon = nodewright_cloud_aws::nodeclass::conditions::rfc3339(
        now().plus(std::time::Duration::from_secs(20 * 60)),
    );
    let body = describe_response(&[
        reservation_xml("cr-0aaa", &zone_a, 1, "ml", "default", YEAR_END),
        reservation_xml("cr-0bbb", &zone_b, 2, "ml", "default", YEAR_END),
        reservation_xml("cr-0blk", &zone_a, 2, "ml", "capacity-block", &soon),
    ]);
    let proxy = proxy(&moto.url, body).await;
    let via = Moto {
        url: proxy.url.clone(),
        clients: support::clients_via(&proxy.url).await,
    };
    let prefix = format!("/{name}");
    let image = support::copy_image(&moto.clients, &format!("{name}-al2023"), &[]).await;
    support::put_parameter(&moto.clients, &prefix, AL2023_PARAMETER, &image).await;
    let cluster = nodewright_cloud_aws::launch::ClusterInfo {
        endpoint: "https://api.example.internal".into(),
        service_cidr: Some("10.100.0.0/16".into()),
        ..Default::default()
    };
    let fleet = Arc::new(RefuseReservation {
        inner: nodewright_cloud_aws::launch::SdkFleet::new(via.clients.clone()),
        full: "cr-0bbb".into(),
        calls: Mutex::new(Vec::new()),
    });
    let cloud = support::cloud(&via, &name, &prefix, "1.32")
        .with_cluster_info(cluster.clone())
        .with_fleet_api(fleet.clone());
    let mut class = support::class(&format!(
        "metadata: {{name: gpu}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {name}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {name}}}}}]\n  amiSelectorTerms: [{{alias: 'al2023@latest'}}]\n  role: {role}\n  capacityReservationSelectorTerms: [{{tags: {{team: ml}}}}]\n",
        role = seed.role
    ));
    class.metadata.uid = Some(support::unique("uid"));

    // The controller's reconcile: status with states, the condition, and the books filled.
    let reconciled = cloud.reconcile_node_class(&class).await.expect("reconcile");
    let status = reconciled.status;
    assert_eq!(
        support::condition(&status, "CapacityReservationsReady").0,
        "True"
    );
    assert_eq!(support::condition(&status, "Ready").0, "True");
    let states: Vec<(String, Option<String>)> = status
        .capacity_reservations
        .iter()
        .flatten()
        .map(|r| (r.id.clone(), r.state.clone()))
        .collect();
    assert_eq!(
        states,
        [
            ("cr-0aaa".to_string(), Some("active".to_string())),
            ("cr-0bbb".to_string(), Some("active".to_string())),
            ("cr-0blk".to_string(), Some("expiring".to_string())),
        ]
    );
    class.status = Some(status);
    let calls_after_reconcile = describe_calls(&proxy);

    // What the scheduler sees: a reserved offering per reservation; the expiring block has
    // none available.
    let types = cloud.instance_types(Some(&class)).await.unwrap();
    assert_eq!(
        reserved_of(&types),
        [
            ("cr-0aaa".to_string(), true, Some(1)),
            ("cr-0bbb".to_string(), true, Some(2)),
            ("cr-0blk".to_string(), false, Some(2)),
        ]
    );
    assert_eq!(
        describe_calls(&proxy),
        calls_after_reconcile,
        "the books answer; EC2 is not asked again"
    );

    // A reserved launch: cr-0bbb refuses, so it is marked used up and the launch lands in
    // cr-0aaa, which then has no free instance either.
    let got = cloud
        .launch(&claim("gpu-1", "reserved"), Some(&class))
        .await
        .expect("reserved launch");
    assert_eq!(
        got.labels["karpenter.k8s.aws/capacity-reservation-id"],
        "cr-0aaa"
    );
    assert_eq!(
        got.labels["karpenter.k8s.aws/capacity-reservation-interruptible"],
        "false"
    );
    let calls = fleet.calls.lock().unwrap().clone();
    assert!(calls.len() >= 2, "refused, then launched: {}", calls.len());
    assert!(
        calls
            .last()
            .unwrap()
            .overrides()
            .all(|o| o.reservation_id.as_deref() == Some("cr-0aaa")),
        "the retry leaves the refused reservation out"
    );
    let types = cloud.instance_types(Some(&class)).await.unwrap();
    assert_eq!(
        reserved_of(&types),
        [
            ("cr-0aaa".to_string(), false, Some(0)),
            ("cr-0bbb".to_string(), false, Some(0)),
            ("cr-0blk".to_string(), false, Some(2)),
        ]
    );
    let e = cloud
        .launch(&claim("gpu-2", "reserved"), Some(&class))
        .await
        .expect_err("no reservation has room");
    assert!(
        matches!(e, nodewright_cloud::CloudError::InsufficientCapacity { .. }),
        "{e:?}"
    );

    // EC2's next count replaces the books.
    cloud.reconcile_node_class(&class).await.expect("reconcile");
    let types = cloud.instance_types(Some(&class)).await.unwrap();
    assert_eq!(
        reserved_of(&types)[0],
        ("cr-0aaa".to_string(), true, Some(1))
    );

    // A fresh process with the class status but empty books lists the reservations once.
    let fresh = support::cloud(&via, &name, &prefix, "1.32").with_cluster_info(cluster);
    let before = describe_calls(&proxy);
    let types = fresh.instance_types(Some(&class)).await.unwrap();
    assert_eq!(reserved_of(&types).len(), 3);
    assert_eq!(describe_calls(&proxy), before + 1);
}

/// EC2's answer for one DescribeCapacityReservations form: the known reservations among the
/// ids it names, or `InvalidCapacityReservationId.NotFound` when it names one EC2 never had.
fn by_id_answer(form: &str, known: &[(&str, String)]) -> (u16, String) {
    let asked: Vec<&str> = form
        .split('&')
        .filter(|kv| kv.starts_with("CapacityReservationId."))
        .filter_map(|kv| kv.split_once('=').map(|(_, v)| v))
        .collect();
    if asked.iter().any(|id| !known.iter().any(|(k, _)| k == id)) {
        return (
            400,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
<Code>InvalidCapacityReservationId.NotFound</Code><Message>The capacity reservation ID does not exist</Message>\
</Error></Errors><RequestID>7c5b4a4e-0000-4000-8000-0000000000cc</RequestID></Response>"
                .to_string(),
        );
    }
    let items: Vec<String> = known
        .iter()
        .filter(|(k, _)| asked.contains(k))
        .map(|(_, xml)| xml.clone())
        .collect();
    (200, describe_response(&items))
}

#[tokio::test]
async fn reservations_are_looked_up_by_id_skipping_ids_ec2_does_not_know() {
    use nodewright_cloud::{CloudProvider, ReservationEnd};
    let moto = moto_or_skip!("reservations_by_id");
    let name = support::unique("crbyid");
    let zone = "us-east-1a";
    let known = vec![
        (
            "cr-0b10c",
            reservation_xml(
                "cr-0b10c",
                zone,
                0,
                "ml",
                "capacity-block",
                "2026-03-01T12:00:00.000Z",
            ),
        ),
        (
            "cr-0dcr",
            reservation_xml("cr-0dcr", zone, 2, "ml", "default", YEAR_END),
        ),
    ];
    let answer: proxy::Reply = Arc::new(move |form: &str| {
        form.contains("Action=DescribeCapacityReservations")
            .then(|| by_id_answer(form, &known))
    });
    let proxied = proxy::start_replies(&moto.url, answer, proxy::unchanged()).await;
    let via = Moto {
        url: proxied.url.clone(),
        clients: support::clients_via(&proxied.url).await,
    };
    let cloud = support::cloud(&via, &name, &format!("/{name}"), "1.32");
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    let got = cloud
        .capacity_reservations(&ids(&["cr-0dcr", "cr-0b10c"]))
        .await
        .expect("lookup");
    let end = nodewright_core::time::Timestamp(1_772_366_400_000); // 2026-03-01T12:00:00Z
    assert_eq!(
        got,
        vec![
            ReservationEnd {
                id: "cr-0b10c".into(),
                capacity_block: true,
                end: Some(end),
            },
            ReservationEnd {
                id: "cr-0dcr".into(),
                capacity_block: false,
                end: Some(nodewright_core::time::Timestamp(1_798_761_600_000)),
            },
        ]
    );
    let forms = proxied.sent("Action=DescribeCapacityReservations");
    assert_eq!(forms.len(), 1, "one call for both ids");
    assert!(!forms[0].contains("Filter"), "any state: {}", forms[0]);

    // An id EC2 never had fails the whole call; the others are then asked for one by one.
    let got = cloud
        .capacity_reservations(&ids(&["cr-0b10c", "cr-0gone"]))
        .await
        .expect("lookup");
    assert_eq!(
        got.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["cr-0b10c"]
    );
    assert_eq!(proxied.sent("Action=DescribeCapacityReservations").len(), 4);
    assert_eq!(cloud.capacity_reservations(&[]).await, Ok(Vec::new()));
    assert_eq!(proxied.sent("Action=DescribeCapacityReservations").len(), 4);
}
