//! The simulated cloud's node agent (which `nodewright controller --cloud-provider sim` runs in
//! the controller process) against a local API stand-in that logs every request: through a
//! registration, a heartbeat and a deletion, a pod started and a pod's deletion confirmed,
//! each request must be allowed by
//! `permissions::SIM_NODE_AGENT`, and each verb that list grants must be used.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use nodewright_cloud::CloudProvider;
use nodewright_cloud_sim::kwok::{AgentConfig, NodeAgent, node_name};
use nodewright_cloud_sim::{FleetConfig, SimCloud, SimCloudConfig};
use nodewright_controller::permissions::{SIM_NODE_AGENT, allows};
use nodewright_testkit::json::merge_into;
use nodewright_testkit::k8s;
use serde_json::{Value, json};

#[derive(Default)]
struct Store {
    objects: BTreeMap<String, Value>,
    /// (method, path, query, content type)
    requests: Vec<(String, String, String, String)>,
}

type Shared = Arc<Mutex<Store>>;

fn reply(code: StatusCode, v: &Value) -> Response {
    (code, [("content-type", "application/json")], v.to_string()).into_response()
}

fn not_found() -> Response {
    reply(
        StatusCode::NOT_FOUND,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "reason": "NotFound", "code": 404, "message": "not found"}),
    )
}

/// Whether `key` is in the collection at `path`: directly under it, or, for a cluster-wide
/// list of a namespaced resource (`/api/v1/pods`), under any namespace's collection.
fn member(key: &str, path: &str) -> bool {
    let prefix = format!("{path}/");
    if key.starts_with(&prefix) && !key[prefix.len()..].contains('/') {
        return true;
    }
    let Some((group, resource)) = path.rsplit_once('/') else {
        return false;
    };
    key.strip_prefix(&format!("{group}/namespaces/"))
        .map(|rest| rest.split('/').collect::<Vec<_>>())
        .is_some_and(|parts| matches!(parts.as_slice(), [_, r, _] if *r == resource))
}

/// Objects by path; a GET of a collection lists what is stored under it, a watch stays open
/// without events; PATCH creates a missing object as server-side apply does; `/status` writes
/// land on the object.
async fn handle(
    store: Shared,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().trim_end_matches('/').to_string();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let query = uri.query().unwrap_or_default().to_string();
    let mut s = store.lock().unwrap();
    s.requests.push((
        method.to_string(),
        path.clone(),
        query.clone(),
        content_type.clone(),
    ));
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let object_path = path.trim_end_matches("/status").to_string();
    match method {
        Method::GET if query.contains("watch=true") => {
            let quiet = futures::stream::pending::<Result<Bytes, Infallible>>();
            (
                [("content-type", "application/json")],
                Body::from_stream(quiet),
            )
                .into_response()
        }
        Method::GET => {
            if let Some(o) = s.objects.get(&path) {
                return reply(StatusCode::OK, o);
            }
            let items: Vec<Value> = s
                .objects
                .iter()
                .filter(|(k, _)| member(k, &path))
                .map(|(_, v)| v.clone())
                .collect();
            reply(
                StatusCode::OK,
                &json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}),
            )
        }
        Method::POST => {
            let name = body["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let mut obj = body;
            obj["metadata"]["uid"] = json!(format!("uid-{name}"));
            obj["metadata"]["resourceVersion"] = json!("1");
            s.objects.insert(format!("{path}/{name}"), obj.clone());
            reply(StatusCode::CREATED, &obj)
        }
        Method::PATCH => {
            let entry = s
                .objects
                .entry(object_path)
                .or_insert_with(|| json!({"metadata": {}}));
            merge_into(entry, body);
            let obj = entry.clone();
            reply(StatusCode::OK, &obj)
        }
        Method::DELETE => match s.objects.remove(&path) {
            Some(o) => reply(StatusCode::OK, &o),
            None => not_found(),
        },
        _ => not_found(),
    }
}

