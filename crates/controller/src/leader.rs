//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's rules: take the
//! lease when it is absent or its holder has not renewed it for `lease_duration`; renew every
//! `retry_period`; give it up when renewal has not succeeded for `renew_deadline`. Every write
//! carries the `resourceVersion` last read, so two candidates racing for an expired lease
//! cannot both win: the second write is a conflict.
//!
//! Expiry is judged by the local clock from the moment this candidate *observed* the record
//! change, never from the `renewTime` written by another machine, so clock skew between
//! replicas cannot make a candidate steal a live lease. Because `renew_deadline` is shorter
//! than `lease_duration`, a leader that cannot renew steps down (its watch turns `false`, so
//! writers stop) before any other candidate may take over.

pub mod metrics;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use thiserror::Error;
use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// This candidate; unique per replica (the pod name plus a random suffix, as upstream).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// controller-runtime's timings: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        LeaseConfig {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// The lease named by the operator settings (`LEADER_ELECTION_NAME`, the lease namespace).
    /// Its timings keep controller-runtime's proportions of the lease duration.
    pub fn from_settings(settings: &crate::settings::Settings, identity: &str) -> Self {
        let lease = settings.leader_election_lease_duration;
        LeaseConfig {
            lease_duration: lease,
            renew_deadline: lease * 2 / 3,
            retry_period: lease * 2 / 15,
            ..Self::new(
                &settings.leader_election_name,
                &settings.lease_namespace(),
                identity,
            )
        }
    }

    /// The ordering the safety argument needs: retry < renew deadline < lease duration.
    pub fn validate(&self) -> Result<(), LeaseError> {
        if self.identity.is_empty() {
            return Err(LeaseError::Config("identity must not be empty".into()));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(LeaseError::Config(
                "lease duration must be longer than the renew deadline".into(),
            ));
        }
        if self.renew_deadline <= self.retry_period {
            return Err(LeaseError::Config(
                "renew deadline must be longer than the retry period".into(),
            ));
        }
        Ok(())
    }
}

/// A candidate identity unique per process, as client-go builds it: the pod's hostname and a
/// suffix that differs between restarts of the same pod.
pub fn identity() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "nodewright".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{host}_{:x}{:x}",
        nanos & 0xffff_ffff_ffff,
        std::process::id()
    )
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum LeaseError {
    /// Someone wrote the lease since we read it (or created it first).
    #[error("lease changed concurrently")]
    Conflict,
    #[error("lease store: {0}")]
    Store(String),
    #[error("invalid leader election config: {0}")]
    Config(String),
}

/// The fields of a Lease election reads and writes.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaseRecord {
    /// `None` (or empty) when released.
    pub holder: Option<String>,
    pub lease_duration: Duration,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i32,
    /// The version the store returned; writes must present it.
    pub resource_version: Option<String>,
}

impl LeaseRecord {
    fn held_by(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }
}

/// Where the lease lives. `create` fails with [`LeaseError::Conflict`] when the lease exists;
/// `update` when `record.resource_version` is not the stored one.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<LeaseRecord>, LeaseError>;
    async fn create(
        &self,
        namespace: &str,
        name: &str,
        record: &LeaseRecord,
    ) -> Result<LeaseRecord, LeaseError>;
    async fn update(
        &self,
        namespace: &str,
        name: &str,
        record: &LeaseRecord,
    ) -> Result<LeaseRecord, LeaseError>;
}

/// Leases in memory, with the API server's optimistic concurrency; for tests and the
/// in-memory controller.
#[derive(Default)]
pub struct MemoryLeaseStore {
    leases: Mutex<BTreeMap<(String, String), LeaseRecord>>,
    version: Mutex<u64>,
}

impl MemoryLeaseStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The stored record, for assertions.
    pub fn record(&self, namespace: &str, name: &str) -> Option<LeaseRecord> {
        self.leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    fn next_version(&self) -> String {
        let mut v = self.version.lock().unwrap_or_else(|e| e.into_inner());
        *v += 1;
        v.to_string()
    }
}

#[async_trait]
impl LeaseStore for MemoryLeaseStore {
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<LeaseRecord>, LeaseError> {
        Ok(self.record(namespace, name))
    }

