//! AMI aliases (`al2023@latest`, `bottlerocket@v1.20.1` ...) to the public SSM parameters that
//! name each variant's image, and the node requirements each variant serves. Pure data: the
//! lookups happen in `amis`.

use nodewright_aws_model::AmiFamily;
use thiserror::Error;

pub const ARCH_LABEL: &str = "kubernetes.io/arch";
pub const GPU_COUNT_LABEL: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const ACCELERATOR_COUNT_LABEL: &str = "karpenter.k8s.aws/instance-accelerator-count";

/// Which hardware an image is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Variant {
    /// No GPU and no accelerator.
    Standard,
    /// NVIDIA GPUs.
    Nvidia,
    /// AWS Inferentia / Trainium accelerators.
    Neuron,
}

/// One node requirement attached to a resolved image: key, operator, values.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Requirement {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}

impl Requirement {
    pub fn new(key: &str, operator: &str, values: &[&str]) -> Self {
        Requirement {
            key: key.to_string(),
            operator: operator.to_string(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }
}

/// Sorts requirements by key length, then key, the order upstream writes them in status.
pub fn sort_requirements(reqs: &mut [Requirement]) {
    reqs.sort_by(|a, b| {
        (a.key.len(), &a.key, &a.operator, &a.values).cmp(&(
            b.key.len(),
            &b.key,
            &b.operator,
            &b.values,
        ))
    });
}

impl Variant {
    /// The requirements an image of this variant adds to its architecture.
    pub fn requirements(self) -> Vec<Requirement> {
        match self {
            Variant::Standard => vec![
                Requirement::new(ACCELERATOR_COUNT_LABEL, "DoesNotExist", &[]),
                Requirement::new(GPU_COUNT_LABEL, "DoesNotExist", &[]),
            ],
            Variant::Nvidia => vec![Requirement::new(GPU_COUNT_LABEL, "Exists", &[])],
            Variant::Neuron => vec![Requirement::new(ACCELERATOR_COUNT_LABEL, "Exists", &[])],
        }
    }
}

/// An SSM parameter to read for an alias, and what the image it names serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AliasParameter {
    pub path: String,
    /// Kubernetes architecture (`amd64`, `arm64`).
    pub arch: &'static str,
    /// Usually one; Bottlerocket's x86 standard image serves both standard and neuron.
    pub variants: Vec<Variant>,
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum AliasError {
    #[error("alias {0:?} is not of the form family@version")]
    Malformed(String),
    #[error("unknown alias family {0:?}")]
    UnknownFamily(String),
    #[error("{family} images are not published for Kubernetes {kubernetes}")]
    Unsupported { family: String, kubernetes: String },
    #[error("{0} aliases only accept @latest")]
    LatestOnly(String),
}

/// `family@version` → (family, version).
pub fn parse_alias(alias: &str) -> Result<(AmiFamily, &str), AliasError> {
    let (family, version) = alias
        .split_once('@')
        .filter(|(f, v)| !f.is_empty() && !v.is_empty())
        .ok_or_else(|| AliasError::Malformed(alias.to_string()))?;
    let family = match family {
        "al2" => AmiFamily::AL2,
        "al2023" => AmiFamily::AL2023,
        "bottlerocket" => AmiFamily::Bottlerocket,
        "windows2019" => AmiFamily::Windows2019,
        "windows2022" => AmiFamily::Windows2022,
        "windows2025" => AmiFamily::Windows2025,
        other => return Err(AliasError::UnknownFamily(other.to_string())),
    };
    Ok((family, version))
}

/// `1.33` → (1, 33); anything unparsable compares as (0, 0).
fn minor(kubernetes: &str) -> (u32, u32) {
    let mut it = kubernetes.trim_start_matches('v').split('.');
    let major = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let minor = it
        .next()
        .map(|s| s.trim_end_matches(|c: char| !c.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (major, minor)
}

/// The parameters to read for `alias` on a cluster running Kubernetes `kubernetes` (`1.32`).
pub fn alias_parameters(alias: &str, kubernetes: &str) -> Result<Vec<AliasParameter>, AliasError> {
    let (family, version) = parse_alias(alias)?;
    let k8s = {
        let (ma, mi) = minor(kubernetes);
        format!("{ma}.{mi}")
    };
    let latest = version == "latest";
    let family_name = || alias.split('@').next().unwrap_or("").to_string();
    let unsupported = || AliasError::Unsupported {
        family: family_name(),
        kubernetes: k8s.clone(),
    };
    match family {
        AmiFamily::AL2 if minor(kubernetes) >= (1, 33) => Err(unsupported()),
        AmiFamily::AL2 => Ok(al2_parameters(&k8s, version)),
        AmiFamily::AL2023 => Ok(al2023_parameters(&k8s, version)),
        AmiFamily::Bottlerocket => Ok(bottlerocket_parameters(&k8s, version)),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 if !latest => {
            Err(AliasError::LatestOnly(family_name()))
        }
        AmiFamily::Windows2019 => Ok(windows_parameters("2019", &k8s)),
        AmiFamily::Windows2022 => Ok(windows_parameters("2022", &k8s)),
        AmiFamily::Windows2025 if minor(kubernetes) < (1, 35) => Err(unsupported()),
        AmiFamily::Windows2025 => Ok(windows_parameters("2025", &k8s)),
        AmiFamily::Custom => Err(AliasError::UnknownFamily("custom".into())),
    }
}

/// The parameter at `path`, whose image serves `variants` on `arch`.
fn parameter(path: String, arch: &'static str, variants: &[Variant]) -> AliasParameter {
    AliasParameter {
        path,
        arch,
        variants: variants.to_vec(),
    }
}

/// AL2's images for Kubernetes `k8s` at `version` (`latest` or a release date): standard
/// for x86 and arm, and one GPU image for both NVIDIA and Neuron.
fn al2_parameters(k8s: &str, version: &str) -> Vec<AliasParameter> {
    use Variant::*;
    let name = if version == "latest" {
        "recommended".to_string()
    } else {
        format!("amazon-eks-node-{k8s}-{version}")
    };
    let base = format!("/aws/service/eks/optimized-ami/{k8s}");
    vec![
        parameter(
            format!("{base}/amazon-linux-2/{name}/image_id"),
            "amd64",
            &[Standard],
        ),
        parameter(
            format!("{base}/amazon-linux-2-arm64/{name}/image_id"),
            "arm64",
            &[Standard],
        ),
        parameter(
            format!("{base}/amazon-linux-2-gpu/{name}/image_id"),
            "amd64",
            &[Nvidia, Neuron],
        ),
    ]
}

/// AL2023's images: one per architecture and variant (no Neuron image for arm).
fn al2023_parameters(k8s: &str, version: &str) -> Vec<AliasParameter> {
    use Variant::*;
    let mut out = Vec::new();
    for (aws_arch, arch, variants) in [
        ("x86_64", "amd64", &[Standard, Nvidia, Neuron][..]),
        ("arm64", "arm64", &[Standard, Nvidia][..]),
    ] {
        for &v in variants {
            let variant = match v {
                Standard => "standard",
                Nvidia => "nvidia",
                Neuron => "neuron",
            };
            let name = if version == "latest" {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{aws_arch}-{variant}-{k8s}-{version}")
            };
            out.push(parameter(
                format!(
                    "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{aws_arch}/{variant}/{name}/image_id"
                ),
                arch,
                &[v],
            ));
        }
    }
    out
}

/// Bottlerocket's images: a standard and an NVIDIA one per architecture.
fn bottlerocket_parameters(k8s: &str, version: &str) -> Vec<AliasParameter> {
    use Variant::*;
    let version = if version == "latest" {
        "latest"
    } else {
        version.trim_start_matches('v')
    };
    let mut out = Vec::new();
    for (aws_arch, arch) in [("x86_64", "amd64"), ("arm64", "arm64")] {
        let standard: &[Variant] = if arch == "amd64" {
            &[Standard, Neuron]
        } else {
            &[Standard]
        };
        out.push(parameter(
            format!("/aws/service/bottlerocket/aws-k8s-{k8s}/{aws_arch}/{version}/image_id"),
            arch,
            standard,
        ));
        out.push(parameter(
            format!("/aws/service/bottlerocket/aws-k8s-{k8s}-nvidia/{aws_arch}/{version}/image_id"),
            arch,
            &[Nvidia],
        ));
    }
    out
}

/// Windows Server `year`'s latest EKS-optimized image (x86 only).
fn windows_parameters(year: &str, k8s: &str) -> Vec<AliasParameter> {
    vec![parameter(
        format!(
            "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
        ),
        "amd64",
        &[Variant::Standard],
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(alias: &str, k8s: &str) -> Vec<String> {
        alias_parameters(alias, k8s)
            .unwrap()
            .into_iter()
            .map(|p| p.path)
            .collect()
    }

    #[test]
    fn al2023_latest_and_pinned() {
        let ps = alias_parameters("al2023@latest", "1.32").unwrap();
        assert_eq!(ps.len(), 5, "arm64 has no neuron variant");
        assert_eq!(
            ps[0].path,
            "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"
        );
        assert_eq!(
            (ps[0].arch, ps[0].variants.as_slice()),
            ("amd64", &[Variant::Standard][..])
        );
        assert!(
            ps.iter()
                .all(|p| !(p.arch == "arm64" && p.variants == [Variant::Neuron]))
        );
        assert!(paths("al2023@v20240807", "1.30").contains(
            &"/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.30-v20240807/image_id".to_string()
        ));
    }

    #[test]
    fn al2_paths_and_gate() {
        assert_eq!(
            paths("al2@latest", "1.30"),
            vec![
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id",
                "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/recommended/image_id",
            ]
        );
        assert_eq!(
            paths("al2@v20240807", "1.29")[0],
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2/amazon-eks-node-1.29-v20240807/image_id"
        );
        assert!(matches!(
            alias_parameters("al2@latest", "1.33"),
            Err(AliasError::Unsupported { .. })
        ));
    }

    #[test]
    fn bottlerocket_strips_the_v_and_shares_the_x86_image_with_neuron() {
        let ps = alias_parameters("bottlerocket@v1.20.1", "1.31").unwrap();
        assert_eq!(
            ps[0].path,
            "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.20.1/image_id"
        );
        assert_eq!(ps[0].variants, vec![Variant::Standard, Variant::Neuron]);
        assert_eq!(
            ps[1].path,
            "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.20.1/image_id"
        );
        assert_eq!(
            paths("bottlerocket@latest", "1.31")[2],
            "/aws/service/bottlerocket/aws-k8s-1.31/arm64/latest/image_id"
        );
    }

    #[test]
    fn windows_latest_only_and_2025_gate() {
        assert_eq!(
            paths("windows2022@latest", "1.31"),
            vec![
                "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id"
            ]
        );
        assert!(matches!(
            alias_parameters("windows2019@v1", "1.31"),
            Err(AliasError::LatestOnly(_))
        ));
        assert!(alias_parameters("windows2025@latest", "1.34").is_err());
        assert!(alias_parameters("windows2025@latest", "1.35").is_ok());
    }

    #[test]
    fn malformed_aliases() {
        assert!(matches!(
            parse_alias("al2023"),
            Err(AliasError::Malformed(_))
        ));
        assert!(matches!(
            parse_alias("ubuntu@latest"),
            Err(AliasError::UnknownFamily(_))
        ));
        assert_eq!(minor("v1.31.2-eks-1234"), (1, 31));
    }

    #[test]
    fn requirement_order_is_key_length_then_key() {
        let mut r = Variant::Standard.requirements();
        r.push(Requirement::new(ARCH_LABEL, "In", &["amd64"]));
        sort_requirements(&mut r);
        let keys: Vec<&str> = r.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            vec![ARCH_LABEL, GPU_COUNT_LABEL, ACCELERATOR_COUNT_LABEL]
        );
    }
}
