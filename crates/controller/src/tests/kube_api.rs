//! The kube-rs writer against a local HTTP server that answers with recorded API responses:
//! the requests' methods, paths, content types and bodies, and how responses are read.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use serde_json::{Value, json};

use crate::write::kube::KubeApi;
use crate::write::{Eviction, KubeWriter, MetaPatch, NodePatch, WriteError};

#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    content_type: String,
    body: Value,
}

type Log = Arc<Mutex<Vec<Seen>>>;

const CREATED: &str = include_str!("../../tests/fixtures/nodeclaim-create-response.json");
const EVICTION_429: &str = include_str!("../../tests/fixtures/eviction-429.json");
const EVICTION_201: &str = include_str!("../../tests/fixtures/eviction-201.json");
const NOT_FOUND: &str = include_str!("../../tests/fixtures/not-found-404.json");
const NODEPOOL: &str = include_str!("../../tests/fixtures/nodepool-patch-response.json");
const NODECLASS: &str = include_str!("../../tests/fixtures/ec2nodeclass-status-response.json");
const POD_DELETED: &str = include_str!("../../tests/fixtures/pod-delete-200.json");
const CONFLICT: &str = include_str!("../../tests/fixtures/conflict-409.json");

async fn handler(
    State(log): State<Log>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let path = uri.path().to_string();
    log.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: path.clone(),
        content_type: headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let (code, text) = match (method.as_str(), path.as_str()) {
        ("POST", "/apis/karpenter.sh/v1/nodeclaims") => (StatusCode::CREATED, CREATED),
        ("POST", "/api/v1/namespaces/default/pods/db/eviction") => {
            (StatusCode::TOO_MANY_REQUESTS, EVICTION_429)
        }
        ("POST", "/api/v1/namespaces/default/pods/web/eviction") => {
            (StatusCode::CREATED, EVICTION_201)
        }
        (_, p) if p.contains("default-gone1") => (StatusCode::NOT_FOUND, NOT_FOUND),
        ("DELETE", "/api/v1/namespaces/default/pods/web") => (StatusCode::OK, POD_DELETED),
        ("PATCH", p) if p.contains("default-stale") => (StatusCode::CONFLICT, CONFLICT),
        ("PATCH", p) if p.starts_with("/apis/karpenter.sh/v1/nodeclaims/") => {
            (StatusCode::OK, CREATED)
        }
        ("PATCH", "/api/v1/nodes/n1") => (
            StatusCode::OK,
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}"#,
        ),
        ("PATCH", p) if p.starts_with("/apis/karpenter.sh/v1/nodepools/default") => {
            (StatusCode::OK, NODEPOOL)
        }
        ("PATCH", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default/status")
        | ("PATCH", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default") => {
            (StatusCode::OK, NODECLASS)
        }
        _ => (StatusCode::NOT_FOUND, NOT_FOUND),
    };
    (
        code,
        [("content-type", "application/json")],
        text.to_string(),
    )
}

async fn server() -> (KubeApi, Log) {
    let log: Log = Arc::default();
    let app = Router::new().fallback(handler).with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let config = crate::write::kube::without_retry(kube::Config::new(
        format!("http://{addr}").parse().unwrap(),
    ));
    let client = kube::Client::try_from(config).unwrap();
    (KubeApi::new(client), log)
}

#[tokio::test]
async fn create_posts_the_claim_and_reads_the_stored_object() {
    let (api, log) = server().await;
    let claim: NodeClaim = serde_json::from_str(CREATED).unwrap();
    let mut request = claim.clone();
    request.metadata.uid = None;
    request.metadata.resource_version = None;
    request.metadata.creation_timestamp = None;
    let stored = api.create_nodeclaim(&request).await.unwrap();
    assert_eq!(
        stored.metadata.uid.as_deref(),
        Some("0d1f5a0e-2b9e-4b5e-8f5a-9f1f2c3d4e5f")
    );
    assert_eq!(stored.metadata.resource_version.as_deref(), Some("1530001"));
    let seen = log.lock().unwrap()[0].clone();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.content_type, "application/json");
    assert_eq!(seen.body["apiVersion"], "karpenter.sh/v1");
    assert_eq!(seen.body["kind"], "NodeClaim");
    assert_eq!(seen.body["metadata"]["name"], "default-x7k2p");
    assert_eq!(
        seen.body["metadata"]["finalizers"],
        json!(["karpenter.sh/termination"])
    );
    assert_eq!(seen.body["spec"]["nodeClassRef"]["kind"], "EC2NodeClass");
    assert!(seen.body["metadata"].get("uid").is_none());
}

