//! `placementGroupSelector`: the one placement group a class launches into, found by name or
//! id with `DescribePlacementGroups` (available groups only), and the `PlacementGroupReady`
//! condition it becomes.
//!
//! The lookup sits behind [`PlacementGroupSource`] because the EC2 peer the tests run against
//! has no placement groups; [`PlacementGroups`] keeps each answer for a minute (a missing group
//! too) and the last group found for a selector, so instance types and drift checks between
//! reconciles need no call, and a failing lookup does not forget a group that existed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::{Filter, PlacementGroup as SdkGroup};
use nodewright_api::aws::v1::PlacementGroupSelector;
use nodewright_aws_model::placement::{PlacementGroup, Strategy};
use tokio::time::Instant;

use crate::AwsClients;
use crate::error::AwsError;

pub const PLACEMENT_GROUP_READY: &str = "PlacementGroupReady";
pub const NOT_FOUND: &str = "PlacementGroupNotFound";
pub const RESOLUTION_FAILED: &str = "PlacementGroupResolutionFailed";

/// How long one lookup's answer is reused.
pub const TTL: Duration = Duration::from_secs(60);

/// What a selector asks for: exactly one of the two (the API validates that).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Query {
    Id(String),
    Name(String),
}

impl Query {
    /// The query of a selector; `None` when it names neither.
    pub fn of(selector: &PlacementGroupSelector) -> Option<Query> {
        match (&selector.id, &selector.name) {
            (Some(id), _) => Some(Query::Id(id.clone())),
            (None, Some(name)) => Some(Query::Name(name.clone())),
            (None, None) => None,
        }
    }

    /// As the selector wrote it, for messages.
    pub fn text(&self) -> &str {
        match self {
            Query::Id(s) | Query::Name(s) => s,
        }
    }
}

/// Looks placement groups up.
#[async_trait]
pub trait PlacementGroupSource: Send + Sync {
    /// The available group the query names; `None` when there is none.
    async fn describe(&self, query: &Query) -> Result<Option<PlacementGroup>, AwsError>;
}

/// The model's form of a group EC2 reported; `None` without an id or with an unknown
/// strategy.
pub fn from_sdk(g: &SdkGroup) -> Option<PlacementGroup> {
    Some(PlacementGroup {
        id: g.group_id()?.to_string(),
        name: g.group_name().unwrap_or_default().to_string(),
        strategy: Strategy::parse(g.strategy()?.as_str())?,
        partition_count: g
            .partition_count()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        spread_level: g.spread_level().map(|l| l.as_str().to_string()),
    })
}

/// `DescribePlacementGroups` through the EC2 client.
pub struct SdkPlacementGroups {
    clients: AwsClients,
}

impl SdkPlacementGroups {
    pub fn new(clients: AwsClients) -> Self {
        SdkPlacementGroups { clients }
    }
}

