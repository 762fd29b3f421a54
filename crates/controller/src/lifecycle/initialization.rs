//! Initialization: the Node is Ready, its startup and ephemeral taints are gone and the
//! extended resources it was launched for are present; then `Initialized` is set.

use super::*;

impl Lifecycle {
    pub(super) async fn initialize(
        &self,
        claim: &NodeClaim,
        status: &NodeClaimStatus,
        conds: &mut Vec<Condition>,
        now: Timestamp,
    ) -> Result<(), WriteError> {
        let node_name = status.node_name.clone().unwrap_or_default();
        let Some(node) = lock(&self.state).node_object(&node_name) else {
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "NodeNotFound",
                "Node not registered with cluster",
                now,
            );
            return Ok(());
        };
        if let Some((reason, message)) = not_initialized(claim, &node) {
            cond::set(conds, INITIALIZED, "Unknown", reason, &message, now);
            return Ok(());
        }
        if node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::INITIALIZED))
            .map(String::as_str)
            != Some("true")
        {
            let mut patch = NodePatch::default();
            patch
                .meta
                .labels
                .insert(labels::INITIALIZED.into(), Some("true".into()));
            self.writer.patch_node(&node_name, &patch).await?;
        }
        cond::set(conds, INITIALIZED, "True", INITIALIZED, "", now);
        info!(nodeclaim = claim.metadata.name.as_deref().unwrap_or_default(), node = %node_name, "initialized nodeclaim");
        Ok(())
    }
}

/// Why the claim's Node is not initialized yet, as the `Initialized` condition's reason and
/// message (upstream's): not Ready, a startup or known ephemeral taint still on it, or an
/// extended resource the claim asked for not registered. `None`: it is initialized.
fn not_initialized(claim: &NodeClaim, node: &Node) -> Option<(&'static str, String)> {
    if !node_ready(node) {
        return Some(("NodeNotReady", "Node status is NotReady".to_string()));
    }
    let taints: Vec<ApiTaint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let startup: Vec<ApiTaint> = claim
        .spec
        .startup_taints
        .iter()
        .flatten()
        .map(api_taint)
        .collect();
    if let Some(t) = taints
        .iter()
        .find(|t| startup.iter().any(|s| same_taint(s, t)))
    {
        return Some((
            "StartupTaintsExist",
            format!("StartupTaint {:?} still exists", t.key),
        ));
    }
    if let Some(t) = taints.iter().find(|t| is_known_ephemeral(t)) {
        return Some((
            "KnownEphemeralTaintsExist",
            format!("KnownEphemeralTaint {:?} still exists", t.key),
        ));
    }
    let requested = convert::resources(
        claim
            .spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref()),
    )
    .unwrap_or_default();
    let allocatable = convert::node(node)
        .map(|n| n.allocatable)
        .unwrap_or_default();
    let missing: Vec<&str> = requested
        .iter()
        .filter(|(k, v)| {
            *v > 0
                && !matches!(
                    *k,
                    "cpu" | "memory" | "ephemeral-storage" | "pods" | "nodes"
                )
                && allocatable.get(k) <= 0
        })
        .map(|(k, _)| k)
        .collect();
    if let Some(r) = missing.first() {
        return Some((
            "ResourceNotRegistered",
            format!("Resource {r:?} was requested but not registered"),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use nodewright_testkit::json::merge;
    use nodewright_testkit::k8s;
    use serde_json::{Value, json};

    use super::*;

    fn claim() -> NodeClaim {
        serde_json::from_value(merge(
            k8s::nodeclaim("c"),
            json!({"spec": {
                "startupTaints": [{"key": "cni", "effect": "NoSchedule"}],
                "resources": {"requests": {"cpu": "1", "example.com/gpu": "1"}}}}),
        ))
        .unwrap()
    }

    /// A Ready Node with `taints` whose allocatable holds `gpus` of the extended resource.
    fn node(taints: Value, gpus: &str) -> Node {
        serde_json::from_value(merge(
            k8s::node("n", "aws:///zone-a/i-1"),
            json!({"spec": {"taints": taints},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110", "example.com/gpu": gpus}}}),
        ))
        .unwrap()
    }

    fn reason(node: &Node) -> Option<&'static str> {
        not_initialized(&claim(), node).map(|(r, _)| r)
    }

    #[test]
    fn each_thing_that_holds_initialization_back_is_named() {
        let mut not_ready = node(json!([]), "1");
        not_ready
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[0]
            .status = "False".into();
        assert_eq!(reason(&not_ready), Some("NodeNotReady"));
        let startup = node(json!([{"key": "cni", "effect": "NoSchedule"}]), "1");
        assert_eq!(reason(&startup), Some("StartupTaintsExist"));
        let ephemeral = node(
            json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
            "1",
        );
        assert_eq!(reason(&ephemeral), Some("KnownEphemeralTaintsExist"));
        assert_eq!(reason(&node(json!([]), "0")), Some("ResourceNotRegistered"));
        assert_eq!(reason(&node(json!([]), "1")), None);
    }
}
