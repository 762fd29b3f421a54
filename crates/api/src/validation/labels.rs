//! Which label keys users may set or require. One table drives both the CEL rules in the CRDs
//! and the Rust check, so the two cannot disagree.

use nodewright_core::labels;

/// Keys in the `kubernetes.io` domain that users may still name.
const KUBERNETES_IO_ALLOWED: &[&str] = &[
    "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "node.kubernetes.io/windows-build",
];

/// One restriction on label keys: its message, its CEL form and its Rust form.
#[derive(Clone, Debug)]
pub enum KeyRule {
    /// Keys whose domain (text before the first `/`) ends with `domain` are rejected, unless the
    /// key is listed in `exceptions` or the domain ends with one of `allowed_suffixes`.
    Domain {
        domain: &'static str,
        exceptions: Vec<&'static str>,
        allowed_suffixes: Vec<&'static str>,
    },
    /// Exactly this key is rejected.
    Exact(&'static str),
}

/// The text before the first `/` (the whole key if it has none), as CEL's `find("^([^/]+)")`.
fn domain_part(key: &str) -> &str {
    key.split('/').next().unwrap_or("")
}

fn cel_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

impl KeyRule {
    pub fn message(&self) -> String {
        match self {
            KeyRule::Domain { domain, .. } => format!("label domain {domain:?} is restricted"),
            KeyRule::Exact(key) => format!("label {key:?} is restricted"),
        }
    }

    /// The CEL expression, true when `var` (a key) is allowed.
    pub fn cel(&self, var: &str) -> String {
        match self {
            KeyRule::Domain {
                domain,
                exceptions,
                allowed_suffixes,
            } => {
                let mut parts = Vec::new();
                if !exceptions.is_empty() {
                    parts.push(format!("{var} in {}", cel_list(exceptions)));
                }
                for s in allowed_suffixes {
                    parts.push(format!("{var}.find(\"^([^/]+)\").endsWith({s:?})"));
                }
                parts.push(format!("!{var}.find(\"^([^/]+)\").endsWith({domain:?})"));
                parts.join(" || ")
            }
            KeyRule::Exact(key) => format!("{var} != {key:?}"),
        }
    }

    pub fn allows(&self, key: &str) -> bool {
        match self {
            KeyRule::Domain {
                domain,
                exceptions,
                allowed_suffixes,
            } => {
                let d = domain_part(key);
                exceptions.contains(&key)
                    || allowed_suffixes.iter().any(|s| d.ends_with(s))
                    || !d.ends_with(domain)
            }
            KeyRule::Exact(k) => key != *k,
        }
    }
}

/// Where a key appears: NodePool requirements and template labels also reject
/// `karpenter.sh/nodepool`, which Karpenter sets itself; NodeClaim requirements carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyContext {
    NodePool,
    NodeClaim,
}

/// The AWS well-known labels in the `karpenter.k8s.aws` domain.
fn aws_well_known() -> Vec<&'static str> {
    labels::aws::WELL_KNOWN
        .iter()
        .copied()
        .filter(|k| k.starts_with("karpenter.k8s.aws/"))
        .collect()
}

/// Every key rule for `ctx`, in the order the CRDs list them.
pub fn key_rules(ctx: KeyContext) -> Vec<KeyRule> {
    let mut rules = vec![
        KeyRule::Domain {
            domain: "kubernetes.io",
            exceptions: KUBERNETES_IO_ALLOWED.to_vec(),
            allowed_suffixes: vec!["node.kubernetes.io", "node-restriction.kubernetes.io"],
        },
        KeyRule::Domain {
            domain: "k8s.io",
            exceptions: vec![],
            allowed_suffixes: vec!["kops.k8s.io"],
        },
        KeyRule::Domain {
            domain: "karpenter.sh",
            exceptions: vec![labels::CAPACITY_TYPE, labels::NODEPOOL],
            allowed_suffixes: vec![],
        },
    ];
    if ctx == KeyContext::NodePool {
        rules.push(KeyRule::Exact(labels::NODEPOOL));
    }
    rules.push(KeyRule::Exact(labels::HOSTNAME));
    rules.push(KeyRule::Domain {
        domain: "karpenter.k8s.aws",
        exceptions: aws_well_known(),
        allowed_suffixes: vec![],
    });
    rules
}

