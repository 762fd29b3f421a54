//! The controller's background loops, supervised. Every loop is meant to run for as long as
//! the process does; one that returns or panics is logged with its name, readiness fails
//! while it is down, and it is started again after a pause (as controller-runtime recovers a
//! panicking reconcile and requeues it). A loop that keeps stopping is not restarted for
//! ever: past [`MAX_RESTARTS`] within [`RESTART_WINDOW`] the supervisor gives up and the
//! process exits, so the kubelet restarts it with a clean slate.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;
use tracing::error;

/// Restarts allowed within [`RESTART_WINDOW`] before the supervisor gives up on a loop.
pub const MAX_RESTARTS: usize = 5;
pub const RESTART_WINDOW: Duration = Duration::from_secs(5 * 60);
/// How long a stopped loop stays down before it is started again.
pub const RESTART_AFTER: Duration = Duration::from_secs(1);

type LoopFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
type Start = Arc<dyn Fn() -> LoopFuture + Send + Sync>;

/// A loop that stopped for good: the process should exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaveUp {
    pub name: &'static str,
    pub why: String,
}

struct Entry {
    name: &'static str,
    start: Start,
    /// When it stopped, within the window.
    stops: VecDeque<Instant>,
}

pub struct Supervisor {
    set: JoinSet<()>,
    running: HashMap<Id, Entry>,
    /// True while every loop is up; readiness reads it.
    up: watch::Sender<bool>,
}

impl Default for Supervisor {
    fn default() -> Self {
        Supervisor::new()
    }
}

impl Supervisor {
    pub fn new() -> Self {
        Supervisor {
            set: JoinSet::new(),
            running: HashMap::new(),
            up: watch::channel(true).0,
        }
    }

    /// True while every loop runs.
    pub fn up(&self) -> watch::Receiver<bool> {
        self.up.subscribe()
    }

    /// Runs `start()` as the loop `name`; `start` is called again for each restart.
    pub fn spawn<F, Fut>(&mut self, name: &'static str, start: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let start: Start = Arc::new(move || Box::pin(start()) as LoopFuture);
        self.launch(Entry {
            name,
            start,
            stops: VecDeque::new(),
        });
    }

    fn launch(&mut self, entry: Entry) {
        let id = self.set.spawn((entry.start)()).id();
        self.running.insert(id, entry);
    }

    /// Watches the loops; returns only when one has stopped too often.
    pub async fn watch(&mut self) -> GaveUp {
        loop {
            let Some(done) = self.set.join_next_with_id().await else {
                // Nothing to watch: never return on its own.
                std::future::pending::<()>().await;
                unreachable!()
            };
            let (id, why) = match done {
                Ok((id, ())) => (id, "returned".to_string()),
                Err(e) => (e.id(), stopped_by(e)),
            };
            let Some(mut entry) = self.running.remove(&id) else {
                continue;
            };
            let _ = self.up.send(false);
            let now = Instant::now();
            entry.stops.push_back(now);
            while entry
                .stops
                .front()
                .is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW)
            {
                entry.stops.pop_front();
            }
            if entry.stops.len() > MAX_RESTARTS {
                error!(task = entry.name, why = %why, "a controller loop keeps stopping; giving up");
                return GaveUp {
                    name: entry.name,
                    why,
                };
            }
            error!(task = entry.name, why = %why, restart_in = ?RESTART_AFTER, "a controller loop stopped; restarting it");
            tokio::time::sleep(RESTART_AFTER).await;
            self.launch(entry);
            let _ = self.up.send(true);
        }
    }
}

/// A panic's message, or why the task was cancelled.
pub(crate) fn stopped_by(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return "cancelled".into();
    }
    let payload = e.into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    format!("panicked: {message}")
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_loop_that_panics_once_is_restarted_and_readiness_comes_back() {
        let runs = Arc::new(AtomicUsize::new(0));
        let mut s = Supervisor::new();
        let up = s.up();
        let counted = runs.clone();
        s.spawn("flaky", move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    panic!("first run fails");
                }
                std::future::pending::<()>().await;
            }
        });
        s.spawn("steady", std::future::pending::<()>);
        let watched = tokio::time::timeout(Duration::from_secs(60), s.watch()).await;
        assert!(watched.is_err(), "the supervisor gave up: {watched:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 2, "restarted once");
        assert!(*up.borrow(), "ready again once restarted");
    }

    #[tokio::test(start_paused = true)]
    async fn readiness_fails_while_a_stopped_loop_waits_to_restart() {
        let runs = Arc::new(AtomicUsize::new(0));
        let mut s = Supervisor::new();
        let mut up = s.up();
        let counted = runs.clone();
        // Returns the first time, then runs on.
        s.spawn("ends once", move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                if n > 0 {
                    std::future::pending::<()>().await;
                }
            }
        });
        let watching = tokio::spawn(async move { s.watch().await });
        up.wait_for(|u| !*u).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1, "not yet restarted");
        up.wait_for(|u| *u).await.unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        watching.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_loop_that_keeps_stopping_ends_the_supervision_with_its_name() {
        let mut s = Supervisor::new();
        s.spawn("steady", std::future::pending::<()>);
        s.spawn("broken", || async { panic!("always") });
        let gave_up = s.watch().await;
        assert_eq!(gave_up.name, "broken");
        assert_eq!(gave_up.why, "panicked: always");
    }

    #[tokio::test(start_paused = true)]
    async fn stops_spread_over_more_than_the_window_are_forgiven() {
        let runs = Arc::new(AtomicUsize::new(0));
        let mut s = Supervisor::new();
        let counted = runs.clone();
        // Ends every 2 minutes: at most 3 stops in any 5-minute window.
        s.spawn("slow", move || {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(120))
        });
        let watched = tokio::time::timeout(Duration::from_secs(3600), s.watch()).await;
        assert!(watched.is_err(), "gave up: {watched:?}");
        assert!(runs.load(Ordering::SeqCst) >= 25);
    }
}
