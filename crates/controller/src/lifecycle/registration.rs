//! Registration: the Node with the claim's provider id is found and takes the claim's labels,
//! annotations and taints; the provider's registration hooks run; the unregistered taint is
//! lifted once none is pending.

use super::*;

impl Lifecycle {
    /// The registration phase of a launched claim: `Registered` once its one Node has taken
    /// the claim's metadata and taints and no hook is pending. `Some` when the pass ends here
    /// (registration timed out and the claim was deleted).
    pub(super) async fn register(
        &self,
        claim: &NodeClaim,
        status: &mut NodeClaimStatus,
        conds: &mut Vec<Condition>,
        now: Timestamp,
    ) -> Result<Option<Outcome>, WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let pid = status.provider_id.clone().unwrap_or_default();
        let nodes: Vec<Node> = {
            let s = lock(&self.state);
            s.node_by_provider_id(&pid)
                .into_iter()
                .filter_map(|n| s.node_object(n.metadata.name.as_deref()?))
                .collect()
        };
        let node = match nodes.as_slice() {
            [] => {
                if let Some(o) = self.registration_timed_out(claim, conds, now).await? {
                    return Ok(Some(o));
                }
                cond::set(
                    conds,
                    REGISTERED,
                    "Unknown",
                    "NodeNotFound",
                    "Node not registered with cluster",
                    now,
                );
                return Ok(None);
            }
            [n] => n.clone(),
            _ => {
                cond::set(
                    conds,
                    REGISTERED,
                    "False",
                    "MultipleNodesFound",
                    "multiple nodes found for the providerID",
                    now,
                );
                return Ok(None);
            }
        };
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let node_labels = node.metadata.labels.clone().unwrap_or_default();
        // The claim as last written: the launch may have added labels and annotations in
        // this same pass.
        let latest = lock(&self.state)
            .nodeclaims
            .get(&name)
            .map(|c| c.metadata.clone())
            .unwrap_or_else(|| claim.metadata.clone());
        let mut claim_labels = latest.labels.clone().unwrap_or_default();
        let hook = self.run_registration_hooks(claim, &latest, status).await;
        let mut gained = MetaPatch::default();
        for (k, v) in &hook.labels {
            if !claim_labels.contains_key(k) {
                claim_labels.insert(k.clone(), v.clone());
                gained.labels.insert(k.clone(), Some(v.clone()));
            }
        }
        if !gained.is_empty() {
            self.writer.patch_nodeclaim_meta(&name, &gained).await?;
        }
        self.sync_node(&node, claim, &claim_labels, &latest, hook.is_pending())
            .await?;
        if let Some(why) = &hook.pending {
            if let Some(o) = self.registration_timed_out(claim, conds, now).await? {
                return Ok(Some(o));
            }
            cond::set(
                conds,
                REGISTERED,
                "False",
                REGISTRATION_HOOK_PENDING,
                why,
                now,
            );
            return Ok(None);
        }
        status.node_name = Some(node_name.clone());
        if !cond::is_true(conds, REGISTERED) {
            lock(&self.state).record_registration(claim, Ok(()));
        }
        cond::set(conds, REGISTERED, "True", REGISTERED, "", now);
        let label = |k: &str| claim_labels.get(k).cloned().unwrap_or_default();
        self.metrics.lifecycle.node_created(
            &label(labels::NODEPOOL),
            &node_labels
                .get(labels::ZONE)
                .cloned()
                .unwrap_or_else(|| label(labels::ZONE)),
        );
        info!(nodeclaim = %name, node = %node_name, "registered nodeclaim");
        Ok(None)
    }

    /// Brings the Node in line with its claim in one patch: labels, annotations, the
    /// termination finalizer and taints, the unregistered taint kept while `hook_pending`.
    async fn sync_node(
        &self,
        node: &Node,
        claim: &NodeClaim,
        claim_labels: &BTreeMap<String, String>,
        latest: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        hook_pending: bool,
    ) -> Result<(), WriteError> {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let node_labels = node.metadata.labels.clone().unwrap_or_default();
        let mut patch = NodePatch {
            meta: node_metadata(node, claim_labels, latest, !hook_pending),
            taints: None,
        };
        let current: Vec<ApiTaint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if !current
            .iter()
            .any(|t| t.key == UNREGISTERED_TAINT && t.effect == "NoExecute")
        {
            self.events
                .publish(events::unregistered_taint_missing(ObjectRef::node(
                    &node_name,
                )));
        }
        let taints = registered_taints(&current, claim, &node_labels, hook_pending);
        if taints != current {
            patch.taints = Some(taints);
        }
        if patch.is_empty() {
            return Ok(());
        }
        self.writer.patch_node(&node_name, &patch).await
    }

    /// The provider's registration hooks for the claim as last written (`meta`, `status`).
    /// A hook that fails keeps registration pending, with the error as the reason.
    pub(super) async fn run_registration_hooks(
        &self,
        claim: &NodeClaim,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        status: &NodeClaimStatus,
    ) -> Registration {
        let mut current = claim.clone();
        current.metadata = meta.clone();
        current.status = Some(status.clone());
        let class = pool_class(&lock(&self.state), claim);
        match self
            .cloud
            .registration_hooks(&current, class.as_ref())
            .await
        {
            Ok(r) => r,
            Err(e) => {
                let name = claim.metadata.name.as_deref().unwrap_or_default();
                warn!(nodeclaim = %name, error = %e, "registration hook failed");
                Registration::pending(format!("registration hook failed: {e}"))
            }
        }
    }
}

