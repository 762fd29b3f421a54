//! What the node agent keeps of the objects it watches: of each pod bound to a Node, of each
//! NodeClaim and of each of its own Nodes, only what its plans read.
//!
//! Pods: the agent caches every bound pod for as long as it runs, ten or so per Node, so this
//! cache grows with the Nodes: at 20,000 pods on 2,000 Nodes it holds 20,000 pods. A
//! k8s-openapi `Pod` is large in memory before any field is set (each `Volume` is over 3 KiB,
//! each `Container` over 2 KiB), and nearly every pod carries a projected service-account
//! volume and its mount. The plan reads the metadata, the pod-level spec fields (node, host
//! network, restart policy, deadline, readiness gates), each container's name, image and
//! restart policy, and the status; everything else of the spec goes.
//!
//! NodeClaims: registration reads a claim's labels and taints ([`desired_node`]), and an
//! instance of another provider its capacity and allocatable ([`machine`]); the rest goes.
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

/// The claim's name, labels, taints, startup taints, capacity and allocatable.
pub fn keep_for_registration(c: NodeClaim) -> NodeClaim {
    NodeClaim {
        metadata: ObjectMeta {
            name: c.metadata.name,
            labels: c.metadata.labels,
            ..ObjectMeta::default()
        },
        spec: NodeClaimSpec {
            taints: c.spec.taints,
            startup_taints: c.spec.startup_taints,
            ..NodeClaimSpec::default()
        },
        status: c.status.map(|s| NodeClaimStatus {
            capacity: s.capacity,
            allocatable: s.allocatable,
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
