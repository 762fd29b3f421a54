//! A tiny stand-in for the Kubernetes API server on 127.0.0.1, for tests of the kube-backed
//! sinks and stores: create (POST, 409 when the name exists), get, replace (PUT, 409 on a
//! stale `resourceVersion`) and merge-patch of objects under any path, with every request
//! logged so tests can count writes.
//!
//! It is not `memory.rs` and cannot be: that one implements the `KubeWriter` trait in
//! process and feeds the index, so the loops' tests never reach HTTP, and it ships (the
//! `bench controller` command runs on it). This one is for the code that is itself the HTTP
//! side, the kube-rs event sink, the lease and the kube-rs writer's requests, which only a
//! server answering over a socket can exercise.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use nodewright_testkit::json::merge_into;
use serde_json::{Value, json};

#[derive(Default)]
pub struct State {
    pub objects: BTreeMap<String, Value>,
    pub requests: Vec<(String, String)>,
    version: u64,
}

pub type Shared = Arc<Mutex<State>>;

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(code: StatusCode, v: &Value) -> Response {
    (code, [("content-type", "application/json")], v.to_string()).into_response()
}

async fn handle(state: Shared, method: Method, uri: Uri, body: Bytes) -> Response {
    let path = uri.path().trim_end_matches('/').to_owned();
    let mut s = state.lock().unwrap();
    s.requests.push((method.to_string(), path.clone()));
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match method {
        Method::POST => {
            let name = body["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let key = format!("{path}/{name}");
            if s.objects.contains_key(&key) {
                return status(409, "AlreadyExists", "already exists");
            }
            s.version += 1;
            let mut obj = body;
            obj["metadata"]["resourceVersion"] = json!(s.version.to_string());
            s.objects.insert(key, obj.clone());
            ok(StatusCode::CREATED, &obj)
        }
        Method::GET => match s.objects.get(&path) {
            Some(obj) => ok(StatusCode::OK, obj),
            None => status(404, "NotFound", "not found"),
        },
        Method::PUT => {
            let Some(current) = s.objects.get(&path) else {
                return status(404, "NotFound", "not found");
            };
            if current["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"] {
                return status(409, "Conflict", "the object has been modified");
            }
            s.version += 1;
            let mut obj = body;
            obj["metadata"]["resourceVersion"] = json!(s.version.to_string());
            s.objects.insert(path, obj.clone());
            ok(StatusCode::OK, &obj)
        }
        Method::PATCH => {
            s.version += 1;
            let version = s.version.to_string();
            let Some(current) = s.objects.get_mut(&path) else {
                return status(404, "NotFound", "not found");
            };
            merge_into(current, body);
            current["metadata"]["resourceVersion"] = json!(version);
            let obj = current.clone();
            ok(StatusCode::OK, &obj)
        }
        _ => status(405, "MethodNotAllowed", "method not allowed"),
    }
}

/// Starts the server and returns a client for it plus its state.
pub async fn start() -> (kube::Client, Shared) {
    let state: Shared = Arc::default();
    let shared = state.clone();
    let app = Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        let state = shared.clone();
        async move { handle(state, method, uri, body).await }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    (client, state)
}
