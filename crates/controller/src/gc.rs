//! Garbage collection both ways, as upstream does it.
//!
//! *Leaked instances*: an instance the provider lists for this cluster that no NodeClaim's
//! `status.providerID` names, older than 30 s (a launch whose status write has not landed yet
//! is younger than that, or its claim still names it in the instance's tag), is terminated and
//! any Node for it deleted.
//!
//! *Orphaned claims*: a launched claim whose instance is missing from the listing and that
//! `get` confirms is gone is deleted, with its Node, unless that Node is still Ready (the
//! listing may lag; a Ready kubelet says the machine is there). A claim launched less than
//! 10 s ago is left alone for the same reason.
//!
//! Runs every 10 s for its first 20 successful passes (a restart finds leaks quickly), then
//! every 2 minutes; only while this replica holds the lease, since terminating instances is
//! a write the Kubernetes-side gate cannot see.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewright_cloud::{CloudError, CloudProvider, Instance, InstanceState};
use nodewright_core::time::Timestamp;
use thiserror::Error;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::clock::{Clock, parse_rfc3339};
use crate::conditions::{self as cond, LAUNCHED};
use crate::context::Context;
use crate::metrics::Metrics;
use crate::state::{SharedState, lock};
use crate::write::{KubeWriter, WriteError};

pub const GC_EVERY: Duration = Duration::from_secs(2 * 60);
pub const GC_EVERY_WARMUP: Duration = Duration::from_secs(10);
pub const WARMUP_PASSES: u32 = 20;
/// An instance younger than this is never collected.
pub const INSTANCE_MIN_AGE: Duration = Duration::from_secs(30);
/// A claim launched more recently than this is never collected.
pub const CLAIM_MIN_LAUNCHED: Duration = Duration::from_secs(10);

#[derive(Debug, Error)]
pub enum GcError {
    #[error("listing instances: {0}")]
    List(#[source] CloudError),
}

/// What one pass collected.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Collected {
    /// Provider ids of terminated leaked instances.
    pub instances: Vec<String>,
    /// Names of deleted orphaned claims.
    pub nodeclaims: Vec<String>,
    /// Names of deleted Nodes.
    pub nodes: Vec<String>,
    pub errors: Vec<String>,
}

pub struct GarbageCollector {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    leader: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    /// When an instance without a launch time was first listed: its age counts from then.
    first_seen: Mutex<HashMap<String, Timestamp>>,
}

