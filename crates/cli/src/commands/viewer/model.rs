//! The screen as data: from lists of Nodes, Pods, NodeClaims and NodePool names, one row per
//! node (and per NodeClaim with no Node yet) grouped by NodePool, with totals. Pure: the
//! shell hands in what its watches hold and the time, and draws what comes back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewright_api::error::Path;
use nodewright_api::quantity;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::workload::effective_requests;
use nodewright_core::labels;
use nodewright_core::resources::Resources;

use super::options::Sort;
use super::prices::{Prices, region_of_zone};
use super::state::{self, State};

/// What the watches hold at one moment.
#[derive(Default)]
pub struct Inputs<'a> {
    pub nodes: Vec<&'a Node>,
    pub pods: Vec<&'a Pod>,
    pub claims: Vec<&'a NodeClaim>,
    pub nodepools: Vec<String>,
}

pub struct Settings<'a> {
    pub resources: &'a [String],
    pub extra_labels: &'a [String],
    pub sort: &'a Sort,
    pub prices: &'a Prices,
    /// Seconds since the epoch.
    pub now: i64,
}

/// Requested and allocatable of one resource, in its canonical unit (millicores, bytes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    pub resource: String,
    pub requested: i64,
    pub allocatable: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The Node's name, or the claim's while it has no Node.
    pub name: String,
    pub nodepool: Option<String>,
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    pub price: Option<f64>,
    pub usage: Vec<Usage>,
    /// Pods bound to the node that have not finished.
    pub pods: usize,
    /// Seconds since creation.
    pub age: Option<i64>,
    pub state: State,
    /// Values of `--extra-labels`, in order ("" when unset).
    pub extra: Vec<String>,
    pub labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// Rows with a Node, or a claim being deleted after its Node went.
    pub nodes: usize,
    /// Claims with no Node yet.
    pub launching: usize,
    pub pods: usize,
    /// Sum of the priced rows.
    pub per_hour: f64,
    /// Rows with no price (not in the tables), left out of `per_hour`.
    pub unpriced: usize,
    pub usage: Vec<Usage>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// `None`: nodes no NodePool owns.
    pub nodepool: Option<String>,
    pub rows: Vec<Row>,
    pub totals: Totals,
}

#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub groups: Vec<Group>,
    pub totals: Totals,
    /// Pods not bound to any node yet and not finished.
    pub pending_pods: usize,
    /// Objects that could not be read, one line each.
    pub problems: Vec<String>,
}

/// Builds the view.
pub fn build(input: &Inputs<'_>, settings: &Settings<'_>) -> View {
    let mut problems = Vec::new();
    let bound = pods_by_node(&input.pods, settings.resources, &mut problems);
    let mut rows = Vec::new();
    let mut claimed = BTreeMap::new();
    for c in &input.claims {
        let status = c.status.as_ref();
        if let Some(id) = status.and_then(|s| s.provider_id.as_deref()) {
            claimed.insert(format!("id:{id}"), *c);
        }
        if let Some(n) = status.and_then(|s| s.node_name.as_deref()) {
            claimed.insert(format!("node:{n}"), *c);
        }
    }
    let mut shown_claims = Vec::new();
    for node in &input.nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        let claim = id
            .and_then(|id| claimed.get(&format!("id:{id}")))
            .or_else(|| claimed.get(&format!("node:{name}")))
            .copied();
        shown_claims.extend(claim.and_then(|c| c.metadata.name.clone()));
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let allocatable = parse_list(
            allocatable
                .into_iter()
                .flatten()
                .map(|(k, v)| (k, v.0.clone())),
            &format!("Node {name}: status.allocatable"),
            &mut problems,
        );
        let (pods, requested) = bound.get(&name).cloned().unwrap_or_default();
        let state = state::of_node(node, claim);
        rows.push(row(
            &node.metadata,
            name,
            state,
            pods,
            &requested,
            &allocatable,
            settings,
        ));
    }
    for c in &input.claims {
        let name = c.metadata.name.clone().unwrap_or_default();
        let registered = c.status.as_ref().and_then(|s| s.node_name.as_ref());
        // A registered claim whose Node is not in view is outside `--node-selector`, or its
        // Node is already gone while the claim finishes; only the latter has something to show.
        let state = state::of_claim(c);
        if shown_claims.contains(&name) || (registered.is_some() && state == State::Launching) {
            continue;
        }
        let allocatable = c.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let allocatable = parse_list(
            allocatable
                .into_iter()
                .flatten()
                .map(|(k, v)| (k, v.text())),
            &format!("NodeClaim {name}: status.allocatable"),
            &mut problems,
        );
        let r = row(
            &c.metadata,
            name,
            state,
            0,
            &Resources::new(),
            &allocatable,
            settings,
        );
        rows.push(r);
    }
    sort_rows(&mut rows, settings.sort);
    let groups = group(rows, &input.nodepools, settings.resources);
    let all: Vec<&Row> = groups.iter().flat_map(|g| &g.rows).collect();
    View {
        totals: totals(&all, settings.resources),
        groups,
        pending_pods: input.pods.iter().filter(|p| pending(p)).count(),
        problems,
    }
}

