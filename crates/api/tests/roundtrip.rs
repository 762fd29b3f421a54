//! YAML → typed objects → YAML keeps every field and adds none, for every supported kind,
//! including fields the types do not model.

mod common;

use nodewright_api::object::Object;

fn assert_round_trip(rel: &str) -> usize {
    let mut n = 0;
    for doc in common::docs(rel) {
        let Some(object) = Object::parse(&doc).unwrap_or_else(|e| panic!("{doc}: {e}")) else {
            continue;
        };
        assert_eq!(
            object.to_value(),
            doc.value,
            "{doc} changed on the round trip"
        );
        let yaml = serde_yaml::to_string(&object.to_value()).unwrap();
        let back: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, doc.value, "{doc} changed through YAML");
        n += 1;
    }
    n
}

#[test]
fn full_featured_v1_objects_round_trip() {
    assert_eq!(assert_round_trip("roundtrip/nodepool-v1-full.yaml"), 1);
    assert_eq!(assert_round_trip("roundtrip/nodepool-v1-static.yaml"), 1);
    assert_eq!(assert_round_trip("roundtrip/nodeclaim-v1.yaml"), 1);
}

#[test]
fn unknown_fields_are_kept() {
    assert_eq!(
        assert_round_trip("roundtrip/nodepool-v1-unknown-fields.yaml"),
        1
    );
    let doc = &common::docs("roundtrip/nodepool-v1-unknown-fields.yaml")[0];
    let Some(Object::NodePool(np)) = Object::parse(doc).unwrap() else {
        panic!("not a NodePool")
    };
    assert!(np.extra.contains_key("futureTopLevel"));
    assert!(
        np.spec.template.spec.requirements[0]
            .extra
            .contains_key("futureRequirementField")
    );
}

#[test]
fn every_seed_round_trips() {
    let mut total = 0;
    for entry in std::fs::read_dir(common::fixture("seed-manifests")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        total += assert_round_trip(&format!("seed-manifests/{name}"));
    }
    assert!(total >= 5, "only {total} Karpenter objects in the seeds");
}
