//! EC2NodeClass reconciliation against moto: selectors, AMIs, instance profiles, conditions.

#[macro_use]
mod support;

use std::collections::BTreeSet;

use nodewright_cloud_aws::cloud::now;
use support::{DISCOVERY, condition};

fn ids<T>(v: &[T], f: impl Fn(&T) -> &str) -> BTreeSet<String> {
    v.iter().map(|x| f(x).to_string()).collect()
}

#[tokio::test]
async fn subnets_by_tags_ids_wildcards_and_globs() {
    let moto = moto_or_skip!("subnets_by_tags_ids_wildcards_and_globs");
    let cluster = support::unique("subnets");
    let seed = support::seed(&moto.clients, &cluster).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let tagged: BTreeSet<String> = seed.subnets.iter().map(|(id, _)| id.clone()).collect();
    let marker = format!("{cluster}-marker");
    moto.clients
        .ec2
        .create_tags()
        .resources(&seed.untagged_subnet)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key(&marker)
                .value("anything")
                .build(),
        )
        .send()
        .await
        .unwrap();

    let resolve = |terms: String| {
        let class = support::class(&format!(
            "metadata: {{name: c}}\nspec:\n  subnetSelectorTerms:\n{terms}\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{id: ami-ekslinux}}]\n  instanceProfile: p\n"
        ));
        let cloud = &cloud;
        async move { cloud.resolve_node_class(&class, now()).await.unwrap() }
    };

    let by_tag = resolve(format!("    - tags: {{{DISCOVERY}: {cluster}}}")).await;
    assert_eq!(
        ids(&by_tag.subnets, |s| &s.id),
        tagged,
        "the untagged subnet and the default VPC stay out"
    );
    let zones: Vec<String> = by_tag.zones().into_iter().map(|z| z.name).collect();
    assert_eq!(zones, support::ZONES);
    assert!(by_tag.subnets.iter().all(|s| s.available_ips > 0));
    assert_eq!(condition(&by_tag.status, "SubnetsReady").0, "True");

    let wildcard = resolve(format!("    - tags: {{{marker}: '*'}}")).await;
    assert_eq!(
        ids(&wildcard.subnets, |s| &s.id),
        BTreeSet::from([seed.untagged_subnet.clone()])
    );

    let (first, _) = &seed.subnets[1];
    let by_id = resolve(format!("    - id: {first}\n    - tags: {{{marker}: '*'}}")).await;
    assert_eq!(
        ids(&by_id.subnets, |s| &s.id),
        BTreeSet::from([first.clone(), seed.untagged_subnet.clone()]),
        "terms are ORed"
    );

    let glob = resolve(format!("    - tags: {{Name: '{cluster}/SubnetPrivate*'}}")).await;
    assert_eq!(ids(&glob.subnets, |s| &s.id), tagged);

    let and = resolve(format!(
        "    - tags: {{Name: '{cluster}/SubnetPrivate*', {marker}: '*'}}"
    ))
    .await;
    assert!(and.subnets.is_empty(), "fields within a term are ANDed");
    assert_eq!(
        condition(&and.status, "SubnetsReady"),
        ("False".into(), "SubnetsNotFound".into())
    );
    assert_eq!(condition(&and.status, "Ready").0, "False");
    assert!(and.status.subnets.is_none());
}

