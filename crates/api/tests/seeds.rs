//! Every seed manifest validates (older generations after conversion), and the conversions give
//! the expected v1 objects, checked field by field.

mod common;

use nodewright_api::convert::{
    ConvertOptions, Item, KUBELET_COMPATIBILITY_ANNOTATION, Outcome, convert_documents,
};
use nodewright_api::document::Document;
use nodewright_api::object::Object;
use nodewright_api::v1;
use serde_json::json;

fn convert(docs: Vec<Document>) -> Vec<Item> {
    convert_documents(docs, &ConvertOptions::default())
}

fn nodepool(item: &Item) -> &v1::NodePool {
    match item.object() {
        Some(Object::NodePool(np)) => np,
        other => panic!("{}: expected a v1 NodePool, got {other:?}", item.doc),
    }
}

fn warnings(item: &Item) -> &[String] {
    match &item.outcome {
        Outcome::Converted { warnings, .. } => warnings,
        _ => &[],
    }
}

fn reqs(np: &v1::NodePool) -> Vec<(String, String, Vec<String>)> {
    np.spec
        .template
        .spec
        .requirements
        .iter()
        .map(|r| (r.key.clone(), r.operator.clone(), r.values().to_vec()))
        .collect()
}

fn req(key: &str, op: &str, values: &[&str]) -> (String, String, Vec<String>) {
    (
        key.to_string(),
        op.to_string(),
        values.iter().map(|v| v.to_string()).collect(),
    )
}

fn ref_of(np: &v1::NodePool) -> (&str, &str, &str) {
    let r = &np.spec.template.spec.node_class_ref;
    (&r.group, &r.kind, &r.name)
}

#[test]
fn all_seeds_validate_together() {
    let items = convert(common::docs("seed-manifests"));
    let mut checked = 0;
    for item in &items {
        if let Outcome::Failed(e) = &item.outcome {
            panic!("{}: {e}", item.doc);
        }
        if let Some(report) = item.validate() {
            assert!(
                report.errors.is_empty(),
                "{}: {:?}",
                item.doc,
                report.errors
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 8);
    assert!(
        items
            .iter()
            .any(|i| matches!(i.outcome, Outcome::NotKarpenter)),
        "the Deployment is skipped"
    );
}

#[test]
fn each_seed_file_validates_on_its_own() {
    for entry in std::fs::read_dir(common::fixture("seed-manifests")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        for item in convert(common::docs(&format!("seed-manifests/{name}"))) {
            if let Some(report) = item.validate() {
                assert!(
                    report.errors.is_empty(),
                    "{}: {:?}",
                    item.doc,
                    report.errors
                );
            }
        }
    }
}

#[test]
fn v1beta1_nodepool_converts_field_by_field() {
    let items = convert(common::docs("seed-manifests/01-nodepool-v1beta1.yaml"));
    let np = nodepool(&items[0]);
    assert_eq!(np.api_version, "karpenter.sh/v1");
    assert_eq!(np.kind, "NodePool");
    assert_eq!(np.metadata.name.as_deref(), Some("default"));
    assert_eq!(
        reqs(np),
        [
            req("kubernetes.io/arch", "In", &["amd64"]),
            req("kubernetes.io/os", "In", &["linux"]),
            req("karpenter.sh/capacity-type", "In", &["spot", "on-demand"]),
            req(
                "node.kubernetes.io/instance-type",
                "In",
                &["t3.medium", "t3a.medium"]
            ),
            req("karpenter.k8s.aws/instance-generation", "Gt", &["2"]),
        ]
    );
    assert_eq!(ref_of(np), ("karpenter.k8s.aws", "EC2NodeClass", "default"));
    assert_eq!(
        np.spec.template.spec.expire_after,
        Some(v1::NillableDuration::new("720h"))
    );
    let d = np.spec.disruption.as_ref().unwrap();
    assert_eq!(
        d.consolidation_policy.as_deref(),
        Some("WhenEmptyOrUnderutilized")
    );
    assert_eq!(d.consolidate_after, Some(v1::NillableDuration::new("0s")));
    assert_eq!(d.budgets, None);
    assert_eq!(
        serde_json::to_value(&np.spec.limits).unwrap(),
        json!({"cpu": 1000})
    );
    assert_eq!(np.spec.weight, None);
    // Alone, the NodePool has no node class to hand its kubelet settings to.
    let ann = np.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann[KUBELET_COMPATIBILITY_ANNOTATION], r#"{"maxPods":110}"#);
    assert!(
        warnings(&items[0])
            .iter()
            .any(|w| w.contains(KUBELET_COMPATIBILITY_ANNOTATION))
    );
}

#[test]
fn v1beta1_kubelet_moves_into_the_node_class_in_the_same_input() {
    let mut docs = common::docs("seed-manifests/01-nodepool-v1beta1.yaml");
    docs.extend(common::docs("seed-manifests/02-ec2nodeclass-v1beta1.yaml"));
    let items = convert(docs);
    let np = nodepool(&items[0]);
    assert!(
        np.metadata.annotations.is_none(),
        "no compatibility annotation when the kubelet moved"
    );
    assert!(
        warnings(&items[0])
            .iter()
            .any(|w| w.contains("moved to EC2NodeClass \"default\""))
    );
    let Some(Object::EC2NodeClass(class)) = items[1].object() else {
        panic!("no EC2NodeClass")
    };
    assert_eq!(
        serde_json::to_value(&class.spec.kubelet).unwrap()["maxPods"],
        json!(110),
        "kubelet.maxPods moved to the EC2NodeClass"
    );
}

#[test]
fn v1alpha5_provisioner_converts_field_by_field() {
    let items = convert(common::docs("seed-manifests/03-provisioner-v1alpha5.yaml"));
    let np = nodepool(&items[0]);
    assert_eq!(np.api_version, "karpenter.sh/v1");
    assert_eq!(np.metadata.name.as_deref(), Some("default"));
    assert_eq!(
        reqs(np),
        [
            req("karpenter.k8s.aws/instance-category", "In", &["m"]),
            req("karpenter.k8s.aws/instance-cpu", "In", &["4", "8"]),
            req("karpenter.k8s.aws/instance-hypervisor", "In", &["nitro"]),
            req(
                "topology.kubernetes.io/zone",
                "In",
                &["eu-north-1a", "eu-north-1b", "eu-north-1c"]
            ),
            req("karpenter.sh/capacity-type", "In", &["spot"]),
            // Implicit v1alpha5 defaults for the keys the Provisioner left open.
            req("kubernetes.io/os", "In", &["linux"]),
            req("kubernetes.io/arch", "In", &["amd64"]),
        ]
    );
    assert_eq!(ref_of(np), ("karpenter.k8s.aws", "EC2NodeClass", "default"));
    assert_eq!(
        np.spec.template.spec.expire_after,
        Some(v1::NillableDuration::new("1h"))
    );
    let d = np.spec.disruption.as_ref().unwrap();
    assert_eq!(d.consolidation_policy.as_deref(), Some("WhenEmpty"));
    assert_eq!(d.consolidate_after, Some(v1::NillableDuration::never()));
    assert_eq!(
        serde_json::to_value(&np.spec.limits).unwrap(),
        json!({"cpu": "1000", "memory": "1000Gi"})
    );
    let w = warnings(&items[0]);
    assert!(
        w.iter().any(|w| w.contains("kubernetes.io/os In [linux]")),
        "{w:?}"
    );
    assert!(
        w.iter().any(|w| w.contains("consolidateAfter: Never")),
        "{w:?}"
    );

    let Some(Object::EC2NodeClass(class)) = items[1].object() else {
        panic!("no EC2NodeClass")
    };
    assert_eq!(class.metadata.name.as_deref(), Some("default"));
    // The template named no instance profile: valid in v1alpha1 (cluster default), reported.
    let report = items[1].validate().unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.reason.contains("--default-instance-profile"))
    );
    let with_profile = convert_documents(
        common::docs("seed-manifests/03-provisioner-v1alpha5.yaml"),
        &ConvertOptions {
            default_instance_profile: Some("KarpenterNodeInstanceProfile".into()),
        },
    );
    let report = with_profile[1].validate().unwrap();
    assert!(
        report.errors.is_empty() && report.warnings.is_empty(),
        "{report:?}"
    );
}

