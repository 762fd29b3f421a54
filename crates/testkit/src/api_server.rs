//! A Kubernetes API server stand-in on 127.0.0.1 for tests of code that is itself the HTTP
//! side of the API: the controller's kube-rs writer, lease store, event sink, watches and
//! webhook setup, and the simulator's node agent. It keeps objects as JSON by path and serves
//! create (409 AlreadyExists), get, replace (409 Conflict on a stale `resourceVersion`), merge
//! patch, delete (a pod's graceful delete only marks it; uid preconditions), lists (cluster-wide
//! ones of namespaced resources too, with equality label selectors), watches that stream every
//! change, and metadata-only lists and watches. It logs every request, and has switches to
//! fail, delay or hold back answers.
//!
//! It is not the controller's `memory.rs` and cannot be: that one implements the `KubeWriter`
//! trait in process, so the loops' tests never reach HTTP, and it ships (`bench controller`
//! runs on it). Requests, status codes and watch streams are only exercised by a server
//! answering over a socket.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::json::merge_into;
use crate::port::free_port;

/// What the server holds; a test reads and changes it directly (watches report its changes).
#[derive(Default)]
pub struct State {
    /// Objects by path, e.g. `/api/v1/namespaces/web/pods/web-1`.
    pub objects: BTreeMap<String, Value>,
    /// Every request as `METHOD path?query`; the `?` is always there, so that
    /// `GET /api/v1/nodes?` matches requests of that collection alone.
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

/// Serves an empty [`State`] on a free port of 127.0.0.1; returns a client for it and the state.
pub async fn start() -> (kube::Client, Shared) {
    let shared = Shared::default();
    let state = shared.clone();
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
    // A port found free may be taken before it is bound; another is then found.
    let listener = loop {
        if let Ok(l) = tokio::net::TcpListener::bind(("127.0.0.1", free_port())).await {
            break l;
        }
    };
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    (client, state)
}

async fn handle(
    shared: Shared,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().trim_end_matches('/').to_owned();
    let query = uri.query().unwrap_or("").to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let meta = meta_only(&headers);
    let mut s = shared.lock().unwrap();
    s.requests.push(format!("{method} {path}?{query}"));
    match method {
        Method::GET if query.contains("watch=true") => {
            drop(s);
            watch(shared.clone(), path, query, meta)
        }
        Method::GET => get(&s, &path, &query, meta),
        Method::POST => create(&mut s, &path, body),
        Method::PUT => replace(&mut s, &path, body),
        Method::PATCH => patch(&mut s, &path, body, &headers),
        Method::DELETE => delete(&mut s, &path, &body),
        _ => failure(405, "MethodNotAllowed"),
    }
}

/// One object, or the list of a collection.
fn get(s: &State, path: &str, query: &str, meta: bool) -> Response {
    if let Some(o) = s.objects.get(path) {
        return reply(200, shown(o, meta));
    }
    if !is_collection(path) {
        return failure(404, "NotFound");
    }
    if s.lists_fail {
        return failure(500, "InternalError");
    }
    let items: Vec<Value> = list(s, path, query)
        .values()
        .map(|v| shown(v, meta))
        .collect();
    let version = json!({"resourceVersion": next_version()});
    reply(
        200,
        json!({"apiVersion": "v1", "kind": "List", "metadata": version, "items": items}),
    )
}

/// POST to a collection. Status is a subresource: the API server drops it on create.
fn create(s: &mut State, path: &str, mut obj: Value) -> Response {
    let key = format!("{path}/{}", obj["metadata"]["name"].as_str().unwrap_or(""));
    if s.objects.contains_key(&key) {
        return failure(409, "AlreadyExists");
    }
    if let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
    let version = next_version();
    obj["metadata"]["uid"] = json!(format!("uid-{version}"));
    obj["metadata"]["resourceVersion"] = json!(version);
    s.objects.insert(key, obj.clone());
    reply(201, obj)
}

/// PUT, refused unless it carries the stored `resourceVersion`: the optimistic concurrency
/// the lease store relies on.
fn replace(s: &mut State, path: &str, mut obj: Value) -> Response {
    let key = path.trim_end_matches("/status");
    let Some(current) = s.objects.get_mut(key) else {
        return failure(404, "NotFound");
    };
    if current["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"] {
        return failure(409, "Conflict");
    }
    obj["metadata"]["resourceVersion"] = json!(next_version());
    *current = obj.clone();
    reply(200, obj)
}

/// A merge patch, of the object or its status (which lives in it); a server-side apply of an
/// object not there creates it. A `metadata.uid` in the body is a precondition.
fn patch(s: &mut State, path: &str, body: Value, headers: &HeaderMap) -> Response {
    if path.ends_with("/status") && std::mem::take(&mut s.fail_next_status) {
        return failure(500, "InternalError");
    }
    let key = path.trim_end_matches("/status");
    let apply = headers
        .get("content-type")
        .is_some_and(|c| c.to_str().unwrap_or("").contains("apply-patch"));
    match s.objects.get_mut(key) {
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
            s.objects.insert(key.to_owned(), body.clone());
            reply(201, body)
        }
        None => failure(404, "NotFound"),
    }
}

