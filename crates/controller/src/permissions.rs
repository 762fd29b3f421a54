//! Every Kubernetes API permission the controller process needs, as data. The Helm chart's
//! ClusterRole and Roles are checked against these lists (`crates/cli/tests/chart/main.rs`),
//! and the tests below check the lists against the requests the kube-backed watchers, writer,
//! lease store and event sink really send, so a new API call cannot ship without its RBAC.
//!
//! Verbs are RBAC verbs: `get`, `list`, `watch`, `create`, `update` (PUT), `patch`, `delete`.
//! Subresources are written `resource/subresource` as RBAC rules name them. Not listed: the
//! AWS provider's `GET /version` at start-up, a non-resource URL every authenticated client
//! may read through the built-in `system:public-info-viewer` role.

/// Where a permission must be granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Cluster-scoped resources, or namespaced ones in any namespace: a ClusterRole rule.
    Cluster,
    /// The namespace the controller runs in (`LEADER_ELECTION_NAMESPACE`): a Role there.
    Own,
    /// One fixed namespace: a Role there.
    Namespace(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permission {
    /// The API group; `""` is the core group.
    pub group: &'static str,
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
    pub scope: Scope,
}

const fn cluster(
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
) -> Permission {
    Permission {
        group,
        resource,
        verbs,
        scope: Scope::Cluster,
    }
}

const WATCHED: &[&str] = &["list", "watch"];

/// What the controller itself calls, whatever the cloud provider.
pub const REQUIRED: &[Permission] = &[
    // watch.rs: one cluster-wide watcher per `state::Kind`, each a list then a watch.
    // write/kube.rs: `delete_pod` (the drain deletes pods that tolerate the disruption taint).
    cluster("", "pods", &["list", "watch", "delete"]),
    // write/kube.rs: `evict_pod` posts an Eviction to the subresource.
    cluster("", "pods/eviction", &["create"]),
    // write/kube.rs: `patch_node` (taints, labels, finalizers), `delete_node`.
    cluster("", "nodes", &["list", "watch", "patch", "delete"]),
    cluster("", "namespaces", WATCHED),
    cluster("", "persistentvolumes", WATCHED),
    cluster("", "persistentvolumeclaims", WATCHED),
    cluster("apps", "daemonsets", WATCHED),
    cluster("policy", "poddisruptionbudgets", WATCHED),
    cluster("storage.k8s.io", "storageclasses", WATCHED),
    // termination.rs waits for a node's VolumeAttachments to go.
    cluster("storage.k8s.io", "volumeattachments", WATCHED),
    // write/kube.rs: `create_nodeclaim`, `patch_nodeclaim_meta`, `delete_nodeclaim`.
    cluster(
        "karpenter.sh",
        "nodeclaims",
        &["list", "watch", "create", "patch", "delete"],
    ),
    // write/kube.rs: `patch_nodeclaim_status`, `patch_nodeclaim_pod_event_time`.
    cluster("karpenter.sh", "nodeclaims/status", &["patch"]),
    // write/kube.rs: `patch_nodepool_meta` (the drift hash annotation).
    cluster("karpenter.sh", "nodepools", &["list", "watch", "patch"]),
    // write/kube.rs: `update_nodepool_status` (a merge patch of the subresource).
    cluster("karpenter.sh", "nodepools/status", &["patch"]),
    // write/kube.rs: `patch_nodeclass_meta` (the class hash annotations).
    cluster(
        "karpenter.k8s.aws",
        "ec2nodeclasses",
        &["list", "watch", "patch"],
    ),
    // write/kube.rs: `patch_nodeclass_status`.
    cluster("karpenter.k8s.aws", "ec2nodeclasses/status", &["patch"]),
    // events/writer.rs: a new series is created in the regarding object's namespace
    // (`default` for cluster-scoped objects); repeats are folded into a patch of its count.
    cluster("", "events", &["create", "patch"]),
    // leader.rs: `KubeLeaseStore` reads the lease, creates it when absent and replaces it
    // (PUT with the last resourceVersion) to acquire and renew.
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["get", "create", "update"],
        scope: Scope::Own,
    },
    // webhook/inject.rs: reads each CRD and patches its conversion when it differs.
    cluster(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &["get", "patch"],
    ),
    // webhook/secret.rs: the webhook certificate the replicas share (in the Service's
    // namespace, the controller's own in the chart): read, created when absent, replaced when
    // damaged.
    Permission {
        group: "",
        resource: "secrets",
        verbs: &["get", "create", "update"],
        scope: Scope::Own,
    },
];

/// The simulated cloud's node agent (`nodewright-cloud-sim`'s `kwok` module), which runs in
/// the controller process with `--cloud-provider sim` and plays the kubelet for its instances
/// and their pods. Read from `kwok/agent.rs` (`NodeAgent::reconcile`, `write_lease` and
/// `apply_pod`) and `kwok/watches.rs`, and checked against the requests the agent sends by
/// `crates/cli/tests/sim_agent_rbac.rs`.
pub const SIM_NODE_AGENT: &[Permission] = &[
    // Watches its Nodes by label (a list then a watch, of their metadata), registers new
    // ones, deletes those of terminated instances.
    cluster("", "nodes", &["list", "watch", "create", "delete"]),
    // Writes the registered Node's status and the Ready heartbeat.
    cluster("", "nodes/status", &["patch"]),
    // Watches the pods bound to Nodes (a list then a watch), and deletes those its Nodes
    // were asked to stop or that were left on a Node that is gone.
    cluster("", "pods", &["list", "watch", "delete"]),
    // Reports a bound pod's containers running and Ready.
    cluster("", "pods/status", &["patch"]),
    // Watches the NodeClaims (a list then a watch) to copy their labels and taints onto the
    // Node.
    cluster("karpenter.sh", "nodeclaims", &["list", "watch"]),
    // Node heartbeats: a server-side apply (a patch that creates the lease when absent) and
    // a delete with the Node.
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["create", "patch", "delete"],
        scope: Scope::Namespace("kube-node-lease"),
    },
];

/// The permissions a process with the given provider needs.
pub fn required(sim: bool) -> Vec<Permission> {
    let mut all = REQUIRED.to_vec();
    if sim {
        all.extend_from_slice(SIM_NODE_AGENT);
    }
    all
}

/// Whether `perms` allow `verb` on `group`/`resource` in `namespace` (`None` for a
/// cluster-scoped resource); `own` is the controller's namespace.
pub fn allows(
    perms: &[Permission],
    group: &str,
    resource: &str,
    verb: &str,
    namespace: Option<&str>,
    own: &str,
) -> bool {
    perms.iter().any(|p| {
        p.group == group
            && p.resource == resource
            && p.verbs.contains(&verb)
            && match (p.scope, namespace) {
                (Scope::Cluster, _) => true,
                (Scope::Own, Some(ns)) => ns == own,
                (Scope::Namespace(fixed), Some(ns)) => ns == fixed,
                (_, None) => false,
            }
    })
}

#[cfg(test)]
mod tests;
