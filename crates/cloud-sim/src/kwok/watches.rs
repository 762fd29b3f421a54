//! The node agent's watches: the pods bound to Nodes, the NodeClaims, and its own Nodes
//! (metadata only), each kept up to date in a reflector store as [`cached`](super::cached)
//! cuts its objects down, so a pass reads memory instead of listing the cluster. Each watch
//! lists once, then follows the changes, and starts over with backoff after an error; the
//! watches stop when dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hash;
use std::sync::Arc;

use futures::{FutureExt, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::{GroupVersionKind, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Lookup, Store};
use kube::runtime::watcher::{self, Event};
use nodewright_api::v1::nodeclaim::NodeClaim;
use tokio::task::JoinHandle;

use super::cached::{KeptClaim, KeptPod, keep_claim, keep_name, keep_pod};
use super::node::AGENT_LABEL;

/// Pods bound to some Node and not finished: the only ones a kubelet acts on. (A finished
/// pod needs no kubelet to go away: the API server deletes it at once.)
pub const BOUND_PODS: &str = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// One watch and the store it fills.
pub(crate) struct Watch<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    task: JoinHandle<()>,
}

impl<K: Lookup + Clone + 'static> Drop for Watch<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<K> Watch<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
{
    /// Fills a new store from `events`, driven by a task of its own.
    fn spawn<S>(what: &'static str, events: S) -> Self
    where
        S: Stream<Item = watcher::Result<Event<K>>> + Send + 'static,
    {
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(writer, events).boxed();
        let task = tokio::spawn(stream.for_each(move |event| async move {
            if let Err(e) = event {
                tracing::warn!(watch = what, error = %e, "watch error; retrying with backoff");
            }
        }));
        Watch { store, task }
    }

    /// Whether the watch has listed once (it stays so through later relists).
    pub fn ready(&self) -> bool {
        matches!(self.store.wait_until_ready().now_or_never(), Some(Ok(())))
    }

    pub async fn wait(&self) {
        let _ = self.store.wait_until_ready().await;
    }

    pub fn state(&self) -> Vec<Arc<K>> {
        self.store.state()
    }
}

/// The agent's three watches.
pub(crate) struct Watches {
    pub pods: Watch<KeptPod>,
    claims: Watch<KeptClaim>,
    nodes: Watch<PartialObjectMeta<Node>>,
}

impl Watches {
    pub fn start(client: kube::Client) -> Self {
        let pods = watcher::watcher(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().fields(BOUND_PODS),
        )
        .default_backoff()
        .map_ok(|event| map_event(event, keep_pod));
        // Over the dynamic API, so that one claim that does not parse is skipped instead of
        // failing the whole list.
        let claims = watcher::watcher(
            Api::<DynamicObject>::all_with(client.clone(), &nodeclaim_resource()),
            watcher::Config::default(),
        )
        .default_backoff()
        .map_ok(|event| map_event(event, keep_claim));
        // An `Api` of `PartialObjectMeta` asks the API server for the metadata only.
        let nodes = watcher::watcher(
            Api::<PartialObjectMeta<Node>>::all(client),
            watcher::Config::default().labels(&format!("{AGENT_LABEL}=true")),
        )
        .default_backoff()
        .modify(keep_name);
        Watches {
            pods: Watch::spawn("pods", pods),
            claims: Watch::spawn("nodeclaims", claims),
            nodes: Watch::spawn("nodes", nodes),
        }
    }

    /// Whether the NodeClaims and Nodes have been listed: until then a pass would take
    /// every Node for missing.
    pub fn nodes_ready(&self) -> bool {
        self.claims.ready() && self.nodes.ready()
    }

    /// Waits for the first list of all three.
    pub async fn wait(&self) {
        self.claims.wait().await;
        self.nodes.wait().await;
        self.pods.wait().await;
    }

    /// The NodeClaims that parse, by name.
    pub fn claims(&self) -> BTreeMap<String, Arc<NodeClaim>> {
        self.claims
            .state()
            .iter()
            .filter_map(|c| Some((c.name.clone(), c.claim.clone()?)))
            .collect()
    }

    /// The names of the Nodes the watch shows with the agent's label.
    pub fn node_names(&self) -> BTreeSet<String> {
        self.nodes
            .state()
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect()
    }
}

fn nodeclaim_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
        "nodeclaims",
    )
}

/// The same event over `f` of its object.
fn map_event<A, B>(event: Event<A>, f: impl FnOnce(A) -> B) -> Event<B> {
    match event {
        Event::Apply(o) => Event::Apply(f(o)),
        Event::Delete(o) => Event::Delete(f(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(f(o)),
        Event::InitDone => Event::InitDone,
    }
}