fn row(
    meta: &ObjectMeta,
    name: String,
    state: State,
    pods: usize,
    requested: &Resources,
    allocatable: &Resources,
    settings: &Settings<'_>,
) -> Row {
    let labels = meta.labels.clone().unwrap_or_default();
    let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
    let zone = label(labels::ZONE);
    let region = match labels.get(labels::REGION) {
        Some(r) => r.clone(),
        None => region_of_zone(&zone).to_string(),
    };
    let (instance_type, capacity_type) =
        (label(labels::INSTANCE_TYPE), label(labels::CAPACITY_TYPE));
    let price = settings
        .prices
        .hourly(&region, &zone, &instance_type, &capacity_type);
    let usage = settings
        .resources
        .iter()
        .map(|r| Usage {
            resource: r.clone(),
            requested: requested.get(r),
            allocatable: allocatable.get(r),
        })
        .collect();
    let created = meta.creation_timestamp.as_ref().map(|t| t.0.as_second());
    Row {
        name,
        nodepool: labels.get(labels::NODEPOOL).cloned(),
        instance_type,
        capacity_type,
        zone,
        price,
        usage,
        pods,
        age: created.map(|c| (settings.now - c).max(0)),
        state,
        extra: settings.extra_labels.iter().map(|k| label(k)).collect(),
        labels,
    }
}

/// Pods count on their node until they finish (Succeeded or Failed), as the scheduler counts
/// them.
fn finished(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
}

fn pending(p: &Pod) -> bool {
    !finished(p) && p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none()
}

/// Per node: the pods bound there and the sum of their effective requests (the scheduler's
/// rule, init containers and overhead included).
fn pods_by_node(
    pods: &[&Pod],
    resources: &[String],
    problems: &mut Vec<String>,
) -> BTreeMap<String, (usize, Resources)> {
    let mut out: BTreeMap<String, (usize, Resources)> = BTreeMap::new();
    for p in pods.iter().filter(|p| !finished(p)) {
        let Some(spec) = p.spec.as_ref() else {
            continue;
        };
        let Some(node) = spec.node_name.as_ref() else {
            continue;
        };
        let entry = out.entry(node.clone()).or_default();
        entry.0 += 1;
        match effective_requests(spec, &Path::root("spec")) {
            Ok(r) => {
                for name in resources {
                    entry.1.set(name, entry.1.get(name) + r.get(name));
                }
            }
            Err(e) => problems.push(format!(
                "Pod {}/{}: {e}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            )),
        }
    }
    out
}

fn parse_list<'k>(
    list: impl Iterator<Item = (&'k String, String)>,
    what: &str,
    problems: &mut Vec<String>,
) -> Resources {
    let mut r = Resources::new();
    for (k, v) in list {
        match quantity::parse_resource(k, &v) {
            Ok(amount) => r.set(k, amount),
            Err(e) => problems.push(format!("{what}.{k}: {e}")),
        }
    }
    r
}

fn sort_rows(rows: &mut [Row], sort: &Sort) {
    use super::options::SortKey;
    use std::cmp::Ordering;
    // Rows missing the key go last in either order.
    fn last<T: PartialOrd>(a: Option<T>, b: Option<T>, descending: bool) -> Ordering {
        match (a, b) {
            (Some(a), Some(b)) => {
                let o = a.partial_cmp(&b).unwrap_or(Ordering::Equal);
                if descending { o.reverse() } else { o }
            }
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
    }
    let d = sort.descending;
    rows.sort_by(|a, b| {
        let by = match &sort.key {
            // Older first: a larger age is an earlier creation.
            SortKey::Creation => last(a.age.map(|x| -x), b.age.map(|x| -x), d),
            SortKey::Name => last(Some(&a.name), Some(&b.name), d),
            SortKey::Price => last(a.price, b.price, d),
            SortKey::Usage(r) => last(fraction(a, r), fraction(b, r), d),
            SortKey::Label(k) => last(a.labels.get(k), b.labels.get(k), d),
        };
        by.then_with(|| a.name.cmp(&b.name))
    });
}

/// Requested over allocatable of `resource`; `None` when the row has no allocatable of it.
pub fn fraction(row: &Row, resource: &str) -> Option<f64> {
    let u = row.usage.iter().find(|u| u.resource == resource)?;
    (u.allocatable > 0).then(|| u.requested as f64 / u.allocatable as f64)
}

/// Rows into NodePool groups (every known NodePool, even an empty one, by name; nodes no
/// NodePool owns last), keeping the sorted order within each.
fn group(rows: Vec<Row>, nodepools: &[String], resources: &[String]) -> Vec<Group> {
    let mut by: BTreeMap<Option<String>, Vec<Row>> = BTreeMap::new();
    for np in nodepools {
        by.entry(Some(np.clone())).or_default();
    }
    for r in rows {
        by.entry(r.nodepool.clone()).or_default().push(r);
    }
    let mut groups: Vec<Group> = by
        .into_iter()
        .map(|(nodepool, rows)| Group {
            totals: totals(&rows.iter().collect::<Vec<_>>(), resources),
            nodepool,
            rows,
        })
        .collect();
    // BTreeMap puts `None` first; unowned nodes read better after the NodePools.
    let unowned_first = groups.first().is_some_and(|g| g.nodepool.is_none());
    groups.rotate_left(usize::from(unowned_first));
    groups
}

fn totals(rows: &[&Row], resources: &[String]) -> Totals {
    let launching = rows.iter().filter(|r| r.state == State::Launching).count();
    let mut t = Totals {
        nodes: rows.len() - launching,
        launching,
        usage: resources
            .iter()
            .map(|r| Usage {
                resource: r.clone(),
                ..Usage::default()
            })
            .collect(),
        ..Totals::default()
    };
    for r in rows {
        t.pods += r.pods;
        match r.price {
            Some(p) => t.per_hour += p,
            None => t.unpriced += 1,
        }
        for (sum, u) in t.usage.iter_mut().zip(&r.usage) {
            sum.requested += u.requested;
            sum.allocatable += u.allocatable;
        }
    }
    t
}

#[cfg(test)]
mod tests;
