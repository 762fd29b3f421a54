//! [`KubeWriter`] over kube-rs: NodeClaims and NodePools through the dynamic API (their
//! types live in `nodewright-api`, which does not depend on kube), Nodes and evictions
//! through the typed API. Every patch is a JSON merge patch built by the same functions the
//! in-memory API applies, so both agree on what a write means.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use nodewright_api::aws::v1::EC2NodeClassStatus;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::nodepool::NodePoolStatus;
use serde_json::{Value, json};

use super::{Eviction, KubeWriter, MetaPatch, NodePatch, WriteError};
use crate::state::Kind;

pub struct KubeApi {
    client: Client,
}

pub fn api_resource(kind: Kind) -> ApiResource {
    let (group, version, k, plural, _) = kind.gvk();
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, k), plural)
}

/// Maps a kube-rs error to the closed set the loops branch on.
pub fn classify(kind: &str, name: &str, e: kube::Error) -> WriteError {
    match e {
        kube::Error::Api(status) => {
            let code = status.code;
            let message = status.message.clone();
            match code {
                404 => WriteError::NotFound {
                    kind: kind.into(),
                    name: name.into(),
                },
                409 if status.reason == "AlreadyExists" => WriteError::AlreadyExists {
                    kind: kind.into(),
                    name: name.into(),
                },
                409 => WriteError::Conflict {
                    kind: kind.into(),
                    name: name.into(),
                    message,
                },
                _ => WriteError::Api { code, message },
            }
        }
        other => WriteError::Transport(other.to_string()),
    }
}

/// The outcome of an eviction call: 429 is a PDB saying no, 404/409 mean the pod is gone.
pub fn eviction_outcome(result: Result<(), kube::Error>) -> Result<Eviction, WriteError> {
    match result {
        Ok(()) => Ok(Eviction::Evicted),
        Err(kube::Error::Api(s)) if s.code == 429 => Ok(Eviction::Blocked(s.message)),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(Eviction::Gone),
        Err(e) => Err(classify("Pod", "", e)),
    }
}

/// A `policy/v1` Eviction for the pod.
pub fn eviction_body(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace}
    })
}

/// DeleteOptions for a pod: the grace period, when given, clamped to the API's range (a
/// negative value is not allowed; 0 would mean "immediately" and skip the kubelet's cleanup,
/// so the drain never asks for less than 1 s).
pub fn pod_delete_params(grace_period_seconds: Option<i64>) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: grace_period_seconds
            .map(|g| u32::try_from(g.max(1)).unwrap_or(u32::MAX)),
        ..DeleteParams::default()
    }
}

/// The status subresource patch of a NodeClaim, NodePool or EC2NodeClass.
pub fn status_patch<T: serde::Serialize>(status: &T) -> Value {
    json!({ "status": status })
}

/// A NodeClaim's status patch from any writer but the pod-event loop: `lastPodEventTime` is
/// left out, so the merge keeps whatever time the API server holds. With `resource_version`
/// the API server applies it only to that version of the claim (409 Conflict otherwise).
pub fn nodeclaim_status_patch(status: &NodeClaimStatus, resource_version: Option<&str>) -> Value {
    let mut patch = status_patch(status);
    if let Some(s) = patch["status"].as_object_mut() {
        s.remove("lastPodEventTime");
    }
    if let Some(v) = resource_version {
        patch["metadata"] = json!({ "resourceVersion": v });
    }
    patch
}

/// The pod-event loop's patch: the time and nothing else.
pub fn pod_event_time_patch(time: &str) -> Value {
    json!({ "status": { "lastPodEventTime": time } })
}

/// The client's built-in retry resends 429s with backoff; an eviction refused by a PDB must
/// come back to the drain loop at once instead, so the writer's client does not retry.
pub fn without_retry(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config
}

impl KubeApi {
    pub fn new(client: Client) -> Self {
        KubeApi { client }
    }

    fn dynamic(&self, kind: Kind) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &api_resource(kind))
    }

    /// A JSON merge patch of one of our custom resources (`kind` names it in errors), on the
    /// object itself or on its status subresource.
    async fn merge_patch(
        &self,
        kind: Kind,
        kind_name: &str,
        name: &str,
        body: Value,
        status: bool,
    ) -> Result<(), WriteError> {
        let api = self.dynamic(kind);
        let (params, patch) = (PatchParams::default(), Patch::Merge(body));
        let r = if status {
            api.patch_status(name, &params, &patch).await
        } else {
            api.patch(name, &params, &patch).await
        };
        r.map(drop).map_err(|e| classify(kind_name, name, e))
    }
}

