//! `nodewright catalog`, run as the built binary: the file it writes, read back as an
//! interchange catalog, is what the simulated cloud offers for that AMI family (the same
//! types, allocatable, labels, offerings and prices), and a bad family is an error naming
//! the flag.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use nodewright_api::interchange;
use nodewright_aws_model::AmiFamily;
use nodewright_cloud_sim::{SimCloud, SimCloudConfig};
use nodewright_core::model::InstanceType;
use nodewright_core::requirements::Operator;
use nodewright_core::resources;

fn catalog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .arg("catalog")
        .args(args)
        .env_remove("AWS_REGION")
        .output()
        .expect("runs")
}

/// What a type puts on a Node and what it costs where: (allocatable cpu, memory, pods,
/// labels, offerings).
type Shape = (
    i64,
    i64,
    i64,
    Vec<(String, String)>,
    Vec<(String, String, u64)>,
);

fn shapes(types: &[InstanceType]) -> BTreeMap<String, Shape> {
    types
        .iter()
        .map(|it| {
            let a = it.allocatable();
            let mut labels: Vec<(String, String)> = it
                .requirements
                .iter()
                // The reader adds the type's own name as a label; the name is the key here.
                .filter(|r| r.operator == Operator::In && r.values.len() == 1)
                .filter(|r| r.key != "node.kubernetes.io/instance-type")
                .map(|r| (r.key.clone(), r.values[0].clone()))
                .collect();
            labels.sort();
            let offerings = it
                .offerings
                .iter()
                .map(|o| {
                    (
                        o.zone.clone(),
                        o.capacity_type.as_str().to_string(),
                        // Prices to a millionth of a dollar: the file holds decimal text.
                        (o.price * 1e6).round() as u64,
                    )
                })
                .collect();
            let shape = (
                a.get(resources::CPU),
                a.get(resources::MEMORY),
                a.get(resources::PODS),
                labels,
                offerings,
            );
            (it.name.clone(), shape)
        })
        .collect()
}

#[test]
fn the_export_reads_back_as_the_simulated_clouds_catalog() {
    let dir = std::env::temp_dir().join(format!("nodewright-catalog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("catalog.json");
    let out = catalog(&["--ami-family", "AL2", "--output", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(doc["meta"]["amiFamily"], "AL2");
    let read = interchange::read_catalog("catalog.json", &doc).expect("reads back");

    let cloud = SimCloud::new(SimCloudConfig::default()).unwrap();
    let offered = cloud.family_types(AmiFamily::AL2);
    assert!(offered.len() > 500, "{} types", offered.len());
    let (want, got) = (shapes(&offered), shapes(&read));
    assert_eq!(want.len(), got.len());
    for (name, shape) in &want {
        assert_eq!(got.get(name), Some(shape), "{name}");
    }
    // Another family's types differ (Windows nodes carry their OS), so the flag is not ignored.
    let windows = shapes(&cloud.family_types(AmiFamily::Windows2022));
    assert!(windows != want);
}

#[test]
fn an_unknown_ami_family_is_an_error_naming_the_flag() {
    let out = catalog(&["--ami-family", "Ubuntu"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--ami-family \"Ubuntu\": not an AMI family"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
