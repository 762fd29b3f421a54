//! Instance tagging after registration, as upstream's `nodeclaim.tagging`: a claim that has
//! registered (it has a node name and a provider id), is not being deleted and does not yet
//! carry the provider's marker annotations has its instance tagged by the provider
//! ([`CloudProvider::tag_registered`]); the markers are then written on the claim, so each
//! instance is tagged once. A provider with no markers does nothing after registration and
//! the loop stays idle. Only claims of the provider's own node classes
//! ([`CloudProvider::tagged_node_classes`]: `karpenter.k8s.aws` `EC2NodeClass` for EC2) are
//! considered, as upstream's controller watches only the claims its provider manages.
//!
//! [`untagged`] is the pure half; [`TaggingController`] is the shell, writing only on the
//! leader.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewright_cloud::{CloudError, CloudProvider, RegisteredInstance};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::context::Context;
use crate::state::{ClusterState, SharedState, lock};
use crate::write::{KubeWriter, MetaPatch};

/// How often the leader looks for newly registered claims.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Registered, live claims missing any of `markers` (key and value), sorted by claim name.
/// With no markers nothing is missing. When `classes` (group, kind) is not empty, only claims
/// whose `nodeClassRef` names one of them count: a claim of another provider's node class is
/// not this provider's to tag.
pub fn untagged(
    state: &ClusterState,
    markers: &BTreeMap<String, String>,
    classes: &[(&str, &str)],
) -> Vec<RegisteredInstance> {
    if markers.is_empty() {
        return Vec::new();
    }
    state
        .nodeclaims
        .values()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| {
            let r = &c.spec.node_class_ref;
            classes.is_empty() || classes.iter().any(|(g, k)| r.group == *g && r.kind == *k)
        })
        .filter(|c| {
            let have = c.metadata.annotations.as_ref();
            markers
                .iter()
                .any(|(k, v)| have.and_then(|a| a.get(k)) != Some(v))
        })
        .filter_map(|c| {
            let status = c.status.as_ref()?;
            let node_name = status.node_name.as_deref().filter(|n| !n.is_empty())?;
            let provider_id = status.provider_id.as_deref().filter(|p| !p.is_empty())?;
            Some(RegisteredInstance {
                nodeclaim: c.metadata.name.clone()?,
                node_name: node_name.to_string(),
                provider_id: provider_id.to_string(),
            })
        })
        .collect()
}

/// The annotation patch that marks a claim tagged.
pub fn marker_patch(markers: &BTreeMap<String, String>) -> MetaPatch {
    MetaPatch {
        annotations: markers
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect(),
        ..MetaPatch::default()
    }
}

impl crate::metrics::Reconciled for Pass {
    fn failed(&self) -> bool {
        !self.failed.is_empty()
    }
}

/// What one pass did, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Claims whose instance was tagged and which now carry the markers.
    pub tagged: Vec<String>,
    /// Claims whose instance is gone: nothing to tag, garbage collection takes the claim.
    pub gone: Vec<String>,
    pub failed: Vec<String>,
}

pub struct TaggingController {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    leader: watch::Receiver<bool>,
    /// Claims the provider refused as malformed (a provider id it cannot read): asking again
    /// cannot help, so they are reported once and skipped.
    refused: Mutex<BTreeSet<String>>,
}

impl TaggingController {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            cloud,
            ..
        } = ctx.clone();
        TaggingController {
            state,
            writer,
            cloud,
            leader: watch::channel(true).1,
            refused: Mutex::new(BTreeSet::new()),
        }
    }

    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = leader;
        self
    }

    fn active(&self) -> bool {
        *self.leader.borrow() && lock(&self.state).synced()
    }

    fn refused(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.refused.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tags every claim [`untagged`] finds, one after the other (the provider paces its
    /// calls), and marks each that succeeded. A replica without the lease neither tags nor
    /// marks.
    pub async fn pass(&self) -> Pass {
        let mut out = Pass::default();
        if !*self.leader.borrow() {
            return out;
        }
        let markers = self.cloud.tagged_annotations();
        let classes = self.cloud.tagged_node_classes();
        let todo = untagged(&lock(&self.state), &markers, classes);
        if todo.is_empty() {
            return out;
        }
        let patch = marker_patch(&markers);
        for instance in todo {
            let name = instance.nodeclaim.clone();
            if self.refused().contains(&name) {
                continue;
            }
            match self.cloud.tag_registered(&instance).await {
                Ok(()) => {}
                Err(CloudError::NotFound { .. }) => {
                    out.gone.push(name);
                    continue;
                }
                Err(e @ CloudError::InvalidRequest(_)) => {
                    self.refused().insert(name.clone());
                    out.failed
                        .push(format!("tagging the instance of {name}: {e}"));
                    continue;
                }
                Err(e) => {
                    out.failed
                        .push(format!("tagging the instance of {name}: {e}"));
                    continue;
                }
            }
            match self.writer.patch_nodeclaim_meta(&name, &patch).await {
                Ok(()) => {
                    info!(nodeclaim = %name, node = %instance.node_name, provider_id = %instance.provider_id, "tagged the instance of a registered nodeclaim");
                    out.tagged.push(name);
                }
                Err(e) if e.is_not_found() => out.gone.push(name),
                Err(e) => out
                    .failed
                    .push(format!("marking NodeClaim {name} tagged: {e}")),
            }
        }
        out
    }

    pub async fn run(self: Arc<Self>, every: Duration, r: crate::metrics::Reconciler) {
        loop {
            if self.active() {
                for f in r.now(self.pass()).await.failed {
                    warn!(error = %f, "instance tagging");
                }
            }
            tokio::time::sleep(every).await;
        }
    }
}

#[cfg(test)]
mod tests;
