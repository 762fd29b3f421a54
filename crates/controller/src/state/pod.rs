//! The index's record of a pod: what the controller's loops read of it, taken from the
//! k8s-openapi `Pod` once, when the watch reports the pod, together with the engine's model
//! of the pod when a snapshot takes it (bound or provisionable).
//!
//! The index holds every pod of the cluster, most of them pending ones no decision may touch
//! yet, and a k8s-openapi `Pod` is large before any field is set (a `Pod` is 2,176 bytes, each
//! `Container` 2,120, each `Volume` 3,208): at 20,000 pending pods that was about half the
//! controller's heap. A record keeps the metadata, node, phase and conditions the loops ask
//! about, and the few answers (critical, tolerates the disrupted taint, mirror pod) that would
//! otherwise need the whole spec.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use nodewright_core::disruption::candidates::DO_NOT_DISRUPT;
use nodewright_core::model::{PodTemplates, Shared};
use nodewright_core::resources::Resources;
use nodewright_core::time::Timestamp;

use super::PodKey;
use crate::clock::from_time;

/// One watched pod, as the index keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodRecord {
    /// `namespace/name` (just `name` when the namespace is unset): the index's key, one copy
    /// shared with every map of the index that names the pod (see [`PodRecord::namespace`]).
    pub(super) key: PodKey,
    pub uid: Option<String>,
    /// What the pod has alike with the other pods of its controller; one copy for them all
    /// (see [`PodRecord::share`]).
    pub shape: Arc<PodShape>,
    pub created: Option<Timestamp>,
    pub deleted: Option<Timestamp>,
    pub deletion_grace_seconds: Option<i64>,
    /// `spec.nodeName` as written (possibly empty).
    pub node_name: Option<String>,
    /// `status.phase` as written.
    pub phase: Option<Cow<'static, str>>,
    /// `status.nominatedNodeName` is set and not empty.
    pub nominated: bool,
    pub started: Option<Timestamp>,
    /// The `PodScheduled` and `Ready` conditions, in the pod's order; no reader asks for
    /// another type. A boxed slice, not a `Vec`: collected from a filter, a `Vec` would keep
    /// room for four, some 3 MiB unused at 20,000 running pods.
    conditions: Box<[Condition]>,
    /// The engine's model, for pods a snapshot takes (see [`PodModel`]).
    pub(super) model: Option<PodModel>,
}

/// The part of a pod's record that its controller's template gives every replica alike, so
/// a Deployment's 20,000 replicas hold one copy. Equal values are shared, not equal
/// controllers: a pod whose labels or annotations were changed by hand keeps its own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodShape {
    /// `metadata.labels`, sorted by key (PDB selectors read them).
    labels: Box<[(Box<str>, Box<str>)]>,
    /// The controller owner reference's kind and name (the API server allows one).
    pub controller: Option<(Box<str>, Box<str>)>,
    pub grace_seconds: Option<i64>,
    pub priority_class_name: Option<Box<str>>,
    /// Whether a toleration lets the pod stay on a node tainted `karpenter.sh/disrupted`.
    pub tolerates_disrupted: bool,
    /// The `karpenter.sh/do-not-disrupt` annotation's value.
    pub do_not_disrupt: Option<Box<str>>,
    /// Carries the `kubernetes.io/config.mirror` annotation.
    pub mirror: bool,
    /// Names of the PersistentVolumeClaims the pod mounts directly.
    pub claims: Vec<String>,
}

/// The shapes the index's pods share ([`PodRecord::share`]).
pub(super) type PodShapes = Shared<PodShape>;

/// One pod condition of a type the loops read.
#[derive(Clone, Debug, PartialEq)]
struct Condition {
    scheduled: bool,
    status: Cow<'static, str>,
    reason: Option<Cow<'static, str>>,
    since: Option<Timestamp>,
}

/// A pod's conversion into the engine's model and what it adds to its node's usage.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PodModel {
    /// Shared with every snapshot that takes the pod.
    pub(super) pod: Result<Arc<nodewright_core::model::Pod>, String>,
    /// What it adds to the node it is bound to, while bound and not finished (the node is
    /// the record's `node_name`, not a copy of it).
    pub(super) usage: Option<PodUsage>,
}

/// What one pod adds to its node's gauges.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodUsage {
    pub requests: Resources,
    pub limits: Resources,
    pub daemon: bool,
}

