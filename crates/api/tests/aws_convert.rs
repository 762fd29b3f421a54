//! Conversion of v1beta1 EC2NodeClasses and v1alpha1 AWSNodeTemplates to v1, checked field by
//! field, with the warnings for what has no v1 home.

use std::collections::BTreeMap;

use nodewright_api::aws::common::{IntOrString, MetadataOptions};
use nodewright_api::aws::convert::{self, UBUNTU_COMPATIBILITY_ANNOTATION};
use nodewright_api::aws::{v1, v1alpha1, v1beta1, validate};
use nodewright_api::document::read_documents;
use serde_json::{Value, json};

fn seed(file: &str, kind: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/seed-manifests")
        .join(file);
    read_documents(&path)
        .unwrap()
        .into_iter()
        .find(|d| d.kind() == kind)
        .unwrap()
        .value
}

fn tags(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn alias(a: &str) -> Option<Vec<v1::AmiSelectorTerm>> {
    Some(vec![v1::AmiSelectorTerm {
        alias: Some(a.to_string()),
        ..Default::default()
    }])
}

fn beta(spec: Value) -> v1beta1::EC2NodeClass {
    serde_json::from_value(json!({"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "metadata": {"name": "x"}, "spec": spec})).unwrap()
}

fn alpha(spec: Value) -> v1alpha1::AWSNodeTemplate {
    serde_json::from_value(json!({"apiVersion": "karpenter.k8s.aws/v1alpha1", "kind": "AWSNodeTemplate", "metadata": {"name": "x"}, "spec": spec})).unwrap()
}

fn has_warning(warnings: &[String], starts: &str) -> bool {
    warnings.iter().any(|w| w.starts_with(starts))
}

#[test]
fn v1beta1_seed_converts_field_by_field() {
    let old: v1beta1::EC2NodeClass =
        serde_json::from_value(seed("02-ec2nodeclass-v1beta1.yaml", "EC2NodeClass")).unwrap();
    let out = convert::from_v1beta1(&old, None);
    let nc = &out.object;
    assert_eq!(nc.api_version, "karpenter.k8s.aws/v1");
    assert_eq!(nc.kind, "EC2NodeClass");
    assert_eq!(nc.metadata.name.as_deref(), Some("default"));
    assert_eq!(nc.metadata.annotations, None);
    let s = &nc.spec;
    assert_eq!(s.ami_family.as_deref(), Some("Bottlerocket"));
    assert_eq!(s.ami_selector_terms, alias("bottlerocket@latest"));
    assert_eq!(s.role.as_deref(), Some("karpenter-node-sandbox"));
    assert_eq!(s.instance_profile, None);
    let discovery = tags(&[("karpenter.sh/discovery", "sandbox")]);
    assert_eq!(
        s.subnet_selector_terms,
        Some(vec![v1::SubnetSelectorTerm {
            tags: discovery.clone(),
            ..Default::default()
        }])
    );
    assert_eq!(
        s.security_group_selector_terms,
        Some(vec![v1::SecurityGroupSelectorTerm {
            tags: discovery,
            ..Default::default()
        }])
    );
    assert_eq!(
        s.tags,
        tags(&[
            ("platform", "eks"),
            ("Name", "eks-karpenter-sandbox"),
            ("karpenter.sh/discovery", "sandbox")
        ])
    );
    // The seed states every metadata option, so nothing is filled in.
    assert_eq!(
        s.metadata_options,
        Some(MetadataOptions {
            http_endpoint: Some("enabled".into()),
            http_protocol_ipv6: Some("disabled".into()),
            http_put_response_hop_limit: Some(2),
            http_tokens: Some("required".into()),
            extra: Default::default(),
        })
    );
    let bdms = s.block_device_mappings.as_ref().unwrap();
    assert_eq!(bdms.len(), 2);
    for (b, (device, size)) in bdms
        .iter()
        .zip([("/dev/xvda", "4Gi"), ("/dev/xvdb", "20Gi")])
    {
        assert_eq!(b.device_name.as_deref(), Some(device));
        let ebs = b.ebs.as_ref().unwrap();
        assert_eq!(ebs.volume_size, Some(IntOrString::String(size.into())));
        assert_eq!(ebs.volume_type.as_deref(), Some("gp3"));
        assert_eq!(ebs.encrypted, Some(true));
        assert_eq!(b.root_volume, None);
    }
    assert_eq!(s.kubelet, None);
    assert_eq!(s.user_data, None);
    assert!(s.extra.is_empty());
    assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
    assert!(has_warning(
        &out.warnings,
        "spec.amiSelectorTerms: not set; amiFamily Bottlerocket"
    ));
    assert_eq!(validate::ec2nodeclass(nc), vec![]);
}

#[test]
fn v1alpha1_seed_converts_field_by_field() {
    let old: v1alpha1::AWSNodeTemplate =
        serde_json::from_value(seed("03-provisioner-v1alpha5.yaml", "AWSNodeTemplate")).unwrap();
    let out = convert::from_v1alpha1(&old, None);
    let nc = &out.object;
    assert_eq!(nc.api_version, "karpenter.k8s.aws/v1");
    assert_eq!(nc.kind, "EC2NodeClass");
    assert_eq!(nc.metadata.name.as_deref(), Some("default"));
    let s = &nc.spec;
    // The implicit AL2 family is made explicit, and its implicit AMI becomes an alias.
    assert_eq!(s.ami_family.as_deref(), Some("AL2"));
    assert_eq!(s.ami_selector_terms, alias("al2@latest"));
    let discovery = tags(&[("karpenter.sh/discovery", "my-cluster")]);
    assert_eq!(
        s.subnet_selector_terms,
        Some(vec![v1::SubnetSelectorTerm {
            tags: discovery.clone(),
            ..Default::default()
        }])
    );
    assert_eq!(
        s.security_group_selector_terms,
        Some(vec![v1::SecurityGroupSelectorTerm {
            tags: discovery.clone(),
            ..Default::default()
        }])
    );
    assert_eq!(s.tags, discovery);
    // v1alpha1 defaulted the hop limit to 2; the converted class keeps that.
    assert_eq!(
        s.metadata_options,
        Some(MetadataOptions::default().with_defaults(2))
    );
    assert_eq!(s.role, None);
    assert_eq!(s.instance_profile, None);
    assert_eq!(s.block_device_mappings, None);
    assert_eq!(s.kubelet, None);
    assert_eq!(out.warnings.len(), 3, "{:?}", out.warnings);
    for w in [
        "spec.instanceProfile:",
        "spec.metadataOptions:",
        "spec.amiSelectorTerms:",
    ] {
        assert!(has_warning(&out.warnings, w), "{w} in {:?}", out.warnings);
    }
    // The instance profile came from a global setting v1 does not have, so on its own the
    // converted class is incomplete, and says so.
    let errs = validate::ec2nodeclass(nc);
    assert_eq!(
        errs.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        ["spec: must specify exactly one of ['role', 'instanceProfile']"]
    );
    let with_profile = convert::from_v1alpha1_with_default_profile(
        &old,
        None,
        Some("KarpenterNodeInstanceProfile"),
    );
    assert_eq!(
        with_profile.object.spec.instance_profile.as_deref(),
        Some("KarpenterNodeInstanceProfile")
    );
    assert!(!has_warning(
        &with_profile.warnings,
        "spec.instanceProfile:"
    ));
    assert_eq!(validate::ec2nodeclass(&with_profile.object), vec![]);
}

#[test]
fn v1alpha5_kubelet_lands_in_spec_kubelet() {
    let old = alpha(
        json!({"instanceProfile": "p", "subnetSelector": {"a": "b"}, "securityGroupSelector": {"a": "b"}}),
    );
    let kubelet = json!({
        "containerRuntime": "containerd",
        "maxPods": 58,
        "clusterDNS": ["10.100.0.10"],
        "systemReserved": {"cpu": "100m"},
        "evictionHard": {"memory.available": "5%"},
        "cpuCFSQuota": false,
        "shutdownGracePeriod": "30s",
    });
    let out = convert::from_v1alpha1(&old, Some(kubelet));
    let k = out.object.spec.kubelet.as_ref().unwrap();
    assert_eq!(k.max_pods, Some(58));
    assert_eq!(k.cluster_dns, Some(vec!["10.100.0.10".to_string()]));
    assert_eq!(k.system_reserved, tags(&[("cpu", "100m")]));
    assert_eq!(k.eviction_hard, tags(&[("memory.available", "5%")]));
    assert_eq!(k.cpu_cfs_quota, Some(false));
    assert!(!k.extra.contains_key("containerRuntime"));
    assert_eq!(k.extra["shutdownGracePeriod"], "30s");
    assert!(has_warning(
        &out.warnings,
        "kubelet.containerRuntime: \"containerd\" has no v1 equivalent"
    ));
    assert!(has_warning(
        &out.warnings,
        "spec.kubelet.shutdownGracePeriod:"
    ));
    assert_eq!(validate::ec2nodeclass(&out.object), vec![]);
}

#[test]
fn v1beta1_nodepool_kubelet_lands_in_spec_kubelet() {
    let old = beta(
        json!({"amiFamily": "AL2023", "role": "r", "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}], "metadataOptions": {"httpPutResponseHopLimit": 1}}),
    );
    let out = convert::from_v1beta1(
        &old,
        Some(
            json!({"maxPods": 110, "imageGCHighThresholdPercent": 90, "imageGCLowThresholdPercent": 80}),
        ),
    );
    let k = out.object.spec.kubelet.as_ref().unwrap();
    assert_eq!(
        (
            k.max_pods,
            k.image_gc_high_threshold_percent,
            k.image_gc_low_threshold_percent
        ),
        (Some(110), Some(90), Some(80))
    );
    assert!(k.extra.is_empty());
    // An explicit hop limit is kept as written; only the alias is derived.
    assert_eq!(
        out.object
            .spec
            .metadata_options
            .as_ref()
            .unwrap()
            .http_put_response_hop_limit,
        Some(1)
    );
    assert_eq!(out.object.spec.ami_selector_terms, alias("al2023@latest"));
    assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
    let bad = convert::from_v1beta1(&old, Some(json!({"maxPods": "many"})));
    assert_eq!(bad.object.spec.kubelet, None);
    assert!(has_warning(&bad.warnings, "kubelet: cannot be read"));
}

#[test]
fn partial_metadata_options_get_the_old_hop_limit() {
    let old = beta(json!({"amiFamily": "AL2", "metadataOptions": {"httpTokens": "optional"}}));
    let out = convert::from_v1beta1(&old, None);
    let m = out.object.spec.metadata_options.unwrap();
    assert_eq!(m.http_put_response_hop_limit, Some(2));
    assert_eq!(m.http_tokens.as_deref(), Some("optional"));
    assert_eq!(m.http_endpoint, None);
    assert!(has_warning(
        &out.warnings,
        "spec.metadataOptions.httpPutResponseHopLimit:"
    ));
}

#[test]
fn ubuntu_becomes_al2_with_its_root_volume() {
    let old = beta(json!({"amiFamily": "Ubuntu", "amiSelectorTerms": [{"id": "ami-0123"}]}));
    let out = convert::from_v1beta1(&old, None);
    let nc = &out.object;
    assert_eq!(nc.spec.ami_family.as_deref(), Some("AL2"));
    assert_eq!(
        nc.spec.ami_selector_terms.as_ref().unwrap()[0]
            .id
            .as_deref(),
        Some("ami-0123")
    );
    assert_eq!(
        nc.metadata.annotations.as_ref().unwrap()[UBUNTU_COMPATIBILITY_ANNOTATION],
        "amiFamily,blockDeviceMappings"
    );
    let root = &nc.spec.block_device_mappings.as_ref().unwrap()[0];
    assert_eq!(root.device_name.as_deref(), Some("/dev/sda1"));
    assert_eq!(root.root_volume, Some(true));
    let ebs = root.ebs.as_ref().unwrap();
    assert_eq!(
        (
            ebs.encrypted,
            ebs.volume_type.as_deref(),
            ebs.volume_size.clone()
        ),
        (
            Some(true),
            Some("gp3"),
            Some(IntOrString::String("20Gi".into()))
        )
    );
    assert!(has_warning(&out.warnings, "spec.amiFamily: Ubuntu"));

    let with_bdm = beta(
        json!({"amiFamily": "Ubuntu", "amiSelectorTerms": [{"id": "ami-0123"}], "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"volumeSize": "50Gi"}}]}),
    );
    let out = convert::from_v1beta1(&with_bdm, None);
    assert_eq!(
        out.object.metadata.annotations.as_ref().unwrap()[UBUNTU_COMPATIBILITY_ANNOTATION],
        "amiFamily"
    );
    assert_eq!(
        out.object.spec.block_device_mappings,
        with_bdm.spec.block_device_mappings
    );

    let no_terms = beta(json!({"amiFamily": "Ubuntu"}));
    let out = convert::from_v1beta1(&no_terms, None);
    assert_eq!(
        out.object.metadata.annotations.as_ref().unwrap()[UBUNTU_COMPATIBILITY_ANNOTATION],
        "incompatible"
    );
    assert_eq!(out.object.spec.ami_selector_terms, None);
}

#[test]
fn custom_family_without_terms_is_reported() {
    let out = convert::from_v1beta1(&beta(json!({"amiFamily": "Custom"})), None);
    assert_eq!(out.object.spec.ami_selector_terms, None);
    assert!(has_warning(
        &out.warnings,
        "spec.amiSelectorTerms: not set and amiFamily Custom has no alias"
    ));
    assert!(
        validate::ec2nodeclass(&out.object)
            .iter()
            .any(|e| e.to_string() == "spec.amiSelectorTerms: required value")
    );
}

#[test]
fn v1alpha1_selector_maps_become_terms() {
    let old = alpha(json!({
        "instanceProfile": "p",
        "amiFamily": "Bottlerocket",
        "subnetSelector": {"aws-ids": "subnet-a, subnet-b"},
        "securityGroupSelector": {"aws::ids": "sg-1", "Name": "x"},
        "amiSelector": {"aws::name": "my-ami-*", "aws::owners": "self,123456789012", "team": "a"},
        "launchTemplate": "my-template",
        "userData": "echo hi",
        "detailedMonitoring": true,
        "context": "c",
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}],
        "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 3, "httpTokens": "optional"},
    }));
    let out = convert::from_v1alpha1(&old, None);
    let s = &out.object.spec;
    let ids: Vec<_> = s
        .subnet_selector_terms
        .as_ref()
        .unwrap()
        .iter()
        .map(|t| (t.id.clone(), t.tags.clone()))
        .collect();
    assert_eq!(
        ids,
        [
            (Some("subnet-a".to_string()), None),
            (Some("subnet-b".to_string()), None)
        ]
    );
    let sgs = s.security_group_selector_terms.as_ref().unwrap();
    assert_eq!(
        (sgs.len(), sgs[0].id.as_deref(), sgs[0].tags.as_ref()),
        (1, Some("sg-1"), None)
    );
    assert!(has_warning(
        &out.warnings,
        "spec.securityGroupSelector: tags [\"Name\"] were ANDed"
    ));
    let amis = s.ami_selector_terms.as_ref().unwrap();
    assert_eq!(amis.len(), 2);
    for (term, owner) in amis.iter().zip(["self", "123456789012"]) {
        assert_eq!(term.name.as_deref(), Some("my-ami-*"));
        assert_eq!(term.owner.as_deref(), Some(owner));
        assert_eq!(term.tags, tags(&[("team", "a")]));
        assert_eq!((term.id.as_ref(), term.alias.as_ref()), (None, None));
    }
    assert_eq!(s.ami_family.as_deref(), Some("Bottlerocket"));
    assert_eq!(s.instance_profile.as_deref(), Some("p"));
    assert_eq!(s.user_data.as_deref(), Some("echo hi"));
    assert_eq!(s.detailed_monitoring, Some(true));
    assert_eq!(s.context.as_deref(), Some("c"));
    assert_eq!(s.block_device_mappings, old.spec.block_device_mappings);
    assert_eq!(s.metadata_options, old.spec.metadata_options);
    assert!(has_warning(
        &out.warnings,
        "spec.launchTemplate: launch template \"my-template\" has no v1 equivalent"
    ));
    let json = serde_json::to_value(&out.object).unwrap();
    assert!(json["spec"].get("launchTemplate").is_none());
    assert_eq!(validate::ec2nodeclass(&out.object), vec![]);
}

#[test]
fn ami_ids_win_over_other_selector_keys() {
    let old = alpha(json!({"amiSelector": {"aws::ids": "ami-1,ami-2", "aws::name": "n"}}));
    let out = convert::from_v1alpha1(&old, None);
    let ids: Vec<_> = out
        .object
        .spec
        .ami_selector_terms
        .unwrap()
        .into_iter()
        .map(|t| t.id.unwrap())
        .collect();
    assert_eq!(ids, ["ami-1", "ami-2"]);
    assert!(has_warning(
        &out.warnings,
        "spec.amiSelector: name, owners and tags were ANDed"
    ));
}

#[test]
fn unknown_fields_are_carried_and_reported() {
    let old = beta(json!({"amiFamily": "AL2", "newField": {"a": 1}}));
    let out = convert::from_v1beta1(&old, None);
    assert_eq!(out.object.spec.extra["newField"], json!({"a": 1}));
    assert!(has_warning(
        &out.warnings,
        "spec.newField: not a v1beta1 EC2NodeClass field"
    ));
    let old = alpha(json!({"launchTemplateName": "lt", "other": true}));
    let out = convert::from_v1alpha1(&old, None);
    assert!(!out.object.spec.extra.contains_key("launchTemplateName"));
    assert_eq!(out.object.spec.extra["other"], true);
    assert!(has_warning(&out.warnings, "spec.launchTemplateName:"));
    assert!(has_warning(
        &out.warnings,
        "spec.other: not a v1alpha1 AWSNodeTemplate field"
    ));
}

#[test]
fn status_is_carried_over() {
    let mut old = beta(json!({"amiFamily": "AL2"}));
    old.status = serde_json::from_value(json!({
        "subnets": [{"id": "subnet-1", "zone": "a"}],
        "securityGroups": [{"id": "sg-1"}],
        "amis": [{"id": "ami-1", "requirements": []}],
        "instanceProfile": "p",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
    }))
    .unwrap();
    let out = convert::from_v1beta1(&old, None);
    let st = serde_json::to_value(out.object.status.unwrap()).unwrap();
    assert_eq!(st, serde_json::to_value(old.status.unwrap()).unwrap());
}

#[test]
fn volume_sizes_are_restated_in_units_v1_accepts() {
    let old = beta(
        json!({"amiFamily": "AL2", "role": "r", "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}],
        "blockDeviceMappings": [
            {"deviceName": "/dev/a", "ebs": {"volumeSize": "20Gi"}},
            {"deviceName": "/dev/b", "ebs": {"volumeSize": 21474836480i64}},
            {"deviceName": "/dev/c", "ebs": {"volumeSize": "20971520Ki"}},
            {"deviceName": "/dev/d", "ebs": {"volumeSize": "100G"}},
            {"deviceName": "/dev/e", "ebs": {"volumeSize": "5000M"}},
            {"deviceName": "/dev/f", "ebs": {"volumeSize": "1500Mi"}},
        ]}),
    );
    let out = convert::from_v1beta1(&old, None);
    let sizes: Vec<String> = out
        .object
        .spec
        .block_device_mappings
        .as_ref()
        .unwrap()
        .iter()
        .map(|b| {
            b.ebs
                .as_ref()
                .unwrap()
                .volume_size
                .as_ref()
                .unwrap()
                .to_text()
        })
        .collect();
    assert_eq!(sizes, ["20Gi", "20Gi", "20Gi", "100G", "5G", "1500Mi"]);
    assert!(has_warning(
        &out.warnings,
        "spec.blockDeviceMappings[1].ebs.volumeSize: 21474836480 restated as 20Gi"
    ));
    assert!(has_warning(
        &out.warnings,
        "spec.blockDeviceMappings[5].ebs.volumeSize: 1500Mi is not a whole number"
    ));
    let errs: Vec<String> = validate::ec2nodeclass(&out.object)
        .iter()
        .map(|e| e.path.clone())
        .collect();
    assert_eq!(errs, ["spec.blockDeviceMappings[5].ebs.volumeSize"]);
}

#[test]
fn v1alpha1_partial_metadata_options_keep_ec2_defaults() {
    let old =
        alpha(json!({"instanceProfile": "p", "metadataOptions": {"httpPutResponseHopLimit": 3}}));
    let out = convert::from_v1alpha1(&old, None);
    assert_eq!(
        out.object.spec.metadata_options,
        Some(MetadataOptions {
            http_endpoint: Some("enabled".into()),
            http_protocol_ipv6: Some("disabled".into()),
            http_put_response_hop_limit: Some(3),
            http_tokens: Some("optional".into()),
            extra: Default::default(),
        })
    );
    assert!(has_warning(
        &out.warnings,
        "spec.metadataOptions: fields left out took EC2's defaults"
    ));
    assert!(
        out.warnings
            .iter()
            .any(|w| w.ends_with("consider httpTokens: required"))
    );
    // A template without metadataOptions had Karpenter's defaults, hop limit 2 and tokens required.
    let out = convert::from_v1alpha1(&alpha(json!({"instanceProfile": "p"})), None);
    let m = out.object.spec.metadata_options.unwrap();
    assert_eq!(
        (m.http_put_response_hop_limit, m.http_tokens.as_deref()),
        (Some(2), Some("required"))
    );
}

#[test]
fn v1alpha1_empty_tag_values_become_wildcards() {
    let old = alpha(json!({
        "instanceProfile": "p",
        "subnetSelector": {"kubernetes.io/role/internal-elb": ""},
        "securityGroupSelector": {"team": "*"},
        "amiSelector": {"release": ""},
    }));
    let out = convert::from_v1alpha1(&old, None);
    let s = &out.object.spec;
    assert_eq!(
        s.subnet_selector_terms.as_ref().unwrap()[0].tags,
        tags(&[("kubernetes.io/role/internal-elb", "*")])
    );
    assert_eq!(
        s.security_group_selector_terms.as_ref().unwrap()[0].tags,
        tags(&[("team", "*")])
    );
    assert_eq!(
        s.ami_selector_terms.as_ref().unwrap()[0].tags,
        tags(&[("release", "*")])
    );
    assert_eq!(validate::ec2nodeclass(&out.object), vec![]);
}

#[test]
fn v1alpha1_provider_leftovers() {
    let old = alpha(json!({
        "apiVersion": "extensions.karpenter.sh/v1alpha1",
        "kind": "AWS",
        "associatePublicIpAddress": false,
        "instanceProfile": "p",
    }));
    let out = convert::from_v1alpha1(&old, None);
    assert_eq!(out.object.spec.associate_public_ip_address, Some(false));
    assert!(out.object.spec.extra.is_empty());
    assert!(has_warning(
        &out.warnings,
        "spec.apiVersion: \"extensions.karpenter.sh/v1alpha1\" described the inline provider"
    ));
    assert!(has_warning(&out.warnings, "spec.kind:"));
}
