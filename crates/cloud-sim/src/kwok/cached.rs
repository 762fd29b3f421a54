//! What the node agent keeps of the objects it watches: of each pod bound to a Node, of each
//! NodeClaim and of each of its own Nodes, only what its plans read.
//!
//! Pods: the agent caches every bound pod for as long as it runs, ten or so per Node, so this
//! cache grows with the Nodes: at 20,000 pods on 2,000 Nodes it holds 20,000 pods. A
//! k8s-openapi `Pod` is large in memory before any field is set (a `Pod` is over 2 KiB, each
//! `Volume` over 3 KiB, each `Container` over 2 KiB), and nearly every pod carries a projected
//! service-account volume and its mount. Most bound pods are settled: Running, with no
//! readiness gate to follow and no run time or deadline to reach, so the kubelet's part has
//! nothing left to write until they are deleted; of those the agent keeps a few strings
//! ([`SettledPod`]). Of any other pod the plan reads the metadata, the pod-level spec fields
//! (node, host network, restart policy, deadline, readiness gates), each container's name,
//! image and restart policy, and the status; everything else of the spec goes.
//!
//! NodeClaims: registration reads a claim's labels and taints ([`desired_node`]), and an
//! instance of another provider its capacity and allocatable ([`machine`]), an instance known
//! only from its claim its provider id, image and deletion too; the rest goes.
//! Nodes: the agent only asks which of its Nodes exist, so of each it keeps the name (and the
//! watch asks the API server for their metadata only).
//!
//! [`desired_node`]: super::desired_node
//! [`machine`]: super::machines::machine

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Lookup;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus};

use super::machines::INSTANCE_TERMINATING;
use super::pod::{PodRef, ending};

/// A pod bound to a Node, as the agent keeps it.
#[derive(Clone, Debug, PartialEq)]
pub enum KeptPod {
    /// Running with nothing left for the kubelet's part to write (see [`keep_pod`]).
    Settled(SettledPod),
    /// Any other pod, as [`keep_for_kubelet`] leaves it.
    Whole(Box<Pod>),
}

/// What a pass reads of a settled pod: which pod, on which Node, at which address (so no
/// other pod there is given it), and whether it is being deleted.
#[derive(Clone, Debug, PartialEq)]
pub struct SettledPod {
    pub pod: PodRef,
    pub node: String,
    pub pod_ip: Option<String>,
    pub deleting: bool,
}

/// Keeps `pod` as [`KeptPod::Settled`] when it is Running, has no readiness gate and will
/// not end by itself ([`ending`]): then the plan for it is only ever to delete it (when it is
/// being deleted or its Node is gone). Any change to the pod comes back through the watch and
/// is kept afresh, so a pod that gains a deadline or a run time is whole again.
pub fn keep_pod(mut pod: Pod) -> KeptPod {
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let gated = pod
        .spec
        .as_ref()
        .is_some_and(|s| s.readiness_gates.is_some());
    let node = pod.spec.as_mut().and_then(|s| s.node_name.take());
    match node {
        Some(node) if running && !gated && ending(&pod).is_none() => KeptPod::Settled(SettledPod {
            pod: PodRef {
                namespace: pod.metadata.namespace.take().unwrap_or_default(),
                name: pod.metadata.name.take().unwrap_or_default(),
                uid: pod.metadata.uid.take(),
            },
            node,
            pod_ip: pod.status.and_then(|s| s.pod_ip),
            deleting: pod.metadata.deletion_timestamp.is_some(),
        }),
        node => {
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = node;
            }
            keep_for_kubelet(&mut pod);
            KeptPod::Whole(Box::new(pod))
        }
    }
}

impl KeptPod {
    pub fn uid(&self) -> Option<&str> {
        match self {
            KeptPod::Settled(s) => s.pod.uid.as_deref(),
            KeptPod::Whole(p) => p.metadata.uid.as_deref(),
        }
    }

    pub fn node(&self) -> Option<&str> {
        match self {
            KeptPod::Settled(s) => Some(&s.node),
            KeptPod::Whole(p) => p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        }
    }

    pub fn phase(&self) -> Option<&str> {
        match self {
            KeptPod::Settled(_) => Some("Running"),
            KeptPod::Whole(p) => p.status.as_ref().and_then(|s| s.phase.as_deref()),
        }
    }

    pub fn pod_ip(&self) -> Option<&str> {
        match self {
            KeptPod::Settled(s) => s.pod_ip.as_deref(),
            KeptPod::Whole(p) => p.status.as_ref().and_then(|s| s.pod_ip.as_deref()),
        }
    }

