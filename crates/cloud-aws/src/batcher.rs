//! Request batching: calls that can share one AWS request and arrive within a short window go
//! out as one request, and each caller gets its own part of the answer back. A batch opens
//! with its first call and closes once no call joined for the idle time, once it has been
//! open for the maximum wait, or once it holds the maximum number of calls.
//!
//! What a batch sends and how its answer is split is an [`Executor`]'s job (CreateFleet,
//! DescribeInstances, TerminateInstances); this module only gathers calls, times windows and
//! hands out replies. Each batch sent is reported to the observer (its size and how long its
//! window stayed open), as upstream's `karpenter_cloudprovider_batcher_batch_size` and
//! `_batch_time_seconds` labelled with the batcher's name.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Mutex, oneshot};
use tokio::time::Instant;

use crate::observe::Observer;

/// When a batch closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// No call joined for this long ...
    pub idle: Duration,
    /// ... or the batch has been open this long ...
    pub max_wait: Duration,
    /// ... or it holds this many calls.
    pub max_items: usize,
}

/// Sends one batch of calls as one request.
#[async_trait]
pub trait Executor: Send + Sync + 'static {
    /// Calls with equal keys can share a request.
    type Key: Ord + Clone + Send + Sync + 'static;
    /// One caller's part of the request.
    type Item: Send + 'static;
    /// One caller's part of the answer.
    type Output: Send + 'static;

    /// Sends `items` (at least one) and answers each: the result holds one output per item,
    /// in the items' order. Missing outputs reach their callers as a dropped batch.
    async fn execute(&self, key: &Self::Key, items: Vec<Self::Item>) -> Vec<Self::Output>;
}

/// The batch was dropped before its answer came back (its task ended early).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the batched request was dropped before it was answered")]
pub struct Dropped;

struct Open<E: Executor> {
    /// Tells this batch from a later one under the same key.
    generation: u64,
    items: Vec<E::Item>,
    replies: Vec<oneshot::Sender<E::Output>>,
    opened: Instant,
    last_join: Instant,
}

/// The open batches by key, and the last generation handed out.
struct Batches<E: Executor> {
    last_generation: u64,
    by_key: BTreeMap<E::Key, Open<E>>,
}

struct Shared<E: Executor> {
    name: &'static str,
    executor: E,
    window: Window,
    open: Mutex<Batches<E>>,
    observer: Observer,
}

/// Gathers calls into batches and sends each through an [`Executor`]. Clones share the open
/// batches.
pub struct Batcher<E: Executor> {
    shared: Arc<Shared<E>>,
}

impl<E: Executor> Clone for Batcher<E> {
    fn clone(&self) -> Self {
        Batcher {
            shared: self.shared.clone(),
        }
    }
}

impl<E: Executor> Batcher<E> {
    /// A batcher named `name` (the `batcher` label of its metrics) reporting to `observer`.
    pub fn new(name: &'static str, executor: E, window: Window, observer: Observer) -> Self {
        Batcher {
            shared: Arc::new(Shared {
                name,
                executor,
                window,
                open: Mutex::new(Batches {
                    last_generation: 0,
                    by_key: BTreeMap::new(),
                }),
                observer,
            }),
        }
    }

    pub fn executor(&self) -> &E {
        &self.shared.executor
    }

    pub fn window(&self) -> Window {
        self.shared.window
    }

    /// Adds `item` to the open batch for `key` (opening one if there is none) and waits for
    /// its part of the answer.
    pub async fn add(&self, key: E::Key, item: E::Item) -> Result<E::Output, Dropped> {
        let (tx, rx) = oneshot::channel();
        let full = {
            let mut guard = self.shared.open.lock().await;
            let Batches {
                last_generation,
                by_key: map,
            } = &mut *guard;
            let now = Instant::now();
            match map.get_mut(&key) {
                Some(b) => {
                    b.items.push(item);
                    b.replies.push(tx);
                    b.last_join = now;
                }
                None => {
                    *last_generation += 1;
                    let generation = *last_generation;
                    map.insert(
                        key.clone(),
                        Open {
                            generation,
                            items: vec![item],
                            replies: vec![tx],
                            opened: now,
                            last_join: now,
                        },
                    );
                    // Its own task, so a caller that gives up does not strand the others.
                    tokio::spawn(Self::wait_and_send(
                        self.shared.clone(),
                        key.clone(),
                        generation,
                    ));
                }
            }
            // A full batch goes at once rather than when its window closes.
            if map
                .get(&key)
                .is_some_and(|b| b.items.len() >= self.shared.window.max_items)
            {
                map.remove(&key)
            } else {
                None
            }
        };
        if let Some(batch) = full {
            tokio::spawn(Self::send(self.shared.clone(), key, batch));
        }
        rx.await.map_err(|_| Dropped)
    }

