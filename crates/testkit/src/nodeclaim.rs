//! NodeClaims as a provider's tests launch them: the NodeClaim the provisioner would create for
//! the NodePool `default`, asking for instance types and a capacity type, with extra
//! requirements and resource requests added where a test needs them.

use serde_json::{Value, json};

/// A v1 NodeClaim of the NodePool `default` for the EC2NodeClass `class`, asking for one of
/// `types` at `capacity_type` (`on-demand`, `spot` or `reserved`).
pub fn aws(name: &str, class: &str, types: &[&str], capacity_type: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]}
            ]
        }
    })
}

/// `claim` with one more requirement: `key` In `values`, after the others.
pub fn require(mut claim: Value, key: &str, values: &[&str]) -> Value {
    let requirements = claim["spec"]["requirements"]
        .as_array_mut()
        .expect("a NodeClaim with requirements");
    requirements.push(json!({"key": key, "operator": "In", "values": values}));
    claim
}

/// `claim` asking for `requests`, e.g. `json!({"cpu": "500m"})`.
pub fn requests(mut claim: Value, requests: Value) -> Value {
    claim["spec"]["resources"] = json!({"requests": requests});
    claim
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_keep_their_order_and_requests_are_set() {
        let c = requests(
            require(
                aws("a", "web", &["m5.large"], "spot"),
                "topology.kubernetes.io/zone",
                &["z1"],
            ),
            json!({"cpu": "500m"}),
        );
        let keys: Vec<&str> = c["spec"]["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "node.kubernetes.io/instance-type",
                "karpenter.sh/capacity-type",
                "topology.kubernetes.io/zone"
            ]
        );
        assert_eq!(c["spec"]["requirements"][1]["values"], json!(["spot"]));
        assert_eq!(c["spec"]["resources"], json!({"requests": {"cpu": "500m"}}));
        assert_eq!(c["spec"]["nodeClassRef"]["name"], "web");
    }
}