/// The reasons `key` may not be used in `ctx`, in rule order; empty when it may.
pub fn key_violations(key: &str, ctx: KeyContext) -> Vec<String> {
    key_rules(ctx)
        .iter()
        .filter(|r| !r.allows(key))
        .map(|r| r.message())
        .collect()
}

/// Label values the CRD schema accepts: at most 63 characters, alphanumeric at both ends.
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/// Qualified names (`prefix/name`), for requirement and taint keys.
pub const QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";

/// Why `key` is not a qualified name (Kubernetes' rules for label keys), or `None`.
pub fn qualified_name_error(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some(format!(
                "{key:?} is not a qualified name: prefix part must not be empty"
            ));
        }
        if p.len() > 253 || !is_dns_subdomain(p) {
            return Some(format!(
                "{key:?} is not a qualified name: prefix part must be a lowercase DNS subdomain"
            ));
        }
    }
    if name.is_empty() || name.len() > 63 {
        return Some(format!(
            "{key:?} is not a qualified name: name part must be 1 to 63 characters"
        ));
    }
    if !is_name_shaped(name) {
        return Some(format!(
            "{key:?} is not a qualified name: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ));
    }
    None
}

/// Alphanumerics, '-', '_' and '.', starting and ending with an alphanumeric: the shape shared
/// by a qualified name's name part and a non-empty label value.
fn is_name_shaped(s: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && alnum(s.chars().next())
        && alnum(s.chars().last())
}

/// A lowercase RFC 1123 subdomain, as used for object names and label prefixes.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Why `value` is not a valid label value, or `None`.
pub fn label_value_error(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some(format!(
            "invalid label value {value:?}: must be no more than 63 characters"
        ));
    }
    if value.is_empty() {
        return None;
    }
    if !is_name_shaped(value) {
        return Some(format!(
            "invalid label value {value:?}: must be empty or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_keys() {
        let np = KeyContext::NodePool;
        assert_eq!(
            key_violations("karpenter.sh/foo", np),
            ["label domain \"karpenter.sh\" is restricted"]
        );
        assert!(key_violations("karpenter.sh/capacity-type", np).is_empty());
        assert_eq!(
            key_violations("karpenter.sh/nodepool", np),
            ["label \"karpenter.sh/nodepool\" is restricted"]
        );
        assert!(key_violations("karpenter.sh/nodepool", KeyContext::NodeClaim).is_empty());
        assert_eq!(key_violations("kubernetes.io/hostname", np).len(), 2);
        assert!(key_violations("node.kubernetes.io/instance-type", np).is_empty());
        assert!(key_violations("example.node.kubernetes.io/x", np).is_empty());
        assert!(!key_violations("foo.k8s.io/x", np).is_empty());
        assert!(key_violations("kops.k8s.io/x", np).is_empty());
        assert!(key_violations("karpenter.k8s.aws/instance-family", np).is_empty());
        assert!(!key_violations("karpenter.k8s.aws/made-up", np).is_empty());
        assert!(key_violations("example.com/team", np).is_empty());
    }

    #[test]
    fn cel_text() {
        let r = KeyRule::Exact("kubernetes.io/hostname");
        assert_eq!(r.cel("self"), "self != \"kubernetes.io/hostname\"");
        let d = &key_rules(KeyContext::NodePool)[1];
        assert_eq!(
            d.cel("x"),
            "x.find(\"^([^/]+)\").endsWith(\"kops.k8s.io\") || !x.find(\"^([^/]+)\").endsWith(\"k8s.io\")"
        );
    }

    #[test]
    fn names_and_values() {
        assert!(qualified_name_error("example.com/team").is_none());
        assert!(qualified_name_error("team").is_none());
        assert!(qualified_name_error("Example.com/team").is_some());
        assert!(qualified_name_error("/team").is_some());
        assert!(qualified_name_error("a b").is_some());
        assert!(label_value_error("").is_none());
        assert!(label_value_error("on-demand").is_none());
        assert!(label_value_error("-x").is_some());
    }
}