/// What the Node's metadata gains at registration: the claim's labels (with
/// `karpenter.sh/registered` once no hook is pending) and annotations, which win over the
/// Node's own as upstream's registration assigns them, and the termination finalizer, guarded
/// by the Node's version.
fn node_metadata(
    node: &Node,
    claim_labels: &BTreeMap<String, String>,
    claim: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    registered: bool,
) -> MetaPatch {
    let mut meta = MetaPatch::default();
    let node_labels = node.metadata.labels.clone().unwrap_or_default();
    let node_annotations = node.metadata.annotations.clone().unwrap_or_default();
    let registered = registered.then(|| (labels::REGISTERED.to_string(), "true".to_string()));
    for (k, v) in claim_labels
        .iter()
        .chain(registered.iter().map(|(k, v)| (k, v)))
    {
        if node_labels.get(k) != Some(v) {
            meta.labels.insert(k.clone(), Some(v.clone()));
        }
    }
    for (k, v) in claim.annotations.iter().flatten() {
        if node_annotations.get(k) != Some(v) {
            meta.annotations.insert(k.clone(), Some(v.clone()));
        }
    }
    let mut finalizers = node.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
        finalizers.push(TERMINATION_FINALIZER.into());
        meta.finalizers = Some(finalizers);
        meta.resource_version = node.metadata.resource_version.clone();
    }
    meta
}

/// The taints a registered Node carries: its own, less the unregistered taint once no hook is
/// pending, plus the claim's taints and startup taints unless the Node asks not to have them
/// synced (`karpenter.sh/do-not-sync-taints`).
fn registered_taints(
    current: &[ApiTaint],
    claim: &NodeClaim,
    node_labels: &BTreeMap<String, String>,
    hook_pending: bool,
) -> Vec<ApiTaint> {
    let mut taints: Vec<ApiTaint> = current
        .iter()
        .filter(|t| hook_pending || !(t.key == UNREGISTERED_TAINT && t.effect == "NoExecute"))
        .cloned()
        .collect();
    if node_labels
        .get(labels::DO_NOT_SYNC_TAINTS)
        .map(String::as_str)
        == Some("true")
    {
        return taints;
    }
    for t in claim
        .spec
        .taints
        .iter()
        .flatten()
        .chain(claim.spec.startup_taints.iter().flatten())
    {
        let t = api_taint(t);
        if !taints.iter().any(|x| same_taint(x, &t)) {
            taints.push(t);
        }
    }
    taints
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use nodewright_testkit::json::merge;
    use nodewright_testkit::k8s;
    use serde_json::json;

    use super::*;

    fn taint(key: &str, effect: &str) -> ApiTaint {
        ApiTaint {
            key: key.into(),
            effect: effect.into(),
            ..ApiTaint::default()
        }
    }

    fn keys(taints: &[ApiTaint]) -> Vec<&str> {
        taints.iter().map(|t| t.key.as_str()).collect()
    }

    #[test]
    fn the_node_takes_the_claims_taints_once_and_loses_the_unregistered_one_when_no_hook_waits() {
        let claim: NodeClaim = serde_json::from_value(merge(
            k8s::nodeclaim("c"),
            json!({"spec": {
                "taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "cni", "effect": "NoSchedule"}]}}),
        ))
        .unwrap();
        let mut team = taint("team", "NoSchedule");
        team.value = Some("a".into());
        let current = vec![taint(UNREGISTERED_TAINT, "NoExecute"), team];
        let none = BTreeMap::new();

        let done = registered_taints(&current, &claim, &none, false);
        assert_eq!(keys(&done), ["team", "cni"]);
        let pending = registered_taints(&current, &claim, &none, true);
        assert_eq!(keys(&pending), [UNREGISTERED_TAINT, "team", "cni"]);

        let opted_out = BTreeMap::from([(labels::DO_NOT_SYNC_TAINTS.to_string(), "true".into())]);
        let kept = registered_taints(&current[..1], &claim, &opted_out, false);
        assert!(kept.is_empty(), "{kept:?}");
    }

    #[test]
    fn the_node_takes_the_claims_labels_and_annotations_and_the_finalizer() {
        let node: Node = serde_json::from_value(merge(
            k8s::node("n", "aws:///zone-a/i-1"),
            json!({"metadata": {"resourceVersion": "7",
                "labels": {"team": "a", "zone": "z"},
                "annotations": {"note": "node's"}}}),
        ))
        .unwrap();
        let claim_labels = BTreeMap::from([
            ("team".to_string(), "a".to_string()),
            ("tier".to_string(), "web".to_string()),
        ]);
        let claim = ObjectMeta {
            annotations: Some(BTreeMap::from([("note".into(), "claim's".into())])),
            ..ObjectMeta::default()
        };
        let pending = node_metadata(&node, &claim_labels, &claim, false);
        let gained: Vec<&str> = pending.labels.keys().map(String::as_str).collect();
        assert_eq!(gained, ["tier"], "only what the Node lacks");
        assert_eq!(pending.annotations["note"].as_deref(), Some("claim's"));
        assert_eq!(
            pending.finalizers,
            Some(vec![TERMINATION_FINALIZER.to_string()])
        );
        assert_eq!(pending.resource_version.as_deref(), Some("7"));
        let done = node_metadata(&node, &claim_labels, &claim, true);
        assert_eq!(done.labels[labels::REGISTERED].as_deref(), Some("true"));
    }
}
