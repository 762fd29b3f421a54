//! Waiting for the cluster to reach a state, with a deadline and a message that says what was
//! awaited and what was last seen.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` every 250 ms until it gives `Some`, or fails after `timeout` naming `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if start.elapsed() >= timeout {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
