//! Instance types discovered from moto's real EC2 data, built with the class's settings, checked
//! against the embedded catalog (taken from the same data) and against hand-computed numbers.

mod support;

use nodewright_aws_model::{Catalog, InstanceTypeInfo, NodeClassInput, Zone, build_instance_type};
use nodewright_cloud_aws::cloud::now;
use nodewright_core::model::CapacityType;
use nodewright_core::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
use support::DISCOVERY;

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

#[tokio::test]
async fn discovered_types_match_the_catalog_and_the_formulas() {
    let Some(moto) = support::moto("discovered_types_match_the_catalog_and_the_formulas").await
    else {
        return;
    };
    let cluster = support::unique("types");
    support::seed(&moto.clients, &cluster).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let discovered = cloud.instance_types.discovered().await.expect("discovery");
    assert!(
        discovered.infos.len() > 1000,
        "moto knows ~1,400 types, got {}",
        discovered.infos.len()
    );
    assert!(discovered.infos.iter().all(|i| i.kube_arch().is_some()));

    // Offerings: m5.large is in every us-east-1 zone but e.
    let m5: Vec<&str> = discovered.zones["m5.large"]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        m5,
        [
            "us-east-1a",
            "us-east-1b",
            "us-east-1c",
            "us-east-1d",
            "us-east-1f"
        ]
    );

    // Facts only the SDK path has (the catalog leaves them unknown): network cards, ENA and
    // nested virtualization, which the class's launch settings filter types by.
    let m5 = discovered.info("m5.large").unwrap();
    assert_eq!(m5.network_cards, [3]);
    assert_eq!(m5.ena_supported, Some(true));
    assert_eq!(m5.nested_virtualization, Some(false));
    let p3dn = discovered.info("p3dn.24xlarge").unwrap();
    assert!(p3dn.efa_max_interfaces > 0 && !p3dn.network_cards.is_empty());
    let catalog_view = |i: &InstanceTypeInfo| InstanceTypeInfo {
        nested_virtualization: None,
        ena_supported: None,
        network_cards: Vec::new(),
        ..i.clone()
    };

    // Otherwise the SDK path reads the same facts the catalog holds (both come from the same
    // data).
    let catalog: Catalog = nodewright_aws_model::catalog::embedded().unwrap();
    for name in [
        "m5.large",
        "c6g.xlarge",
        "p3dn.24xlarge",
        "g4dn.xlarge",
        "inf1.xlarge",
        "t3.micro",
    ] {
        assert_eq!(
            discovered.info(name).map(catalog_view).as_ref(),
            catalog.info(name),
            "{name}"
        );
    }
    let mismatched: Vec<&str> = discovered
        .infos
        .iter()
        .filter(|i| catalog.info(&i.name) != Some(&catalog_view(i)))
        .map(|i| i.name.as_str())
        .collect();
    assert!(
        mismatched.is_empty(),
        "differ from the catalog: {:?}; first: {:?} vs {:?}",
        &mismatched[..mismatched.len().min(10)],
        mismatched.first().and_then(|n| discovered.info(n)),
        mismatched.first().and_then(|n| catalog.info(n)),
    );

    // Build for an AL2023 class whose subnets are in a, b, c.
    let class = support::class(&format!(
        "metadata: {{name: c}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiFamily: AL2023\n  amiSelectorTerms: [{{id: ami-ekslinux}}]\n  instanceProfile: p\n"
    ));
    let resolved = cloud.resolve_node_class(&class, now()).await.unwrap();
    let types = cloud.instance_types_for(&class, &resolved).await.unwrap();
    let get = |n: &str| {
        types
            .iter()
            .find(|t| t.name == n)
            .unwrap_or_else(|| panic!("{n} missing"))
    };

    // Hand-computed (VM overhead 7.5%, AL2023, no reserved ENIs):
    // m5.large: 2 vCPU, 8192 MiB, 3 ENIs × 10 IPv4 → pods 3×9+2 = 29;
    //   memory 8192 − ceil(614.4) = 7577 MiB; kube-reserved 11×29+255 = 574 MiB, 70m;
    //   eviction 100 MiB; storage 20Gi − 1Gi − 10%.
    let m5 = get("m5.large").allocatable();
    assert_eq!(m5.get(CPU), 1930);
    assert_eq!(m5.get(MEMORY), (7577 - 574 - 100) * MI);
    assert_eq!(m5.get(PODS), 29);
    assert_eq!(m5.get(EPHEMERAL_STORAGE), 20 * GI - GI - 2 * GI);
    // c6g.xlarge (arm64): 4 vCPU, 8192 − 64 = 8128 MiB − ceil(609.6) = 7518 MiB;
    //   4 ENIs × 15 → pods 58; kube-reserved 11×58+255 = 893 MiB, 80m.
    let c6g = get("c6g.xlarge").allocatable();
    assert_eq!(c6g.get(CPU), 3920);
    assert_eq!(c6g.get(MEMORY), (7518 - 893 - 100) * MI);
    assert_eq!(c6g.get(PODS), 58);
    // p3dn.24xlarge (the p3 family's size moto knows): 96 vCPU, 786432 MiB − ceil(58982.4);
    //   15 ENIs × 50 → pods 737; kube-reserved 11×737+255 MiB; cpu 60+10+5+5+92×2.5 = 310m.
    let p3 = get("p3dn.24xlarge");
    let p3a = p3.allocatable();
    assert_eq!(p3a.get(CPU), 96_000 - 310);
    assert_eq!(p3a.get(PODS), 737);
    assert_eq!(
        p3a.get(MEMORY),
        (786_432 - 58_983 - (11 * 737 + 255) - 100) * MI
    );
    assert_eq!(p3.capacity.get("nvidia.com/gpu"), 8);

    // Offering zones are the type's zones ∩ the subnet zones.
    let mut zones: Vec<&str> = get("m5.large")
        .offerings
        .iter()
        .map(|o| o.zone.as_str())
        .collect();
    zones.dedup();
    assert_eq!(zones, ["us-east-1a", "us-east-1b", "us-east-1c"]);
    // Before any spot refresh, spot is priced at on-demand.
    let od = get("m5.large")
        .offerings
        .iter()
        .find(|o| o.capacity_type == CapacityType::OnDemand)
        .unwrap()
        .price;
    assert!(get("m5.large").offerings.iter().all(|o| o.price == od));

    // Identical to building the catalog's facts with the same inputs.
    let subnet_zones: Vec<Zone> = resolved.zones();
    let prices = cloud.pricing.prices().await;
    let from_catalog = build_instance_type(
        catalog.info("c6g.xlarge").unwrap(),
        &Default::default(),
        &NodeClassInput::new(nodewright_aws_model::AmiFamily::AL2023),
        "us-east-1",
        &subnet_zones
            .iter()
            .filter(|z| {
                catalog
                    .offered_zones("us-east-1", "c6g.xlarge")
                    .contains(&z.name)
            })
            .cloned()
            .collect::<Vec<_>>(),
        prices.book(),
    )
    .unwrap();
    assert_eq!(get("c6g.xlarge"), &from_catalog);
}

#[tokio::test]
async fn max_pods_and_pods_per_core_come_from_the_class_kubelet() {
    let Some(moto) = support::moto("max_pods_and_pods_per_core_come_from_the_class_kubelet").await
    else {
        return;
    };
    let cluster = support::unique("kubelet");
    support::seed(&moto.clients, &cluster).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let class = support::class(&format!(
        "metadata: {{name: c}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiFamily: AL2023\n  amiSelectorTerms: [{{id: ami-ekslinux}}]\n  instanceProfile: p\n  kubelet: {{maxPods: 20, podsPerCore: 4, systemReserved: {{memory: 200Mi}}}}\n"
    ));
    let resolved = cloud.resolve_node_class(&class, now()).await.unwrap();
    let types = cloud.instance_types_for(&class, &resolved).await.unwrap();
    let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
    // min(maxPods 20, 4 × 2 vCPU) = 8; kube-reserved memory still counts ENI-limited pods (29).
    assert_eq!(m5.capacity.get(PODS), 8);
    assert_eq!(m5.allocatable().get(MEMORY), (7577 - 574 - 100 - 200) * MI);
}
