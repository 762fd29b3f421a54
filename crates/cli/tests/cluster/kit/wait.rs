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

/// Waits up to `timeout` for exactly `n` pods of `default` to be bound and Running; on time out
/// the error names the count awaited.
pub async fn pods_running(
    client: &kube::Client,
    n: usize,
    timeout: Duration,
) -> Result<(), String> {
    eventually(timeout, &format!("{n} pods Running"), || {
        let client = client.clone();
        async move {
            let pods = super::read::pods(&client, "default").await;
            (super::read::running(&pods).len() == n).then_some(())
        }
    })
    .await
}
