//! Bottlerocket's settings merged from the user's TOML, the cluster and the NodeClass.

use super::super::testutil::{decode, full};
use super::super::{BootstrapInput, generate};
use super::*;
use crate::nodeclass::AmiFamily;

fn table<'a>(t: &'a Table, path: &[&str]) -> &'a Table {
    path.iter().fold(t, |t, k| match &t[*k] {
        Value::Table(inner) => inner,
        other => panic!("{k} is {other:?}"),
    })
}

fn settings_of(input: &BootstrapInput) -> Table {
    toml::parse(&decode(&generate(input).unwrap())).unwrap()
}

#[test]
fn kubernetes_settings_are_set_and_user_settings_kept() {
    let mut i = full(AmiFamily::Bottlerocket);
    i.user_data = Some(
        r#"
[settings.kubernetes]
cluster-name = "wrong"
max-pods = 7
allowed-unsafe-sysctls = ["net.core.somaxconn"]
[settings.kubernetes.node-labels]
"user/label" = "kept"
team = "overridden"
[settings.kubernetes.node-taints]
"user/taint" = ["x:NoSchedule"]
[settings.host-containers.admin]
enabled = true
[settings.autoscaling]
should-wait = true
"#
        .into(),
    );
    let root = settings_of(&i);
    let k = table(&root, &["settings", "kubernetes"]);
    let s = |v: &str| Value::String(v.into());
    assert_eq!(k["cluster-name"], s("prod"));
    assert_eq!(
        k["api-server"],
        s("https://ABC.gr7.us-west-2.eks.amazonaws.com")
    );
    assert_eq!(k["cluster-certificate"], s("Q0FCVU5ETEU="));
    assert_eq!(k["cluster-dns-ip"], s("10.100.0.10"));
    assert_eq!(k["max-pods"], Value::Integer(42));
    assert_eq!(
        k["allowed-unsafe-sysctls"],
        strings(&["net.core.somaxconn"])
    );
    assert_eq!(
        table(k, &["system-reserved"]),
        &Table::from([("cpu".into(), s("100m")), ("memory".into(), s("200Mi"))])
    );
    assert_eq!(table(k, &["kube-reserved"])["memory"], s("300Mi"));
    assert_eq!(table(k, &["eviction-hard"])["memory.available"], s("5%"));
    assert_eq!(table(k, &["eviction-soft"])["nodefs.available"], s("15%"));
    assert_eq!(
        table(k, &["eviction-soft-grace-period"])["nodefs.available"],
        s("1m30s")
    );
    assert_eq!(k["eviction-max-pod-grace-period"], Value::Integer(60));
    assert_eq!(k["image-gc-high-threshold-percent"], s("85"));
    assert_eq!(k["image-gc-low-threshold-percent"], s("70"));
    assert_eq!(k["cpu-cfs-quota-enforced"], Value::Boolean(false));
    assert!(!k.contains_key("pods-per-core"));
    assert_eq!(
        table(k, &["node-labels"]),
        &Table::from([
            ("karpenter.sh/nodepool".into(), s("default")),
            ("team".into(), s("web")),
            ("user/label".into(), s("kept")),
        ])
    );
    assert_eq!(
        table(k, &["node-taints"]),
        &Table::from([
            ("dedicated".into(), strings(&["gpu:NoSchedule"])),
            ("cni-not-ready".into(), strings(&[":NoSchedule"])),
            ("karpenter.sh/unregistered".into(), strings(&[":NoExecute"])),
        ])
    );
    assert_eq!(
        table(&root, &["settings", "host-containers", "admin"])["enabled"],
        Value::Boolean(true)
    );
    let raid = table(
        &root,
        &[
            "settings",
            "bootstrap-commands",
            "000-mount-instance-storage",
        ],
    );
    assert_eq!(raid["mode"], s("always"));
    assert_eq!(raid["essential"], Value::Boolean(true));
    assert_eq!(
        raid["commands"],
        Value::Array(vec![
            strings(&["apiclient", "ephemeral-storage", "init"]),
            strings(&[
                "apiclient",
                "ephemeral-storage",
                "bind",
                "--dirs",
                "/var/lib/containerd",
                "/var/lib/kubelet",
                "/var/log/pods"
            ]),
        ])
    );
}

#[test]
fn minimal_input_without_user_data() {
    let i = BootstrapInput::new(AmiFamily::Bottlerocket, "c", "https://e");
    let out = decode(&generate(&i).unwrap());
    assert_eq!(
        out,
        "[settings.kubernetes]\napi-server = \"https://e\"\ncluster-name = \"c\"\n"
    );
}

#[test]
fn registry_mirrors_and_inline_tables_survive() {
    let mut i = full(AmiFamily::Bottlerocket);
    i.user_data = Some(
        "[[settings.container-registry.mirrors]]\nregistry = \"docker.io\"\nendpoint = [\"https://m.example\"]\n[settings.kubernetes]\nnode-labels = { team = \"user\", zone = \"x\" }\n".into(),
    );
    let out = decode(&generate(&i).unwrap());
    assert!(out.contains("[[settings.container-registry.mirrors]]\nendpoint = [\"https://m.example\"]\nregistry = \"docker.io\"\n"), "{out}");
    let root = toml::parse(&out).unwrap();
    let labels = table(&root, &["settings", "kubernetes", "node-labels"]);
    assert_eq!(labels["team"], Value::String("web".into()));
    assert_eq!(labels["zone"], Value::String("x".into()));
}

#[test]
fn bad_toml_and_type_conflicts_are_errors() {
    let mut i = full(AmiFamily::Bottlerocket);
    i.user_data = Some("[settings]\nx = 1.5\n".into());
    match generate(&i) {
        Err(UserDataError::Toml(e)) => assert_eq!(e.line, 2),
        other => panic!("{other:?}"),
    }
    i.user_data = Some("settings = \"flat\"".into());
    assert!(matches!(generate(&i), Err(UserDataError::Conflict(_))));
    i.user_data = Some("[settings]\nkubernetes = 1".into());
    assert!(matches!(generate(&i), Err(UserDataError::Conflict(_))));
}