    async fn create(
        &self,
        namespace: &str,
        name: &str,
        record: &LeaseRecord,
    ) -> Result<LeaseRecord, LeaseError> {
        let version = self.next_version();
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        let key = (namespace.to_owned(), name.to_owned());
        if leases.contains_key(&key) {
            return Err(LeaseError::Conflict);
        }
        let stored = LeaseRecord {
            resource_version: Some(version),
            ..record.clone()
        };
        leases.insert(key, stored.clone());
        Ok(stored)
    }

    async fn update(
        &self,
        namespace: &str,
        name: &str,
        record: &LeaseRecord,
    ) -> Result<LeaseRecord, LeaseError> {
        let version = self.next_version();
        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
        let key = (namespace.to_owned(), name.to_owned());
        match leases.get(&key) {
            Some(current) if current.resource_version == record.resource_version => {
                let stored = LeaseRecord {
                    resource_version: Some(version),
                    ..record.clone()
                };
                leases.insert(key, stored.clone());
                Ok(stored)
            }
            _ => Err(LeaseError::Conflict),
        }
    }
}

/// Leases on the API server.
pub struct KubeLeaseStore {
    client: kube::Client,
}

impl KubeLeaseStore {
    pub fn new(client: kube::Client) -> Self {
        KubeLeaseStore { client }
    }

    fn api(&self, namespace: &str) -> Api<Lease> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

/// A lost race for the lease is routine; anything else (a refused request, an unreachable
/// API server) keeps this replica from ever leading, so an operator must see it.
fn log_failure(action: &str, e: &LeaseError) {
    match e {
        LeaseError::Conflict => tracing::debug!(error = %e, "{action} the lease failed"),
        _ => tracing::warn!(error = %e, "{action} the lease failed"),
    }
}

fn store_error(e: kube::Error) -> LeaseError {
    match &e {
        kube::Error::Api(status) if status.code == 409 => LeaseError::Conflict,
        _ => LeaseError::Store(e.to_string()),
    }
}

fn from_lease(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity,
        lease_duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64),
        acquire_time: spec.acquire_time.map(|t| t.0),
        renew_time: spec.renew_time.map(|t| t.0),
        transitions: spec.lease_transitions.unwrap_or(0),
        resource_version: lease.metadata.resource_version.clone(),
    }
}

fn to_lease(namespace: &str, name: &str, r: &LeaseRecord) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            resource_version: r.resource_version.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: r.holder.clone(),
            lease_duration_seconds: Some(r.lease_duration.as_secs().min(i32::MAX as u64) as i32),
            acquire_time: r.acquire_time.map(MicroTime),
            renew_time: r.renew_time.map(MicroTime),
            lease_transitions: Some(r.transitions),
            ..LeaseSpec::default()
        }),
    }
}

#[async_trait]
impl LeaseStore for KubeLeaseStore {
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<LeaseRecord>, LeaseError> {
        let lease = self
            .api(namespace)
            .get_opt(name)
            .await
            .map_err(store_error)?;
        Ok(lease.as_ref().map(from_lease))
    }

    async fn create(
        &self,
        namespace: &str,
        name: &str,
        record: &LeaseRecord,
    ) -> Result<LeaseRecord, LeaseError> {
        let mut lease = to_lease(namespace, name, record);
        lease.metadata.resource_version = None;
        let created = self
            .api(namespace)
            .create(&PostParams::default(), &lease)
            .await
            .map_err(store_error)?;
        Ok(from_lease(&created))
    }

    async fn update(
        &self,
        namespace: &str,
        name: &str,
        record: &LeaseRecord,
    ) -> Result<LeaseRecord, LeaseError> {
        let lease = to_lease(namespace, name, record);
        let replaced = self
            .api(namespace)
            .replace(name, &PostParams::default(), &lease)
            .await
            .map_err(store_error)?;
        Ok(from_lease(&replaced))
    }
}

