//! Resolved node classes for launches, kept for a minute. Launches arrive in bursts (one per
//! claim of a provisioning round); resolving the class once for the burst saves the subnet,
//! group, image and profile calls, and resolving one at a time keeps concurrent launches from
//! racing each other to attach the role to a new instance profile.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nodewright_api::aws::v1::EC2NodeClass;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::cloud::{AwsCloud, now};
use crate::error::AwsError;
use crate::nodeclass::ResolvedNodeClass;

/// How long a ready resolution is reused by default (upstream refreshes subnets, groups and
/// images on the same period: `AMI_REFRESH_INTERVAL` and `SUBNET_REFRESH_INTERVAL`, 1m).
pub const TTL: Duration = Duration::from_secs(60);

pub struct ResolvedCache {
    /// The sooner of the two refresh intervals: a resolution holds both the images and the
    /// subnets, so it is redone when either is due.
    ttl: Duration,
    entries: Mutex<BTreeMap<String, (Instant, Arc<ResolvedNodeClass>)>>,
}

impl Default for ResolvedCache {
    fn default() -> Self {
        ResolvedCache::new(TTL)
    }
}

/// Any change to the class (spec, generation, uid) is a different entry.
fn key(class: &EC2NodeClass) -> String {
    format!(
        "{}/{}/{:?}/{:?}",
        class.metadata.name.as_deref().unwrap_or(""),
        class.metadata.uid.as_deref().unwrap_or(""),
        class.metadata.generation,
        class.spec
    )
}

impl ResolvedCache {
    pub fn new(ttl: Duration) -> Self {
        ResolvedCache {
            ttl,
            entries: Mutex::default(),
        }
    }

    /// How long a resolution is reused.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The class resolved within the last [`Self::ttl`], else resolved now. Only ready resolutions
    /// are kept, so a class that is being fixed is looked at again on the next launch.
    pub async fn get(
        &self,
        cloud: &AwsCloud,
        class: &EC2NodeClass,
    ) -> Result<Arc<ResolvedNodeClass>, AwsError> {
        let key = key(class);
        let mut entries = self.entries.lock().await;
        let t = Instant::now();
        entries.retain(|_, (at, _)| t.duration_since(*at) < self.ttl);
        if let Some((_, r)) = entries.get(&key) {
            return Ok(r.clone());
        }
        let resolved_at = now();
        let r = Arc::new(cloud.resolve_node_class(class, resolved_at).await?);
        // A fresh DescribeSubnets count replaces the addresses predicted in flight.
        cloud
            .launch
            .addresses()
            .refresh(&super::subnet_infos(&r), resolved_at);
        cloud
            .launch
            .reservations()
            .observe(&r.capacity_reservations);
        if r.is_ready() {
            entries.insert(key, (t, r.clone()));
        }
        Ok(r)
    }

    /// Forgets every entry (after a launch found a subnet, group or image gone).
    pub async fn clear(&self) {
        self.entries.lock().await.clear();
    }
}
