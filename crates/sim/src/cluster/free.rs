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
mod tests {
    use nodewright_core::model::NodeClaim;
    use nodewright_core::resources::MEMORY;

    use super::*;

    /// The parts of a cluster the table reads.
    #[derive(Default)]
    struct World {
        claims: BTreeMap<String, SimClaim>,
        pods: BTreeMap<String, Arc<Pod>>,
        on_node: BTreeMap<String, BTreeSet<String>>,
    }

    impl World {
        fn claim(&mut self, t: &mut FreeTable, claim: &str, node: &str, cpu: i64) {
            t.claim_changed(claim);
            self.claims.insert(
                claim.into(),
                SimClaim {
                    claim: NodeClaim {
                        name: claim.into(),
                        node_name: Some(node.into()),
                        ..NodeClaim::default()
                    },
                    instance: None,
                    node: Some(Node {
                        name: node.into(),
                        ready: true,
                        allocatable: Resources::new().with(CPU, cpu).with(MEMORY, 4 * cpu),
                        ..Node::default()
                    }),
                    launched_at: None,
                    terminating: None,
                    deleted_at: None,
                    reason: String::new(),
                },
            );
        }

        fn pod(&mut self, t: &mut FreeTable, name: &str, node: &str, cpu: i64) {
            t.node_changed(node);
            self.pods.insert(
                name.into(),
                Pod {
                    name: name.into(),
                    node_name: Some(node.into()),
                    requests: Resources::new().with(CPU, cpu).with(MEMORY, cpu),
                    ..Pod::default()
                }
                .into(),
            );
            self.on_node
                .entry(node.into())
                .or_default()
                .insert(name.into());
        }

        fn unpod(&mut self, t: &mut FreeTable, name: &str) {
            let p = self.pods.remove(name).unwrap();
            let node = p.node_name.clone().unwrap();
            t.node_changed(&node);
            self.on_node.get_mut(&node).unwrap().remove(name);
        }

        fn refresh(&self, t: &mut FreeTable) {
            t.refresh(&self.claims, &self.pods, &self.on_node);
        }

        /// The table as a fresh one sums it: claims, nodes, free resources, then the columns.
        fn fresh(&self, columns: &[&str]) -> (Vec<(String, String, Resources)>, Vec<i64>) {
            let mut t = FreeTable::default();
            self.refresh(&mut t);
            seen(&mut t, columns)
        }
    }

    fn seen(t: &mut FreeTable, columns: &[&str]) -> (Vec<(String, String, Resources)>, Vec<i64>) {
        let room = t.room(columns);
        let rows = (0..room.len())
            .map(|r| {
                let (claim, node) = (room.claim(r).to_string(), room.node(r).to_string());
                (claim, node, room.free(r).clone())
            })
            .collect();
        let cells = (0..room.len())
            .flat_map(|r| {
                let room = &room;
                columns
                    .iter()
                    .map(move |c| room.amount(r, room.column(c).unwrap()))
            })
            .collect();
        (rows, cells)
    }

    fn check(t: &mut FreeTable, w: &World) {
        w.refresh(t);
        assert_eq!(seen(t, &[CPU, MEMORY]), w.fresh(&[CPU, MEMORY]));
        let mut fresh = FreeTable::default();
        w.refresh(&mut fresh);
        assert_eq!(t.cpu(), fresh.cpu());
        assert_eq!(t.misnamed, fresh.misnamed);
    }

    #[test]
    fn rows_follow_pods_and_claims() {
        let (mut t, mut w) = (FreeTable::default(), World::default());
        w.claim(&mut t, "b", "b", 4000);
        w.claim(&mut t, "d", "d", 2000);
        check(&mut t, &w);
        w.pod(&mut t, "p1", "b", 500);
        w.pod(&mut t, "p2", "b", 700);
        check(&mut t, &w);
        // A claim that sorts between the others becomes Ready, then one goes.
        w.claim(&mut t, "c", "c", 8000);
        w.pod(&mut t, "p3", "c", 100);
        check(&mut t, &w);
        t.claim_changed("d");
        w.claims.get_mut("d").unwrap().deleted_at = Some(Default::default());
        check(&mut t, &w);
        w.unpod(&mut t, "p1");
        check(&mut t, &w);
        assert_eq!(
            t.cpu(),
            ReadyCpu {
                nodes: 2,
                allocatable: 12_000,
                requested: 800
            }
        );
    }

