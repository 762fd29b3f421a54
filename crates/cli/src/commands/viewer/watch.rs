//! The viewer's view of the cluster: one kube-runtime watch per kind (Nodes, Pods,
//! NodeClaims, NodePools) feeding a reflector store, and a [`Notify`] the screen waits on.
//! Nothing polls the API server: after the first list each watch only streams changes,
//! and restarts with backoff after an error, which the screen shows until it clears.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource};
use nodewright_api::v1::nodeclaim::NodeClaim;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

/// Pods that have finished hold no capacity; the API server leaves them out.
const UNFINISHED_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Whether each kind has listed, and its last error while it has not recovered.
#[derive(Default)]
struct Health {
    synced: bool,
    error: Option<String>,
}

pub struct Watches {
    pub nodes: Store<Node>,
    pub pods: Store<Pod>,
    pub claims: Store<DynamicObject>,
    pub nodepools: Store<DynamicObject>,
    /// Signalled on every change a watch applies (and on errors).
    pub changed: Arc<Notify>,
    health: Arc<Mutex<BTreeMap<&'static str, Health>>>,
}

fn karpenter(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("karpenter.sh", "v1", kind), plural)
}

impl Watches {
    /// Starts the four watches; `node_selector` narrows Nodes and NodeClaims on the server.
    pub fn start(client: &Client, node_selector: Option<&str>) -> Watches {
        let changed = Arc::new(Notify::new());
        let health = Arc::new(Mutex::new(BTreeMap::new()));
        let w = Watcher {
            changed: changed.clone(),
            health: health.clone(),
        };
        let mut selected = watcher::Config::default();
        if let Some(s) = node_selector {
            selected = selected.labels(s);
        }
        let claims_ar = karpenter("NodeClaim", "nodeclaims");
        let pools_ar = karpenter("NodePool", "nodepools");
        Watches {
            nodes: w.spawn(
                "nodes",
                Api::all(client.clone()),
                selected.clone(),
                Writer::default(),
            ),
            pods: w.spawn(
                "pods",
                Api::all(client.clone()),
                watcher::Config::default().fields(UNFINISHED_PODS),
                Writer::default(),
            ),
            claims: w.spawn(
                "nodeclaims",
                Api::all_with(client.clone(), &claims_ar),
                selected,
                Writer::new(claims_ar),
            ),
            nodepools: w.spawn(
                "nodepools",
                Api::all_with(client.clone(), &pools_ar),
                watcher::Config::default(),
                Writer::new(pools_ar),
            ),
            changed,
            health,
        }
    }

    /// True once every kind has listed.
    pub fn synced(&self) -> bool {
        let h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        h.len() == 4 && h.values().all(|h| h.synced)
    }

    /// `kind: error` for each watch failing right now.
    pub fn errors(&self) -> Vec<String> {
        let h = self.health.lock().unwrap_or_else(|p| p.into_inner());
        h.iter()
            .filter_map(|(k, h)| h.error.as_ref().map(|e| format!("{k}: {e}")))
            .collect()
    }

    /// The NodeClaims as typed objects, and a line for each that does not parse.
    pub fn nodeclaims(&self) -> (Vec<NodeClaim>, Vec<String>) {
        let mut out = Vec::new();
        let mut problems = Vec::new();
        for o in self.claims.state() {
            let name = o.metadata.name.clone().unwrap_or_default();
            let mut v = match serde_json::to_value(&*o) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(format!("NodeClaim {name}: {e}"));
                    continue;
                }
            };
            // A dynamic object may come without these; the typed one needs them.
            v["apiVersion"] = "karpenter.sh/v1".into();
            v["kind"] = "NodeClaim".into();
            match serde_json::from_value(v) {
                Ok(c) => out.push(c),
                Err(e) => problems.push(format!("NodeClaim {name}: {e}")),
            }
        }
        (out, problems)
    }

    pub fn nodepool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .nodepools
            .state()
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        names.sort();
        names
    }
}

struct Watcher {
    changed: Arc<Notify>,
    health: Arc<Mutex<BTreeMap<&'static str, Health>>>,
}

impl Watcher {
    fn spawn<K>(
        &self,
        name: &'static str,
        api: Api<K>,
        config: watcher::Config,
        writer: Writer<K>,
    ) -> Store<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Send + Sync,
    {
        let store = writer.as_reader();
        let changed = self.changed.clone();
        let health = self.health.clone();
        health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name, Health::default());
        let stream = reflector::reflector(writer, watcher::watcher(api, config).default_backoff());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                // The store swaps in a relist whole at InitDone; objects before it are not
                // visible yet, so they do not redraw.
                if matches!(item, Ok(Event::InitApply(_) | Event::Init)) {
                    continue;
                }
                {
                    let mut all = health.lock().unwrap_or_else(|p| p.into_inner());
                    let h = all.entry(name).or_default();
                    match item {
                        Ok(e) => {
                            h.synced |= matches!(e, Event::InitDone);
                            h.error = None;
                        }
                        Err(e) => h.error = Some(e.to_string()),
                    }
                }
                changed.notify_one();
            }
        });
        store
    }
}
