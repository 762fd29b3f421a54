//! What a provisioning pass plans from: the NodePools' instance types, fetched once per
//! node class, and the index's snapshot taken with them. The disruption loop and the cloud
//! metrics read the same.

use std::collections::BTreeMap;
use std::sync::Arc;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_cloud::CloudProvider;
use nodewright_core::model::{InstanceType, Snapshot};
use nodewright_core::time::Timestamp;
use tracing::warn;

use crate::state::{SharedState, lock};

/// The instance types of every NodePool, fetched once per node class.
pub async fn instance_types(
    cloud: &dyn CloudProvider,
    pools: &[NodePool],
    classes: &BTreeMap<String, EC2NodeClass>,
) -> Result<BTreeMap<String, Arc<Vec<InstanceType>>>, nodewright_cloud::CloudError> {
    // Pools of one class share its types, unless a pool brings its own kubelet settings.
    type Key = (String, Option<String>);
    let mut by_class: BTreeMap<Key, Arc<Vec<InstanceType>>> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for np in pools {
        let class_name = np.spec.template.spec.node_class_ref.name.clone();
        let key = (
            class_name.clone(),
            crate::pool_kubelet::annotation(np).map(str::to_string),
        );
        let its = match by_class.get(&key) {
            Some(its) => its.clone(),
            None => {
                let class = classes
                    .get(&class_name)
                    .map(|c| crate::pool_kubelet::class_for(c, Some(np)));
                let its = cloud.instance_types(class.as_deref()).await?;
                by_class.insert(key, its.clone());
                its
            }
        };
        out.insert(np.metadata.name.clone().unwrap_or_default(), its);
    }
    Ok(out)
}

/// Builds a fresh snapshot: NodePools, classes and instance types, then the index under one
/// short lock.
pub async fn snapshot(
    state: &SharedState,
    cloud: &dyn CloudProvider,
    now: Timestamp,
) -> Result<Snapshot, nodewright_cloud::CloudError> {
    let (pools, classes): (Vec<NodePool>, BTreeMap<String, EC2NodeClass>) = {
        let s = lock(state);
        (
            s.nodepools.values().cloned().collect(),
            s.nodeclasses.clone(),
        )
    };
    let its = instance_types(cloud, &pools, &classes).await?;
    let (snap, problems) = lock(state).snapshot(now, its);
    for p in problems.iter().take(10) {
        warn!(problem = %p, "object left out of the snapshot");
    }
    Ok(snap)
}
