//! The snapshots the engine's decisions see: built from scratch, or kept up to date from the
//! changes since the last one (the maintained view), and handed to work that runs beside
//! the engine.

use std::sync::Arc;

use nodewright_core::disruption::InFlight;
use nodewright_core::model::Snapshot;
use nodewright_core::time::Timestamp;

use super::{Cluster, snapshot_node};

impl Cluster {
    /// The snapshot a decision at `now` sees: live claims and Ready nodes, every pod, and the
    /// catalog with offerings still inside their ICE window marked unavailable. Built from
    /// scratch; [`Cluster::view`] gives the same snapshot without copying what did not change.
    pub fn snapshot(&self, now: Timestamp) -> Snapshot {
        let mut s = Snapshot {
            nodes: self
                .claims
                .iter()
                .filter_map(|(k, c)| snapshot_node(k, c, &self.versions))
                .map(Arc::new)
                .collect(),
            node_claims: self
                .claims
                .values()
                .filter(|c| c.is_live())
                .map(|c| Arc::new(c.claim.clone()))
                .collect(),
            pods: self.pods.values().cloned().collect(),
            ..Snapshot::default()
        };
        self.fill_rest(&mut s, now);
        s
    }

    /// The same snapshot as [`Cluster::snapshot`], kept by the cluster: only the pods and
    /// claims that changed since the last call are copied again.
    pub fn view(&mut self, now: Timestamp) -> &Snapshot {
        self.view_stamped(now).1
    }

    /// [`Cluster::view`] with its [`Cluster::view_generation`].
    pub fn view_stamped(&mut self, now: Timestamp) -> (u64, &Snapshot) {
        let mut m = std::mem::take(&mut self.maintained);
        m.sync(&self.pods, &self.claims, &self.versions);
        let mut rest = Snapshot {
            namespaces: m.snapshot().namespaces.clone(),
            ..Snapshot::default()
        };
        self.fill_rest(&mut rest, now);
        m.set_rest(rest);
        self.maintained = m;
        (self.maintained.generation, self.maintained.snapshot())
    }

    /// [`Cluster::view_stamped`] as the running commands `held` leave it ([`InFlight::view`]),
    /// applied to the kept snapshot in place instead of copied; the next view puts it back.
    pub fn view_held(&mut self, now: Timestamp, held: &InFlight) -> (u64, &Snapshot) {
        self.view_stamped(now);
        let m = &mut self.maintained;
        if !held.is_empty() {
            m.applied = Some(held.apply_reversibly(m.snapshot_mut()));
        }
        (m.generation, m.snapshot())
    }

    /// The last view ([`Cluster::view_stamped`] or [`Cluster::view_held`]) as it was left.
    pub fn last_view(&self) -> &Snapshot {
        self.maintained.snapshot()
    }

    /// Runs `work` over the last view on another thread while the caller goes on. The view
    /// is not changed until `work` ends: the next view waits for it first (a copy of the
    /// cluster copies the view instead, if `work` still reads it).
    pub fn beside_view(&mut self, work: impl FnOnce(&Snapshot) + Send + 'static) {
        self.maintained.beside(work);
    }

    /// Changes whenever the last [`Cluster::view`] may differ from the one before it in
    /// anything but its time: two views of one generation are the same snapshot at two
    /// instants, so a decision that does not read the clock gives the same answer on both.
    pub fn view_generation(&self) -> u64 {
        self.maintained.generation
    }

    /// Everything of the snapshot but the pods, Nodes and NodeClaims: small lists, built anew.
    fn fill_rest(&self, s: &mut Snapshot, now: Timestamp) {
        let mut instance_types = self.catalog.clone();
        if self.cloud.any_unavailable(now) {
            for list in instance_types.values_mut() {
                let mut types = (**list).clone();
                self.cloud.mark_offerings(&mut types, now);
                *list = Arc::new(types);
            }
        }
        s.now = now;
        s.nodepools = self.nodepools.clone();
        s.instance_types = instance_types;
        s.daemonsets = self.daemonsets.clone();
        s.pdbs = self.pdbs.values().map(|b| b.observed(self)).collect();
        s.persistent_volume_claims = self.pvcs.values().cloned().collect();
        s.persistent_volumes = self.pvs.values().cloned().collect();
        s.storage_classes = self.storage_classes.values().cloned().collect();
    }
}
