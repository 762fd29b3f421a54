//! Drift from the class: image, groups, subnet, hash, reservation and placement group.

use nodewright_api::aws::common::{AmiStatus, SecurityGroupStatus, SubnetStatus};
use nodewright_cloud::{Instance, InstanceState};
use nodewright_core::model::CapacityType;
use nodewright_core::requirements::Operator;

use super::*;

const ARCH: &str = "kubernetes.io/arch";
const GPU: &str = "karpenter.k8s.aws/instance-gpu-count";

fn req(key: &str, op: &str, values: &[&str]) -> AmiRequirement {
    AmiRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        min_values: None,
        extra: Default::default(),
    }
}

fn ami(id: &str, reqs: Vec<AmiRequirement>) -> AmiStatus {
    AmiStatus {
        id: id.into(),
        deprecated: None,
        name: None,
        requirements: reqs,
        extra: Default::default(),
    }
}

/// AL2023-like status: a standard amd64 image, an nvidia amd64 image and an arm64 image.
fn status() -> EC2NodeClassStatus {
    EC2NodeClassStatus {
        amis: Some(vec![
            ami(
                "ami-std",
                vec![req(ARCH, "In", &["amd64"]), req(GPU, "DoesNotExist", &[])],
            ),
            ami(
                "ami-gpu",
                vec![req(ARCH, "In", &["amd64"]), req(GPU, "Exists", &[])],
            ),
            ami("ami-arm", vec![req(ARCH, "In", &["arm64"])]),
        ]),
        subnets: Some(vec![SubnetStatus {
            id: "subnet-a".into(),
            zone: Some("us-east-1a".into()),
            zone_id: None,
            extra: Default::default(),
        }]),
        security_groups: Some(
            ["sg-1", "sg-2"]
                .iter()
                .map(|id| SecurityGroupStatus {
                    id: id.to_string(),
                    name: None,
                    extra: Default::default(),
                })
                .collect(),
        ),
        ..Default::default()
    }
}

