use super::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// A store whose writes (and reads) can be cut off, as a partitioned replica sees it, or
/// that panics, as a bug in the election's path would.
struct Flaky {
    inner: Arc<MemoryLeaseStore>,
    down: AtomicBool,
    panics: AtomicBool,
}

impl Flaky {
    fn new(inner: Arc<MemoryLeaseStore>) -> Arc<Self> {
        Arc::new(Flaky {
            inner,
            down: AtomicBool::new(false),
            panics: AtomicBool::new(false),
        })
    }
    fn check(&self) -> Result<(), LeaseError> {
        assert!(!self.panics.load(Ordering::SeqCst), "the store broke");
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
    async fn create(&self, ns: &str, n: &str, r: &LeaseRecord) -> Result<LeaseRecord, LeaseError> {
        self.check()?;
        self.inner.create(ns, n, r).await
    }
    async fn update(&self, ns: &str, n: &str, r: &LeaseRecord) -> Result<LeaseRecord, LeaseError> {
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

#[tokio::test(start_paused = true)]
async fn an_election_that_panics_stops_the_writers_and_says_why() {
    let store = Flaky::new(Arc::new(MemoryLeaseStore::new()));
    let mut a = spawn(store.clone(), config("a"));
    advance(0.1).await;
    assert!(*a.leader.borrow());
    store.panics.store(true, Ordering::SeqCst);
    let why = tokio::time::timeout(Duration::from_secs(10), a.ended()).await;
    assert_eq!(why.as_deref(), Ok("panicked: the store broke"));
    assert!(!*a.leader.borrow(), "a dead election leads no writer");
    a.release().await;
}

#[tokio::test(start_paused = true)]
async fn an_election_that_cannot_start_ends_at_once() {
    let mut bad = config("a");
    bad.renew_deadline = bad.lease_duration + Duration::from_secs(1);
    let mut a = spawn(Arc::new(MemoryLeaseStore::new()), bad);
    let why = tokio::time::timeout(Duration::from_secs(1), a.ended()).await;
    assert_eq!(why.as_deref(), Ok("it returned"));
    assert!(!*a.leader.borrow());
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
    let (client, _state) = nodewright_testkit::api_server::start().await;
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
    let (client, state) = nodewright_testkit::api_server::start().await;
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
    let puts = s.requests.iter().filter(|r| r.starts_with("PUT ")).count();
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
