//! A minimal API server on 127.0.0.1 for the agent's tests: objects by path; lists, also
//! cluster-wide lists of namespaced resources; merge patches; watches that stream every
//! change (and can be held back, to play a lagging watch); metadata-only lists and watches
//! when the client asks for them; and pod deletion as the API server does it (a delete with
//! a grace period only marks the pod, one with `gracePeriodSeconds: 0` removes it) with uid
//! preconditions.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use nodewright_testkit::json::merge_into;
use serde_json::{Value, json};

use super::node::AGENT_LABEL;

#[derive(Default)]
pub struct State {
    /// Objects by path, e.g. `/api/v1/namespaces/web/pods/web-1`.
    pub objects: BTreeMap<String, Value>,
    /// Every request as `METHOD path?query`.
    pub requests: Vec<String>,
    /// While true, the next status patch fails with a 500.
    pub fail_next_status: bool,
    /// While true, open watches send nothing; once false they send what changed meanwhile.
    pub watches_held: bool,
    /// While true, every list fails with a 500.
    pub lists_fail: bool,
    /// How long each write is held before it is answered, so that writes sent at once are
    /// seen in flight together.
    pub write_delay: Duration,
    /// Writes being answered now, and the most at any moment since last reset.
    pub writes_in_flight: usize,
    pub most_writes_in_flight: usize,
}

pub type Shared = Arc<Mutex<State>>;

static RESOURCE_VERSION: AtomicU64 = AtomicU64::new(1);

fn next_version() -> String {
    RESOURCE_VERSION.fetch_add(1, Ordering::Relaxed).to_string()
}

fn reply(code: u16, v: Value) -> Response {
    (
        StatusCode::from_u16(code).unwrap(),
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn failure(code: u16, reason: &str) -> Response {
    reply(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "reason": reason, "code": code, "message": reason}),
    )
}

/// Whether the object at `key` belongs to the collection at `path`: directly under it, or,
/// for a cluster-wide list such as `/api/v1/pods`, under any namespace's collection.
fn member(key: &str, path: &str) -> bool {
    if key.rsplit_once('/').is_some_and(|(dir, _)| dir == path) {
        return true;
    }
    let Some((prefix, resource)) = path.rsplit_once('/') else {
        return false;
    };
    let Some(rest) = key.strip_prefix(&format!("{prefix}/namespaces/")) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    matches!(parts.as_slice(), [_, r, _] if *r == resource)
}

fn list(s: &State, path: &str, query: &str) -> BTreeMap<String, Value> {
    let selector = query.contains("labelSelector");
    s.objects
        .iter()
        .filter(|(k, v)| {
            member(k, path) && (!selector || v["metadata"]["labels"][AGENT_LABEL] == "true")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whether the client asked for metadata only (`PartialObjectMetadata`), as a metadata
/// watch does through its Accept header.
fn meta_only(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("as=PartialObjectMetadata"))
}

/// What a metadata-only request gets of `object`.
fn metadata(object: &Value) -> Value {
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": object["metadata"]})
}

fn event(type_: &str, mut object: Value) -> String {
    if object["metadata"]["resourceVersion"].is_null() {
        object["metadata"]["resourceVersion"] = json!(next_version());
    }
    format!("{}\n", json!({"type": type_, "object": object}))
}

/// Streams the changes to the collection, polling the store, until the client hangs up.
fn watch(shared: Shared, path: String, query: String, meta: bool) -> Response {
    let start = list(&shared.lock().unwrap(), &path, &query);
    let changes = futures::stream::unfold(start, move |mut last| {
        let (shared, path, query) = (shared.clone(), path.clone(), query.clone());
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let now = {
                    let s = shared.lock().unwrap();
                    if s.watches_held {
                        continue;
                    }
                    list(&s, &path, &query)
                };
                let line = |type_: &str, v: &Value| {
                    event(type_, if meta { metadata(v) } else { v.clone() })
                };
                let mut lines = String::new();
                for (k, v) in &now {
                    match last.get(k) {
                        None => lines.push_str(&line("ADDED", v)),
                        Some(old) if old != v => lines.push_str(&line("MODIFIED", v)),
                        Some(_) => {}
                    }
                }
                for (k, v) in &last {
                    if !now.contains_key(k) {
                        lines.push_str(&line("DELETED", v));
                    }
                }
                last = now;
                if !lines.is_empty() {
                    return Some((Ok::<_, Infallible>(Bytes::from(lines)), last));
                }
            }
        }
    });
    (
        [("content-type", "application/json")],
        Body::from_stream(changes),
    )
        .into_response()
}

