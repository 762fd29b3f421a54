//! An in-memory API server for tests: an object store keyed by kind and `namespace/name` that
//! applies the controller's writes with the API server's semantics that matter here
//! (finalizers hold deletion, merge patches with an optional resourceVersion precondition,
//! evictions refused by PDBs with 429) and feeds
//! every change to a [`ClusterState`] as the watchers would.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use nodewright_api::aws::v1::EC2NodeClassStatus;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::nodepool::NodePoolStatus;
use serde_json::Value;

use crate::clock::Clock;
use crate::state::convert::label_selector;
use crate::state::{Kind, Object, SharedState, WatchEvent, lock};
use crate::write::kube::{nodeclaim_status_patch, pod_event_time_patch, status_patch};
use crate::write::{Eviction, KubeWriter, MetaPatch, NodePatch, WriteError};

#[derive(Default)]
struct Store {
    objects: BTreeMap<(Kind, String), Object>,
    version: u64,
    /// Every write, in order (`verb kind key`), so tests can assert what was written.
    log: Vec<String>,
}

pub struct MemoryApi {
    store: Mutex<Store>,
    state: SharedState,
    clock: Clock,
    /// Kinds whose watch events are held back (see [`MemoryApi::hold`]), with the events.
    held: Mutex<(BTreeSet<Kind>, Vec<WatchEvent>)>,
}

/// RFC 7386 merge.
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Default::default());
            }
            let t = target.as_object_mut().unwrap_or_else(|| unreachable!());
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

impl MemoryApi {
    pub fn new(state: SharedState, clock: Clock) -> Self {
        MemoryApi {
            store: Mutex::new(Store::default()),
            state,
            clock,
            held: Mutex::new((BTreeSet::new(), Vec::new())),
        }
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn emit(&self, e: WatchEvent) {
        {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            let kind = match &e {
                WatchEvent::Apply(o) | WatchEvent::Delete(o) | WatchEvent::InitApply(o) => {
                    Some(o.kind())
                }
                WatchEvent::Init(_) | WatchEvent::InitDone(_) => None,
            };
            if kind.is_some_and(|k| held.0.contains(&k)) {
                held.1.push(e);
                return;
            }
        }
        lock(&self.state).apply(e);
    }

    /// Holds back the watch events of `kind` until [`MemoryApi::release`], as a slow watch
    /// does: writes land in the store while the index still shows the old objects.
    pub fn hold(&self, kind: Kind) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .insert(kind);
    }

    /// Delivers the held events of `kind`, in order, and stops holding it.
    pub fn release(&self, kind: Kind) {
        let events: Vec<WatchEvent> = {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            held.0.remove(&kind);
            let (mine, rest): (Vec<_>, Vec<_>) =
                std::mem::take(&mut held.1)
                    .into_iter()
                    .partition(|e| match e {
                        WatchEvent::Apply(o) | WatchEvent::Delete(o) | WatchEvent::InitApply(o) => {
                            o.kind() == kind
                        }
                        _ => false,
                    });
            held.1 = rest;
            mine
        };
        let mut s = lock(&self.state);
        for e in events {
            s.apply(e);
        }
    }

    /// Reports every kind as listed (the state becomes synced).
    pub fn mark_synced(&self) {
        for k in Kind::ALL {
            self.emit(WatchEvent::Init(k));
            let objects: Vec<Object> = self
                .store()
                .objects
                .iter()
                .filter(|((kind, _), _)| *kind == k)
                .map(|(_, o)| o.clone())
                .collect();
            for o in objects {
                self.emit(WatchEvent::InitApply(o));
            }
            self.emit(WatchEvent::InitDone(k));
        }
    }

    /// Creates or replaces an object as a user, kubelet or scheduler would.
    pub fn put(&self, o: Object) -> Object {
        let o = self.store_object(o);
        self.emit(WatchEvent::Apply(o.clone()));
        o
    }

    /// As [`MemoryApi::put`], but the watchers have not seen the change yet: the state keeps
    /// the old object, as it does in a cluster while a watch event is in flight.
    pub fn put_unseen(&self, o: Object) -> Object {
        self.store_object(o)
    }

