//! Upstream's `cloudprovider.metrics` loop: once a minute on the leader, the instance types
//! of every NodePool's node class become the `karpenter_cloudprovider_instance_type_*`
//! gauges (cores, memory, and per offering whether it can be launched and its price), the
//! series dashboards read to see which capacity is unavailable after an ICE or how prices
//! move. A refresh that fails keeps the last published series. The same refresh prices each
//! NodePool's NodeClaims at their offerings, upstream's cost tracker
//! (`karpenter_nodepools_cost_total`), and counts the claims it could not price
//! (`karpenter_nodepools_cost_tracker_errors_total`).

pub mod metrics;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_cloud::{CloudError, CloudProvider};
use nodewright_core::labels;
use nodewright_core::model::InstanceType;
use tokio::sync::watch;
use tracing::warn;

use crate::context::Context;
use crate::metrics::Metrics;
use crate::provisioner::instance_types;
use crate::state::{SharedState, lock};
use metrics::OfferingRows;

/// Upstream's period.
pub const REFRESH_EVERY: Duration = Duration::from_secs(60);

/// The rows for instance-type lists (one per node class). A type or offering listed by
/// several classes is available if any class can launch it, at the lowest price listed.
pub fn rows<'a>(lists: impl IntoIterator<Item = &'a [InstanceType]>) -> OfferingRows {
    let mut out = OfferingRows::default();
    for list in lists {
        for it in list {
            out.types.insert(
                it.name.clone(),
                (
                    it.capacity.get("cpu") as f64 / 1000.0,
                    it.capacity.get("memory") as f64,
                ),
            );
            for o in &it.offerings {
                let key = (
                    it.name.clone(),
                    o.capacity_type.as_str().to_string(),
                    o.zone.clone(),
                );
                out.offerings
                    .entry(key)
                    .and_modify(|(available, price)| {
                        *available |= o.available;
                        *price = price.min(o.price);
                    })
                    .or_insert((o.available, o.price));
            }
        }
    }
    out
}

/// What a NodeClaim's cost is looked up by: its NodePool and offering (instance type, zone,
/// capacity type), from its labels; `None` until it has them all, as upstream's cost tracker
/// waits for them.
fn offering_of(claim: &NodeClaim) -> Option<[&str; 4]> {
    let l = claim.metadata.labels.as_ref()?;
    let get = |k: &str| l.get(k).map(String::as_str);
    Some([
        get(labels::NODEPOOL)?,
        get(labels::INSTANCE_TYPE)?,
        get(labels::ZONE)?,
        get(labels::CAPACITY_TYPE)?,
    ])
}

/// Each NodePool's cost (every pool of `pools`, 0 without claims): the price of each of its
/// claims' offerings in the pool's instance types, 0 for one they no longer list (upstream
/// logs it and counts nothing). A claim whose NodePool `by_pool` does not know (the pool is
/// gone) could not be priced: it is counted as an error of its pool.
pub fn costs(
    claims: &[Arc<NodeClaim>],
    pools: &[String],
    by_pool: &BTreeMap<String, Arc<Vec<InstanceType>>>,
) -> (BTreeMap<String, f64>, BTreeMap<String, u64>) {
    let mut cost: BTreeMap<String, f64> = pools.iter().map(|p| (p.clone(), 0.0)).collect();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for [pool, instance_type, zone, capacity_type] in claims.iter().filter_map(|c| offering_of(c)) {
        let Some(types) = by_pool.get(pool) else {
            *errors.entry(pool.to_string()).or_default() += 1;
            continue;
        };
        let price = types
            .iter()
            .filter(|it| it.name == instance_type)
            .flat_map(|it| &it.offerings)
            .find(|o| o.zone == zone && o.capacity_type.as_str() == capacity_type)
            .map_or(0.0, |o| o.price);
        *cost.entry(pool.to_string()).or_default() += price;
    }
    (cost, errors)
}

pub struct CloudMetrics {
    state: SharedState,
    cloud: Arc<dyn CloudProvider>,
    metrics: Arc<Metrics>,
    leader: watch::Receiver<bool>,
}

impl CloudMetrics {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            cloud,
            metrics,
            ..
        } = ctx.clone();
        CloudMetrics {
            state,
            cloud,
            metrics,
            leader: watch::channel(true).1,
        }
    }

    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = leader;
        self
    }

    /// One refresh; nothing is published unless every class's types were listed (the claims
    /// that could not be priced then are counted as cost-tracking errors).
    pub async fn pass(&self) -> Result<(), CloudError> {
        let (pools, classes, claims): (Vec<NodePool>, BTreeMap<String, EC2NodeClass>, Vec<_>) = {
            let s = lock(&self.state);
            (
                s.nodepools.values().cloned().collect(),
                s.nodeclasses.clone(),
                s.nodeclaims.values().cloned().collect(),
            )
        };
        let by_pool = match instance_types(self.cloud.as_ref(), &pools, &classes).await {
            Ok(by_pool) => by_pool,
            Err(e) => {
                for [pool, ..] in claims.iter().filter_map(|c| offering_of(c)) {
                    self.metrics.offerings.cost_tracking_errors(pool, 1);
                }
                return Err(e);
            }
        };
        let names: Vec<String> = pools
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let (cost, errors) = costs(&claims, &names, &by_pool);
        self.metrics.offerings.set_costs(&cost);
        for (pool, n) in &errors {
            self.metrics.offerings.cost_tracking_errors(pool, *n);
        }
        // Pools sharing a class share one list; count each list once.
        let mut lists: Vec<&Arc<Vec<InstanceType>>> = by_pool.values().collect();
        lists.sort_by_key(|l| Arc::as_ptr(l));
        lists.dedup_by_key(|l| Arc::as_ptr(l));
        self.metrics
            .offerings
            .set(&rows(lists.into_iter().map(|l| l.as_slice())));
        Ok(())
    }

    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        loop {
            let active = *self.leader.borrow() && lock(&self.state).synced();
            if active && let Err(e) = r.now(self.pass()).await {
                warn!(error = %e, "refreshing the instance-type metrics");
            }
            tokio::time::sleep(REFRESH_EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests;