#[test]
fn provisioners_get_the_implicit_defaults_they_relied_on() {
    let items = convert(common::docs(
        "seed-manifests/06-provisioners-by-capacity-v1alpha5.yaml",
    ));
    for (item, capacity) in items.iter().zip(["spot", "on-demand"]) {
        let np = nodepool(item);
        assert_eq!(
            reqs(np),
            [
                req("karpenter.sh/capacity-type", "In", &[capacity]),
                req(
                    "karpenter.k8s.aws/instance-category",
                    "In",
                    &["c", "m", "r"]
                ),
                req("karpenter.k8s.aws/instance-generation", "Gt", &["2"]),
                req("kubernetes.io/os", "In", &["linux"]),
                req("kubernetes.io/arch", "In", &["amd64"]),
            ]
        );
        assert_eq!(
            np.spec.template.spec.expire_after,
            Some(v1::NillableDuration::never())
        );
        assert_eq!(
            np.spec.disruption.as_ref().unwrap().consolidate_after,
            Some(v1::NillableDuration::never())
        );
        assert!(np.spec.limits.is_none());
    }
    assert_eq!(
        nodepool(&items[1]).metadata.name.as_deref(),
        Some("on-demand")
    );
}

#[test]
fn v1_seed_is_unchanged_by_conversion() {
    let docs = common::docs("seed-manifests/04-nodepool-ec2nodeclass-v1.yaml");
    let items = convert(docs.clone());
    for (item, doc) in items.iter().zip(&docs) {
        assert!(matches!(item.outcome, Outcome::Current(_)), "{}", item.doc);
        assert_eq!(item.object().unwrap().to_value(), doc.value);
    }
}

#[test]
fn every_seed_nodepool_becomes_a_core_nodepool() {
    let mut n = 0;
    for item in convert(common::docs("seed-manifests")) {
        if let Some(Object::NodePool(np)) = item.object() {
            let core = nodewright_api::to_core::nodepool(np)
                .unwrap_or_else(|e| panic!("{}: {e:?}", item.doc));
            assert_eq!(core.name, np.metadata.name.clone().unwrap());
            assert_eq!(
                core.template.requirements.len(),
                np.spec.template.spec.requirements.len()
            );
            n += 1;
        }
    }
    assert_eq!(n, 5);
}