fn ok_if_gone(r: Result<(), WriteError>) -> Result<(), WriteError> {
    match r {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

impl GarbageCollector {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            cloud,
            clock,
            metrics,
            ..
        } = ctx.clone();
        GarbageCollector {
            state,
            writer,
            cloud,
            clock,
            leader: watch::channel(true).1,
            metrics,
            first_seen: Mutex::new(HashMap::new()),
        }
    }

    /// Collects only while `leader` says this replica holds the lease.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = leader;
        self
    }

    fn age(&self, i: &Instance, now: Timestamp) -> Duration {
        let mut seen = self.first_seen.lock().unwrap_or_else(|p| p.into_inner());
        let since = i
            .launched_at
            .unwrap_or_else(|| *seen.entry(i.provider_id.clone()).or_insert(now));
        now.since(since)
    }

    /// One pass. Nothing happens before sync or without the lease.
    pub async fn collect(&self) -> Result<Collected, GcError> {
        let mut out = Collected::default();
        if !*self.leader.borrow() || !lock(&self.state).synced() {
            return Ok(out);
        }
        let instances = self.cloud.list().await.map_err(GcError::List)?;
        let now = self.clock.now();
        {
            let listed: BTreeSet<&str> = instances.iter().map(|i| i.provider_id.as_str()).collect();
            self.first_seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|pid, _| listed.contains(pid.as_str()));
        }
        self.collect_instances(&instances, now, &mut out).await;
        self.collect_claims(&instances, now, &mut out).await;
        Ok(out)
    }

    async fn delete_nodes_for(&self, provider_id: &str, out: &mut Collected) {
        let nodes: Vec<String> = lock(&self.state)
            .node_by_provider_id(provider_id)
            .into_iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        for node in nodes {
            match ok_if_gone(self.writer.delete_node(&node).await) {
                Ok(()) => out.nodes.push(node),
                Err(e) => out.errors.push(format!("deleting Node {node}: {e}")),
            }
        }
    }

    async fn collect_instances(&self, instances: &[Instance], now: Timestamp, out: &mut Collected) {
        let leaked: Vec<&Instance> = {
            let s = lock(&self.state);
            let claimed: BTreeSet<&str> = s
                .all_claims()
                .filter_map(|c| c.status.as_ref()?.provider_id.as_deref())
                .collect();
            // A claim that exists but has no provider id yet may be mid-launch with this
            // very instance.
            let launching: BTreeSet<&str> = s
                .all_claims()
                .filter(|c| {
                    c.status
                        .as_ref()
                        .and_then(|st| st.provider_id.as_deref())
                        .is_none()
                })
                .filter_map(|c| c.metadata.name.as_deref())
                .collect();
            instances
                .iter()
                .filter(|i| matches!(i.state, InstanceState::Pending | InstanceState::Running))
                .filter(|i| !claimed.contains(i.provider_id.as_str()))
                .filter(|i| i.nodeclaim().is_none_or(|n| !launching.contains(n)))
                .collect()
        };
        for i in leaked {
            if self.age(i, now) < INSTANCE_MIN_AGE {
                continue;
            }
            match self.cloud.delete(&i.provider_id).await {
                Ok(()) | Err(CloudError::NotFound { .. }) => {
                    info!(provider_id = %i.provider_id, "garbage collected a leaked instance");
                    out.instances.push(i.provider_id.clone());
                    self.delete_nodes_for(&i.provider_id, out).await;
                }
                Err(e) => out
                    .errors
                    .push(format!("terminating {}: {e}", i.provider_id)),
            }
        }
    }

    async fn collect_claims(&self, instances: &[Instance], now: Timestamp, out: &mut Collected) {
        let listed: BTreeSet<&str> = instances
            .iter()
            .filter(|i| i.state != InstanceState::Terminated)
            .map(|i| i.provider_id.as_str())
            .collect();
        // (claim, provider id, nodepool, capacity type): the last two label the metric.
        let suspects: Vec<(String, String, String, String)> = {
            let s = lock(&self.state);
            s.nodeclaims
                .values()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .filter_map(|c| {
                    let status = c.status.as_ref()?;
                    let pid = status.provider_id.as_deref()?;
                    let conds = status.conditions.as_deref().unwrap_or_default();
                    let launched_at = cond::find(conds, LAUNCHED)
                        .filter(|l| l.status == "True")?
                        .last_transition_time
                        .as_deref()
                        .and_then(parse_rfc3339)?;
                    if listed.contains(pid) || now.since(launched_at) < CLAIM_MIN_LAUNCHED {
                        return None;
                    }
                    let node_ready = s.node_by_provider_id(pid).iter().any(|n| {
                        n.status
                            .as_ref()
                            .and_then(|st| st.conditions.as_ref())
                            .into_iter()
                            .flatten()
                            .any(|c| c.type_ == "Ready" && c.status == "True")
                    });
                    let name = c.metadata.name.clone()?;
                    let label = |key: &str| {
                        c.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(key))
                            .cloned()
                            .unwrap_or_default()
                    };
                    let pool = label(nodewright_core::labels::NODEPOOL);
                    let capacity = label(nodewright_core::labels::CAPACITY_TYPE);
                    (!node_ready).then(|| (name, pid.to_string(), pool, capacity))
                })
                .collect()
        };
        for (name, pid, pool, capacity) in suspects {
            match self.cloud.get(&pid).await {
                Err(CloudError::NotFound { .. }) => {}
                Ok(_) => continue,
                Err(e) => {
                    out.errors.push(format!("checking {pid}: {e}"));
                    continue;
                }
            }
            match ok_if_gone(self.writer.delete_nodeclaim(&name).await) {
                Ok(()) => {
                    info!(nodeclaim = %name, provider_id = %pid, "garbage collected a claim whose instance is gone");
                    self.metrics.nodeclaim_disrupted_with_mode(
                        "garbage_collected",
                        &pool,
                        &capacity,
                        "",
                        "forceful",
                    );
                    out.nodeclaims.push(name);
                    self.delete_nodes_for(&pid, out).await;
                }
                Err(e) => out.errors.push(format!("deleting NodeClaim {name}: {e}")),
            }
        }
    }

    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        let mut passes = 0u32;
        loop {
            let active = *self.leader.borrow() && lock(&self.state).synced();
            match r.now(self.collect()).await {
                Ok(c) => {
                    if active {
                        passes = passes.saturating_add(1);
                    }
                    for e in &c.errors {
                        warn!(error = %e, "garbage collection step failed");
                    }
                }
                Err(e) => warn!(error = %e, "garbage collection failed"),
            }
            let every = if passes < WARMUP_PASSES {
                GC_EVERY_WARMUP
            } else {
                GC_EVERY
            };
            tokio::time::sleep(every).await;
        }
    }
}
