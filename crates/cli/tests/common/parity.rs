//! Karpenter's metric families as listed in `docs/karpenter-metrics.txt`, and the check of a
//! scrape against them; shared by `observability.rs` (the built binary and a bench run) and
//! the cluster suite (a controller on a real control plane).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One family of the exposition: its type and the label names its samples carry.
#[derive(Debug, Default)]
pub struct Family {
    pub kind: String,
    pub labels: BTreeSet<String>,
    pub sampled: bool,
}

/// Families by name, from OpenMetrics text.
pub fn families(text: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.entry(name.into()).or_default().kind = kind.into();
        }
    }
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name_end = line.find(['{', ' ']).unwrap();
        let series = &line[..name_end];
        let family = out
            .keys()
            .filter(|f| series.starts_with(f.as_str()))
            .max_by_key(|f| f.len())
            .unwrap_or_else(|| panic!("sample {series} of no family"))
            .clone();
        let f = out.get_mut(&family).unwrap();
        f.sampled = true;
        if line[name_end..].starts_with('{') {
            let close = line.rfind('}').unwrap();
            for pair in split_labels(&line[name_end + 1..close]) {
                let key = pair.split_once('=').unwrap().0;
                if key != "le" {
                    f.labels.insert(key.into());
                }
            }
        }
    }
    out
}

/// `a="x",b="y,z"` into its pairs, commas inside quotes kept.
fn split_labels(s: &str) -> Vec<&str> {
    let (mut out, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// One line of `docs/karpenter-metrics.txt`.
#[derive(Debug)]
pub struct Upstream {
    pub sample: String,
    pub kind: String,
    pub labels: BTreeSet<String>,
    pub without: BTreeSet<String>,
    /// `absent` or `missing`: not exported, and said so in docs/OBSERVABILITY.md.
    pub unexported: Option<String>,
}

impl Upstream {
    /// The family name in `# TYPE`: a counter's without `_total`.
    pub fn family(&self) -> &str {
        match self.kind.as_str() {
            "counter" => self.sample.strip_suffix("_total").unwrap_or(&self.sample),
            _ => &self.sample,
        }
    }
}

pub fn upstream_families(repo: &Path) -> Vec<Upstream> {
    let file = repo.join("docs/karpenter-metrics.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    let names = |s: &str| -> BTreeSet<String> {
        s.split(',')
            .filter(|l| *l != "-" && !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        let at = format!("{}:{}", file.display(), n + 1);
        assert!(
            (3..=4).contains(&cols.len()),
            "{at}: want name type labels [mark]"
        );
        assert!(
            ["counter", "gauge", "histogram", "summary"].contains(&cols[1]),
            "{at}: unknown type {}",
            cols[1]
        );
        let mut u = Upstream {
            sample: cols[0].into(),
            kind: cols[1].into(),
            labels: names(cols[2]),
            without: BTreeSet::new(),
            unexported: None,
        };
        match cols.get(3) {
            None => {}
            Some(m) if *m == "absent" || *m == "missing" => u.unexported = Some(m.to_string()),
            Some(m) => {
                let w = m
                    .strip_prefix("without=")
                    .unwrap_or_else(|| panic!("{at}: unknown mark {m}"));
                u.without = names(w);
                assert!(
                    u.without.is_subset(&u.labels),
                    "{at}: without= names labels not listed"
                );
            }
        }
        out.push(u);
    }
    out
}

/// Prefixes of the families upstream's list covers: any exported family under one of them
/// must be on the list.
const UPSTREAM_PREFIXES: [&str; 5] = [
    "karpenter_",
    "controller_runtime_",
    "workqueue_",
    "operator_",
    "leader_election_",
];

/// What a scrape (`seen`) gets wrong against the list: every listed family not marked
/// absent or missing is exported under its name and type, with exactly its labels (less
/// `without`) when sampled; a marked one is not exported and `docs` (docs/OBSERVABILITY.md)
/// names it; an exported family under an upstream prefix is on the list. Also returns the
/// listed families `seen` has no sample of.
pub fn check(
    listed: &[Upstream],
    seen: &BTreeMap<String, Family>,
    docs: &str,
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut unsampled = Vec::new();
    for u in listed {
        let name = u.family();
        let found = seen.get(name);
        if let Some(mark) = &u.unexported {
            if found.is_some() {
                problems.push(format!("{}: marked {mark}, but exported", u.sample));
            }
            if !docs.contains(&u.sample) {
                problems.push(format!(
                    "{}: marked {mark}, and docs/OBSERVABILITY.md does not name it",
                    u.sample
                ));
            }
            continue;
        }
        let Some(f) = found else {
            problems.push(format!("{}: not exported", u.sample));
            continue;
        };
        if f.kind != u.kind {
            problems.push(format!(
                "{}: exported as a {}, upstream's is a {}",
                u.sample, f.kind, u.kind
            ));
        }
        if !f.sampled {
            unsampled.push(u.sample.clone());
            continue;
        }
        let want: BTreeSet<String> = u.labels.difference(&u.without).cloned().collect();
        let got: BTreeSet<String> = f
            .labels
            .iter()
            .filter(|l| *l != "quantile")
            .cloned()
            .collect();
        if got != want {
            problems.push(format!("{}: labels {got:?}, want {want:?}", u.sample));
        }
        for w in &u.without {
            if !docs.contains(&format!("`{w}`")) {
                problems.push(format!(
                    "{}: without `{w}`, which docs/OBSERVABILITY.md does not name",
                    u.sample
                ));
            }
        }
    }
    let names: BTreeSet<&str> = listed.iter().map(Upstream::family).collect();
    for name in seen.keys() {
        if UPSTREAM_PREFIXES.iter().any(|p| name.starts_with(p)) && !names.contains(name.as_str()) {
            problems.push(format!(
                "{name}: exported under an upstream prefix, not on the list"
            ));
        }
    }
    (problems, unsampled)
}
