//! Per-pod figures the engine asks for at every step (pods per controller, pending pods,
//! workload pods), kept by adding and taking back each pod's share instead
//! of scanning every pod each time.
//!
//! Pods change in place through `Cluster::pod_mut`, after the cluster has handed out the
//! reference, so the ledger cannot see the new state when it is told of a change. It only notes
//! the key; `sync` later takes back what the pod counted for when last synced and counts it as
//! it is now (or not at all, once gone). Every path that changes a pod notes its key, the same
//! paths that keep the maintained snapshot in step.

use std::collections::BTreeSet;

use nodewright_core::model::Pod;
use nodewright_core::scheduling::FastMap;

/// What one pod counts for.
#[derive(Clone, Debug, PartialEq)]
struct Share {
    /// `(namespace, controller name)` when a controller owns it.
    controller: Option<(String, String)>,
    terminating: bool,
    daemon: bool,
    bound: bool,
}

impl Share {
    fn of(p: &Pod) -> Share {
        Share {
            controller: p
                .owner
                .as_ref()
                .filter(|o| o.controller)
                .map(|o| (p.namespace.clone(), o.name.clone())),
            terminating: p.deletion_timestamp.is_some(),
            daemon: p.is_daemonset_pod(),
            bound: p.node_name.is_some(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub(super) struct Ledger {
    /// Pods changed since the last `sync` (a key may appear more than once).
    noted: Vec<String>,
    shares: FastMap<String, Share>,
    /// `(namespace, controller name)` → (pods it controls, those not terminating).
    controlled: FastMap<(String, String), (usize, usize)>,
    /// Keys of unbound pods that no DaemonSet owns, in key order.
    pending: BTreeSet<String>,
    /// Pods that no DaemonSet owns.
    workload_pods: usize,
}

impl Ledger {
    pub(super) fn note(&mut self, key: &str) {
        self.noted.push(key.to_string());
    }

    /// Brings every figure up to date with `pods`.
    pub(super) fn sync(&mut self, pods: &std::collections::BTreeMap<String, std::sync::Arc<Pod>>) {
        for key in std::mem::take(&mut self.noted) {
            let now = pods.get(&key).map(|p| Share::of(p));
            if self.shares.get(&key) == now.as_ref() {
                continue;
            }
            if let Some(old) = self.shares.remove(&key) {
                self.count(&key, &old, -1);
            }
            if let Some(new) = now {
                self.count(&key, &new, 1);
                self.shares.insert(key, new);
            }
        }
    }

    fn count(&mut self, key: &str, s: &Share, sign: i64) {
        let step = |n: &mut usize, by: bool| {
            if by {
                *n = n.checked_add_signed(sign as isize).expect("ledger count");
            }
        };
        if let Some(c) = &s.controller {
            let e = self.controlled.entry(c.clone()).or_default();
            step(&mut e.0, true);
            step(&mut e.1, !s.terminating);
            if *e == (0, 0) {
                self.controlled.remove(c);
            }
        }
        if !s.daemon {
            step(&mut self.workload_pods, true);
        }
        if !s.bound && !s.daemon {
            if sign > 0 {
                self.pending.insert(key.to_string());
            } else {
                self.pending.remove(key);
            }
        }
    }

    /// (pods, not terminating) a controller owns, as of the last `sync`.
    pub(super) fn controlled(&self, controller: &(String, String)) -> (usize, usize) {
        self.controlled.get(controller).copied().unwrap_or_default()
    }

    pub(super) fn pending(&self) -> &BTreeSet<String> {
        &self.pending
    }

    pub(super) fn workload_pods(&self) -> usize {
        self.workload_pods
    }
}
