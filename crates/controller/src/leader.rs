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
        // A task already ended (and perhaps awaited by `ended`) has nothing left to release.
        if !self.task.is_finished() {
            let _ = self.task.await;
        }
    }

    /// Resolves, with why, if the election stops on its own: its configuration refused, or
    /// a panic. Writers have seen `false` by then. A controller must not run on without an
    /// election (it would never lead again, or a successor could not be told apart), so the
    /// caller exits and the process starts afresh.
    pub async fn ended(&mut self) -> String {
        match (&mut self.task).await {
            Ok(()) => "it returned".into(),
            Err(e) => crate::supervise::stopped_by(e),
        }
    }
}

/// Sends `false` when dropped, so writers stop even when the election's task ends in a
/// panic with the lease held.
struct Demote(watch::Sender<bool>);

impl Drop for Demote {
    fn drop(&mut self) {
        self.0.send_replace(false);
    }
}

/// Runs election for `config.identity` until [`Election::release`] or until every receiver
/// is dropped; either way a held lease is released on the way out.
pub fn spawn(store: Arc<dyn LeaseStore>, config: LeaseConfig) -> Election {
    let (tx, rx) = watch::channel(false);
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let tx = Demote(tx);
        let mut candidate = Candidate {
            store,
            config,
            observed: None,
        };
        tokio::select! {
            _ = candidate.run(&tx.0) => {}
            _ = tx.0.closed() => {}
            _ = stopped.notified() => {}
        }
        if *tx.0.borrow() {
            let _ = tx.0.send(false);
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
mod tests;