#[tokio::test]
async fn status_and_metadata_are_merge_patches_on_the_right_paths() {
    let (api, log) = server().await;
    // The pod-event time of the copy the status came from is not this writer's to send.
    let status = NodeClaimStatus {
        provider_id: Some("aws:///us-west-2a/i-1".into()),
        last_pod_event_time: Some("2024-06-01T00:00:00Z".into()),
        ..Default::default()
    };
    api.patch_nodeclaim_status("default-x7k2p", &status, Some("41"))
        .await
        .unwrap();
    let mut meta = MetaPatch::default();
    meta.labels.insert("a".into(), Some("b".into()));
    meta.labels.insert("gone".into(), None);
    meta.finalizers = Some(vec![]);
    api.patch_nodeclaim_meta("default-x7k2p", &meta)
        .await
        .unwrap();
    let node = NodePatch {
        taints: Some(vec![]),
        ..Default::default()
    };
    api.patch_node("n1", &node).await.unwrap();
    api.patch_nodeclaim_pod_event_time("default-x7k2p", "2024-06-01T00:00:10Z")
        .await
        .unwrap();

    let seen = log.lock().unwrap().clone();
    assert_eq!(seen[0].method, "PATCH");
    assert_eq!(
        seen[0].path,
        "/apis/karpenter.sh/v1/nodeclaims/default-x7k2p/status"
    );
    assert_eq!(seen[0].content_type, "application/merge-patch+json");
    assert_eq!(
        seen[0].body,
        json!({
            "metadata": {"resourceVersion": "41"},
            "status": {"providerID": "aws:///us-west-2a/i-1"}
        })
    );
    assert_eq!(
        seen[1].path,
        "/apis/karpenter.sh/v1/nodeclaims/default-x7k2p"
    );
    assert_eq!(
        seen[1].body,
        json!({"metadata": {"labels": {"a": "b", "gone": null}, "finalizers": []}})
    );
    assert_eq!(seen[2].path, "/api/v1/nodes/n1");
    assert_eq!(
        seen[2].body,
        json!({"metadata": {}, "spec": {"taints": []}})
    );
    assert_eq!(seen[3].path, seen[0].path);
    assert_eq!(
        seen[3].body,
        json!({"status": {"lastPodEventTime": "2024-06-01T00:00:10Z"}})
    );
}