    fn store_object(&self, mut o: Object) -> Object {
        {
            let mut s = self.store();
            s.version += 1;
            let version = s.version.to_string();
            let key = (o.kind(), o.key());
            let existing_uid = s.objects.get(&key).and_then(|e| e.meta().uid.clone());
            let now = self.clock.now_time();
            let m = o.meta_mut();
            m.resource_version = Some(version);
            if m.uid.is_none() {
                m.uid = existing_uid.or_else(|| Some(format!("uid-{}", key.1.replace('/', "-"))));
            }
            if m.creation_timestamp.is_none() {
                m.creation_timestamp = Some(now);
            }
            s.log.push(format!("put {} {}", o.kind().name(), o.key()));
            s.objects.insert(key, o.clone());
        }
        o
    }

    pub fn put_value(&self, kind: Kind, v: Value) -> Object {
        let o = Object::from_value(kind, v).unwrap_or_else(|e| panic!("test object: {e}"));
        self.put(o)
    }

    pub fn get(&self, kind: Kind, key: &str) -> Option<Object> {
        self.store().objects.get(&(kind, key.to_string())).cloned()
    }

    pub fn list(&self, kind: Kind) -> Vec<Object> {
        self.store()
            .objects
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|(_, o)| o.clone())
            .collect()
    }

    pub fn log(&self) -> Vec<String> {
        self.store().log.clone()
    }

    /// Deletes as the API server does: with finalizers the object only gets a deletion
    /// timestamp; without, it is gone.
    pub fn delete(&self, kind: Kind, key: &str) -> Result<(), WriteError> {
        let event = {
            let mut s = self.store();
            let k = (kind, key.to_string());
            let Some(o) = s.objects.get_mut(&k) else {
                return Err(WriteError::NotFound {
                    kind: kind.name().into(),
                    name: key.into(),
                });
            };
            let has_finalizers = o.meta().finalizers.as_ref().is_some_and(|f| !f.is_empty());
            s.log.push(format!("delete {} {key}", kind.name()));
            if has_finalizers {
                let o = s.objects.get_mut(&k).unwrap_or_else(|| unreachable!());
                if o.meta().deletion_timestamp.is_none() {
                    o.meta_mut().deletion_timestamp = Some(self.clock.now_time());
                }
                WatchEvent::Apply(o.clone())
            } else {
                let o = s.objects.remove(&k).unwrap_or_else(|| unreachable!());
                WatchEvent::Delete(o)
            }
        };
        self.emit(event);
        Ok(())
    }

    /// Applies a merge patch to the object's JSON; an object left terminating without
    /// finalizers is removed.
    fn patch(&self, kind: Kind, key: &str, patch: &Value, verb: &str) -> Result<(), WriteError> {
        let event = {
            let mut s = self.store();
            let k = (kind, key.to_string());
            let Some(o) = s.objects.get(&k) else {
                return Err(WriteError::NotFound {
                    kind: kind.name().into(),
                    name: key.into(),
                });
            };
            // A resourceVersion in the patch is a precondition, as the API server treats it.
            if let Some(expected) = patch["metadata"]["resourceVersion"].as_str()
                && o.meta().resource_version.as_deref() != Some(expected)
            {
                s.log.push(format!("conflict {} {key}", kind.name()));
                return Err(WriteError::Conflict {
                    kind: kind.name().into(),
                    name: key.into(),
                    message: "the object has been modified; please apply your changes to the latest version and try again".into(),
                });
            }
            let mut v = o.to_value();
            merge(&mut v, patch);
            let mut updated = Object::from_value(kind, v).map_err(|e| WriteError::Api {
                code: 422,
                message: e,
            })?;
            s.version += 1;
            updated.meta_mut().resource_version = Some(s.version.to_string());
            s.log.push(format!("{verb} {} {key}", kind.name()));
            let gone = updated.meta().deletion_timestamp.is_some()
                && updated
                    .meta()
                    .finalizers
                    .as_ref()
                    .is_none_or(|f| f.is_empty());
            if gone {
                s.objects.remove(&k);
                WatchEvent::Delete(updated)
            } else {
                s.objects.insert(k, updated.clone());
                WatchEvent::Apply(updated)
            }
        };
        self.emit(event);
        Ok(())
    }

    fn evict(&self, namespace: &str, name: &str) -> Result<Eviction, WriteError> {
        let key = format!("{namespace}/{name}");
        let (pod, pdbs): (Pod, Vec<Object>) = {
            let s = self.store();
            let Some(Object::Pod(p)) = s.objects.get(&(Kind::Pod, key.clone())) else {
                return Ok(Eviction::Gone);
            };
            let pdbs = s
                .objects
                .iter()
                .filter(|((k, _), _)| *k == Kind::Pdb)
                .map(|(_, o)| o.clone())
                .collect();
            ((**p).clone(), pdbs)
        };
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let matching: Vec<_> = pdbs
            .into_iter()
            .filter_map(|o| match o {
                Object::Pdb(p) => Some(p),
                _ => None,
            })
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.selector.as_ref())
                    .and_then(|sel| label_selector(sel).ok())
                    .is_some_and(|sel| !sel.is_empty() && sel.matches(&labels))
            })
            .collect();
        if matching.len() > 1 {
            return Err(WriteError::Api {
                code: 500,
                message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
            });
        }
        if let Some(pdb) = matching.first() {
            let allowed = pdb
                .status
                .as_ref()
                .map(|s| s.disruptions_allowed)
                .unwrap_or(0);
            let pdb_name = pdb.metadata.name.clone().unwrap_or_default();
            if allowed <= 0 {
                self.store().log.push(format!("evict-refused Pod {key}"));
                return Ok(Eviction::Blocked(format!(
                    "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {pdb_name} needs 1 healthy pods and has 1 currently"
                )));
            }
            self.patch(
                Kind::Pdb,
                &format!("{namespace}/{pdb_name}"),
                &serde_json::json!({"status": {"disruptionsAllowed": allowed - 1}}),
                "budget",
            )?;
        }
        self.store().log.push(format!("evict Pod {key}"));
        // The pod's grace period is not modelled: an evicted pod is gone at once.
        let _ = self.delete(Kind::Pod, &key);
        Ok(Eviction::Evicted)
    }
}