/// One API request in RBAC terms: `(group, resource, verb, namespace)`.
fn rbac(
    method: &str,
    path: &str,
    query: &str,
    content_type: &str,
) -> Vec<(String, String, String, Option<String>)> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _, rest @ ..] => ("", rest),
        ["apis", g, _, rest @ ..] => (*g, rest),
        _ => panic!("not a resource path: {path}"),
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        other => (None, other),
    };
    let (resource, named) = match rest {
        [r] => (r.to_string(), false),
        [r, _] => (r.to_string(), true),
        [r, _, sub] => (format!("{r}/{sub}"), true),
        _ => panic!("unexpected path {path}"),
    };
    let watch = query.split('&').any(|p| p == "watch=true");
    let verbs: &[&str] = match (method, named) {
        ("GET", false) if watch => &["watch"],
        ("GET", true) => &["get"],
        ("GET", false) => &["list"],
        ("POST", _) => &["create"],
        ("PUT", _) => &["update"],
        // The API server authorizes an apply that finds no object as a create too.
        ("PATCH", _) if content_type.starts_with("application/apply-patch") => &["patch", "create"],
        ("PATCH", _) => &["patch"],
        ("DELETE", _) => &["delete"],
        _ => panic!("unexpected method {method}"),
    };
    verbs
        .iter()
        .map(|v| {
            (
                group.to_string(),
                resource.clone(),
                v.to_string(),
                ns.clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_agent_uses_exactly_the_permissions_listed_for_it() {
    let store: Shared = Arc::default();
    let mut claim = k8s::nodeclaim("default-abcde");
    claim["metadata"]["labels"] = json!({"karpenter.sh/nodepool": "default"});
    store.lock().unwrap().objects.insert(
        "/apis/karpenter.sh/v1/nodeclaims/default-abcde".into(),
        claim.clone(),
    );
    let shared = store.clone();
    let app = Router::new().fallback(move |m: Method, u: Uri, h: HeaderMap, b: Bytes| {
        let s = shared.clone();
        async move { handle(s, m, u, h, b).await }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client =
        kube::Client::try_from(kube::Config::new(format!("http://{addr}").parse().unwrap()))
            .unwrap();

    let cloud = Arc::new(
        SimCloud::new(SimCloudConfig {
            fleet: FleetConfig {
                launch_delay: Duration::ZERO,
                termination_delay: Duration::ZERO,
                ..FleetConfig::default()
            },
            ..SimCloudConfig::default()
        })
        .unwrap(),
    );
    let claim = serde_json::from_value(claim).unwrap();
    let launched = cloud.create(&claim, None).await.unwrap();
    // Two pods the scheduler bound to the Node the agent is about to register: one to start,
    // one being deleted.
    let node = node_name(&launched.instance.provider_id);
    for (name, terminating) in [("web-1", false), ("web-2", true)] {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "web", "uid": format!("uid-{name}"),
                         "resourceVersion": "1"},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]},
            "status": {"phase": "Pending"}
        });
        if terminating {
            pod["metadata"]["deletionTimestamp"] = json!("2023-11-14T22:13:20Z");
        }
        store
            .lock()
            .unwrap()
            .objects
            .insert(format!("/api/v1/namespaces/web/pods/{name}"), pod);
    }
    let mut agent = NodeAgent::new(
        cloud.clone(),
        client,
        AgentConfig {
            registration_delay: Duration::ZERO,
            interval: Duration::from_millis(10),
            heartbeat: Duration::ZERO,
            status_report: Duration::ZERO,
        },
    );
    let count = |method: &str, needle: &str| {
        store
            .lock()
            .unwrap()
            .requests
            .iter()
            .filter(|(m, p, _, _)| m == method && p.contains(needle))
            .count()
    };
    agent.wait_for_watches().await;
    // Registers the Node (create, status, lease), starts one pod and deletes the other ...
    agent.reconcile().await.unwrap();
    assert_eq!(count("POST", "/api/v1/nodes"), 1, "registered");
    assert_eq!(count("PATCH", "/pods/web-1/status"), 1, "started");
    assert_eq!(count("DELETE", "/pods/web-2"), 1, "deletion confirmed");
    // ... heartbeats it ...
    agent.reconcile().await.unwrap();
    assert!(count("PATCH", "/status") >= 2, "heartbeat");
    // ... and deletes it with its lease once the instance has terminated.
    cloud.delete(&launched.instance.provider_id).await.unwrap();
    agent.reconcile().await.unwrap();
    assert_eq!(count("DELETE", "/api/v1/nodes/"), 1);
    assert_eq!(count("DELETE", "/leases/"), 1);
    // Each watch follows its list once the list is in.
    for _ in 0..500 {
        let watched = |path: &str| {
            store
                .lock()
                .unwrap()
                .requests
                .iter()
                .any(|(m, p, q, _)| m == "GET" && p == path && q.contains("watch=true"))
        };
        let paths = [
            "/api/v1/pods",
            "/api/v1/nodes",
            "/apis/karpenter.sh/v1/nodeclaims",
        ];
        if paths.into_iter().all(watched) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let seen: BTreeSet<_> = store
        .lock()
        .unwrap()
        .requests
        .iter()
        .flat_map(|(m, p, q, c)| rbac(m, p, q, c))
        .collect();
    for (g, r, v, ns) in &seen {
        assert!(
            allows(SIM_NODE_AGENT, g, r, v, ns.as_deref(), "unused"),
            "{g}/{r} {v} in {ns:?} is not in SIM_NODE_AGENT"
        );
    }
    for p in SIM_NODE_AGENT {
        for v in p.verbs {
            assert!(
                seen.iter()
                    .any(|(g, r, sv, _)| g == p.group && r == p.resource && sv == v),
                "{}/{} {v} is listed but never used",
                p.group,
                p.resource
            );
        }
    }
}