#[tokio::test]
async fn eviction_outcomes_follow_the_status_code() {
    let (api, log) = server().await;
    match api.evict_pod("default", "db").await.unwrap() {
        Eviction::Blocked(m) => assert!(m.contains("disruption budget"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        api.evict_pod("default", "web").await.unwrap(),
        Eviction::Evicted
    );
    assert_eq!(
        api.evict_pod("default", "default-gone1").await.unwrap(),
        Eviction::Gone
    );
    let seen = log.lock().unwrap()[0].clone();
    assert_eq!(seen.path, "/api/v1/namespaces/default/pods/db/eviction");
    assert_eq!(seen.body["kind"], "Eviction");
    assert_eq!(seen.body["apiVersion"], "policy/v1");
    assert_eq!(seen.body["metadata"]["name"], "db");
    assert_eq!(seen.body["metadata"]["namespace"], "default");
}

#[tokio::test]
async fn not_found_is_its_own_error() {
    let (api, _) = server().await;
    let e = api.delete_nodeclaim("default-gone1").await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert_eq!(
        e,
        WriteError::NotFound {
            kind: "NodeClaim".into(),
            name: "default-gone1".into()
        }
    );
}

#[tokio::test]
async fn nodepool_and_nodeclass_writes_are_merge_patches_on_the_right_paths() {
    let (api, log) = server().await;
    let mut meta = MetaPatch::default();
    meta.annotations.insert(
        "karpenter.sh/nodepool-hash".into(),
        Some("12786034405735297231".into()),
    );
    api.patch_nodepool_meta("default", &meta).await.unwrap();
    let status: nodewright_api::v1::nodepool::NodePoolStatus =
        serde_json::from_value(serde_json::from_str::<Value>(NODEPOOL).unwrap()["status"].clone())
            .unwrap();
    api.update_nodepool_status("default", &status)
        .await
        .unwrap();
    let class_status: nodewright_api::aws::v1::EC2NodeClassStatus =
        serde_json::from_value(serde_json::from_str::<Value>(NODECLASS).unwrap()["status"].clone())
            .unwrap();
    api.patch_nodeclass_status("default", &class_status)
        .await
        .unwrap();
    let e = api
        .patch_nodeclass_status("gone", &class_status)
        .await
        .unwrap_err();
    assert_eq!(
        e,
        WriteError::NotFound {
            kind: "EC2NodeClass".into(),
            name: "gone".into()
        }
    );

    let seen = log.lock().unwrap().clone();
    assert_eq!(seen[0].method, "PATCH");
    assert_eq!(seen[0].path, "/apis/karpenter.sh/v1/nodepools/default");
    assert_eq!(seen[0].content_type, "application/merge-patch+json");
    assert_eq!(
        seen[0].body,
        json!({"metadata": {"annotations": {"karpenter.sh/nodepool-hash": "12786034405735297231"}}})
    );
    assert_eq!(
        seen[1].path,
        "/apis/karpenter.sh/v1/nodepools/default/status"
    );
    assert_eq!(seen[1].body["status"]["nodes"], 2);
    assert_eq!(seen[1].body["status"]["resources"]["memory"], "32Gi");
    assert_eq!(seen[1].body["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(
        seen[2].path,
        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default/status"
    );
    assert_eq!(seen[2].content_type, "application/merge-patch+json");
    assert_eq!(
        seen[2].body["status"]["subnets"][0],
        json!({"id": "subnet-0123456789abcdef0", "zone": "us-west-2a", "zoneID": "usw2-az1"})
    );
    assert_eq!(seen[2].body["status"]["instanceProfile"], "demo_1234567890");
}

#[tokio::test]
async fn a_pod_is_deleted_with_the_grace_period_asked_for() {
    let (api, log) = server().await;
    api.delete_pod("default", "web", Some(7)).await.unwrap();
    let e = api
        .delete_pod("default", "default-gone1", Some(0))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen[0].method, "DELETE");
    assert_eq!(seen[0].path, "/api/v1/namespaces/default/pods/web");
    assert_eq!(seen[0].content_type, "application/json");
    // DeleteOptions in the body: only the grace period, so the pod's own propagation and
    // preconditions stay the API server's defaults.
    assert_eq!(seen[0].body, json!({"gracePeriodSeconds": 7}));
    // The API refuses nothing below zero, but 0 skips the kubelet: never less than 1 s.
    assert_eq!(
        seen[1].path,
        "/api/v1/namespaces/default/pods/default-gone1"
    );
    assert_eq!(seen[1].body, json!({"gracePeriodSeconds": 1}));
}

#[tokio::test]
async fn nodeclass_annotations_are_a_merge_patch_of_the_object_not_its_status() {
    let (api, log) = server().await;
    let mut meta = MetaPatch::default();
    meta.annotations.insert(
        "karpenter.k8s.aws/ec2nodeclass-hash".into(),
        Some("123".into()),
    );
    api.patch_nodeclass_meta("default", &meta).await.unwrap();
    let seen = log.lock().unwrap()[0].clone();
    assert_eq!(seen.method, "PATCH");
    assert_eq!(
        seen.path,
        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default"
    );
    assert_eq!(seen.content_type, "application/merge-patch+json");
    assert_eq!(
        seen.body,
        json!({"metadata": {"annotations": {"karpenter.k8s.aws/ec2nodeclass-hash": "123"}}})
    );
}

#[tokio::test]
async fn a_finalizer_write_carries_its_resource_version_and_a_stale_one_is_a_conflict() {
    let (api, log) = server().await;
    let meta = MetaPatch {
        finalizers: Some(vec![]),
        resource_version: Some("4242".into()),
        ..MetaPatch::default()
    };
    let e = api
        .patch_nodeclaim_meta("default-stale", &meta)
        .await
        .unwrap_err();
    assert!(e.is_conflict(), "{e:?}");
    assert!(!e.is_not_found());
    let seen = log.lock().unwrap()[0].clone();
    assert_eq!(seen.path, "/apis/karpenter.sh/v1/nodeclaims/default-stale");
    assert_eq!(seen.content_type, "application/merge-patch+json");
    assert_eq!(
        seen.body,
        json!({"metadata": {"finalizers": [], "resourceVersion": "4242"}})
    );
}

#[tokio::test]
async fn a_status_write_carries_its_resource_version_and_a_stale_one_is_a_conflict() {
    let (api, log) = server().await;
    let status = NodeClaimStatus {
        node_name: Some("n1".into()),
        ..Default::default()
    };
    let e = api
        .patch_nodeclaim_status("default-stale", &status, Some("4242"))
        .await
        .unwrap_err();
    assert!(e.is_conflict(), "{e:?}");
    let seen = log.lock().unwrap()[0].clone();
    assert_eq!(
        seen.path,
        "/apis/karpenter.sh/v1/nodeclaims/default-stale/status"
    );
    assert_eq!(
        seen.body,
        json!({"metadata": {"resourceVersion": "4242"}, "status": {"nodeName": "n1"}})
    );
}
