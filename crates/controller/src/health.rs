//! The two HTTP servers Karpenter's chart expects: `/metrics` on the metrics port (8080) and
//! `/healthz`, `/readyz` on the health-probe port (8081). `/healthz` answers while the
//! process serves at all; `/readyz` only once the controller says it is ready (caches
//! synced), so a rollout waits for a replica that can actually act.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::metrics::Metrics;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Routes for `GET /metrics`.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .with_state(metrics)
}

/// Routes for `GET /healthz` and `GET /readyz`.
pub fn health_router(ready: watch::Receiver<bool>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(ready)
}

async fn metrics_handler(State(metrics): State<Arc<Metrics>>) -> Response {
    ([(header::CONTENT_TYPE, OPENMETRICS)], metrics.encode()).into_response()
}

async fn readyz(State(ready): State<watch::Receiver<bool>>) -> Response {
    if *ready.borrow() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response()
    }
}

/// All three endpoints on one address.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    ready: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let router = metrics_router(metrics).merge(health_router(ready));
    axum::serve(TcpListener::bind(addr).await?, router).await
}

pub async fn serve_metrics(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    serve_metrics_on(TcpListener::bind(addr).await?, metrics).await
}

pub async fn serve_health(addr: SocketAddr, ready: watch::Receiver<bool>) -> std::io::Result<()> {
    serve_health_on(TcpListener::bind(addr).await?, ready).await
}

/// As [`serve_metrics`] on a listener the caller bound (port 0 in tests).
pub async fn serve_metrics_on(listener: TcpListener, metrics: Arc<Metrics>) -> std::io::Result<()> {
    axum::serve(listener, metrics_router(metrics)).await
}

/// As [`serve_health`] on a listener the caller bound.
pub async fn serve_health_on(
    listener: TcpListener,
    ready: watch::Receiver<bool>,
) -> std::io::Result<()> {
    axum::serve(listener, health_router(ready)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// A minimal HTTP/1.1 GET; returns (status, headers and body as text).
    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status line");
        (status, response)
    }

    async fn local() -> (TcpListener, SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        (listener, addr)
    }

    #[tokio::test]
    async fn metrics_are_served_as_openmetrics() {
        let metrics = Arc::new(Metrics::new());
        metrics
            .provisioner
            .nodeclaim_created("provisioned", "default", false);
        let (listener, addr) = local().await;
        tokio::spawn(serve_metrics_on(listener, metrics.clone()));
        let (status, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            body.to_lowercase()
                .contains("content-type: application/openmetrics-text")
        );
        assert!(body.contains(
            r#"karpenter_nodeclaims_created_total{reason="provisioned",nodepool="default",min_values_relaxed="false"} 1"#
        ));
        let (status, _) = get(addr, "/nope").await;
        assert_eq!(status, 404);
    }

    #[tokio::test]
    async fn readyz_follows_the_ready_signal() {
        let (tx, rx) = watch::channel(false);
        let (listener, addr) = local().await;
        tokio::spawn(serve_health_on(listener, rx));
        assert_eq!(get(addr, "/healthz").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 503);
        tx.send(true).unwrap();
        assert_eq!(get(addr, "/readyz").await.0, 200);
        tx.send(false).unwrap();
        assert_eq!(get(addr, "/readyz").await.0, 503);
    }

    #[tokio::test]
    async fn one_server_can_carry_everything() {
        let (_tx, rx) = watch::channel(true);
        let (listener, addr) = local().await;
        let router = metrics_router(Arc::new(Metrics::new())).merge(health_router(rx));
        tokio::spawn(async move { axum::serve(listener, router).await });
        assert_eq!(get(addr, "/metrics").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 200);
    }
}