/// Resource sums of the running (not finished) pods bound to one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeUsage {
    pub requests: Resources,
    pub limits: Resources,
    /// Requests and limits of the pods a DaemonSet owns.
    pub daemon_requests: Resources,
    pub daemon_limits: Resources,
    /// Pods counted, so an emptied entry can be dropped.
    pub(super) pods: usize,
}

impl NodeUsage {
    pub(super) fn add(&mut self, u: &PodUsage) {
        self.requests.add(&u.requests);
        self.limits.add(&u.limits);
        if u.daemon {
            self.daemon_requests.add(&u.requests);
            self.daemon_limits.add(&u.limits);
        }
        self.pods += 1;
    }

    pub(super) fn sub(&mut self, u: &PodUsage) {
        self.requests.sub(&u.requests);
        self.limits.sub(&u.limits);
        if u.daemon {
            self.daemon_requests.sub(&u.requests);
            self.daemon_limits.sub(&u.limits);
        }
        self.pods -= 1;
    }
}

/// The values the API server writes most, kept without an allocation of their own.
fn known(s: &str) -> Cow<'static, str> {
    const KNOWN: [&str; 9] = [
        "Pending",
        "Running",
        "Succeeded",
        "Failed",
        "Unknown",
        "True",
        "False",
        "Unschedulable",
        "SchedulerError",
    ];
    match KNOWN.iter().find(|k| **k == s) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(s.to_owned()),
    }
}

