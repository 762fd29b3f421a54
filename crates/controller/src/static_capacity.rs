//! The static capacity loop (gate `StaticCapacity`): every 10 s, core's
//! [`static_capacity::plan`] on a fresh snapshot says how many NodeClaims each NodePool with
//! `spec.replicas` must gain or lose; this creates them from the pool's template (any
//! instance type the pool admits, cheapest first, for the cloud to choose among) and deletes
//! the extra ones in the order core gives. A drifted claim gets a replacement first (annotated
//! with the claim it replaces) and is deleted once that one is initialized. The lifecycle and
//! termination loops take it from there, as for any claim. Static pools get no pods' claims
//! from the provisioner, no consolidation and no drift command.

use std::sync::Arc;
use std::time::Duration;

use nodewright_cloud::CloudProvider;
use nodewright_core::resources::Resources;
use nodewright_core::static_capacity::{self, Scale};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::claims::{self, ClaimRequest};
use crate::clock::Clock;
use crate::context::Context;
use crate::interruption::deletion;
use crate::metrics::Metrics;
use crate::provisioner::{snapshot, submit_claim};
use crate::state::{SharedState, lock};
use crate::write::KubeWriter;

/// How often the loop looks (upstream requeues each static NodePool every minute, sooner
/// while it scales).
pub const EVERY: Duration = Duration::from_secs(10);

/// The `karpenter_nodeclaims_created_total` reason of a static claim.
const REASON: &str = "static";

/// The reason of a drifted claim's replacement and of its deletion (upstream's drift reason).
const DRIFTED: &str = "drifted";

pub struct StaticCapacity {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    metrics: Arc<Metrics>,
    leader: Option<watch::Receiver<bool>>,
}

impl StaticCapacity {
    pub fn new(ctx: &Context) -> Self {
        StaticCapacity {
            state: ctx.state.clone(),
            writer: ctx.writer.clone(),
            cloud: ctx.cloud.clone(),
            clock: ctx.clock,
            metrics: ctx.metrics.clone(),
            leader: None,
        }
    }

    /// Acts only while `leader` says this replica holds the lease.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = Some(leader);
        self
    }

    fn leading(&self) -> bool {
        self.leader.as_ref().is_none_or(|l| *l.borrow())
    }

    /// One pass: what it created and deleted, as `created <name>` / `deleted <name>`.
    pub async fn reconcile(&self) -> Result<Vec<String>, String> {
        {
            // No snapshot (and no cloud call for instance types) while no pool is static.
            let state = lock(&self.state);
            if !state.synced() || !state.nodepools.values().any(|p| p.spec.replicas.is_some()) {
                return Ok(Vec::new());
            }
        }
        let snap = snapshot(&self.state, self.cloud.as_ref(), self.clock.now())
            .await
            .map_err(|e| e.to_string())?;
        let mut done = Vec::new();
        for scale in static_capacity::plan(&snap) {
            let Some(pool) = snap.nodepools.iter().find(|p| p.name == scale.nodepool) else {
                continue;
            };
            let types = snap
                .instance_types
                .get(&pool.name)
                .map(|its| static_capacity::instance_types(pool, its))
                .unwrap_or_default();
            let replacing: Vec<Option<&str>> = std::iter::repeat_n(None, scale.create)
                .chain(scale.replace.iter().map(|d| Some(d.as_str())))
                .collect();
            self.create(
                &scale.nodepool,
                &replacing,
                &pool.template.requirements,
                types,
                &mut done,
            )
            .await?;
            self.delete(&scale, &mut done).await?;
        }
        Ok(done)
    }

    /// One claim per entry of `replacing`: a plain one for `None`, a replacement of the named
    /// drifted claim for `Some`.
    async fn create(
        &self,
        nodepool: &str,
        replacing: &[Option<&str>],
        requirements: &[nodewright_core::requirements::Requirement],
        instance_types: Vec<String>,
        done: &mut Vec<String>,
    ) -> Result<(), String> {
        if replacing.is_empty() {
            return Ok(());
        }
        if instance_types.is_empty() {
            warn!(nodepool = %nodepool, "static NodePool: no instance type satisfies its requirements");
            return Ok(());
        }
        let Some(api_pool) = lock(&self.state).nodepools.get(nodepool).cloned() else {
            return Ok(());
        };
        let request = ClaimRequest {
            nodepool: nodepool.to_string(),
            requirements: requirements.to_vec(),
            instance_types,
            capacity_types: Vec::new(),
            requests: Resources::new(),
            min_values_relaxed: false,
        };
        for replaces in replacing {
            let name = format!("{nodepool}-{}", claims::random_suffix());
            let mut claim = claims::build(&api_pool, &request, &name);
            let reason = match replaces {
                Some(old) => {
                    claim
                        .metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .insert(static_capacity::REPLACES.into(), old.to_string());
                    DRIFTED
                }
                None => REASON,
            };
            submit_claim(
                &self.state,
                self.writer.as_ref(),
                &self.metrics,
                &claim,
                reason,
            )
            .await
            .map_err(|e| e.to_string())?;
            match replaces {
                Some(old) => {
                    info!(nodepool = %nodepool, nodeclaim = %name, replaces = %old, "static NodePool: replacing a drifted claim")
                }
                None => {
                    info!(nodepool = %nodepool, nodeclaim = %name, "static NodePool: created a claim")
                }
            }
            done.push(format!("created {name}"));
        }
        Ok(())
    }

    async fn delete(&self, scale: &Scale, done: &mut Vec<String>) -> Result<(), String> {
        let extra = scale.delete.iter().map(|n| (n, false));
        for (name, drifted) in extra.chain(scale.replaced.iter().map(|n| (n, true))) {
            let deletion = drifted
                .then(|| {
                    let s = lock(&self.state);
                    s.claim_named(name).and_then(|c| deletion(c, &s))
                })
                .flatten();
            match self.writer.delete_nodeclaim(name).await {
                Err(e) if !e.is_not_found() => return Err(e.to_string()),
                _ => {}
            }
            if let Some(d) = deletion {
                self.metrics.nodeclaim_disrupted_with_mode(
                    DRIFTED,
                    &d.nodepool,
                    &d.capacity_type,
                    &d.consolidation_policy,
                    d.termination_mode,
                );
                info!(nodepool = %scale.nodepool, nodeclaim = %name, "static NodePool: deleted a drifted claim, its replacement initialized");
            } else {
                info!(nodepool = %scale.nodepool, nodeclaim = %name, "static NodePool: deleted an extra claim");
            }
            done.push(format!("deleted {name}"));
        }
        Ok(())
    }

    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        loop {
            if self.leading()
                && let Err(e) = r.now(self.reconcile()).await
            {
                warn!(error = %e, "static capacity pass failed");
            }
            tokio::time::sleep(EVERY).await;
        }
    }
}
