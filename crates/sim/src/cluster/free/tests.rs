//! The free-capacity table: rows kept in step with pods and claims, new columns, pass copies.

use nodewright_core::model::{NodeClaim, PodTemplate};
use nodewright_core::resources::MEMORY;
use std::sync::Arc;

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
                template: Arc::new(PodTemplate {
                    requests: Resources::new().with(CPU, cpu).with(MEMORY, cpu),
                    ..PodTemplate::default()
                }),
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
