//! What is free on every Ready node, kept row by row in `Cluster::ready_nodes` order, so the
//! kube-scheduler pass and the samples read it without summing any node's pods again or
//! looking any node up by name.
//!
//! Like the ledger, the table is only told which claims and which node names changed (a pod
//! added, moved, changed or removed; a claim made, made Ready, changed or deleted) and works
//! those rows out again at the next `refresh`, from the cluster as it is then. Amounts are kept
//! twice: as `Resources` (what the filters and their messages read) and, for the resource names
//! asked for so far, as plain columns, so a search for room compares integers rather than
//! looking names up in every node's list.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nodewright_core::model::{Node, Pod};
use nodewright_core::resources::{CPU, Resources};

use super::SimClaim;

/// Which node a row is, and what of it changes only with its claim.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ident {
    /// The key of the node's claim, which orders the rows.
    claim: String,
    node: String,
    allocatable_cpu: i64,
}

impl Ident {
    fn misnamed(&self) -> bool {
        self.claim != self.node
    }
}

/// One Ready node's row, worked out from the cluster.
struct Row {
    ident: Ident,
    free: Resources,
    requested_cpu: i64,
}

impl Row {
    fn of(
        claim: &str,
        node: &Node,
        pods: &BTreeMap<String, Arc<Pod>>,
        on_node: &BTreeMap<String, BTreeSet<String>>,
    ) -> Row {
        let mut free = node.allocatable.clone();
        let mut requested_cpu = 0;
        for p in on_node
            .get(&node.name)
            .into_iter()
            .flatten()
            .filter_map(|k| pods.get(k))
        {
            free.sub(&p.requests);
            requested_cpu += p.requests.get(CPU);
        }
        Row {
            ident: Ident {
                claim: claim.to_string(),
                node: node.name.clone(),
                allocatable_cpu: node.allocatable.get(CPU),
            },
            free,
            requested_cpu,
        }
    }
}

/// Ready nodes, their cpu and what they requested of it (see `Cluster::ready_cpu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadyCpu {
    pub nodes: usize,
    pub allocatable: i64,
    pub requested: i64,
}

/// The rows, one list per field. The lists a pass copies are shared with its [`Room`] and
/// copied only when one side changes them.
#[derive(Clone, Debug, Default)]
pub(super) struct FreeTable {
    idents: Arc<Vec<Ident>>,
    free: Arc<Vec<Arc<Resources>>>,
    requested_cpu: Vec<i64>,
    /// Resource names with a column, in the order they were first asked for.
    columns: Arc<Vec<String>>,
    /// `cells[r * columns.len() + c]` is `free[r].get(&columns[c])`.
    cells: Arc<Vec<i64>>,
    /// Claims changed since the last `refresh` (a key may appear more than once).
    claims_noted: Vec<String>,
    /// Node names whose pods changed since the last `refresh`.
    nodes_noted: Vec<String>,
    /// Rows whose node is not named after its claim: while there are any, a changed node's
    /// rows are found by a scan rather than by its name among the claims.
    misnamed: usize,
    /// Whether the rows were built; until then (and after the notes outgrew them) `refresh`
    /// builds every row afresh.
    built: bool,
}

impl FreeTable {
    pub(super) fn claim_changed(&mut self, name: &str) {
        if self.built {
            self.claims_noted.push(name.to_string());
            self.bound_notes();
        }
    }

    pub(super) fn node_changed(&mut self, name: &str) {
        if self.built {
            self.nodes_noted.push(name.to_string());
            self.bound_notes();
        }
    }

    /// Past a few notes per row, building every row again costs no more than taking the
    /// notes one by one, and forgetting them keeps a table nobody reads from growing.
    fn bound_notes(&mut self) {
        if self.claims_noted.len() + self.nodes_noted.len() > 2 * self.idents.len() + 256 {
            self.claims_noted = Vec::new();
            self.nodes_noted = Vec::new();
            self.built = false;
        }
    }