fn instance(image: &str, subnet: &str, groups: &[&str]) -> Ec2Instance {
    Ec2Instance {
        instance: Instance {
            provider_id: "aws:///us-east-1a/i-1".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::OnDemand,
            image_id: Some(image.into()),
            state: InstanceState::Running,
            launched_at: None,
            tags: Default::default(),
        },
        subnet_id: Some(subnet.into()),
        security_groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

fn m5_large() -> Vec<Requirement> {
    vec![
        Requirement::single(ARCH, "amd64"),
        Requirement::new(GPU, Operator::DoesNotExist, &[]),
    ]
}

fn p3() -> Vec<Requirement> {
    vec![
        Requirement::single(ARCH, "amd64"),
        Requirement::single(GPU, "1"),
    ]
}

#[test]
fn an_instance_matching_its_class_has_not_drifted() {
    let i = instance("ami-std", "subnet-a", &["sg-2", "sg-1"]);
    assert_eq!(instance_drift(&i, &m5_large(), &status()), Ok(None));
    let g = instance("ami-gpu", "subnet-a", &["sg-1", "sg-2"]);
    assert_eq!(instance_drift(&g, &p3(), &status()), Ok(None));
}

#[test]
fn an_image_not_serving_the_type_is_ami_drift() {
    // Gone from the status entirely.
    let old = instance("ami-old", "subnet-a", &["sg-1", "sg-2"]);
    assert_eq!(
        instance_drift(&old, &m5_large(), &status()),
        Ok(Some(DriftReason::Ami))
    );
    // Still in the status, but for GPU nodes or another architecture only.
    for image in ["ami-gpu", "ami-arm"] {
        let i = instance(image, "subnet-a", &["sg-1", "sg-2"]);
        assert_eq!(
            instance_drift(&i, &m5_large(), &status()),
            Ok(Some(DriftReason::Ami)),
            "{image}"
        );
    }
    let std_on_gpu = instance("ami-std", "subnet-a", &["sg-1", "sg-2"]);
    assert_eq!(
        instance_drift(&std_on_gpu, &p3(), &status()),
        Ok(Some(DriftReason::Ami))
    );
}

#[test]
fn security_groups_must_be_the_same_set() {
    for groups in [&["sg-1"][..], &["sg-1", "sg-2", "sg-3"], &["sg-3", "sg-4"]] {
        let i = instance("ami-std", "subnet-a", groups);
        assert_eq!(
            instance_drift(&i, &m5_large(), &status()),
            Ok(Some(DriftReason::SecurityGroup)),
            "{groups:?}"
        );
    }
}

#[test]
fn a_subnet_outside_the_class_is_subnet_drift_and_comes_after_the_others() {
    let i = instance("ami-std", "subnet-z", &["sg-1", "sg-2"]);
    assert_eq!(
        instance_drift(&i, &m5_large(), &status()),
        Ok(Some(DriftReason::Subnet))
    );
    let both = instance("ami-std", "subnet-z", &["sg-1"]);
    assert_eq!(
        instance_drift(&both, &m5_large(), &status()),
        Ok(Some(DriftReason::SecurityGroup))
    );
}

#[test]
fn an_unresolved_status_is_an_error_not_a_verdict() {
    let i = instance("ami-std", "subnet-a", &["sg-1", "sg-2"]);
    let mut s = status();
    s.subnets = None;
    assert_eq!(
        instance_drift(&i, &m5_large(), &s),
        Err(DriftError::NoSubnets)
    );
    s.security_groups = Some(vec![]);
    assert_eq!(
        instance_drift(&i, &m5_large(), &s),
        Err(DriftError::NoSecurityGroups)
    );
    s.amis = None;
    assert_eq!(instance_drift(&i, &m5_large(), &s), Err(DriftError::NoAmis));
}

#[test]
fn numeric_and_negative_ami_requirements() {
    let cpu = "karpenter.k8s.aws/instance-cpu";
    let t = vec![
        Requirement::single(cpu, "8"),
        Requirement::single(ARCH, "amd64"),
    ];
    assert!(ami_serves(&[req(cpu, "Gt", &["4"])], &t));
    assert!(!ami_serves(&[req(cpu, "Lt", &["8"])], &t));
    assert!(ami_serves(&[req(cpu, "Lte", &["8"])], &t));
    assert!(ami_serves(&[req(ARCH, "NotIn", &["arm64"])], &t));
    assert!(!ami_serves(&[req(ARCH, "NotIn", &["amd64"])], &t));
    assert!(ami_serves(&[req("unknown/key", "In", &["x"])], &t));
    assert!(!ami_serves(&[req(ARCH, "Bogus", &[])], &t));
}

fn annotated(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn the_class_hash_is_compared_only_within_one_version() {
    let mut class = EC2NodeClass::default();
    class.metadata.annotations =
        annotated(&[(HASH_ANNOTATION, "111"), (HASH_VERSION_ANNOTATION, "nw1")]);
    let mut claim = NodeClaim::default();
    claim.metadata.annotations =
        annotated(&[(HASH_ANNOTATION, "111"), (HASH_VERSION_ANNOTATION, "nw1")]);
    assert_eq!(static_drift(&claim, &class), None);

    claim.metadata.annotations =
        annotated(&[(HASH_ANNOTATION, "222"), (HASH_VERSION_ANNOTATION, "nw1")]);
    assert_eq!(static_drift(&claim, &class), Some(DriftReason::NodeClass));

    // Another version (a claim launched by Karpenter itself): no verdict.
    claim.metadata.annotations =
        annotated(&[(HASH_ANNOTATION, "222"), (HASH_VERSION_ANNOTATION, "v4")]);
    assert_eq!(static_drift(&claim, &class), None);
    // No hash on either side: no verdict.
    claim.metadata.annotations = annotated(&[(HASH_VERSION_ANNOTATION, "nw1")]);
    assert_eq!(static_drift(&claim, &class), None);
    class.metadata.annotations = None;
    assert_eq!(static_drift(&NodeClaim::default(), &class), None);
}

#[test]
fn a_reserved_claim_drifts_once_its_reservation_is_no_longer_selected() {
    use nodewright_api::aws::v1::CapacityReservationStatus;
    let mut claim = NodeClaim::default();
    let labelled = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
    };
    let selected = EC2NodeClassStatus {
        capacity_reservations: Some(vec![CapacityReservationStatus {
            id: "cr-1".into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    claim.metadata.labels = labelled(&[
        ("karpenter.sh/capacity-type", "reserved"),
        ("karpenter.k8s.aws/capacity-reservation-id", "cr-1"),
    ]);
    assert_eq!(reservation_drift(&claim, &selected), None);
    let dropped = EC2NodeClassStatus::default();
    assert_eq!(
        reservation_drift(&claim, &dropped).map(DriftReason::as_str),
        Some("CapacityReservationDrift")
    );
    claim.metadata.labels = labelled(&[("karpenter.sh/capacity-type", "on-demand")]);
    assert_eq!(
        reservation_drift(&claim, &dropped),
        None,
        "not in a reservation"
    );
}

#[test]
fn a_claim_outside_the_class_placement_group_has_drifted() {
    use nodewright_aws_model::placement::{PlacementGroup, Strategy};
    let group = |id: &str| PlacementGroup {
        id: id.into(),
        name: "ml".into(),
        strategy: Strategy::Cluster,
        partition_count: 0,
        spread_level: None,
    };
    let mut claim = NodeClaim::default();
    // Neither has a group.
    assert_eq!(placement_group_drift(&claim, false, None), None);
    // The selector was added.
    assert_eq!(
        placement_group_drift(&claim, true, Some(&group("pg-1"))).map(DriftReason::as_str),
        Some("PlacementGroupDrift")
    );
    claim.metadata.labels = Some(
        [(
            "karpenter.k8s.aws/placement-group-id".to_string(),
            "pg-1".to_string(),
        )]
        .into(),
    );
    assert_eq!(
        placement_group_drift(&claim, true, Some(&group("pg-1"))),
        None
    );
    // Pointed elsewhere, or removed.
    assert_eq!(
        placement_group_drift(&claim, true, Some(&group("pg-2"))),
        Some(DriftReason::PlacementGroup)
    );
    assert_eq!(
        placement_group_drift(&claim, false, None),
        Some(DriftReason::PlacementGroup)
    );
    // Named but not resolvable now: no verdict.
    assert_eq!(placement_group_drift(&claim, true, None), None);
}
