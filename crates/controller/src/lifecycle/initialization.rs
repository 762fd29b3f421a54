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
        let Some(node) = lock(&self.state).nodes.get(&node_name).cloned() else {
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
        if !node_ready(&node) {
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "NodeNotReady",
                "Node status is NotReady",
                now,
            );
            return Ok(());
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
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "StartupTaintsExist",
                &format!("StartupTaint {:?} still exists", t.key),
                now,
            );
            return Ok(());
        }
        if let Some(t) = taints.iter().find(|t| is_known_ephemeral(t)) {
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "KnownEphemeralTaintsExist",
                &format!("KnownEphemeralTaint {:?} still exists", t.key),
                now,
            );
            return Ok(());
        }
        let requested = convert::resources(
            claim
                .spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref()),
        )
        .unwrap_or_default();
        let allocatable = convert::node(&node)
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
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "ResourceNotRegistered",
                &format!("Resource {r:?} was requested but not registered"),
                now,
            );
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
