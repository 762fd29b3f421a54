//! The moto peer answers, and the seed creates what it says, seen through the real SDK.

mod support;

use aws_sdk_ec2::types::Filter;

#[tokio::test]
async fn seeded_subnets_are_found_by_their_discovery_tag() {
    let Some(moto) = support::moto("seeded_subnets_are_found_by_their_discovery_tag").await else {
        return;
    };
    let cluster = support::unique("smoke");
    let seed = support::seed(&moto.clients, &cluster).await;
    let out = moto
        .clients
        .ec2
        .describe_subnets()
        .filters(
            Filter::builder()
                .name(format!("tag:{}", support::DISCOVERY))
                .values(&cluster)
                .build(),
        )
        .send()
        .await
        .expect("DescribeSubnets");
    let mut found: Vec<(String, String)> = out
        .subnets()
        .iter()
        .map(|s| {
            (
                s.subnet_id().unwrap_or_default().to_string(),
                s.availability_zone().unwrap_or_default().to_string(),
            )
        })
        .collect();
    found.sort();
    let mut want = seed.subnets.clone();
    want.sort();
    assert_eq!(found, want);
    let role = moto
        .clients
        .iam
        .get_role()
        .role_name(&seed.role)
        .send()
        .await
        .expect("GetRole");
    assert_eq!(role.role().map(|r| r.role_name()), Some(seed.role.as_str()));
}
