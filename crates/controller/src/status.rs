//! The status writers: each EC2NodeClass's finalizer, resolved status and hash annotations
//! (from the cloud provider), each NodePool's drift hash, resources, node count and
//! conditions, and each NodeClaim's hash stamp and `Drifted` condition. One loop runs them in that order (a
//! pool's readiness reads its class's status), only while this replica holds the lease, and
//! writes an object only when what it would write differs from what is stored.

pub mod consolidatable;
pub mod drift;
pub mod events;
pub mod finalizer;
pub mod nodeclass;
pub mod nodepool;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewright_cloud::CloudProvider;
use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::warn;

use crate::clock::Clock;
use crate::context::Context;
use crate::events::EventSink;
use crate::state::{SharedState, lock};
use crate::write::{KubeWriter, WriteError};

/// Upstream's NodePool counter cadence; the other writers are cheap enough to share it.
pub const STATUS_EVERY: Duration = Duration::from_secs(5);

impl crate::metrics::Reconciled for Written {
    fn failed(&self) -> bool {
        !self.errors.is_empty()
    }
}

/// What one pass wrote, by object name (for tests and logs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Written {
    pub nodeclass_status: Vec<String>,
    pub nodeclass_meta: Vec<String>,
    /// Classes given the finalizer, and classes whose finalizer was released.
    pub nodeclass_finalizer: Vec<String>,
    pub nodeclass_finalized: Vec<String>,
    pub nodepool_hash: Vec<String>,
    pub nodepool_status: Vec<String>,
    pub nodeclaim_hash: Vec<String>,
    pub nodeclaim_drift: Vec<String>,
    pub errors: Vec<String>,
}

pub struct StatusController {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    leader: watch::Receiver<bool>,
    /// When each class was last resolved, and what it was resolved with.
    classes: Mutex<HashMap<String, nodeclass::Resolved>>,
    /// The provider's last drift answer per claim uid, and when it was asked.
    provider_drift: Mutex<HashMap<String, (Timestamp, Option<String>)>>,
    events: Arc<dyn EventSink>,
}

impl StatusController {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            cloud,
            clock,
            events,
            ..
        } = ctx.clone();
        StatusController {
            state,
            writer,
            cloud,
            clock,
            leader: watch::channel(true).1,
            classes: Mutex::new(HashMap::new()),
            provider_drift: Mutex::new(HashMap::new()),
            events,
        }
    }

    /// Writes only while `leader` says this replica holds the lease.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = leader;
        self
    }

    /// One pass over classes, pools and claims. Does nothing before sync or without the lease
    /// (the cloud calls would be wasted and the writes refused).
    pub async fn reconcile_all(&self) -> Written {
        let mut out = Written::default();
        if !*self.leader.borrow() || !lock(&self.state).synced() {
            return out;
        }
        self.finalize_nodeclasses(&mut out).await;
        self.reconcile_nodeclasses(&mut out).await;
        self.reconcile_nodepools(&mut out).await;
        self.reconcile_drift(&mut out).await;
        for e in &out.errors {
            warn!(error = %e, "status write failed");
        }
        out
    }

    pub async fn run(self: Arc<Self>, every: Duration, r: crate::metrics::Reconciler) {
        loop {
            r.now(self.reconcile_all()).await;
            self.clock.sleep_on_grid(every).await;
        }
    }
}

/// Records a failed write; a NotFound (the object went away meanwhile) is not a failure.
fn record(out: &mut Written, what: &str, name: &str, r: Result<(), WriteError>) -> bool {
    match r {
        Ok(()) => true,
        Err(e) if e.is_not_found() => false,
        Err(e) => {
            out.errors.push(format!("{what} {name}: {e}"));
            false
        }
    }
}
