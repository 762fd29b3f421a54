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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rustls::pki_types::ServerName;
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;
    use crate::webhook::cert;

    /// One request over TLS, trusting only `ca_pem`; the raw response.
    async fn call(port: u16, ca_pem: &str, request: String) -> String {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap_or_default();
        String::from_utf8_lossy(&out).into_owned()
    }

    fn post(body: &str) -> String {
        format!(
            "POST /convert HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    #[tokio::test]
    async fn answers_reviews_over_tls_and_survives_garbage() {
        let id = cert::generate(&["127.0.0.1".into()]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(serve(listener, cert::server_config(&id).unwrap()));

        // Not TLS at all: the connection is dropped, the server goes on.
        let mut plain = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        plain.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut sink)).await;

        let review = r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"karpenter.sh/v1","objects":[{"apiVersion":"karpenter.sh/v1beta1","kind":"NodePool","metadata":{"name":"p"},"spec":{}}]}}"#;
        let ok = call(port, &id.ca_pem, post(review)).await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(
            ok.contains(r#""status":"Success""#)
                && ok.contains(r#""apiVersion":"karpenter.sh/v1""#),
            "{ok}"
        );

        let bad = call(port, &id.ca_pem, post("{\"objects\": 3")).await;
        assert!(
            bad.starts_with("HTTP/1.1 200") && bad.contains(r#""status":"Failure""#),
            "{bad}"
        );

        let health = call(
            port,
            &id.ca_pem,
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(),
        )
        .await;
        assert!(
            health.starts_with("HTTP/1.1 200") && health.ends_with("ok"),
            "{health}"
        );
    }
}