    #[test]
    fn nodes_not_named_after_their_claim_are_found_too() {
        let (mut t, mut w) = (FreeTable::default(), World::default());
        w.claim(&mut t, "a", "node-x", 4000);
        w.claim(&mut t, "b", "b", 4000);
        // Two claims whose nodes share a name both count its pods.
        w.claim(&mut t, "c", "node-x", 1000);
        check(&mut t, &w);
        w.pod(&mut t, "p1", "node-x", 300);
        w.pod(&mut t, "p2", "b", 300);
        check(&mut t, &w);
        // Renamed after its claim: the scan is no longer needed.
        for claim in ["a", "c"] {
            t.claim_changed(claim);
            let c = w.claims.get_mut(claim).unwrap();
            c.node.as_mut().unwrap().name = claim.into();
        }
        check(&mut t, &w);
        assert_eq!(t.misnamed, 0);
        w.pod(&mut t, "p3", "a", 300);
        check(&mut t, &w);
    }

    #[test]
    fn columns_added_later_hold_every_row() {
        let (mut t, mut w) = (FreeTable::default(), World::default());
        w.claim(&mut t, "a", "a", 4000);
        w.claim(&mut t, "b", "b", 2000);
        w.pod(&mut t, "p1", "a", 500);
        w.refresh(&mut t);
        let _ = t.room(&[MEMORY]);
        check(&mut t, &w);
        assert_eq!(*t.columns, vec![MEMORY.to_string(), CPU.to_string()]);
    }

    #[test]
    fn too_many_notes_rebuild_the_table() {
        let (mut t, mut w) = (FreeTable::default(), World::default());
        w.claim(&mut t, "a", "a", 4000);
        w.refresh(&mut t);
        for i in 0..400 {
            w.pod(&mut t, &format!("p{i}"), "a", 1);
        }
        assert!(!t.built);
        check(&mut t, &w);
    }

    #[test]
    fn a_pass_copy_changes_apart_from_the_table() {
        let (mut t, mut w) = (FreeTable::default(), World::default());
        w.claim(&mut t, "a", "a", 4000);
        w.claim(&mut t, "b", "b", 2000);
        w.refresh(&mut t);
        let mut room = t.room(&[CPU]);
        let c = room.column(CPU).unwrap();
        assert!(room.may_fit_somewhere(&[(c, 4000)]));
        assert!(!room.may_fit_somewhere(&[(c, 4001)]));
        assert!(room.fits(0, &[(c, 4000)]) && !room.fits(1, &[(c, 4000)]));
        room.take(0, &Resources::new().with(CPU, 3500).with(MEMORY, 1));
        assert!(!room.fits(0, &[(c, 600)]));
        assert_eq!(room.free(0).get(MEMORY), 16_000 - 1);
        assert_eq!(t.free[0].get(CPU), 4000, "the table is not changed");
        assert_eq!(t.cells[0], 4000);
        assert_eq!(
            (room.claim(1), room.node(1), room.allocatable_cpu(1)),
            ("b", "b", 2000)
        );
        assert!(FreeTable::default().room(&[CPU]).is_empty());
    }

    #[test]
    fn a_table_changed_after_a_copy_leaves_the_copy_alone() {
        let (mut t, mut w) = (FreeTable::default(), World::default());
        w.claim(&mut t, "a", "a", 4000);
        w.claim(&mut t, "b", "b", 2000);
        w.refresh(&mut t);
        let room = t.room(&[CPU]);
        let before = format!("{room:?}");
        w.pod(&mut t, "p1", "a", 500);
        w.claim(&mut t, "c", "c", 1000);
        check(&mut t, &w);
        assert_eq!(format!("{room:?}"), before);
    }
}
