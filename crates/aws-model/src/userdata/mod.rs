//! User data per AMI family: what a new instance runs to join the cluster with the right name,
//! endpoint, CA, labels, taints and kubelet settings, merged with the user's own user data.
//!
//! [`generate`] takes a plain [`BootstrapInput`] and returns base64 ready for a launch template,
//! with EC2's 16 KiB limit checked. The families differ only in format: AL2 runs
//! `bootstrap.sh` in a MIME archive, AL2023 appends a nodeadm `NodeConfig`, Bottlerocket merges
//! TOML settings, Windows runs `Start-EKSBootstrap.ps1`, and Custom is passed through.

mod al2;
mod al2023;
pub mod base64;
mod bottlerocket;
pub mod mime;
pub mod toml;
mod windows;

use std::collections::BTreeMap;
use std::fmt;

use nodewright_core::taints::{Taint, TaintEffect};

use crate::nodeclass::AmiFamily;

/// EC2's limit on decoded user data.
pub const MAX_USER_DATA_BYTES: usize = 16384;
/// Above this share of the limit a warning is returned.
pub const WARN_FRACTION: f64 = 0.9;
use nodewright_core::taints::UNREGISTERED_TAINT;

/// The kubelet fields of an EC2NodeClass, as written (quantities and durations as strings).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeletSettings {
    pub cluster_dns: Vec<String>,
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub system_reserved: BTreeMap<String, String>,
    pub kube_reserved: BTreeMap<String, String>,
    pub eviction_hard: BTreeMap<String, String>,
    pub eviction_soft: BTreeMap<String, String>,
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    pub eviction_max_pod_grace_period: Option<i64>,
    pub image_gc_high_threshold_percent: Option<i64>,
    pub image_gc_low_threshold_percent: Option<i64>,
    pub cpu_cfs_quota: Option<bool>,
}

/// Everything user data is made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapInput {
    pub ami_family: AmiFamily,
    pub cluster_name: String,
    pub cluster_endpoint: String,
    /// The cluster CA, base64 (as DescribeCluster returns it).
    pub ca_bundle: Option<String>,
    /// The service CIDR; AL2023's nodeadm requires it.
    pub cluster_cidr: Option<String>,
    /// Labels the node registers with.
    pub labels: BTreeMap<String, String>,
    /// Taints the node registers with; see [`registration_taints`].
    pub taints: Vec<Taint>,
    pub kubelet: KubeletSettings,
    /// `instanceStorePolicy: RAID0`.
    pub instance_store_raid0: bool,
    /// The EC2NodeClass's `userData`.
    pub user_data: Option<String>,
}

impl BootstrapInput {
    pub fn new(ami_family: AmiFamily, cluster_name: &str, cluster_endpoint: &str) -> Self {
        BootstrapInput {
            ami_family,
            cluster_name: cluster_name.to_string(),
            cluster_endpoint: cluster_endpoint.to_string(),
            ca_bundle: None,
            cluster_cidr: None,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            kubelet: KubeletSettings::default(),
            instance_store_raid0: false,
            user_data: None,
        }
    }

    /// The first cluster DNS address, which the bootstrap scripts take.
    pub(crate) fn dns_ip(&self) -> Option<&str> {
        self.kubelet.cluster_dns.first().map(String::as_str)
    }

    pub(crate) fn custom_user_data(&self) -> Option<&str> {
        self.user_data.as_deref().filter(|u| !u.trim().is_empty())
    }
}