/// DELETE, with uid preconditions. As the API server does, a pod deleted with a grace period
/// is only marked, for its kubelet to stop; `gracePeriodSeconds: 0` removes it.
fn delete(s: &mut State, path: &str, body: &Value) -> Response {
    let Some(current) = s.objects.get_mut(path) else {
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
    reply(200, s.objects.remove(path).unwrap())
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
                let line = |type_: &str, v: &Value| event(type_, shown(v, meta));
                let mut lines = String::new();
                for (k, v) in &now {
                    match last.get(k) {
                        None => lines.push_str(&line("ADDED", v)),
                        Some(old) if old != v => lines.push_str(&line("MODIFIED", v)),
                        Some(_) => {}
                    }
                }
                for (_, v) in last.iter().filter(|(k, _)| !now.contains_key(*k)) {
                    lines.push_str(&line("DELETED", v));
                }
                last = now;
                if !lines.is_empty() {
                    return Some((Ok::<_, Infallible>(Bytes::from(lines)), last));
                }
            }
        }
    });
    let content_type = [("content-type", "application/json")];
    (content_type, Body::from_stream(changes)).into_response()
}

/// A watch event's line. kube-rs refuses an event without a `resourceVersion`, which objects
/// a test put in the store itself may lack.
fn event(type_: &str, mut object: Value) -> String {
    if object["metadata"]["resourceVersion"].is_null() {
        object["metadata"]["resourceVersion"] = json!(next_version());
    }
    format!("{}\n", json!({"type": type_, "object": object}))
}

/// The objects of the collection at `path` its `labelSelector` selects, by path.
fn list(s: &State, path: &str, query: &str) -> BTreeMap<String, Value> {
    let selector = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "labelSelector")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    s.objects
        .iter()
        .filter(|(k, v)| member(k, path) && selects(&selector, &v["metadata"]["labels"]))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whether an equality-based selector (`k=v` or `k==v` terms, comma-separated; empty for
/// all) selects `labels`. Other terms are not served: a test using them fails loudly.
fn selects(selector: &str, labels: &Value) -> bool {
    let terms = selector.split(',').filter(|t| !t.is_empty());
    terms.map(|t| t.split_once('=')).all(|term| match term {
        Some((k, v)) if !k.ends_with('!') => labels[k] == v.trim_start_matches('='),
        _ => panic!("only equality label selectors are served: {selector}"),
    })
}

/// Whether `path` is a collection (`/api/v1/nodes`, `/apis/g/v/namespaces/ns/leases`), not
/// an object or a subresource; only a collection is listed when nothing is stored there.
fn is_collection(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let rest = match segments.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => return false,
    };
    matches!(rest, [_] | ["namespaces", _, _])
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

/// Whether the client asked for metadata only (`PartialObjectMetadata`), as a metadata
/// watch does through its Accept header.
fn meta_only(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("as=PartialObjectMetadata"))
}

/// `object` as a request gets it: whole, or only its metadata.
fn shown(object: &Value, meta: bool) -> Value {
    if !meta {
        return object.clone();
    }
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": object["metadata"]})
}

/// A `resourceVersion` no object of this process has had.
fn next_version() -> String {
    static VERSION: AtomicU64 = AtomicU64::new(1);
    VERSION.fetch_add(1, Ordering::Relaxed).to_string()
}

fn reply(code: u16, v: Value) -> Response {
    let code = StatusCode::from_u16(code).unwrap();
    (code, [("content-type", "application/json")], v.to_string()).into_response()
}

/// A `Status` failure, as kube-rs decodes into `kube::Error::Api`.
fn failure(code: u16, reason: &str) -> Response {
    reply(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "reason": reason, "code": code, "message": reason}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_holds_its_collection_or_every_namespace_s_and_what_its_selector_selects() {
        let pod = |ns: &str, labels: Value| {
            let object = json!({"metadata": {"labels": labels}});
            (format!("/api/v1/namespaces/{ns}/pods/p"), object)
        };
        let objects = [pod("web", json!({"a/b": "true"})), pod("db", json!({}))];
        let s = State {
            objects: BTreeMap::from(objects),
            ..State::default()
        };
        for (path, query, listed) in [
            ("/api/v1/pods", "", 2),
            ("/api/v1/namespaces/web/pods", "", 1),
            ("/api/v1/namespaces/web/secrets", "", 0),
            ("/api/v1/pods", "labelSelector=a%2Fb%3Dtrue&watch=true", 1),
            ("/api/v1/pods", "labelSelector=a%2Fb%3D%3Dfalse", 0),
        ] {
            assert_eq!(list(&s, path, query).len(), listed, "{path}?{query}");
        }
        for (path, collection) in [
            ("/api/v1/pods", true),
            ("/apis/g/v1/namespaces/ns/leases", true),
            ("/apis/g/v1/namespaces/ns/leases/l", false),
            ("/api/v1/nodes/n/status", false),
        ] {
            assert_eq!(is_collection(path), collection, "{path}");
        }
    }
}