#[tokio::test]
async fn security_groups_by_tags_ids_and_names() {
    let moto = moto_or_skip!("security_groups_by_tags_ids_and_names");
    let cluster = support::unique("sgs");
    let seed = support::seed(&moto.clients, &cluster).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let resolve = |terms: String| {
        let class = support::class(&format!(
            "metadata: {{name: c}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms:\n{terms}\n  amiSelectorTerms: [{{id: ami-ekslinux}}]\n  instanceProfile: p\n"
        ));
        let cloud = &cloud;
        async move { cloud.resolve_node_class(&class, now()).await.unwrap() }
    };
    let all: BTreeSet<String> = seed
        .security_groups
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    let by_tag = resolve(format!("    - tags: {{{DISCOVERY}: {cluster}}}")).await;
    assert_eq!(ids(&by_tag.security_groups, |g| &g.id), all);
    let names: BTreeSet<String> = by_tag
        .status
        .security_groups
        .iter()
        .flatten()
        .filter_map(|g| g.name.clone())
        .collect();
    assert_eq!(
        names,
        seed.security_groups
            .iter()
            .map(|(_, n)| n.clone())
            .collect()
    );

    let (id0, _) = &seed.security_groups[0];
    let (id1, name1) = &seed.security_groups[1];
    let by_id = resolve(format!("    - id: {id0}")).await;
    assert_eq!(
        ids(&by_id.security_groups, |g| &g.id),
        BTreeSet::from([id0.clone()])
    );
    let by_name = resolve(format!("    - name: {name1}")).await;
    assert_eq!(
        ids(&by_name.security_groups, |g| &g.id),
        BTreeSet::from([id1.clone()])
    );
    assert_eq!(condition(&by_name.status, "SecurityGroupsReady").0, "True");

    let none = resolve("    - name: no-such-group-anywhere".to_string()).await;
    assert_eq!(
        condition(&none.status, "SecurityGroupsReady"),
        ("False".into(), "SecurityGroupsNotFound".into())
    );
}

#[tokio::test]
async fn amis_by_id_name_tags_and_ssm_parameter() {
    let moto = moto_or_skip!("amis_by_id_name_tags_and_ssm_parameter");
    let cluster = support::unique("amis");
    support::seed(&moto.clients, &cluster).await;
    let prefix = format!("/{cluster}");
    let cloud = support::cloud(&moto, &cluster, &prefix, "1.32");
    let name = format!("{cluster}-image");
    let tagged = support::copy_image(&moto.clients, &name, &[("team", &cluster)]).await;
    let resolve = |terms: String| {
        let class = support::class(&format!(
            "metadata: {{name: c}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiFamily: AL2023\n  amiSelectorTerms:\n{terms}\n  instanceProfile: p\n"
        ));
        let cloud = &cloud;
        async move { cloud.resolve_node_class(&class, now()).await.unwrap() }
    };

    let by_id = resolve("    - id: ami-ekslinux".into()).await;
    assert_eq!(by_id.amis.len(), 1);
    assert_eq!(by_id.amis[0].id, "ami-ekslinux");
    let status = by_id.status.amis.as_ref().unwrap();
    let reqs = &status[0].requirements;
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        (
            reqs[0].key.as_str(),
            reqs[0].operator.as_str(),
            reqs[0].values.clone()
        ),
        ("kubernetes.io/arch", "In", Some(vec!["amd64".to_string()]))
    );
    assert_eq!(condition(&by_id.status, "AMIsReady").0, "True");

    let by_tag = resolve(format!("    - tags: {{team: {cluster}}}")).await;
    assert_eq!(
        ids(&by_tag.amis, |a| &a.id),
        BTreeSet::from([tagged.clone()])
    );
    let by_name = resolve(format!("    - name: {name}")).await;
    assert_eq!(
        ids(&by_name.amis, |a| &a.id),
        BTreeSet::from([tagged.clone()])
    );
    assert_eq!(by_name.amis[0].name, name);

    support::put_parameter(&moto.clients, &prefix, "/my/image", &tagged).await;
    let by_param = resolve("    - ssmParameter: /my/image".into()).await;
    assert_eq!(
        ids(&by_param.amis, |a| &a.id),
        BTreeSet::from([tagged.clone()])
    );

    let missing = resolve("    - id: ami-0000000000000dead".into()).await;
    assert_eq!(
        condition(&missing.status, "AMIsReady"),
        ("False".into(), "AMINotFound".into())
    );
    assert_eq!(condition(&missing.status, "Ready").0, "False");
}