    /// Brings every row up to date with the cluster.
    pub(super) fn refresh(
        &mut self,
        claims: &BTreeMap<String, SimClaim>,
        pods: &BTreeMap<String, Arc<Pod>>,
        on_node: &BTreeMap<String, BTreeSet<String>>,
    ) {
        if !self.built {
            self.rebuild(claims, pods, on_node);
            return;
        }
        let mut changed = std::mem::take(&mut self.claims_noted);
        changed.sort_unstable();
        changed.dedup();
        for key in &changed {
            self.settle(key, claims, pods, on_node);
        }
        let mut nodes = std::mem::take(&mut self.nodes_noted);
        nodes.sort_unstable();
        nodes.dedup();
        for name in &nodes {
            if self.misnamed == 0 {
                // Each node is named after its claim: the claim's row is the node's only one.
                if self.position(name).is_ok() {
                    self.settle(name, claims, pods, on_node);
                }
            } else {
                let holding: Vec<String> = self
                    .idents
                    .iter()
                    .filter(|i| i.node == *name)
                    .map(|i| i.claim.clone())
                    .collect();
                for claim in holding {
                    self.settle(&claim, claims, pods, on_node);
                }
            }
        }
    }

    fn rebuild(
        &mut self,
        claims: &BTreeMap<String, SimClaim>,
        pods: &BTreeMap<String, Arc<Pod>>,
        on_node: &BTreeMap<String, BTreeSet<String>>,
    ) {
        let rows: Vec<Row> = claims
            .iter()
            .filter_map(|(k, c)| Some(Row::of(k, c.ready_node()?, pods, on_node)))
            .collect();
        let mut cells = Vec::with_capacity(rows.len() * self.columns.len());
        for row in &rows {
            cells.extend(self.columns.iter().map(|c| row.free.get(c)));
        }
        self.cells = Arc::new(cells);
        self.requested_cpu = rows.iter().map(|r| r.requested_cpu).collect();
        self.misnamed = rows.iter().filter(|r| r.ident.misnamed()).count();
        let (idents, free) = rows
            .into_iter()
            .map(|r| (r.ident, Arc::new(r.free)))
            .unzip();
        self.idents = Arc::new(idents);
        self.free = Arc::new(free);
        self.built = true;
    }

    fn position(&self, claim: &str) -> Result<usize, usize> {
        self.idents
            .binary_search_by(|i| i.claim.as_str().cmp(claim))
    }

    /// Works out the row of claim `key` again: added when its node became Ready, dropped
    /// when it is no longer, summed afresh otherwise.
    fn settle(
        &mut self,
        key: &str,
        claims: &BTreeMap<String, SimClaim>,
        pods: &BTreeMap<String, Arc<Pod>>,
        on_node: &BTreeMap<String, BTreeSet<String>>,
    ) {
        let node = claims.get(key).and_then(SimClaim::ready_node);
        let w = self.columns.len();
        match (self.position(key), node) {
            (Ok(r), Some(n)) => {
                let row = Row::of(key, n, pods, on_node);
                let cells: Vec<i64> = self.columns.iter().map(|c| row.free.get(c)).collect();
                Arc::make_mut(&mut self.cells).splice(r * w..(r + 1) * w, cells);
                self.requested_cpu[r] = row.requested_cpu;
                Arc::make_mut(&mut self.free)[r] = Arc::new(row.free);
                if self.idents[r] != row.ident {
                    self.misnamed -= usize::from(self.idents[r].misnamed());
                    self.misnamed += usize::from(row.ident.misnamed());
                    Arc::make_mut(&mut self.idents)[r] = row.ident;
                }
            }
            (Ok(r), None) => {
                Arc::make_mut(&mut self.cells).drain(r * w..(r + 1) * w);
                self.requested_cpu.remove(r);
                Arc::make_mut(&mut self.free).remove(r);
                let gone = Arc::make_mut(&mut self.idents).remove(r);
                self.misnamed -= usize::from(gone.misnamed());
            }
            (Err(r), Some(n)) => {
                let row = Row::of(key, n, pods, on_node);
                let cells: Vec<i64> = self.columns.iter().map(|c| row.free.get(c)).collect();
                Arc::make_mut(&mut self.cells).splice(r * w..r * w, cells);
                self.requested_cpu.insert(r, row.requested_cpu);
                Arc::make_mut(&mut self.free).insert(r, Arc::new(row.free));
                self.misnamed += usize::from(row.ident.misnamed());
                Arc::make_mut(&mut self.idents).insert(r, row.ident);
            }
            (Err(_), None) => {}
        }
    }