    /// Waits out the window of batch `generation` under `key`, then sends it.
    async fn wait_and_send(shared: Arc<Shared<E>>, key: E::Key, generation: u64) {
        let batch = loop {
            let wake = {
                let mut guard = shared.open.lock().await;
                let map = &mut guard.by_key;
                // Sent already (it filled up), maybe with a newer batch open under the key.
                let Some(b) = map.get(&key).filter(|b| b.generation == generation) else {
                    return;
                };
                let idle_until = b.last_join + shared.window.idle;
                let deadline = b.opened + shared.window.max_wait;
                if Instant::now() >= idle_until.min(deadline) {
                    break map.remove(&key);
                }
                idle_until.min(deadline)
            };
            tokio::time::sleep_until(wake).await;
        };
        if let Some(batch) = batch {
            Self::send(shared, key, batch).await;
        }
    }

    async fn send(shared: Arc<Shared<E>>, key: E::Key, batch: Open<E>) {
        shared
            .observer
            .batch_flushed(&nodewright_cloud::BatchFlushed {
                batcher: shared.name,
                size: batch.items.len(),
                window_seconds: batch.opened.elapsed().as_secs_f64(),
            });
        let outputs = shared.executor.execute(&key, batch.items).await;
        for (reply, out) in batch.replies.into_iter().zip(outputs) {
            let _ = reply.send(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    /// Answers each item with (batch number, item), recording every batch.
    #[derive(Default)]
    struct Echo(StdMutex<Vec<(u8, Vec<u32>)>>);

    #[async_trait]
    impl Executor for Echo {
        type Key = u8;
        type Item = u32;
        type Output = (usize, u32);

        async fn execute(&self, key: &u8, items: Vec<u32>) -> Vec<(usize, u32)> {
            let mut seen = self.0.lock().unwrap();
            seen.push((*key, items.clone()));
            let n = seen.len();
            items.into_iter().map(|i| (n, i)).collect()
        }
    }

    fn batcher(max_items: usize) -> Batcher<Echo> {
        Batcher::new(
            "echo",
            Echo::default(),
            Window {
                idle: Duration::from_millis(100),
                max_wait: Duration::from_secs(1),
                max_items,
            },
            Observer::default(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn calls_with_one_key_share_a_batch_and_each_gets_its_own_answer() {
        let b = batcher(500);
        let (x, y, z) = tokio::join!(b.add(1, 10), b.add(1, 11), b.add(2, 20));
        assert_eq!(x.unwrap().1, 10);
        assert_eq!(y.unwrap().1, 11);
        assert_eq!(z.unwrap().1, 20);
        let mut sent = b.executor().0.lock().unwrap().clone();
        sent.sort();
        assert_eq!(sent, vec![(1, vec![10, 11]), (2, vec![20])]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_goes_at_once_and_the_rest_wait_for_the_next() {
        let b = batcher(2);
        let start = Instant::now();
        let (x, y, z) = tokio::join!(b.add(1, 1), b.add(1, 2), b.add(1, 3));
        let sent = b.executor().0.lock().unwrap().clone();
        assert_eq!(sent, vec![(1, vec![1, 2]), (1, vec![3])]);
        assert_eq!((x.unwrap().0, y.unwrap().0, z.unwrap().0), (1, 1, 2));
        // The third call's batch waited out its idle time; the full one did not wait.
        assert!(start.elapsed() >= Duration::from_millis(100));
        assert!(start.elapsed() < Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_batch_closes_at_its_maximum_wait() {
        let b = batcher(500);
        let start = Instant::now();
        let mut calls = Vec::new();
        // One call every 45 ms keeps the batch from going idle for 1.3 s.
        for i in 0..30u32 {
            let b = b.clone();
            calls.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(45) * i).await;
                b.add(1, i).await.unwrap()
            }));
        }
        let mut batches = Vec::new();
        for c in calls {
            batches.push(c.await.unwrap().0);
        }
        let sent = b.executor().0.lock().unwrap().clone();
        assert_eq!(sent.len(), 2, "{sent:?}");
        // Calls up to the one-second mark (the 23rd, at 990 ms) went in the first batch.
        assert_eq!(sent[0].1, (0..=22).collect::<Vec<u32>>());
        assert_eq!(batches.iter().filter(|&&n| n == 1).count(), 23);
        // The second closed once idle after the last call (1305 ms).
        assert!(start.elapsed() >= Duration::from_millis(1400));
    }

    #[derive(Default)]
    struct Batches(StdMutex<Vec<nodewright_cloud::BatchFlushed>>);

    impl nodewright_cloud::ProviderObserver for Batches {
        fn launch_failed(&self, _: &nodewright_cloud::LaunchFailure) {}
        fn batch_flushed(&self, b: &nodewright_cloud::BatchFlushed) {
            self.0.lock().unwrap().push(b.clone());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_batch_is_reported_under_the_batchers_name() {
        let observer = Observer::default();
        let seen = Arc::new(Batches::default());
        observer.set(seen.clone());
        let b = Batcher::new(
            "describe_instances",
            Echo::default(),
            Window {
                idle: Duration::from_millis(100),
                max_wait: Duration::from_secs(1),
                max_items: 500,
            },
            observer,
        );
        let _ = tokio::join!(b.add(1, 1), b.add(1, 2), b.add(1, 3));
        let got = seen.0.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].batcher, got[0].size), ("describe_instances", 3));
        assert!((0.1..1.0).contains(&got[0].window_seconds), "{:?}", got[0]);
    }
}
