//! Kubernetes objects as tests build them by hand: the smallest Pod, NodePool, NodeClaim and Node
//! the API server and nodewright's converters accept, to which a test merges what it is about
//! ([`crate::json::merge`]).

use serde_json::{Value, json};

/// A Pending Pod `namespace/name` with uid `uid-{name}` and one container, `app`.
pub fn pod(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
        "status": {"phase": "Pending"}
    })
}

/// A NodePool `name` with uid `uid-{name}`, a template of no requirements, of the
/// EC2NodeClass `default`.
pub fn nodepool(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"template": {"spec": {"requirements": [],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
    })
}

/// A NodeClaim `name` with uid `uid-{name}`, no requirements, of the EC2NodeClass `default`.
pub fn nodeclaim(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"requirements": [],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
    })
}

/// A Node `name` with no status, its instance named by `provider_id`.
pub fn node(name: &str, provider_id: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "spec": {"providerID": provider_id}
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::merge;

    #[test]
    fn a_pod_takes_what_is_merged_into_it() {
        let p = merge(pod("web", "a"), json!({"spec": {"nodeName": "n"}}));
        assert_eq!(p["metadata"]["uid"], "uid-a");
        assert_eq!(p["spec"]["nodeName"], "n");
        assert_eq!(p["spec"]["containers"][0]["name"], "app");
        assert_eq!(
            node("n", "aws:///z/i-1")["spec"]["providerID"],
            "aws:///z/i-1"
        );
    }
}