    pub fn deleting(&self) -> bool {
        match self {
            KeptPod::Settled(s) => s.deleting,
            KeptPod::Whole(p) => p.metadata.deletion_timestamp.is_some(),
        }
    }

    pub fn reference(&self) -> PodRef {
        match self {
            KeptPod::Settled(s) => s.pod.clone(),
            KeptPod::Whole(p) => PodRef {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone().unwrap_or_default(),
                uid: p.metadata.uid.clone(),
            },
        }
    }
}

/// Drops from `pod` what the kubelet's part never reads (see the module header).
pub fn keep_for_kubelet(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    spec.volumes = None;
    spec.affinity = None;
    spec.tolerations = None;
    spec.topology_spread_constraints = None;
    spec.ephemeral_containers = None;
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        keep_container(c);
    }
}

/// A container's name, image and restart policy: what its status is built from.
fn keep_container(c: &mut Container) {
    *c = Container {
        name: std::mem::take(&mut c.name),
        image: c.image.take(),
        restart_policy: c.restart_policy.take(),
        ..Container::default()
    };
}

/// A NodeClaim as the agent keeps it: its name, and the claim as [`keep_for_registration`]
/// leaves it, or `None` when it does not parse (the agent then skips it, as if absent).
#[derive(Clone, Debug)]
pub struct KeptClaim {
    pub name: String,
    pub claim: Option<Arc<NodeClaim>>,
}

/// Converts a watched NodeClaim; one that does not parse is kept by name only.
pub fn keep_claim(o: DynamicObject) -> KeptClaim {
    let name = o.metadata.name.clone().unwrap_or_default();
    let claim = serde_json::to_value(o).and_then(|mut v| {
        // A list's items may leave these out; the typed claim requires them.
        v["apiVersion"] = "karpenter.sh/v1".into();
        v["kind"] = "NodeClaim".into();
        serde_json::from_value::<NodeClaim>(v)
    });
    match claim {
        Ok(c) => KeptClaim {
            name,
            claim: Some(Arc::new(keep_for_registration(c))),
        },
        Err(e) => {
            tracing::debug!(claim = %name, error = %e, "skipping a NodeClaim that does not parse");
            KeptClaim { name, claim: None }
        }
    }
}

/// The claim's name, labels, taints, startup taints, capacity and allocatable, and what
/// [`ClaimMachines`](super::machines::ClaimMachines) reads: whether it is being deleted, its
/// Node's name, whether its instance is terminating, its provider id and image.
pub fn keep_for_registration(c: NodeClaim) -> NodeClaim {
    NodeClaim {
        metadata: ObjectMeta {
            name: c.metadata.name,
            labels: c.metadata.labels,
            deletion_timestamp: c.metadata.deletion_timestamp,
            ..ObjectMeta::default()
        },
        spec: NodeClaimSpec {
            taints: c.spec.taints,
            startup_taints: c.spec.startup_taints,
            ..NodeClaimSpec::default()
        },
        status: c.status.map(|s| NodeClaimStatus {
            node_name: s.node_name,
            provider_id: s.provider_id,
            image_id: s.image_id,
            capacity: s.capacity,
            allocatable: s.allocatable,
            conditions: s
                .conditions
                .map(|all| -> Vec<_> {
                    all.into_iter()
                        .filter(|c| c.type_ == INSTANCE_TERMINATING)
                        .collect()
                })
                .filter(|kept| !kept.is_empty()),
            ..NodeClaimStatus::default()
        }),
        ..NodeClaim::default()
    }
}

/// Drops all of a watched Node's metadata but its name.
pub fn keep_name(node: &mut PartialObjectMeta<Node>) {
    node.types = None;
    node.metadata = ObjectMeta {
        name: node.metadata.name.take(),
        ..ObjectMeta::default()
    };
}

/// How the reflector's store files a [`KeptPod`]: by namespace and name, as the pod.
impl Lookup for KeptPod {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        match self {
            KeptPod::Settled(s) => Some(Cow::Borrowed(&s.pod.name)),
            KeptPod::Whole(p) => p.metadata.name.as_deref().map(Cow::Borrowed),
        }
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        match self {
            KeptPod::Settled(s) => Some(Cow::Borrowed(&s.pod.namespace)),
            KeptPod::Whole(p) => p.metadata.namespace.as_deref().map(Cow::Borrowed),
        }
    }
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        KeptPod::uid(self).map(Cow::Borrowed)
    }
}

/// How the reflector's store files a [`KeptClaim`]: by name, as the NodeClaim it stands for.
impl Lookup for KeptClaim {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        "NodeClaim".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "karpenter.sh".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "nodeclaims".into()
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

#[cfg(test)]
mod tests;