async fn handle(
    shared: Shared,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let query = uri.query().unwrap_or("").to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut s = shared.lock().unwrap();
    s.requests.push(format!("{method} {path}?{query}"));
    match method {
        Method::GET if query.contains("watch=true") => {
            drop(s);
            watch(shared.clone(), path, query, meta_only(&headers))
        }
        Method::GET => {
            if let Some(o) = s.objects.get(&path) {
                return reply(200, o.clone());
            }
            if s.lists_fail {
                return failure(500, "InternalError");
            }
            let mut items: Vec<Value> = list(&s, &path, &query).into_values().collect();
            if meta_only(&headers) {
                items = items.iter().map(metadata).collect();
            }
            reply(
                200,
                json!({"apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": next_version()}, "items": items}),
            )
        }
        Method::POST => {
            let key = format!("{path}/{}", body["metadata"]["name"].as_str().unwrap());
            if s.objects.contains_key(&key) {
                return failure(409, "AlreadyExists");
            }
            let mut obj = body;
            // Status is a subresource: the API server drops it on create.
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
            obj["metadata"]["uid"] = json!(format!("uid-{}", s.objects.len()));
            obj["metadata"]["resourceVersion"] = json!(next_version());
            s.objects.insert(key, obj.clone());
            reply(201, obj)
        }
        Method::PATCH => {
            if path.ends_with("/status") && s.fail_next_status {
                s.fail_next_status = false;
                return failure(500, "InternalError");
            }
            let key = path.trim_end_matches("/status").to_owned();
            let apply = headers
                .get("content-type")
                .is_some_and(|c| c.to_str().unwrap_or("").contains("apply-patch"));
            match s.objects.get_mut(&key) {
                Some(current) => {
                    let uid = &body["metadata"]["uid"];
                    if !uid.is_null() && *uid != current["metadata"]["uid"] {
                        return failure(422, "Invalid");
                    }
                    merge_into(current, body);
                    current["metadata"]["resourceVersion"] = json!(next_version());
                    reply(200, current.clone())
                }
                None if apply => {
                    s.objects.insert(key, body.clone());
                    reply(201, body)
                }
                None => failure(404, "NotFound"),
            }
        }
        Method::DELETE => {
            let Some(current) = s.objects.get_mut(&path) else {
                return failure(404, "NotFound");
            };
            let uid = &body["preconditions"]["uid"];
            if !uid.is_null() && *uid != current["metadata"]["uid"] {
                return failure(409, "Conflict");
            }
            if path.contains("/pods/") && body["gracePeriodSeconds"] != 0 {
                current["metadata"]["deletionTimestamp"] = json!("2023-11-14T22:13:20Z");
                current["metadata"]["resourceVersion"] = json!(next_version());
                return reply(200, current.clone());
            }
            let removed = s.objects.remove(&path).unwrap();
            reply(200, removed)
        }
        _ => failure(404, "NotFound"),
    }
}

/// Serves `shared` on a free port of 127.0.0.1 and returns a client for it.
pub async fn server(shared: Shared) -> kube::Client {
    let app = axum::Router::new().fallback(move |m: Method, u: Uri, h: HeaderMap, b: Bytes| {
        let shared = shared.clone();
        async move {
            if m == Method::GET {
                return handle(shared, m, u, h, b).await;
            }
            let delay = {
                let mut s = shared.lock().unwrap();
                s.writes_in_flight += 1;
                s.most_writes_in_flight = s.most_writes_in_flight.max(s.writes_in_flight);
                s.write_delay
            };
            tokio::time::sleep(delay).await;
            let answer = handle(shared.clone(), m, u, h, b).await;
            shared.lock().unwrap().writes_in_flight -= 1;
            answer
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    kube::Client::try_from(kube::Config::new(format!("http://{addr}").parse().unwrap())).unwrap()
}
