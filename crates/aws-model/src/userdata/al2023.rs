//! Amazon Linux 2023: nodeadm reads every `application/node.eks.aws` part of the MIME archive
//! and merges them in order, so the generated `NodeConfig` goes last and wins.

use std::collections::BTreeMap;

use super::mime::{self, MimePart};
use super::{BootstrapInput, UserDataError, labels_csv};
use crate::nodeclass::AmiFamily;

const NODECONFIG: &str = "application/node.eks.aws";
const SHELL: &str = "text/x-shellscript; charset=\"us-ascii\"";

/// The YAML this module writes: block style, strings always double-quoted.
enum Yaml {
    Str(String),
    Int(i64),
    Bool(bool),
    List(Vec<Yaml>),
    Map(Vec<(String, Yaml)>),
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric()) {
        k.to_string()
    } else {
        quote(k)
    }
}

impl Yaml {
    fn scalar(&self) -> Option<String> {
        match self {
            Yaml::Str(s) => Some(quote(s)),
            Yaml::Int(i) => Some(i.to_string()),
            Yaml::Bool(b) => Some(b.to_string()),
            Yaml::List(l) if l.is_empty() => Some("[]".into()),
            Yaml::Map(m) if m.is_empty() => Some("{}".into()),
            _ => None,
        }
    }

    fn render(&self, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match self {
            Yaml::Map(entries) => {
                for (k, v) in entries {
                    match v.scalar() {
                        Some(s) => out.push_str(&format!("{pad}{}: {s}\n", key(k))),
                        None => {
                            out.push_str(&format!("{pad}{}:\n", key(k)));
                            v.render(indent + 2, out);
                        }
                    }
                }
            }
            Yaml::List(items) => {
                for item in items {
                    match item.scalar() {
                        Some(s) => out.push_str(&format!("{pad}- {s}\n")),
                        None => {
                            // The first line of a nested block shares the dash's line.
                            let mut inner = String::new();
                            item.render(indent + 2, &mut inner);
                            out.push_str(&format!("{pad}- {}", &inner[indent + 2..]));
                        }
                    }
                }
            }
            scalar => out.push_str(&format!("{pad}{}\n", scalar.scalar().unwrap_or_default())),
        }
    }
}

fn str_map(m: &BTreeMap<String, String>) -> Yaml {
    Yaml::Map(
        m.iter()
            .map(|(k, v)| (k.clone(), Yaml::Str(v.clone())))
            .collect(),
    )
}

fn kubelet_config(input: &BootstrapInput) -> Yaml {
    let k = &input.kubelet;
    let mut c: BTreeMap<&str, Yaml> = BTreeMap::new();
    if !k.cluster_dns.is_empty() {
        c.insert(
            "clusterDNS",
            Yaml::List(k.cluster_dns.iter().map(|d| Yaml::Str(d.clone())).collect()),
        );
    }
    if let Some(n) = k.max_pods {
        c.insert("maxPods", Yaml::Int(n));
    }
    if let Some(n) = k.pods_per_core {
        c.insert("podsPerCore", Yaml::Int(n));
    }
    for (name, m) in [
        ("systemReserved", &k.system_reserved),
        ("kubeReserved", &k.kube_reserved),
        ("evictionHard", &k.eviction_hard),
        ("evictionSoft", &k.eviction_soft),
        ("evictionSoftGracePeriod", &k.eviction_soft_grace_period),
    ] {
        if !m.is_empty() {
            c.insert(name, str_map(m));
        }
    }
    if let Some(n) = k.eviction_max_pod_grace_period {
        c.insert("evictionMaxPodGracePeriod", Yaml::Int(n));
    }
    if let Some(n) = k.image_gc_high_threshold_percent {
        c.insert("imageGCHighThresholdPercent", Yaml::Int(n));
    }
    if let Some(n) = k.image_gc_low_threshold_percent {
        c.insert("imageGCLowThresholdPercent", Yaml::Int(n));
    }
    if let Some(b) = k.cpu_cfs_quota {
        c.insert("cpuCFSQuota", Yaml::Bool(b));
    }
    if !input.taints.is_empty() {
        let taints = input
            .taints
            .iter()
            .map(|t| {
                let mut m = vec![("key".to_string(), Yaml::Str(t.key.clone()))];
                if !t.value.is_empty() {
                    m.push(("value".into(), Yaml::Str(t.value.clone())));
                }
                m.push(("effect".into(), Yaml::Str(t.effect.as_str().into())));
                Yaml::Map(m)
            })
            .collect();
        c.insert("registerWithTaints", Yaml::List(taints));
    }
    Yaml::Map(c.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn node_config(input: &BootstrapInput) -> Result<String, UserDataError> {
    let cidr = input.cluster_cidr.as_ref().ok_or(UserDataError::Missing {
        family: AmiFamily::AL2023,
        field: "the cluster service CIDR",
    })?;
    let mut cluster = vec![
        ("name".to_string(), Yaml::Str(input.cluster_name.clone())),
        (
            "apiServerEndpoint".into(),
            Yaml::Str(input.cluster_endpoint.clone()),
        ),
    ];
    if let Some(ca) = &input.ca_bundle {
        if super::base64::decode(ca).is_none() {
            return Err(UserDataError::Unrecognised {
                family: AmiFamily::AL2023,
                reason: "the cluster CA bundle is not valid base64".into(),
            });
        }
        cluster.push(("certificateAuthority".into(), Yaml::Str(ca.clone())));
    }
    cluster.push(("cidr".into(), Yaml::Str(cidr.clone())));
    let mut kubelet = vec![("config".to_string(), kubelet_config(input))];
    if !input.labels.is_empty() {
        kubelet.push((
            "flags".into(),
            Yaml::List(vec![Yaml::Str(format!(
                "--node-labels={}",
                labels_csv(&input.labels)
            ))]),
        ));
    }
    let mut spec = vec![
        ("cluster".to_string(), Yaml::Map(cluster)),
        ("kubelet".into(), Yaml::Map(kubelet)),
    ];
    if input.instance_store_raid0 {
        spec.push((
            "instance".into(),
            Yaml::Map(vec![(
                "localStorage".into(),
                Yaml::Map(vec![("strategy".into(), Yaml::Str("RAID0".into()))]),
            )]),
        ));
    }
    let mut out = String::from("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n");
    Yaml::Map(spec).render(2, &mut out);
    Ok(out)
}

/// A YAML document declaring `kind: NodeConfig` of a `node.eks.aws` API version.
fn is_node_config(s: &str) -> bool {
    let top = |name: &str| {
        s.lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix(':'))
                .map(|v| v.trim().trim_matches(|c| c == '"' || c == '\''))
        })
    };
    top("apiVersion").is_some_and(|v| v.starts_with("node.eks.aws/"))
        && top("kind") == Some("NodeConfig")
}