fn to_dynamic<T: serde::Serialize>(v: &T) -> Result<DynamicObject, WriteError> {
    serde_json::to_value(v)
        .and_then(serde_json::from_value)
        .map_err(|e| WriteError::Transport(format!("encoding request: {e}")))
}

#[async_trait]
impl KubeWriter for KubeApi {
    async fn create_nodeclaim(&self, claim: &NodeClaim) -> Result<NodeClaim, WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let created = self
            .dynamic(Kind::NodeClaim)
            .create(&PostParams::default(), &to_dynamic(claim)?)
            .await
            .map_err(|e| classify("NodeClaim", &name, e))?;
        serde_json::to_value(created)
            .and_then(serde_json::from_value)
            .map_err(|e| WriteError::Transport(format!("decoding NodeClaim {name}: {e}")))
    }

    async fn patch_nodeclaim_status(
        &self,
        name: &str,
        status: &NodeClaimStatus,
        resource_version: Option<&str>,
    ) -> Result<(), WriteError> {
        self.merge_patch(
            Kind::NodeClaim,
            "NodeClaim",
            name,
            nodeclaim_status_patch(status, resource_version),
            true,
        )
        .await
    }

    async fn patch_nodeclaim_pod_event_time(
        &self,
        name: &str,
        time: &str,
    ) -> Result<(), WriteError> {
        self.merge_patch(
            Kind::NodeClaim,
            "NodeClaim",
            name,
            pod_event_time_patch(time),
            true,
        )
        .await
    }

    async fn patch_nodeclaim_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.merge_patch(
            Kind::NodeClaim,
            "NodeClaim",
            name,
            patch.to_merge_patch(),
            false,
        )
        .await
    }

    async fn delete_nodeclaim(&self, name: &str) -> Result<(), WriteError> {
        self.dynamic(Kind::NodeClaim)
            .delete(name, &DeleteParams::background())
            .await
            .map(drop)
            .map_err(|e| classify("NodeClaim", name, e))
    }

    async fn patch_node(&self, name: &str, patch: &NodePatch) -> Result<(), WriteError> {
        Api::<Node>::all(self.client.clone())
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(patch.to_merge_patch()),
            )
            .await
            .map(drop)
            .map_err(|e| classify("Node", name, e))
    }

    async fn delete_node(&self, name: &str) -> Result<(), WriteError> {
        Api::<Node>::all(self.client.clone())
            .delete(name, &DeleteParams::background())
            .await
            .map(drop)
            .map_err(|e| classify("Node", name, e))
    }

    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<Eviction, WriteError> {
        let r = Api::<Pod>::namespaced(self.client.clone(), namespace)
            .create_subresource::<Value, Value>(
                "eviction",
                name,
                &PostParams::default(),
                &eviction_body(namespace, name),
            )
            .await
            .map(drop);
        eviction_outcome(r)
    }

    async fn update_nodepool_status(
        &self,
        name: &str,
        status: &NodePoolStatus,
    ) -> Result<(), WriteError> {
        self.merge_patch(Kind::NodePool, "NodePool", name, status_patch(status), true)
            .await
    }

    async fn patch_nodepool_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.merge_patch(
            Kind::NodePool,
            "NodePool",
            name,
            patch.to_merge_patch(),
            false,
        )
        .await
    }

    async fn patch_nodeclass_status(
        &self,
        name: &str,
        status: &EC2NodeClassStatus,
    ) -> Result<(), WriteError> {
        self.merge_patch(
            Kind::NodeClass,
            "EC2NodeClass",
            name,
            status_patch(status),
            true,
        )
        .await
    }

    async fn patch_nodeclass_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.merge_patch(
            Kind::NodeClass,
            "EC2NodeClass",
            name,
            patch.to_merge_patch(),
            false,
        )
        .await
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), WriteError> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .delete(name, &pod_delete_params(grace_period_seconds))
            .await
            .map(drop)
            .map_err(|e| classify("Pod", &format!("{namespace}/{name}"), e))
    }
}
