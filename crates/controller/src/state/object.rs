//! The objects the controller watches, as one closed enum, with the identity (kind, namespace,
//! name) both the watch index and the in-memory API key them by.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Pod,
    Node,
    NodeClaim,
    NodePool,
    NodeClass,
    DaemonSet,
    Pdb,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    VolumeAttachment,
    Namespace,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::Pod,
        Kind::Node,
        Kind::NodeClaim,
        Kind::NodePool,
        Kind::NodeClass,
        Kind::DaemonSet,
        Kind::Pdb,
        Kind::PersistentVolume,
        Kind::PersistentVolumeClaim,
        Kind::StorageClass,
        Kind::VolumeAttachment,
        Kind::Namespace,
    ];

    /// `(group, version, kind, plural, namespaced)` as the API server serves it.
    pub fn gvk(self) -> (&'static str, &'static str, &'static str, &'static str, bool) {
        match self {
            Kind::Pod => ("", "v1", "Pod", "pods", true),
            Kind::Node => ("", "v1", "Node", "nodes", false),
            Kind::NodeClaim => ("karpenter.sh", "v1", "NodeClaim", "nodeclaims", false),
            Kind::NodePool => ("karpenter.sh", "v1", "NodePool", "nodepools", false),
            Kind::NodeClass => (
                "karpenter.k8s.aws",
                "v1",
                "EC2NodeClass",
                "ec2nodeclasses",
                false,
            ),
            Kind::DaemonSet => ("apps", "v1", "DaemonSet", "daemonsets", true),
            Kind::Pdb => (
                "policy",
                "v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                true,
            ),
            Kind::PersistentVolume => ("", "v1", "PersistentVolume", "persistentvolumes", false),
            Kind::PersistentVolumeClaim => (
                "",
                "v1",
                "PersistentVolumeClaim",
                "persistentvolumeclaims",
                true,
            ),
            Kind::StorageClass => (
                "storage.k8s.io",
                "v1",
                "StorageClass",
                "storageclasses",
                false,
            ),
            Kind::VolumeAttachment => (
                "storage.k8s.io",
                "v1",
                "VolumeAttachment",
                "volumeattachments",
                false,
            ),
            Kind::Namespace => ("", "v1", "Namespace", "namespaces", false),
        }
    }

    pub fn name(self) -> &'static str {
        self.gvk().2
    }

    pub fn api_version(self) -> String {
        let (g, v, ..) = self.gvk();
        if g.is_empty() {
            v.to_string()
        } else {
            format!("{g}/{v}")
        }
    }
}

/// One watched object, typed.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    Pod(Box<Pod>),
    Node(Box<Node>),
    NodeClaim(Box<NodeClaim>),
    NodePool(Box<NodePool>),
    NodeClass(Box<EC2NodeClass>),
    DaemonSet(Box<DaemonSet>),
    Pdb(Box<PodDisruptionBudget>),
    PersistentVolume(Box<PersistentVolume>),
    PersistentVolumeClaim(Box<PersistentVolumeClaim>),
    StorageClass(Box<StorageClass>),
    VolumeAttachment(Box<VolumeAttachment>),
    Namespace(Box<Namespace>),
}

/// `namespace/name` for namespaced objects, `name` otherwise.
pub fn key_of(meta: &ObjectMeta) -> String {
    let name = meta.name.clone().unwrap_or_default();
    match &meta.namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name,
    }
}

impl Object {
    pub fn kind(&self) -> Kind {
        match self {
            Object::Pod(_) => Kind::Pod,
            Object::Node(_) => Kind::Node,
            Object::NodeClaim(_) => Kind::NodeClaim,
            Object::NodePool(_) => Kind::NodePool,
            Object::NodeClass(_) => Kind::NodeClass,
            Object::DaemonSet(_) => Kind::DaemonSet,
            Object::Pdb(_) => Kind::Pdb,
            Object::PersistentVolume(_) => Kind::PersistentVolume,
            Object::PersistentVolumeClaim(_) => Kind::PersistentVolumeClaim,
            Object::StorageClass(_) => Kind::StorageClass,
            Object::VolumeAttachment(_) => Kind::VolumeAttachment,
            Object::Namespace(_) => Kind::Namespace,
        }
    }

    pub fn meta(&self) -> &ObjectMeta {
        match self {
            Object::Pod(o) => &o.metadata,
            Object::Node(o) => &o.metadata,
            Object::NodeClaim(o) => &o.metadata,
            Object::NodePool(o) => &o.metadata,
            Object::NodeClass(o) => &o.metadata,
            Object::DaemonSet(o) => &o.metadata,
            Object::Pdb(o) => &o.metadata,
            Object::PersistentVolume(o) => &o.metadata,
            Object::PersistentVolumeClaim(o) => &o.metadata,
            Object::StorageClass(o) => &o.metadata,
            Object::VolumeAttachment(o) => &o.metadata,
            Object::Namespace(o) => &o.metadata,
        }
    }