#[async_trait]
impl PlacementGroupSource for SdkPlacementGroups {
    async fn describe(&self, query: &Query) -> Result<Option<PlacementGroup>, AwsError> {
        let mut req = self
            .clients
            .ec2
            .describe_placement_groups()
            .filters(Filter::builder().name("state").values("available").build());
        req = match query {
            Query::Id(id) => req.group_ids(id),
            Query::Name(name) => req.group_names(name),
        };
        match req.send().await {
            Ok(out) => Ok(out.placement_groups().iter().find_map(from_sdk)),
            Err(e) => {
                let e = AwsError::from_sdk("DescribePlacementGroups", e);
                // EC2 answers a name or id it does not know with an error, not an empty list.
                let unknown = e
                    .code
                    .as_deref()
                    .is_some_and(|c| c.starts_with("InvalidPlacementGroup"));
                if unknown || e.is_not_found() {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }
}

/// Lookups with a one-minute memory, shared by reconciles, instance-type listings, launches
/// and drift checks.
pub struct PlacementGroups {
    source: Arc<dyn PlacementGroupSource>,
    ttl: Duration,
    answers: Mutex<BTreeMap<Query, (Instant, Option<PlacementGroup>)>>,
    last_found: Mutex<BTreeMap<Query, PlacementGroup>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PlacementGroups {
    pub fn new(source: Arc<dyn PlacementGroupSource>) -> Self {
        PlacementGroups {
            source,
            ttl: TTL,
            answers: Mutex::new(BTreeMap::new()),
            last_found: Mutex::new(BTreeMap::new()),
        }
    }

    /// The group `selector` names (`Ok(None)`: no such available group). Answers younger
    /// than the TTL are reused; `fresh` skips them (reconciles look again every time).
    pub async fn get(
        &self,
        selector: &PlacementGroupSelector,
        fresh: bool,
    ) -> Result<Option<PlacementGroup>, AwsError> {
        let Some(query) = Query::of(selector) else {
            return Ok(None);
        };
        if !fresh
            && let Some((at, answer)) = lock(&self.answers).get(&query)
            && at.elapsed() < self.ttl
        {
            return Ok(answer.clone());
        }
        let answer = self.source.describe(&query).await?;
        lock(&self.answers).insert(query.clone(), (Instant::now(), answer.clone()));
        if let Some(g) = &answer {
            lock(&self.last_found).insert(query, g.clone());
        }
        Ok(answer)
    }

    /// The last group found for `selector`, however old: what launches and drift checks use
    /// while a lookup fails.
    pub fn last_found(&self, selector: &PlacementGroupSelector) -> Option<PlacementGroup> {
        lock(&self.last_found).get(&Query::of(selector)?).cloned()
    }

    /// For callers outside a reconcile: the cached or looked-up group, falling back to the
    /// last one found when the lookup fails (the error is logged).
    pub async fn current(
        &self,
        selector: Option<&PlacementGroupSelector>,
    ) -> Option<PlacementGroup> {
        let selector = selector?;
        match self.get(selector, false).await {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(error = %e, "placement group lookup failed; using the last one found");
                self.last_found(selector)
            }
        }
    }
}

/// The partition EC2 put an instance in (partition groups only); `None` while it is not known.
pub fn partition_of(instance: &aws_sdk_ec2::types::Instance) -> Option<u32> {
    instance
        .placement()?
        .partition_number()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0)
}

/// The partition of the instance behind `provider_id`, for the node's
/// `placement-group-partition` label when the launch let EC2 choose. `Ok(None)` while EC2 does
/// not report one yet (or the instance is in no partition group).
pub async fn instance_partition(
    clients: &AwsClients,
    provider_id: &str,
) -> Result<Option<u32>, nodewright_cloud::CloudError> {
    let id = crate::instances::instance_id(provider_id)?;
    let out = clients
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("DescribeInstances", e))?;
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find(|i| i.instance_id() == Some(id))
        .and_then(partition_of))
}

/// The class's group and its `PlacementGroupReady` outcome; no selector, no condition.
pub async fn resolve(
    groups: &PlacementGroups,
    selector: Option<&PlacementGroupSelector>,
) -> (Option<PlacementGroup>, Option<super::conditions::Outcome>) {
    let Some(selector) = selector else {
        return (None, None);
    };
    let text = Query::of(selector)
        .map(|q| q.text().to_string())
        .unwrap_or_default();
    match groups.get(selector, true).await {
        Ok(Some(g)) => (Some(g), Some(Ok(()))),
        Ok(None) => (
            None,
            Some(Err((
                NOT_FOUND.into(),
                format!("placement group {text:?} not found"),
            ))),
        ),
        Err(e) => (
            None,
            Some(Err((
                RESOLUTION_FAILED.into(),
                format!("failed to resolve placement group {text:?}: {e}"),
            ))),
        ),
    }
}

#[cfg(test)]
mod tests;
