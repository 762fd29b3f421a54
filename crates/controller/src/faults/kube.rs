//! The Kubernetes edge: a tower layer between the controller's clients and kube's HTTP stack
//! (below the `KUBE_CLIENT_QPS` throttle, as a flaky network sits below client-go's rate
//! limiter) that fails the calls its [`Injector`] picks. Throttling and server errors come
//! back as the API server's own `Status` answers (429 with `Retry-After`, 500), so the
//! controller's error handling sees what a real server sends. The layer wraps kube's whole
//! stack, its retry of 429s included, so every fault reaches the controller's own code.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use kube::client::{Body, DynBody};
use tower::{BoxError, Layer, Service};

use super::{Fault, Injected, Injector};

/// The layer; clone it into each client that should see faults.
#[derive(Clone)]
pub struct KubeFaults(pub Arc<Injector>);

impl<S> Layer<S> for KubeFaults {
    type Service = Faulty<S>;
    fn layer(&self, inner: S) -> Faulty<S> {
        Faulty {
            inner,
            injector: self.0.clone(),
        }
    }
}

pub struct Faulty<S> {
    inner: S,
    injector: Arc<Injector>,
}

type Answer = Response<Box<DynBody>>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The API server's `Status` answer for a refused call.
fn status(code: StatusCode, reason: &str, message: &str) -> Answer {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    let body = http_body_util::Full::new(Bytes::from(body.to_string()))
        .map_err(|never| -> BoxError { match never {} });
    let mut answer = Response::new(Box::new(body) as Box<DynBody>);
    *answer.status_mut() = code;
    let headers = answer.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if code == StatusCode::TOO_MANY_REQUESTS {
        headers.insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
    }
    answer
}

impl<S> Service<Request<Body>> for Faulty<S>
where
    S: Service<Request<Body>, Response = Answer, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Answer;
    type Error = BoxError;
    type Future = BoxFuture<Result<Answer, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        match self.injector.draw() {
            None => Box::pin(self.inner.call(request)),
            Some(Fault::Throttled) => Box::pin(std::future::ready(Ok(status(
                StatusCode::TOO_MANY_REQUESTS,
                "TooManyRequests",
                "injected fault: too many requests, please try again later",
            )))),
            Some(Fault::ServerError) => Box::pin(std::future::ready(Ok(status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "injected fault: internal error",
            )))),
            Some(Fault::Timeout) => {
                let wait = self.injector.timeout;
                Box::pin(async move {
                    tokio::time::sleep(wait).await;
                    Err(Injected::of(Fault::Timeout).into())
                })
            }
            Some(Fault::Dropped) => {
                // Sent and carried out; only the answer is lost.
                let sent = self.inner.call(request);
                Box::pin(async move {
                    let _ = sent.await;
                    Err(Injected::of(Fault::Dropped).into())
                })
            }
        }
    }
}