/// A running election: [`Election::leader`] reads `true` exactly while this candidate holds
/// the lease.
pub struct Election {
    pub leader: watch::Receiver<bool>,
    stop: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Election {
    /// Stops the election: writers see `false` first, then a held lease is released so a
    /// successor takes over at once instead of waiting out the lease duration.
    pub async fn release(self) {
        self.stop.notify_one();
        let _ = self.task.await;
    }
}

/// Runs election for `config.identity` until [`Election::release`] or until every receiver
/// is dropped; either way a held lease is released on the way out.
pub fn spawn(store: Arc<dyn LeaseStore>, config: LeaseConfig) -> Election {
    let (tx, rx) = watch::channel(false);
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let mut candidate = Candidate {
            store,
            config,
            observed: None,
        };
        tokio::select! {
            _ = candidate.run(&tx) => {}
            _ = tx.closed() => {}
            _ = stopped.notified() => {}
        }
        if *tx.borrow() {
            let _ = tx.send(false);
        }
        candidate.release().await;
    });
    Election {
        leader: rx,
        stop,
        task,
    }
}

struct Candidate {
    store: Arc<dyn LeaseStore>,
    config: LeaseConfig,
    /// The last record seen and when it was first seen in that form.
    observed: Option<(LeaseRecord, Instant)>,
}

/// How one attempt ended.
enum Attempt {
    Held,
    /// Someone else holds a live lease.
    HeldByOther,
    Failed,
}

impl Candidate {
    async fn run(&mut self, tx: &watch::Sender<bool>) {
        if let Err(e) = self.config.validate() {
            tracing::error!(error = %e, "leader election cannot start");
            return;
        }
        loop {
            // Follower: try until the lease is ours.
            loop {
                if let Attempt::Held = self.try_acquire_or_renew().await {
                    break;
                }
                tokio::time::sleep(self.config.retry_period).await;
            }
            tracing::info!(
                identity = %self.config.identity,
                lease = %self.config.name,
                "successfully acquired lease"
            );
            let _ = tx.send(true);
            self.hold().await;
            let _ = tx.send(false);
            tracing::info!(
                identity = %self.config.identity,
                lease = %self.config.name,
                "lost the lease; stopping writers"
            );
        }
    }