#[tokio::test]
async fn aliases_resolve_through_parameters_and_keep_one_image_per_requirement_set() {
    let moto = moto_or_skip!("aliases_resolve_through_parameters");
    let cluster = support::unique("alias");
    support::seed(&moto.clients, &cluster).await;
    let prefix = format!("/{cluster}");
    let cloud = support::cloud(&moto, &cluster, &prefix, "1.32");
    let standard = support::copy_image(&moto.clients, &format!("{cluster}-standard"), &[]).await;
    let nvidia = support::copy_image(&moto.clients, &format!("{cluster}-nvidia"), &[]).await;
    let base = "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64";
    support::put_parameter(
        &moto.clients,
        &prefix,
        &format!("{base}/standard/recommended/image_id"),
        &standard,
    )
    .await;
    support::put_parameter(
        &moto.clients,
        &prefix,
        &format!("{base}/nvidia/recommended/image_id"),
        &nvidia,
    )
    .await;
    let class = support::class(&format!(
        "metadata: {{name: c}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  instanceProfile: p\n"
    ));
    let r = cloud.resolve_node_class(&class, now()).await.unwrap();
    assert_eq!(
        condition(&r.status, "AMIsReady").0,
        "True",
        "{:?}",
        r.status
    );
    let by_id: BTreeSet<(String, Vec<(String, String)>)> = r
        .amis
        .iter()
        .map(|a| {
            (
                a.id.clone(),
                a.requirements
                    .iter()
                    .map(|q| (q.key.clone(), q.operator.clone()))
                    .collect(),
            )
        })
        .collect();
    let arch = ("kubernetes.io/arch".to_string(), "In".to_string());
    assert_eq!(
        by_id,
        BTreeSet::from([
            (
                standard.clone(),
                vec![
                    arch.clone(),
                    (
                        "karpenter.k8s.aws/instance-gpu-count".into(),
                        "DoesNotExist".into()
                    ),
                    (
                        "karpenter.k8s.aws/instance-accelerator-count".into(),
                        "DoesNotExist".into()
                    ),
                ]
            ),
            (
                nvidia.clone(),
                vec![
                    arch,
                    (
                        "karpenter.k8s.aws/instance-gpu-count".into(),
                        "Exists".into()
                    )
                ]
            ),
        ])
    );

    // AL2 is not published for 1.33 and later.
    let old = support::cloud(&moto, &cluster, &prefix, "1.33");
    let mut al2 = class.clone();
    al2.spec.ami_selector_terms.as_mut().unwrap()[0].alias = Some("al2@latest".into());
    let r = old.resolve_node_class(&al2, now()).await.unwrap();
    assert_eq!(
        condition(&r.status, "AMIsReady"),
        ("False".into(), "UnsupportedAlias".into())
    );
}

#[tokio::test]
async fn instance_profile_is_created_tagged_and_follows_the_role() {
    let moto = moto_or_skip!("instance_profile_is_created_tagged_and_follows_the_role");
    let cluster = support::unique("profile");
    let seed = support::seed(&moto.clients, &cluster).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let yaml = |role: &str| {
        format!(
            "metadata: {{name: default, uid: 1234-abcd, generation: 3}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{id: ami-ekslinux}}]\n  role: {role}\n  tags: {{team: blue}}\n"
        )
    };
    let class = support::class(&yaml(&seed.role));
    let first = cloud.resolve_node_class(&class, now()).await.unwrap();
    assert!(first.is_ready(), "{:?}", first.status);
    let name = first.instance_profile.clone().unwrap();
    assert_eq!(
        first.status.instance_profile.as_deref(),
        Some(name.as_str())
    );
    assert!(name.starts_with(&format!("{cluster}_")));
    let got = moto
        .clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await
        .unwrap()
        .instance_profile
        .unwrap();
    assert_eq!(
        got.path(),
        format!("/karpenter/us-east-1/{cluster}/1234-abcd/")
    );
    let roles: Vec<&str> = got.roles().iter().map(|r| r.role_name()).collect();
    assert_eq!(roles, vec![seed.role.as_str()]);
    let tags: std::collections::BTreeMap<String, String> = got
        .tags()
        .iter()
        .map(|t| (t.key().to_string(), t.value().to_string()))
        .collect();
    assert_eq!(tags.get("team").map(String::as_str), Some("blue"));
    assert_eq!(
        tags.get(&format!("kubernetes.io/cluster/{cluster}"))
            .map(String::as_str),
        Some("owned")
    );
    assert_eq!(
        tags.get("karpenter.k8s.aws/ec2nodeclass")
            .map(String::as_str),
        Some("default")
    );

    // Reconciling again changes nothing and keeps transition times.
    let mut class2 = class.clone();
    class2.status = Some(first.status.clone());
    let again = cloud.resolve_node_class(&class2, now()).await.unwrap();
    assert_eq!(again.status, first.status);
    assert!(
        again
            .status
            .conditions
            .iter()
            .flatten()
            .all(|c| c.observed_generation == Some(3))
    );

    // A new role replaces the old one in the same profile.
    let other = format!("{cluster}-other");
    support::create_role(&moto.clients, &other).await;
    let swapped = cloud
        .resolve_node_class(&support::class(&yaml(&other)), now())
        .await
        .unwrap();
    assert_eq!(swapped.instance_profile.as_deref(), Some(name.as_str()));
    let got = moto
        .clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await
        .unwrap()
        .instance_profile
        .unwrap();
    let roles: Vec<&str> = got.roles().iter().map(|r| r.role_name()).collect();
    assert_eq!(roles, vec![other.as_str()]);

    // A role that does not exist leaves the profile condition false.
    let mut missing = support::class(&yaml(&format!("{cluster}-missing")));
    missing.metadata.uid = Some("other-uid".into());
    let r = cloud.resolve_node_class(&missing, now()).await.unwrap();
    assert_eq!(condition(&r.status, "InstanceProfileReady").0, "False");
    assert!(!r.is_ready());
}