#[async_trait]
impl KubeWriter for MemoryApi {
    async fn create_nodeclaim(&self, claim: &NodeClaim) -> Result<NodeClaim, WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        if self.get(Kind::NodeClaim, &name).is_some() {
            return Err(WriteError::AlreadyExists {
                kind: "NodeClaim".into(),
                name,
            });
        }
        match self.put(Object::NodeClaim(Box::new(claim.clone()))) {
            Object::NodeClaim(c) => Ok(*c),
            _ => unreachable!(),
        }
    }

    async fn patch_nodeclaim_status(
        &self,
        name: &str,
        status: &NodeClaimStatus,
        resource_version: Option<&str>,
    ) -> Result<(), WriteError> {
        self.patch(
            Kind::NodeClaim,
            name,
            &nodeclaim_status_patch(status, resource_version),
            "status",
        )
    }

    async fn patch_nodeclaim_pod_event_time(
        &self,
        name: &str,
        time: &str,
    ) -> Result<(), WriteError> {
        self.patch(Kind::NodeClaim, name, &pod_event_time_patch(time), "status")
    }

    async fn patch_nodeclaim_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.patch(Kind::NodeClaim, name, &patch.to_merge_patch(), "patch")
    }

    async fn delete_nodeclaim(&self, name: &str) -> Result<(), WriteError> {
        self.delete(Kind::NodeClaim, name)
    }

    async fn patch_node(&self, name: &str, patch: &NodePatch) -> Result<(), WriteError> {
        self.patch(Kind::Node, name, &patch.to_merge_patch(), "patch")
    }

    async fn delete_node(&self, name: &str) -> Result<(), WriteError> {
        self.delete(Kind::Node, name)
    }

    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<Eviction, WriteError> {
        self.evict(namespace, name)
    }

    async fn update_nodepool_status(
        &self,
        name: &str,
        status: &NodePoolStatus,
    ) -> Result<(), WriteError> {
        self.patch(Kind::NodePool, name, &status_patch(status), "status")
    }

    async fn patch_nodepool_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.patch(Kind::NodePool, name, &patch.to_merge_patch(), "patch")
    }

    async fn patch_nodeclass_status(
        &self,
        name: &str,
        status: &EC2NodeClassStatus,
    ) -> Result<(), WriteError> {
        self.patch(Kind::NodeClass, name, &status_patch(status), "status")
    }

    async fn patch_nodeclass_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.patch(Kind::NodeClass, name, &patch.to_merge_patch(), "patch")
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), WriteError> {
        let key = format!("{namespace}/{name}");
        let grace = grace_period_seconds.map_or_else(|| "default".to_string(), |g| g.to_string());
        self.store()
            .log
            .push(format!("delete-pod Pod {key} grace={grace}"));
        // As with evictions, the kubelet's grace period is not modelled: the pod is gone.
        self.delete(Kind::Pod, &key)
    }
}