fn user_parts(input: &BootstrapInput) -> Result<Vec<MimePart>, UserDataError> {
    let Some(u) = input.custom_user_data() else {
        return Ok(Vec::new());
    };
    if mime::is_mime(u) {
        mime::parse(u)
    } else if is_node_config(u) {
        Ok(vec![MimePart::new(NODECONFIG, u)])
    } else {
        Ok(vec![MimePart::new(SHELL, u)])
    }
}

pub(super) fn script(input: &BootstrapInput) -> Result<String, UserDataError> {
    let mut parts = user_parts(input)?;
    parts.push(MimePart::new(NODECONFIG, &node_config(input)?));
    Ok(mime::serialize(&parts))
}

#[cfg(test)]
mod tests {
    use super::super::generate;
    use super::super::testutil::{decode, full};
    use super::*;

    fn parts_of(input: &BootstrapInput) -> Vec<MimePart> {
        mime::parse(&decode(&generate(input).unwrap())).unwrap()
    }

    #[test]
    fn node_config_has_every_field() {
        let parts = parts_of(&full(AmiFamily::AL2023));
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].content_type, NODECONFIG);
        let want = r#"apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: "prod"
    apiServerEndpoint: "https://ABC.gr7.us-west-2.eks.amazonaws.com"
    certificateAuthority: "Q0FCVU5ETEU="
    cidr: "10.100.0.0/16"
  kubelet:
    config:
      clusterDNS:
        - "10.100.0.10"
      cpuCFSQuota: false
      evictionHard:
        "memory.available": "5%"
      evictionMaxPodGracePeriod: 60
      evictionSoft:
        "nodefs.available": "15%"
      evictionSoftGracePeriod:
        "nodefs.available": "1m30s"
      imageGCHighThresholdPercent: 85
      imageGCLowThresholdPercent: 70
      kubeReserved:
        memory: "300Mi"
      maxPods: 42
      podsPerCore: 4
      registerWithTaints:
        - key: "dedicated"
          value: "gpu"
          effect: "NoSchedule"
        - key: "cni-not-ready"
          effect: "NoSchedule"
        - key: "karpenter.sh/unregistered"
          effect: "NoExecute"
      systemReserved:
        cpu: "100m"
        memory: "200Mi"
    flags:
      - "--node-labels=karpenter.sh/nodepool=default,team=web"
  instance:
    localStorage:
      strategy: "RAID0""#;
        assert_eq!(parts[0].content, want);
    }

    #[test]
    fn cidr_is_required() {
        let mut i = full(AmiFamily::AL2023);
        i.cluster_cidr = None;
        assert!(matches!(generate(&i), Err(UserDataError::Missing { .. })));
    }

    #[test]
    fn user_parts_come_first_and_generated_config_last() {
        let mut i = full(AmiFamily::AL2023);
        let user_config = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s";
        i.user_data = Some(user_config.into());
        let parts = parts_of(&i);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], MimePart::new(NODECONFIG, user_config));
        assert!(parts[1].content.contains("maxPods: 42"));

        i.user_data = Some("#!/bin/bash\necho hello".into());
        let parts = parts_of(&i);
        assert_eq!(parts[0], MimePart::new(SHELL, "#!/bin/bash\necho hello"));

        i.user_data = Some(mime::serialize(&[
            MimePart::new("text/x-shellscript", "echo a"),
            MimePart::new(NODECONFIG, user_config),
        ]));
        let parts = parts_of(&i);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].content, "echo a");
        assert_eq!(parts[1].content, user_config);
        assert_eq!(parts[2].content_type, NODECONFIG);
    }

    #[test]
    fn other_user_data_is_a_shell_part_and_a_bad_ca_is_an_error() {
        let mut i = full(AmiFamily::AL2023);
        i.user_data = Some("echo no shebang".into());
        assert_eq!(parts_of(&i)[0], MimePart::new(SHELL, "echo no shebang"));
        i.ca_bundle = Some("not base64!".into());
        assert!(matches!(
            generate(&i),
            Err(UserDataError::Unrecognised { .. })
        ));
    }

    #[test]
    fn minimal_config_omits_empty_sections() {
        let mut i = BootstrapInput::new(AmiFamily::AL2023, "c", "https://e");
        i.cluster_cidr = Some("172.20.0.0/16".into());
        let parts = parts_of(&i);
        let c = &parts[0].content;
        assert!(c.contains("    config: {}"), "{c}");
        assert!(
            !c.contains("flags") && !c.contains("instance") && !c.contains("certificateAuthority")
        );
    }
}