/// A claim's taints, then its startup taints, then `karpenter.sh/unregistered:NoExecute`
/// (unless already present): what a node must register with.
pub fn registration_taints(taints: &[Taint], startup_taints: &[Taint]) -> Vec<Taint> {
    let mut out: Vec<Taint> = Vec::new();
    for t in taints.iter().chain(startup_taints) {
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    let unregistered = Taint::new(UNREGISTERED_TAINT, "", TaintEffect::NoExecute);
    if !out
        .iter()
        .any(|t| t.key == unregistered.key && t.effect == unregistered.effect)
    {
        out.push(unregistered);
    }
    out
}

/// Generated user data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserData {
    pub base64: String,
    /// Size once decoded, which is what EC2 limits.
    pub decoded_bytes: usize,
    /// Set when the size is above 90% of the limit.
    pub warning: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UserDataError {
    /// The user's MIME archive could not be read.
    Mime(String),
    /// The user's Bottlerocket TOML could not be read.
    Toml(toml::TomlError),
    /// The user data is none of the forms the family accepts.
    Unrecognised {
        family: AmiFamily,
        reason: String,
    },
    /// A value the family requires is missing.
    Missing {
        family: AmiFamily,
        field: &'static str,
    },
    /// A user setting clashes with the generated one's type.
    Conflict(String),
    TooLarge {
        bytes: usize,
        limit: usize,
    },
}

impl fmt::Display for UserDataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserDataError::Mime(r) => write!(f, "userData: invalid MIME archive: {r}"),
            UserDataError::Toml(e) => write!(f, "userData: {e}"),
            UserDataError::Unrecognised { family, reason } => {
                write!(f, "userData for amiFamily {family:?}: {reason}")
            }
            UserDataError::Missing { family, field } => {
                write!(f, "amiFamily {family:?} needs {field}, which is not known")
            }
            UserDataError::Conflict(r) => write!(f, "userData: {r}"),
            UserDataError::TooLarge { bytes, limit } => write!(
                f,
                "user data is {bytes} bytes decoded, above EC2's limit of {limit}"
            ),
        }
    }
}

impl std::error::Error for UserDataError {}

/// The user data for `input`'s AMI family, base64-encoded and size-checked.
pub fn generate(input: &BootstrapInput) -> Result<UserData, UserDataError> {
    let plain = match input.ami_family {
        AmiFamily::AL2 => al2::script(input)?,
        AmiFamily::AL2023 => al2023::script(input)?,
        AmiFamily::Bottlerocket => bottlerocket::script(input)?,
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            windows::script(input)
        }
        AmiFamily::Custom => input.user_data.clone().unwrap_or_default(),
    };
    let decoded_bytes = plain.len();
    if decoded_bytes > MAX_USER_DATA_BYTES {
        return Err(UserDataError::TooLarge {
            bytes: decoded_bytes,
            limit: MAX_USER_DATA_BYTES,
        });
    }
    let warning = (decoded_bytes as f64 > WARN_FRACTION * MAX_USER_DATA_BYTES as f64).then(|| {
        format!(
            "user data is {decoded_bytes} bytes, over 90% of EC2's {MAX_USER_DATA_BYTES}-byte limit"
        )
    });
    Ok(UserData {
        base64: base64::encode(plain.as_bytes()),
        decoded_bytes,
        warning,
    })
}

/// `name="k<sep>v,k<sep>v"` in key order, or nothing for an empty map.
fn joined_arg(name: &str, map: &BTreeMap<String, String>, sep: &str) -> Option<String> {
    if map.is_empty() {
        return None;
    }
    let items: Vec<String> = map.iter().map(|(k, v)| format!("{k}{sep}{v}")).collect();
    Some(format!("{name}=\"{}\"", items.join(",")))
}