    /// Gives each of `names` a column; the table must be up to date.
    fn ensure_columns(&mut self, names: &[&str]) {
        let missing: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !self.columns.iter().any(|c| c == n))
            .collect();
        if missing.is_empty() {
            return;
        }
        let old = self.columns.len();
        let mut cells = Vec::with_capacity(self.free.len() * (old + missing.len()));
        for (r, free) in self.free.iter().enumerate() {
            cells.extend_from_slice(&self.cells[r * old..(r + 1) * old]);
            cells.extend(missing.iter().map(|n| free.get(n)));
        }
        self.cells = Arc::new(cells);
        Arc::make_mut(&mut self.columns).extend(missing.iter().map(|n| n.to_string()));
    }

    /// The up-to-date table with a column for each of `names`, for a pass to change.
    pub(super) fn room(&mut self, names: &[&str]) -> Room {
        self.ensure_columns(names);
        let width = self.columns.len();
        let mut most = vec![i64::MIN; width];
        if width > 0 {
            for row in self.cells.chunks(width) {
                for (m, v) in most.iter_mut().zip(row) {
                    *m = (*m).max(*v);
                }
            }
        }
        Room {
            idents: Arc::clone(&self.idents),
            columns: Arc::clone(&self.columns),
            free: Arc::clone(&self.free),
            cells: Arc::clone(&self.cells),
            most,
        }
    }

    /// Sums over the rows of the up-to-date table.
    pub(super) fn cpu(&self) -> ReadyCpu {
        ReadyCpu {
            nodes: self.idents.len(),
            allocatable: self.idents.iter().map(|i| i.allocatable_cpu).sum(),
            requested: self.requested_cpu.iter().sum(),
        }
    }
}

/// What is free on each Ready node, in `Cluster::ready_nodes` order: a pass's own copy,
/// changed as the pass places pods. Shared with the cluster's table until the pass changes
/// it, so a pass that places nothing copies nothing.
#[derive(Clone, Debug)]
pub struct Room {
    idents: Arc<Vec<Ident>>,
    columns: Arc<Vec<String>>,
    free: Arc<Vec<Arc<Resources>>>,
    cells: Arc<Vec<i64>>,
    /// Per column, the most any row had when the copy was made (`i64::MIN` with no rows).
    /// Placing pods only lowers amounts, so it stays an upper bound.
    most: Vec<i64>,
}

impl Room {
    pub fn len(&self) -> usize {
        self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }

    /// The column of resource `name`, if it has one.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    pub fn free(&self, row: usize) -> &Resources {
        &self.free[row]
    }

    /// What is free on `row` of the resource in `column`.
    pub fn amount(&self, row: usize, column: usize) -> i64 {
        self.cells[row * self.columns.len() + column]
    }

    /// The key of the claim of the node on `row`.
    pub fn claim(&self, row: usize) -> &str {
        &self.idents[row].claim
    }

    /// The name of the node on `row`.
    pub fn node(&self, row: usize) -> &str {
        &self.idents[row].node
    }

    /// The allocatable cpu of the node on `row`.
    pub fn allocatable_cpu(&self, row: usize) -> i64 {
        self.idents[row].allocatable_cpu
    }

    /// Whether every `(column, amount)` of `need` is free on `row`.
    pub fn fits(&self, row: usize, need: &[(usize, i64)]) -> bool {
        let cells = &self.cells[row * self.columns.len()..];
        need.iter().all(|&(c, v)| cells[c] >= v)
    }

    /// Whether some row may hold every `(column, amount)` of `need`, each on its own: when
    /// not, none holds them all.
    pub fn may_fit_somewhere(&self, need: &[(usize, i64)]) -> bool {
        need.iter().all(|&(c, v)| self.most[c] >= v)
    }

    /// Takes `requests` from what is free on `row`.
    pub fn take(&mut self, row: usize, requests: &Resources) {
        let free = Arc::make_mut(&mut Arc::make_mut(&mut self.free)[row]);
        free.sub(requests);
        let w = self.columns.len();
        let cells = &mut Arc::make_mut(&mut self.cells)[row * w..(row + 1) * w];
        for (cell, name) in cells.iter_mut().zip(self.columns.iter()) {
            *cell = free.get(name);
        }
    }
}

#[cfg(test)]
mod tests;
