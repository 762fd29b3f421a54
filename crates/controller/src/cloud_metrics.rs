//! Upstream's `cloudprovider.metrics` loop: once a minute on the leader, the instance types
//! of every NodePool's node class become the `karpenter_cloudprovider_instance_type_*`
//! gauges (cores, memory, and per offering whether it can be launched and its price), the
//! series dashboards read to see which capacity is unavailable after an ICE or how prices
//! move. A refresh that fails keeps the last published series.

pub mod metrics;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_cloud::{CloudError, CloudProvider};
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

    /// One refresh; nothing is published unless every class's types were listed.
    pub async fn pass(&self) -> Result<(), CloudError> {
        let (pools, classes): (Vec<NodePool>, BTreeMap<String, EC2NodeClass>) = {
            let s = lock(&self.state);
            (
                s.nodepools.values().cloned().collect(),
                s.nodeclasses.clone(),
            )
        };
        let by_pool = instance_types(self.cloud.as_ref(), &pools, &classes).await?;
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