/// `k=v` pairs of the node's labels, in key order, comma-joined.
fn labels_csv(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The kubelet command-line flags that AL2's `--kubelet-extra-args` and Windows'
/// `-KubeletExtraArgs` carry. Eviction thresholds use the kubelet's `<` form.
fn kubelet_extra_args(input: &BootstrapInput) -> Vec<String> {
    let k = &input.kubelet;
    let mut args = Vec::new();
    if !input.labels.is_empty() {
        args.push(format!("--node-labels=\"{}\"", labels_csv(&input.labels)));
    }
    if !input.taints.is_empty() {
        let taints: Vec<String> = input
            .taints
            .iter()
            .map(|t| format!("{}={}:{}", t.key, t.value, t.effect.as_str()))
            .collect();
        args.push(format!("--register-with-taints=\"{}\"", taints.join(",")));
    }
    if let Some(n) = k.max_pods {
        args.push(format!("--max-pods={n}"));
    }
    if let Some(n) = k.pods_per_core {
        args.push(format!("--pods-per-core={n}"));
    }
    args.extend(joined_arg("--system-reserved", &k.system_reserved, "="));
    args.extend(joined_arg("--kube-reserved", &k.kube_reserved, "="));
    args.extend(joined_arg("--eviction-hard", &k.eviction_hard, "<"));
    args.extend(joined_arg("--eviction-soft", &k.eviction_soft, "<"));
    args.extend(joined_arg(
        "--eviction-soft-grace-period",
        &k.eviction_soft_grace_period,
        "=",
    ));
    if let Some(n) = k.eviction_max_pod_grace_period {
        args.push(format!("--eviction-max-pod-grace-period={n}"));
    }
    if let Some(n) = k.image_gc_high_threshold_percent {
        args.push(format!("--image-gc-high-threshold={n}"));
    }
    if let Some(n) = k.image_gc_low_threshold_percent {
        args.push(format!("--image-gc-low-threshold={n}"));
    }
    if let Some(b) = k.cpu_cfs_quota {
        args.push(format!("--cpu-cfs-quota={b}"));
    }
    args
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    /// An input with every field set, shared by the family tests.
    pub fn full(family: AmiFamily) -> BootstrapInput {
        let mut i = BootstrapInput::new(
            family,
            "prod",
            "https://ABC.gr7.us-west-2.eks.amazonaws.com",
        );
        i.ca_bundle = Some("Q0FCVU5ETEU=".into());
        i.cluster_cidr = Some("10.100.0.0/16".into());
        i.labels
            .insert("karpenter.sh/nodepool".into(), "default".into());
        i.labels.insert("team".into(), "web".into());
        i.taints = registration_taints(
            &[Taint::new("dedicated", "gpu", TaintEffect::NoSchedule)],
            &[Taint::new("cni-not-ready", "", TaintEffect::NoSchedule)],
        );
        i.kubelet = KubeletSettings {
            cluster_dns: vec!["10.100.0.10".into()],
            max_pods: Some(42),
            pods_per_core: Some(4),
            system_reserved: [
                ("cpu".into(), "100m".into()),
                ("memory".into(), "200Mi".into()),
            ]
            .into(),
            kube_reserved: [("memory".into(), "300Mi".into())].into(),
            eviction_hard: [("memory.available".into(), "5%".into())].into(),
            eviction_soft: [("nodefs.available".into(), "15%".into())].into(),
            eviction_soft_grace_period: [("nodefs.available".into(), "1m30s".into())].into(),
            eviction_max_pod_grace_period: Some(60),
            image_gc_high_threshold_percent: Some(85),
            image_gc_low_threshold_percent: Some(70),
            cpu_cfs_quota: Some(false),
        };
        i.instance_store_raid0 = true;
        i
    }

    pub fn decode(u: &UserData) -> String {
        let bytes = base64::decode(&u.base64).expect("valid base64");
        assert_eq!(bytes.len(), u.decoded_bytes);
        String::from_utf8(bytes).expect("utf-8")
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn unregistered_taint_is_added_once_after_claim_and_startup_taints() {
        let a = Taint::new("a", "1", TaintEffect::NoSchedule);
        let b = Taint::new("b", "", TaintEffect::NoExecute);
        let t = registration_taints(std::slice::from_ref(&a), &[b.clone(), a.clone()]);
        assert_eq!(t.len(), 3);
        assert_eq!((&t[0], &t[1]), (&a, &b));
        assert_eq!(t[2].to_string(), "karpenter.sh/unregistered:NoExecute");
        assert_eq!(registration_taints(&[], &t).len(), 3);
    }

    #[test]
    fn custom_is_verbatim() {
        let mut i = full(AmiFamily::Custom);
        i.user_data = Some("#!/bin/bash\nmy-own-join --cluster prod\n".into());
        let u = generate(&i).unwrap();
        assert_eq!(decode(&u), "#!/bin/bash\nmy-own-join --cluster prod\n");
        i.user_data = None;
        assert_eq!(generate(&i).unwrap().base64, "");
    }

    #[test]
    fn size_limit_and_warning() {
        let mut i = BootstrapInput::new(AmiFamily::Custom, "c", "https://e");
        i.user_data = Some("x".repeat(15000));
        let u = generate(&i).unwrap();
        assert!(u.warning.as_deref().unwrap().contains("15000"));
        i.user_data = Some("x".repeat(14000));
        assert_eq!(generate(&i).unwrap().warning, None);
        i.user_data = Some("x".repeat(MAX_USER_DATA_BYTES + 1));
        assert_eq!(
            generate(&i),
            Err(UserDataError::TooLarge {
                bytes: 16385,
                limit: 16384
            })
        );
    }
}
