//! The viewer's flags as data: which resources get bars, which labels get columns, and how
//! rows are sorted. Parsed once at start, so a bad flag stops the command before anything
//! connects, with the flag's name and what it accepts.

use anyhow::{bail, ensure};

/// What rows are sorted by; ties go to the node's name so the order never flickers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SortKey {
    /// When the Node (or, for a launching claim, the NodeClaim) was created.
    Creation,
    Name,
    /// $/h; rows without a price sort after every priced row.
    Price,
    /// Requested over allocatable of one resource (`cpu`, `memory`, ...).
    Usage(String),
    /// The value of a label; rows without it sort after every labelled row.
    Label(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sort {
    pub key: SortKey,
    pub descending: bool,
}

impl Default for Sort {
    fn default() -> Self {
        Sort {
            key: SortKey::Creation,
            descending: false,
        }
    }
}

/// `KEY[=asc|=dsc]` with KEY one of `creation`, `name`, `price`, `label:LABEL` or a resource
/// name (usage of that resource).
pub fn parse_sort(text: &str) -> anyhow::Result<Sort> {
    let (key, order) = match text.rsplit_once('=') {
        Some((k, o)) => (k.trim(), o.trim()),
        None => (text.trim(), "asc"),
    };
    let descending = match order {
        "asc" => false,
        "dsc" | "desc" => true,
        other => bail!("--sort {text:?}: order {other:?} is not asc or dsc"),
    };
    let key = match key {
        "creation" => SortKey::Creation,
        "name" => SortKey::Name,
        "price" => SortKey::Price,
        "" => bail!("--sort {text:?}: no key (creation, name, price, label:KEY or a resource)"),
        k => match k.strip_prefix("label:") {
            Some("") => bail!("--sort {text:?}: label: needs a label key"),
            Some(label) => SortKey::Label(label.to_string()),
            None => SortKey::Usage(resource_name(k, "--sort")?),
        },
    };
    Ok(Sort { key, descending })
}

/// A comma-separated list; empty items are dropped, duplicates kept once.
pub fn parse_list(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !out.iter().any(|o| o == item) {
            out.push(item.to_string());
        }
    }
    out
}

/// `--resources`: at least one resource name.
pub fn parse_resources(text: &str) -> anyhow::Result<Vec<String>> {
    let list = parse_list(text);
    ensure!(
        !list.is_empty(),
        "--resources {text:?}: name at least one resource (cpu, memory, pods, ...)"
    );
    list.iter()
        .map(|r| resource_name(r, "--resources"))
        .collect()
}

/// A resource name as Kubernetes spells them: `cpu`, `nvidia.com/gpu`, `hugepages-2Mi`.
fn resource_name(name: &str, flag: &str) -> anyhow::Result<String> {
    let ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._/".contains(c));
    ensure!(
        ok && !name.starts_with('/') && !name.ends_with('/'),
        "{flag}: {name:?} is not a resource name (cpu, memory, nvidia.com/gpu, ...)"
    );
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_parse_with_their_order() {
        assert_eq!(parse_sort("creation").unwrap(), Sort::default());
        let s = parse_sort("creation=dsc").unwrap();
        assert!(s.descending && s.key == SortKey::Creation);
        assert_eq!(parse_sort("price=asc").unwrap().key, SortKey::Price);
        assert_eq!(
            parse_sort("label:topology.kubernetes.io/zone").unwrap().key,
            SortKey::Label("topology.kubernetes.io/zone".into())
        );
        let s = parse_sort("label:team=desc").unwrap();
        assert_eq!(s.key, SortKey::Label("team".into()));
        assert!(s.descending);
        assert_eq!(parse_sort("cpu").unwrap().key, SortKey::Usage("cpu".into()));
    }

    #[test]
    fn bad_sorts_name_the_flag_and_the_fault() {
        let e = parse_sort("creation=up").unwrap_err().to_string();
        assert!(e.contains("--sort") && e.contains("\"up\""), "{e}");
        let e = parse_sort("label:").unwrap_err().to_string();
        assert!(e.contains("label key"), "{e}");
        let e = parse_sort("c p u").unwrap_err().to_string();
        assert!(e.contains("not a resource name"), "{e}");
    }

    #[test]
    fn resources_are_a_non_empty_list() {
        assert_eq!(
            parse_resources("cpu, memory,,cpu,nvidia.com/gpu").unwrap(),
            ["cpu", "memory", "nvidia.com/gpu"]
        );
        assert!(parse_resources(" , ").is_err());
        assert!(parse_resources("cpu;memory").is_err());
        assert_eq!(parse_list(""), Vec::<String>::new());
    }
}
