//! Which offering a simulated launch lands on, by requirements, requests, zone and price.

use nodewright_core::labels;
use nodewright_core::model::CapacityType;
use nodewright_core::requirements::Operator;
use nodewright_core::testkit::offering;

use super::*;

fn compatible(it: &InstanceType, o: &Offering, reqs: &[Requirement]) -> bool {
    type_compatible(it, reqs) && offering_compatible(o, reqs)
}

fn it(name: &str, arch: &str, cpu_m: i64, offerings: Vec<Offering>) -> InstanceType {
    InstanceType {
        name: name.into(),
        requirements: vec![
            Requirement::single(labels::ARCH, arch),
            Requirement::single(
                "karpenter.k8s.aws/instance-cpu",
                &(cpu_m / 1000).to_string(),
            ),
            Requirement::new(
                "karpenter.k8s.aws/instance-gpu-name",
                Operator::DoesNotExist,
                &[],
            ),
        ],
        capacity: Resources::new().with("cpu", cpu_m),
        overhead: Default::default(),
        offerings,
    }
}

fn catalog() -> Vec<InstanceType> {
    use CapacityType::*;
    vec![
        it(
            "m5.large",
            "amd64",
            2000,
            vec![offering("a", OnDemand, 0.096), offering("b", Spot, 0.04)],
        ),
        it(
            "m6g.large",
            "arm64",
            2000,
            vec![offering("a", OnDemand, 0.077), offering("a", Spot, 0.03)],
        ),
        it(
            "m5.xlarge",
            "amd64",
            4000,
            vec![offering("a", OnDemand, 0.192), offering("b", Spot, 0.07)],
        ),
    ]
}

#[test]
fn spot_wins_when_allowed_and_the_cheapest_compatible_offering_first() {
    let reqs = vec![Requirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        &["spot", "on-demand"],
    )];
    let c = candidates(&catalog(), &reqs, &Resources::new(), |_, _| true);
    assert_eq!(c[0].instance_type, "m6g.large");
    assert!(c.iter().all(|c| c.capacity_type == CapacityType::Spot));
    assert_eq!(c.len(), 3);
}

#[test]
fn requirements_and_requests_filter() {
    let reqs = vec![
        Requirement::single(labels::ARCH, "amd64"),
        Requirement::single(labels::CAPACITY_TYPE, "on-demand"),
        Requirement::new("karpenter.k8s.aws/instance-cpu", Operator::Gt, &["2"]),
        Requirement::single(labels::NODEPOOL, "default"),
    ];
    let c = candidates(&catalog(), &reqs, &Resources::new(), |_, _| true);
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].instance_type.as_str(), c[0].zone.as_str()),
        ("m5.xlarge", "a")
    );
    let big = Resources::new().with("cpu", 3000);
    let c = candidates(
        &catalog(),
        &[Requirement::single(labels::CAPACITY_TYPE, "on-demand")],
        &big,
        |_, _| true,
    );
    assert_eq!(
        c.iter()
            .map(|c| c.instance_type.as_str())
            .collect::<Vec<_>>(),
        ["m5.xlarge"]
    );
}

#[test]
fn does_not_exist_and_usable_filters() {
    let gpu = vec![Requirement::new(
        "karpenter.k8s.aws/instance-gpu-name",
        Operator::Exists,
        &[],
    )];
    assert!(candidates(&catalog(), &gpu, &Resources::new(), |_, _| true).is_empty());
    let c = candidates(&catalog(), &[], &Resources::new(), |name, o| {
        !(name == "m6g.large" && o.capacity_type == CapacityType::Spot)
    });
    assert_eq!(c[0].instance_type, "m5.large");
}

#[test]
fn zone_requirements_apply_per_offering() {
    let reqs = vec![Requirement::single(labels::ZONE, "b")];
    let c = candidates(&catalog(), &reqs, &Resources::new(), |_, _| true);
    assert!(c.iter().all(|c| c.zone == "b"));
    assert_eq!(c.len(), 2);
    let types = catalog();
    assert!(!compatible(&types[0], &types[0].offerings[0], &reqs));
    assert!(compatible(&types[0], &types[0].offerings[1], &reqs));
}