impl PodRecord {
    /// The record of `p`, with its model when a snapshot would take it.
    pub fn from_api(p: &Pod) -> PodRecord {
        let md = &p.metadata;
        let spec = p.spec.as_ref();
        let status = p.status.as_ref();
        let annotations = md.annotations.as_ref();
        let mut labels: Vec<(Box<str>, Box<str>)> = md
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
            .collect();
        labels.sort();
        let conditions = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == "PodScheduled" || c.type_ == "Ready")
            .map(|c| Condition {
                scheduled: c.type_ == "PodScheduled",
                status: known(&c.status),
                reason: c.reason.as_deref().map(known),
                since: c.last_transition_time.as_ref().map(from_time),
            })
            .collect();
        let name = md.name.as_deref().unwrap_or_default();
        let key = match md.namespace.as_deref().unwrap_or_default() {
            "" => name.into(),
            namespace => format!("{namespace}/{name}").into(),
        };
        let shape = PodShape {
            labels: labels.into(),
            controller: md
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| (o.kind.as_str().into(), o.name.as_str().into())),
            grace_seconds: spec.and_then(|s| s.termination_grace_period_seconds),
            priority_class_name: spec
                .and_then(|s| s.priority_class_name.as_deref())
                .map(Into::into),
            tolerates_disrupted: spec
                .and_then(|s| s.tolerations.as_deref())
                .is_some_and(crate::termination::tolerates_disrupted),
            do_not_disrupt: annotations
                .and_then(|a| a.get(DO_NOT_DISRUPT))
                .map(|v| v.as_str().into()),
            mirror: annotations.is_some_and(|a| a.contains_key("kubernetes.io/config.mirror")),
            claims: spec
                .and_then(|s| s.volumes.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .map(|c| c.claim_name.clone())
                .collect(),
        };
        let mut record = PodRecord {
            key,
            uid: md.uid.clone(),
            shape: Arc::new(shape),
            created: md.creation_timestamp.as_ref().map(from_time),
            deleted: md.deletion_timestamp.as_ref().map(from_time),
            deletion_grace_seconds: md.deletion_grace_period_seconds,
            node_name: spec.and_then(|s| s.node_name.clone()),
            phase: status.and_then(|s| s.phase.as_deref()).map(known),
            nominated: status
                .and_then(|s| s.nominated_node_name.as_deref())
                .is_some_and(|n| !n.is_empty()),
            started: status.and_then(|s| s.start_time.as_ref()).map(from_time),
            conditions,
            model: None,
        };
        record.model = record.model_of(p);
        record
    }

    /// The model of a pod the snapshot takes (bound or provisionable); `None` for others.
    fn model_of(&self, p: &Pod) -> Option<PodModel> {
        let node = self.bound_to();
        if node.is_none() && !self.provisionable() {
            return None;
        }
        let pod = nodewright_api::workload::pod_from_api(p)
            .map(Arc::new)
            .map_err(|e| e.to_string());
        let usage = node.filter(|_| !self.finished()).map(|_| PodUsage {
            requests: pod.as_ref().map(|m| m.requests.clone()).unwrap_or_default(),
            limits: super::gauges::pod_limits(p),
            daemon: self.owned_by("DaemonSet"),
        });
        Some(PodModel { pod, usage })
    }

    /// Points a new record's shape at `shapes`' copy of it and its model's template at
    /// `templates`' copy.
    pub(super) fn share(&mut self, shapes: &mut PodShapes, templates: &mut PodTemplates) {
        shapes.share(&mut self.shape);
        let Some(Ok(pod)) = self.model.as_mut().map(|m| &mut m.pod) else {
            return;
        };
        // A model already shared with a snapshot was shared when it came in.
        if let Some(pod) = Arc::get_mut(pod) {
            templates.share(&mut pod.template);
        }
    }

    /// `namespace/name`, the index's key.
    pub fn key(&self) -> &PodKey {
        &self.key
    }

    /// `metadata.namespace`, empty when unset. Neither a namespace nor a name may hold a `/`,
    /// so the key's first one parts them.
    pub fn namespace(&self) -> &str {
        self.key.split_once('/').map_or("", |(ns, _)| ns)
    }

    /// `metadata.name`, empty when unset.
    pub fn name(&self) -> &str {
        self.key
            .split_once('/')
            .map_or(&*self.key, |(_, name)| name)
    }

    /// The labels, as selectors take them.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.shape
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Whether `other` holds the same copy of its shape, for tests of the sharing.
    #[cfg(test)]
    pub(super) fn shares_shape_with(&self, other: &PodRecord) -> bool {
        Arc::ptr_eq(&self.shape, &other.shape)
    }

    /// The node the pod is bound to, if any (an empty `spec.nodeName` is none).
    pub fn bound_to(&self) -> Option<&str> {
        self.node_name.as_deref().filter(|n| !n.is_empty())
    }

    /// Its controller owner reference is of `kind`.
    pub fn owned_by(&self, kind: &str) -> bool {
        self.shape
            .controller
            .as_ref()
            .is_some_and(|(k, _)| &**k == kind)
    }

    /// `Succeeded` or `Failed`.
    pub fn finished(&self) -> bool {
        matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// Whether a condition of `type_` ("PodScheduled" or "Ready") has status `True`.
    pub fn condition_true(&self, type_: &str) -> bool {
        self.conditions
            .iter()
            .any(|c| c.is(type_) && c.status == "True")
    }

    /// When the first condition of `type_` with status `True` last changed.
    pub fn true_since(&self, type_: &str) -> Option<Timestamp> {
        self.conditions
            .iter()
            .find(|c| c.is(type_) && c.status == "True")
            .and_then(|c| c.since)
    }

    /// Upstream's provisionable pod: marked Unschedulable by kube-scheduler, unbound, not
    /// preempting, not terminating, not owned by a DaemonSet or a Node.
    pub fn provisionable(&self) -> bool {
        if self.deleted.is_some() || self.bound_to().is_some() || self.nominated || self.finished()
        {
            return false;
        }
        if self.owned_by("DaemonSet") || self.owned_by("Node") {
            return false;
        }
        self.conditions.iter().any(|c| {
            c.scheduled && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
        })
    }

    /// The engine's model of the pod, for a pod a snapshot takes (bound or provisionable).
    pub fn model(&self) -> Option<&Result<Arc<nodewright_core::model::Pod>, String>> {
        self.model.as_ref().map(|m| &m.pod)
    }

    /// What the pod adds to the node it counts on (bound and not finished).
    pub fn usage(&self) -> Option<&PodUsage> {
        self.model.as_ref()?.usage.as_ref()
    }

    /// The node the pod counts on (bound and not finished) and what it adds there.
    pub(super) fn counts_on(&self) -> Option<(&str, &PodUsage)> {
        Some((self.bound_to()?, self.usage()?))
    }
}

impl Condition {
    fn is(&self, type_: &str) -> bool {
        match type_ {
            "PodScheduled" => self.scheduled,
            "Ready" => !self.scheduled,
            _ => false,
        }
    }
}
