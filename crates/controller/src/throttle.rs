//! `KUBE_CLIENT_QPS` and `KUBE_CLIENT_BURST`: a token bucket every request to the API server
//! waits on, as client-go's rate limiter does. One bucket serves the whole process (the read
//! and the write client share it), so the settings bound what this controller asks of the
//! API server, whichever loop asks. A watch counts once, when it starts.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service};

use crate::faults::kube::KubeFaults;

/// Tokens refill at `qps` a second up to `burst`; each request takes one.
#[derive(Clone)]
pub struct Throttle {
    bucket: Arc<Mutex<Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
    qps: f64,
    burst: f64,
}

impl Throttle {
    /// A full bucket. A `qps` of 0 is taken as 1 and a `burst` below 1 as 1, so a request
    /// always gets through eventually.
    pub fn new(qps: u32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Throttle {
            bucket: Arc::new(Mutex::new(Bucket {
                tokens: burst,
                at: Instant::now(),
                qps: f64::from(qps.max(1)),
                burst,
            })),
        }
    }

    /// Takes a token now, or says how long until one is there.
    fn try_take(&self) -> Result<(), Duration> {
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(b.at).as_secs_f64() * b.qps;
        b.tokens = (b.tokens + refill).min(b.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - b.tokens) / b.qps))
        }
    }

    /// Waits until a request may go.
    pub async fn acquire(&self) {
        while let Err(wait) = self.try_take() {
            tokio::time::sleep(wait).await;
        }
    }
}

impl<S> Layer<S> for Throttle {
    type Service = Throttled<S>;
    fn layer(&self, inner: S) -> Throttled<S> {
        Throttled {
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
            throttle: self.clone(),
        }
    }
}

/// A service whose every call waits for a token first. The inner service (kube's is boxed,
/// not `Clone`) is shared behind a lock held only to get it ready and start the call; the
/// response is awaited outside it, so calls still run side by side.
pub struct Throttled<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    throttle: Throttle,
}

impl<S> Clone for Throttled<S> {
    fn clone(&self) -> Self {
        Throttled {
            inner: self.inner.clone(),
            throttle: self.throttle.clone(),
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, R> Service<R> for Throttled<S>
where
    S: Service<R> + Send + 'static,
    S::Future: Send,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // Readiness is awaited in `call`, under the lock, after the token.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: R) -> Self::Future {
        let (inner, throttle) = (self.inner.clone(), self.throttle.clone());
        Box::pin(async move {
            throttle.acquire().await;
            let response = {
                let mut service = inner.lock().await;
                std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                service.call(request)
            };
            response.await
        })
    }
}

/// A client for `config` whose requests wait on `throttle`, with the test-only `faults`
/// (when set) between the throttle and the network.
pub fn client(
    config: kube::Config,
    throttle: &Throttle,
    faults: Option<&KubeFaults>,
) -> Result<kube::Client, kube::Error> {
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match faults {
        Some(faults) => builder.with_layer(faults).with_layer(throttle).build(),
        None => builder.with_layer(throttle).build(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_at_once_and_the_rest_at_the_rate() {
        let t = Throttle::new(2, 3);
        let start = Instant::now();
        for _ in 0..3 {
            t.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst needs no wait");
        for _ in 0..4 {
            t.acquire().await;
        }
        // Four more at 2 a second: 2 s.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(1999) && took < Duration::from_millis(2100),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_bucket_fills_up_to_the_burst_only() {
        let t = Throttle::new(10, 2);
        tokio::time::sleep(Duration::from_secs(60)).await;
        let start = Instant::now();
        for _ in 0..3 {
            t.acquire().await;
        }
        // Two from the burst, the third a tenth of a second later.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(99) && took < Duration::from_millis(150),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn every_call_through_the_layer_waits_for_a_token() {
        let counted =
            tower::service_fn(|n: u32| async move { Ok::<u32, std::convert::Infallible>(n) });
        let mut svc = Throttle::new(1, 1).layer(counted);
        let start = Instant::now();
        for n in 0..3 {
            std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
            assert_eq!(svc.call(n).await.unwrap(), n);
        }
        assert!(
            start.elapsed() >= Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }
}