    /// Renews every retry period; returns when renewal has failed for the renew deadline or
    /// another holder is seen.
    async fn hold(&mut self) {
        let mut last_renewed = Instant::now();
        loop {
            let deadline = last_renewed + self.config.renew_deadline;
            let next = (Instant::now() + self.config.retry_period).min(deadline);
            tokio::time::sleep_until(next).await;
            if Instant::now() >= deadline {
                return;
            }
            match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(Attempt::Held) => last_renewed = Instant::now(),
                Ok(Attempt::HeldByOther) => return,
                Ok(Attempt::Failed) => {}
                Err(_elapsed) => return,
            }
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Attempt {
        let c = &self.config;
        let now = Instant::now();
        let wall = Timestamp::now();
        let current = match self.store.get(&c.namespace, &c.name).await {
            Ok(r) => r,
            Err(e) => {
                log_failure("reading", &e);
                return Attempt::Failed;
            }
        };
        let Some(current) = current else {
            let record = LeaseRecord {
                holder: Some(c.identity.clone()),
                lease_duration: c.lease_duration,
                acquire_time: Some(wall),
                renew_time: Some(wall),
                transitions: 0,
                resource_version: None,
            };
            return match self.store.create(&c.namespace, &c.name, &record).await {
                Ok(stored) => {
                    self.observed = Some((stored, now));
                    Attempt::Held
                }
                Err(_) => Attempt::Failed,
            };
        };
        let observed_at = match &self.observed {
            Some((seen, at)) if *seen == current => *at,
            _ => {
                self.observed = Some((current.clone(), now));
                now
            }
        };
        let mine = current.held_by() == Some(c.identity.as_str());
        if let Some(_other) = current.held_by().filter(|_| !mine)
            && now < observed_at + current.lease_duration
        {
            return Attempt::HeldByOther;
        }
        let record = LeaseRecord {
            holder: Some(c.identity.clone()),
            lease_duration: c.lease_duration,
            acquire_time: if mine {
                current.acquire_time
            } else {
                Some(wall)
            },
            renew_time: Some(wall),
            transitions: if mine {
                current.transitions
            } else {
                current.transitions + 1
            },
            resource_version: current.resource_version.clone(),
        };
        match self.store.update(&c.namespace, &c.name, &record).await {
            Ok(stored) => {
                self.observed = Some((stored, now));
                Attempt::Held
            }
            Err(e) => {
                log_failure("writing", &e);
                Attempt::Failed
            }
        }
    }

    /// Gives the lease up if we still hold it: empty holder, one-second duration.
    async fn release(&mut self) {
        let c = &self.config;
        let Ok(Some(current)) = self.store.get(&c.namespace, &c.name).await else {
            return;
        };
        if current.held_by() != Some(c.identity.as_str()) {
            return;
        }
        let record = LeaseRecord {
            holder: None,
            lease_duration: Duration::from_secs(1),
            ..current
        };
        if let Err(e) = self.store.update(&c.namespace, &c.name, &record).await {
            tracing::debug!(error = %e, "releasing the lease failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A store whose writes (and reads) can be cut off, as a partitioned replica sees it.
    struct Flaky {
        inner: Arc<MemoryLeaseStore>,
        down: AtomicBool,
    }

    impl Flaky {
        fn new(inner: Arc<MemoryLeaseStore>) -> Arc<Self> {
            Arc::new(Flaky {
                inner,
                down: AtomicBool::new(false),
            })
        }
        fn check(&self) -> Result<(), LeaseError> {
            if self.down.load(Ordering::SeqCst) {
                Err(LeaseError::Store("connection refused".into()))
            } else {
                Ok(())
            }
        }
    }

    #[async_trait]
    impl LeaseStore for Flaky {
        async fn get(&self, ns: &str, n: &str) -> Result<Option<LeaseRecord>, LeaseError> {
            self.check()?;
            self.inner.get(ns, n).await
        }
        async fn create(
            &self,
            ns: &str,
            n: &str,
            r: &LeaseRecord,
        ) -> Result<LeaseRecord, LeaseError> {
            self.check()?;
            self.inner.create(ns, n, r).await
        }
        async fn update(
            &self,
            ns: &str,
            n: &str,
            r: &LeaseRecord,
        ) -> Result<LeaseRecord, LeaseError> {
            self.check()?;
            self.inner.update(ns, n, r).await
        }
    }

    fn config(identity: &str) -> LeaseConfig {
        LeaseConfig::new("karpenter-leader-election", "kube-system", identity)
    }

    fn holder(store: &MemoryLeaseStore) -> Option<String> {
        store
            .record("kube-system", "karpenter-leader-election")
            .and_then(|r| r.holder)
    }

    async fn advance(secs: f64) {
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn acquires_an_absent_lease_and_keeps_renewing_it() {
        let store = Arc::new(MemoryLeaseStore::new());
        let rx = spawn(store.clone(), config("a")).leader;
        advance(0.1).await;
        assert!(*rx.borrow());
        assert_eq!(holder(&store).as_deref(), Some("a"));
        let v1 = store
            .record("kube-system", "karpenter-leader-election")
            .unwrap()
            .resource_version;
        advance(60.0).await;
        assert!(*rx.borrow(), "renewal keeps the lease");
        let r = store
            .record("kube-system", "karpenter-leader-election")
            .unwrap();
        assert_ne!(r.resource_version, v1, "renewals write the lease");
        assert_eq!(r.transitions, 0);
        assert_eq!(r.lease_duration, Duration::from_secs(15));
    }

    #[tokio::test(start_paused = true)]
    async fn a_live_lease_is_not_taken() {
        let store = Arc::new(MemoryLeaseStore::new());
        let a = spawn(store.clone(), config("a")).leader;
        advance(0.1).await;
        let b = spawn(store.clone(), config("b")).leader;
        advance(120.0).await;
        assert!(*a.borrow());
        assert!(!*b.borrow());
        assert_eq!(holder(&store).as_deref(), Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_lease_is_taken_over() {
        let store = Arc::new(MemoryLeaseStore::new());
        // A lease left by a replica that died without releasing it.
        store
            .create(
                "kube-system",
                "karpenter-leader-election",
                &LeaseRecord {
                    holder: Some("dead".into()),
                    lease_duration: Duration::from_secs(15),
                    acquire_time: None,
                    renew_time: None,
                    transitions: 3,
                    resource_version: None,
                },
            )
            .await
            .unwrap();
        let b = spawn(store.clone(), config("b")).leader;
        advance(10.0).await;
        assert!(!*b.borrow(), "not before the lease duration has passed");
        advance(8.0).await;
        assert!(*b.borrow());
        let r = store
            .record("kube-system", "karpenter-leader-election")
            .unwrap();
        assert_eq!(r.holder.as_deref(), Some("b"));
        assert_eq!(r.transitions, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_renewal_steps_down_by_the_deadline() {
        let store = Arc::new(MemoryLeaseStore::new());
        let flaky = Flaky::new(store.clone());
        let a = spawn(flaky.clone(), config("a")).leader;
        advance(0.1).await;
        assert!(*a.borrow());
        flaky.down.store(true, Ordering::SeqCst);
        advance(9.0).await;
        assert!(*a.borrow(), "still within the renew deadline");
        advance(1.5).await;
        assert!(!*a.borrow(), "steps down once renewal failed for 10s");
        flaky.down.store(false, Ordering::SeqCst);
        advance(5.0).await;
        assert!(
            *a.borrow(),
            "re-acquires its own lease once the store is back"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn two_candidates_are_never_both_leader() {
        let store = Arc::new(MemoryLeaseStore::new());
        let fa = Flaky::new(store.clone());
        let fb = Flaky::new(store.clone());
        let a = spawn(fa.clone(), config("a")).leader;
        let b = spawn(fb.clone(), config("b")).leader;
        let mut leaders_seen = std::collections::BTreeSet::new();
        // Cut off whoever leads, then heal, several times; sample every 100 ms.
        for round in 0..6 {
            for _ in 0..300 {
                advance(0.1).await;
                let (la, lb) = (*a.borrow(), *b.borrow());
                assert!(!(la && lb), "both leaders in round {round}");
                if la {
                    leaders_seen.insert("a");
                }
                if lb {
                    leaders_seen.insert("b");
                }
            }
            let leader = if *a.borrow() { &fa } else { &fb };
            fa.down.store(false, Ordering::SeqCst);
            fb.down.store(false, Ordering::SeqCst);
            leader.down.store(true, Ordering::SeqCst);
        }
        assert_eq!(leaders_seen.len(), 2, "leadership moved between candidates");
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_receiver_releases_the_lease() {
        let store = Arc::new(MemoryLeaseStore::new());
        let a = spawn(store.clone(), config("a")).leader;
        advance(0.1).await;
        assert!(*a.borrow());
        drop(a);
        advance(0.1).await;
        assert_eq!(holder(&store), None);
        let b = spawn(store.clone(), config("b")).leader;
        advance(2.5).await;
        assert!(
            *b.borrow(),
            "a released lease is taken without waiting for expiry"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn release_steps_down_and_frees_the_lease_before_returning() {
        let store = Arc::new(MemoryLeaseStore::new());
        let a = spawn(store.clone(), config("a"));
        let leader = a.leader.clone();
        advance(0.1).await;
        assert!(*leader.borrow());
        a.release().await;
        assert!(
            !*leader.borrow(),
            "writers stop before the lease is given up"
        );
        assert_eq!(holder(&store), None, "released by the time release returns");
    }

    #[tokio::test]
    async fn memory_store_rejects_stale_writes() {
        let store = MemoryLeaseStore::new();
        let rec = LeaseRecord {
            holder: Some("a".into()),
            lease_duration: Duration::from_secs(15),
            acquire_time: None,
            renew_time: None,
            transitions: 0,
            resource_version: None,
        };
        let first = store.create("ns", "l", &rec).await.unwrap();
        assert_eq!(
            store.create("ns", "l", &rec).await,
            Err(LeaseError::Conflict)
        );
        let second = store.update("ns", "l", &first).await.unwrap();
        assert_eq!(
            store.update("ns", "l", &first).await,
            Err(LeaseError::Conflict)
        );
        assert!(store.update("ns", "l", &second).await.is_ok());
    }

    #[test]
    fn config_from_settings_and_identity() {
        let mut settings = crate::settings::Settings::with_cluster_name("c");
        settings.leader_election_namespace = "karpenter".into();
        let c = LeaseConfig::from_settings(&settings, "me");
        assert_eq!(
            (c.name.as_str(), c.namespace.as_str(), c.identity.as_str()),
            ("karpenter-leader-election", "karpenter", "me")
        );
        assert!(c.validate().is_ok());
        assert!(identity().contains('_'));
        assert_eq!(
            (c.lease_duration, c.renew_deadline, c.retry_period),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
        settings.leader_election_lease_duration = Duration::from_secs(6);
        let c = LeaseConfig::from_settings(&settings, "me");
        assert_eq!(
            (c.lease_duration, c.renew_deadline, c.retry_period),
            (
                Duration::from_secs(6),
                Duration::from_secs(4),
                Duration::from_millis(800)
            )
        );
        assert!(c.validate().is_ok());
    }

    #[test]
    fn config_ordering_is_checked() {
        assert!(config("a").validate().is_ok());
        let mut c = config("a");
        c.renew_deadline = c.lease_duration;
        assert!(c.validate().is_err());
        let mut c = config("a");
        c.retry_period = c.renew_deadline;
        assert!(c.validate().is_err());
        assert!(config("").validate().is_err());
    }

    #[tokio::test]
    async fn kube_store_keeps_optimistic_concurrency_over_http() {
        let (client, _state) = crate::fake_api::start().await;
        let store = KubeLeaseStore::new(client);
        assert_eq!(store.get("ns", "l").await, Ok(None));
        let rec = LeaseRecord {
            holder: Some("a".into()),
            lease_duration: Duration::from_secs(15),
            acquire_time: Some(Timestamp::from_second(1_700_000_000).unwrap()),
            renew_time: Some(Timestamp::from_second(1_700_000_000).unwrap()),
            transitions: 0,
            resource_version: None,
        };
        let created = store.create("ns", "l", &rec).await.unwrap();
        assert!(created.resource_version.is_some());
        assert_eq!(
            store.create("ns", "l", &rec).await,
            Err(LeaseError::Conflict)
        );
        let taken = LeaseRecord {
            holder: Some("b".into()),
            ..created.clone()
        };
        store.update("ns", "l", &taken).await.unwrap();
        assert_eq!(
            store.update("ns", "l", &created).await,
            Err(LeaseError::Conflict),
            "a write with a stale resourceVersion is refused"
        );
        let stored = store.get("ns", "l").await.unwrap().unwrap();
        assert_eq!(stored.holder.as_deref(), Some("b"));
        assert_eq!(stored.lease_duration, Duration::from_secs(15));
    }

    #[tokio::test]
    async fn elects_through_the_kube_store() {
        let (client, state) = crate::fake_api::start().await;
        let mut c = config("a");
        c.lease_duration = Duration::from_millis(900);
        c.renew_deadline = Duration::from_millis(600);
        c.retry_period = Duration::from_millis(100);
        let mut rx = spawn(Arc::new(KubeLeaseStore::new(client)), c).leader;
        tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|l| *l))
            .await
            .expect("leader within 5s")
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let s = state.lock().unwrap();
        let puts = s.requests.iter().filter(|(m, _)| m == "PUT").count();
        assert!(puts >= 1, "the leader renews with PUT: {:?}", s.requests);
        let lease = &s.objects["/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpenter-leader-election"];
        assert_eq!(lease["spec"]["holderIdentity"], "a");
    }

    #[test]
    fn lease_objects_round_trip() {
        let rec = LeaseRecord {
            holder: Some("a".into()),
            lease_duration: Duration::from_secs(15),
            acquire_time: Some(Timestamp::from_second(1_700_000_000).unwrap()),
            renew_time: Some(Timestamp::from_second(1_700_000_010).unwrap()),
            transitions: 2,
            resource_version: Some("42".into()),
        };
        let lease = to_lease("kube-system", "l", &rec);
        assert_eq!(lease.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(from_lease(&lease), rec);
    }
}
