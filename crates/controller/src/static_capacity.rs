//! The static capacity loop (gate `StaticCapacity`): every 10 s, core's
//! [`static_capacity::plan`] on a fresh snapshot says how many NodeClaims each NodePool with
//! `spec.replicas` must gain or lose; this creates them from the pool's template (any
//! instance type the pool admits, cheapest first, for the cloud to choose among) and deletes
//! the extra ones in the order core gives. The lifecycle and termination loops take it from
//! there, as for any claim. Static pools get no pods' claims from the provisioner and no
//! consolidation.

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
use crate::metrics::Metrics;
use crate::provisioner::{snapshot, submit_claim};
use crate::state::{SharedState, lock};
use crate::write::KubeWriter;

/// How often the loop looks (upstream requeues each static NodePool every minute, sooner
/// while it scales).
pub const EVERY: Duration = Duration::from_secs(10);

/// The `karpenter_nodeclaims_created_total` reason of a static claim.
const REASON: &str = "static";

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
            self.create(&scale, &pool.template.requirements, types, &mut done)
                .await?;
            self.delete(&scale, &mut done).await?;
        }
        Ok(done)
    }

    async fn create(
        &self,
        scale: &Scale,
        requirements: &[nodewright_core::requirements::Requirement],
        instance_types: Vec<String>,
        done: &mut Vec<String>,
    ) -> Result<(), String> {
        if scale.create == 0 {
            return Ok(());
        }
        if instance_types.is_empty() {
            warn!(nodepool = %scale.nodepool, "static NodePool: no instance type satisfies its requirements");
            return Ok(());
        }
        let Some(api_pool) = lock(&self.state).nodepools.get(&scale.nodepool).cloned() else {
            return Ok(());
        };
        let request = ClaimRequest {
            nodepool: scale.nodepool.clone(),
            requirements: requirements.to_vec(),
            instance_types,
            capacity_types: Vec::new(),
            requests: Resources::new(),
            min_values_relaxed: false,
        };
        for _ in 0..scale.create {
            let name = format!("{}-{}", scale.nodepool, claims::random_suffix());
            let claim = claims::build(&api_pool, &request, &name);
            submit_claim(
                &self.state,
                self.writer.as_ref(),
                &self.metrics,
                &claim,
                REASON,
            )
            .await
            .map_err(|e| e.to_string())?;
            info!(nodepool = %scale.nodepool, nodeclaim = %name, "static NodePool: created a claim");
            done.push(format!("created {name}"));
        }
        Ok(())
    }

    async fn delete(&self, scale: &Scale, done: &mut Vec<String>) -> Result<(), String> {
        for name in &scale.delete {
            match self.writer.delete_nodeclaim(name).await {
                Err(e) if !e.is_not_found() => return Err(e.to_string()),
                _ => {}
            }
            info!(nodepool = %scale.nodepool, nodeclaim = %name, "static NodePool: deleted an extra claim");
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