#[tokio::test]
async fn concurrent_reconciles_share_one_instance_profile() {
    let moto = moto_or_skip!("concurrent_reconciles_share_one_instance_profile");
    let cluster = support::unique("profile-race");
    let seed = support::seed(&moto.clients, &cluster).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let class = support::class(&format!(
        "metadata: {{name: default, uid: race-uid, generation: 1}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{id: ami-ekslinux}}]\n  role: {role}\n",
        role = seed.role
    ));
    // Several reconciles of one class at once all look, find nothing and create: the ones that
    // lose (EntityAlreadyExists, then LimitExceeded adding the role) must still succeed.
    let runs = (0..6).map(|_| cloud.resolve_node_class(&class, now()));
    let results = futures::future::join_all(runs).await;
    let mut names = BTreeSet::new();
    for r in results {
        let r = r.expect("reconcile");
        assert!(r.is_ready(), "{:?}", r.status);
        names.insert(r.instance_profile.clone().unwrap());
    }
    assert_eq!(names.len(), 1, "{names:?}");
    let name = names.into_iter().next().unwrap();
    let got = moto
        .clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await
        .unwrap()
        .instance_profile
        .unwrap();
    let roles: Vec<&str> = got.roles().iter().map(|r| r.role_name()).collect();
    assert_eq!(roles, vec![seed.role.as_str()]);

    // The losing side of the race, made deterministic: the profile appeared (with its role)
    // between our look and our create.
    let roles = nodewright_cloud_aws::nodeclass::profile::create_or_adopt(
        &moto.clients,
        &name,
        "/karpenter/us-east-1/x/race-uid/",
        &Default::default(),
    )
    .await
    .expect("an existing profile is adopted");
    assert_eq!(roles, vec![seed.role.clone()]);
}

#[tokio::test]
async fn validation_waits_on_dependencies_and_refuses_restricted_tags() {
    let moto = moto_or_skip!("validation_waits_on_dependencies_and_refuses_restricted_tags");
    let cluster = support::unique("validation");
    support::seed(&moto.clients, &cluster).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let resolve = |groups: String, tags: &str| {
        let class = support::class(&format!(
            "metadata: {{name: c}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{groups}]\n  amiSelectorTerms: [{{id: ami-ekslinux}}]\n  instanceProfile: p\n  tags: {{{tags}}}\n"
        ));
        let cloud = &cloud;
        async move { cloud.resolve_node_class(&class, now()).await.unwrap() }
    };
    let ours = format!("{{tags: {{{DISCOVERY}: {cluster}}}}}");

    let fine = resolve(ours.clone(), "team: web").await;
    assert_eq!(condition(&fine.status, "ValidationSucceeded").0, "True");
    assert_eq!(
        condition(&fine.status, "CapacityReservationsReady").0,
        "True"
    );
    assert!(fine.is_ready());

    let restricted = resolve(ours, "'karpenter.sh/nodepool': mine").await;
    assert_eq!(
        condition(&restricted.status, "ValidationSucceeded"),
        ("False".into(), "TagValidationFailed".into())
    );
    assert!(!restricted.is_ready());

    let waiting = resolve("{name: no-such-group-anywhere}".into(), "team: web").await;
    assert_eq!(
        condition(&waiting.status, "ValidationSucceeded"),
        ("False".into(), "DependenciesNotReady".into())
    );
}