    pub fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Object::Pod(o) => &mut o.metadata,
            Object::Node(o) => &mut o.metadata,
            Object::NodeClaim(o) => &mut o.metadata,
            Object::NodePool(o) => &mut o.metadata,
            Object::NodeClass(o) => &mut o.metadata,
            Object::DaemonSet(o) => &mut o.metadata,
            Object::Pdb(o) => &mut o.metadata,
            Object::PersistentVolume(o) => &mut o.metadata,
            Object::PersistentVolumeClaim(o) => &mut o.metadata,
            Object::StorageClass(o) => &mut o.metadata,
            Object::VolumeAttachment(o) => &mut o.metadata,
            Object::Namespace(o) => &mut o.metadata,
        }
    }

    pub fn key(&self) -> String {
        key_of(self.meta())
    }

    /// Parses an object of `kind` as the API server serves it. The error names the kind, the
    /// object (when its metadata could be read) and what did not parse.
    pub fn from_value(kind: Kind, value: Value) -> Result<Object, String> {
        fn typed<T: serde::de::DeserializeOwned>(kind: Kind, v: Value) -> Result<Box<T>, String> {
            let name = v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("<unnamed>")
                .to_string();
            serde_json::from_value(v)
                .map(Box::new)
                .map_err(|e| format!("{} {name}: {e}", kind.name()))
        }
        let mut object = match kind {
            Kind::Pod => Object::Pod(typed(kind, value)?),
            Kind::Node => Object::Node(typed(kind, value)?),
            Kind::NodeClaim => Object::NodeClaim(typed(kind, value)?),
            Kind::NodePool => Object::NodePool(typed(kind, value)?),
            Kind::NodeClass => Object::NodeClass(typed(kind, value)?),
            Kind::DaemonSet => Object::DaemonSet(typed(kind, value)?),
            Kind::Pdb => Object::Pdb(typed(kind, value)?),
            Kind::PersistentVolume => Object::PersistentVolume(typed(kind, value)?),
            Kind::PersistentVolumeClaim => Object::PersistentVolumeClaim(typed(kind, value)?),
            Kind::StorageClass => Object::StorageClass(typed(kind, value)?),
            Kind::VolumeAttachment => Object::VolumeAttachment(typed(kind, value)?),
            Kind::Namespace => Object::Namespace(typed(kind, value)?),
        };
        object.strip();
        Ok(object)
    }

    pub fn to_value(&self) -> Value {
        let r = match self {
            Object::Pod(o) => serde_json::to_value(o),
            Object::Node(o) => serde_json::to_value(o),
            Object::NodeClaim(o) => serde_json::to_value(o),
            Object::NodePool(o) => serde_json::to_value(o),
            Object::NodeClass(o) => serde_json::to_value(o),
            Object::DaemonSet(o) => serde_json::to_value(o),
            Object::Pdb(o) => serde_json::to_value(o),
            Object::PersistentVolume(o) => serde_json::to_value(o),
            Object::PersistentVolumeClaim(o) => serde_json::to_value(o),
            Object::StorageClass(o) => serde_json::to_value(o),
            Object::VolumeAttachment(o) => serde_json::to_value(o),
            Object::Namespace(o) => serde_json::to_value(o),
        };
        r.unwrap_or(Value::Null)
    }

    /// Drops fields nothing reads (and the spare room of lists kept), so the index's memory
    /// grows with the objects' meaning and not with their bookkeeping.
    pub fn strip(&mut self) {
        let meta = self.meta_mut();
        meta.managed_fields = None;
        if let Some(a) = meta.annotations.as_mut() {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
        match self {
            Object::Pod(p) => {
                if let Some(status) = p.status.as_mut() {
                    status.container_statuses = None;
                    status.init_container_statuses = None;
                    status.ephemeral_container_statuses = None;
                }
                if let Some(spec) = p.spec.as_mut() {
                    // Only volumes backed by a claim are read (volume topology and limits,
                    // the termination's wait for detachments). Nearly every pod carries a
                    // projected service-account volume, about 4 KiB in memory of a pod's 9:
                    // at 20,000 pending pods the difference is some 80 MiB.
                    if let Some(volumes) = spec.volumes.as_mut() {
                        volumes.retain(|v| {
                            v.persistent_volume_claim.is_some() || v.ephemeral.is_some()
                        });
                        volumes.shrink_to_fit();
                    }
                    for c in spec
                        .containers
                        .iter_mut()
                        .chain(spec.init_containers.iter_mut().flatten())
                    {
                        c.env = None;
                        c.env_from = None;
                        c.command = None;
                        c.args = None;
                        c.liveness_probe = None;
                        c.readiness_probe = None;
                        c.startup_probe = None;
                        c.volume_mounts = None;
                        c.lifecycle = None;
                        c.security_context = None;
                    }
                }
            }
            Object::Node(n) => {
                // Nodes are only ever patched, never written back whole, so what no loop
                // reads can go: a few hundred bytes a Node, each a string of its own.
                if let Some(status) = n.status.as_mut() {
                    status.images = None;
                    status.volumes_attached = None;
                    status.volumes_in_use = None;
                    status.node_info = None;
                    status.addresses = None;
                    status.daemon_endpoints = None;
                    status.config = None;
                    for c in status.conditions.iter_mut().flatten() {
                        c.message = None;
                        c.last_heartbeat_time = None;
                    }
                }
            }
            Object::DaemonSet(d) => {
                if let Some(spec) = d.spec.as_mut()
                    && let Some(ps) = spec.template.spec.as_mut()
                {
                    for c in ps.containers.iter_mut() {
                        c.env = None;
                        c.env_from = None;
                        c.command = None;
                        c.args = None;
                    }
                }
            }
            // A claim's status is written whole from this copy (conditions replace), so nothing
            // of it can go; but the lists were read into buffers grown by doubling, a few
            // hundred bytes unused per claim.
            Object::NodeClaim(c) => {
                c.spec.requirements.shrink_to_fit();
                if let Some(conditions) = c.status.as_mut().and_then(|s| s.conditions.as_mut()) {
                    conditions.shrink_to_fit();
                }
            }
            // Only the labels matter (pod-affinity namespaceSelectors).
            Object::Namespace(n) => {
                n.metadata.annotations = None;
                n.spec = None;
                n.status = None;
            }
            _ => {}
        }
    }
}
