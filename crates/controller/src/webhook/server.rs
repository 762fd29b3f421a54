//! The webhook's TLS server: ConversionReviews are POSTed (to any path: the CRDs name it), and
//! `GET /healthz` answers `ok`. Each connection is served on a task of its own; one that fails
//! its handshake or sends garbage is dropped and logged, never the server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

/// The largest review accepted: the API server converts a whole list page at once.
const MAX_BODY: usize = 64 << 20;

/// Serves on `listener` until the process stops.
pub async fn serve(listener: TcpListener, tls: Arc<rustls::ServerConfig>) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (tcp, peer) = listener.accept().await?;
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(s) => s,
                Err(e) => {
                    debug!(%peer, error = %e, "webhook TLS handshake failed");
                    return;
                }
            };
            let service = hyper::service::service_fn(handle);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, error = %e, "webhook connection ended with an error");
            }
        });
    }
}

/// Binds `addr` and serves.
pub async fn bind_and_serve(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
) -> std::io::Result<()> {
    serve(TcpListener::bind(addr).await?, tls).await
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, content_type: &str, body: Vec<u8>| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = content_type.parse() {
            r.headers_mut().insert(CONTENT_TYPE, v);
        }
        Ok(r)
    };
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/healthz") => reply(StatusCode::OK, "text/plain", b"ok".to_vec()),
        (&Method::POST, _) => match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(body) => reply(
                StatusCode::OK,
                "application/json",
                super::review::answer(&body.to_bytes()),
            ),
            Err(e) => reply(
                StatusCode::PAYLOAD_TOO_LARGE,
                "text/plain",
                format!("reading the review: {e}").into_bytes(),
            ),
        },
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            b"POST a ConversionReview".to_vec(),
        ),
    }
}
