//! What the node agent keeps of each pod bound to a Node: the pod as the API server sent it,
//! less what the kubelet's part ([`pod_plan`](super::pod_plan)) never reads.
//!
//! The agent caches every bound pod for as long as it runs, ten or so per Node, so this cache
//! grows with the Nodes: at 20,000 pods on 2,000 Nodes it holds 20,000 pods. A k8s-openapi
//! `Pod` is large in memory before any field is set (each `Volume` is over 3 KiB, each
//! `Container` over 2 KiB), and nearly every pod carries a projected service-account volume
//! and its mount. The plan reads the metadata, the pod-level spec fields (node, host network,
//! restart policy, deadline, readiness gates), each container's name, image and restart
//! policy, and the status; everything else of the spec goes.

use k8s_openapi::api::core::v1::{Container, Pod};

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

#[cfg(test)]
mod tests;
