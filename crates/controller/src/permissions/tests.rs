//! The lists against the code: every kube-backed component is driven against a local API
//! stand-in that logs each request, and every request must be allowed by [`REQUIRED`]; every
//! verb [`REQUIRED`] grants must be one some request used, so the list stays minimal.

use std::collections::BTreeSet;
use std::time::Duration;

use async_trait::async_trait;
use nodewright_api::aws::v1::EC2NodeClassStatus;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::nodepool::NodePoolStatus;
use nodewright_testkit::api_server::Shared;

use super::*;
use crate::events::{Event, EventSink, EventType, KubeEvents, ObjectRef};
use crate::leader::{KubeLeaseStore, LeaseRecord, LeaseStore};
use crate::state::{ClusterState, Kind};
use crate::supervise::Supervisor;
use crate::write::kube::{KubeApi, api_resource};
use crate::write::{Eviction, KubeWriter, MetaPatch, NodePatch, WriteError};

const OWN: &str = "nodewright-system";

/// One API request in RBAC terms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Access {
    group: String,
    resource: String,
    verb: String,
    namespace: Option<String>,
}

/// Reads `(method, path)` as RBAC sees it: `/api/v1/...` is the core group, `/apis/g/v/...`
/// group `g`; `namespaces/<ns>/` scopes the rest; a trailing segment after the name is a
/// subresource. A GET without a name is a list.
fn access(method: &str, path: &str) -> Access {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => panic!("not a resource path: {path}"),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        other => (None, other),
    };
    let (resource, named) = match rest {
        [r] => (r.to_string(), false),
        [r, _name] => (r.to_string(), true),
        [r, _name, sub] => (format!("{r}/{sub}"), true),
        _ => panic!("unexpected path shape: {path}"),
    };
    let verb = match (method, named) {
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => panic!("unexpected method {method} {path}"),
    };
    Access {
        group: group.into(),
        resource,
        verb: verb.into(),
        namespace,
    }
}

/// Delegates every write to the kube implementation. Listing the trait's methods here means a
/// new write method does not compile until this audit calls it.
struct Audited(KubeApi);

#[async_trait]
impl KubeWriter for Audited {
    async fn create_nodeclaim(&self, claim: &NodeClaim) -> Result<NodeClaim, WriteError> {
        self.0.create_nodeclaim(claim).await
    }
    async fn patch_nodeclaim_status(
        &self,
        name: &str,
        status: &NodeClaimStatus,
        resource_version: Option<&str>,
    ) -> Result<(), WriteError> {
        self.0
            .patch_nodeclaim_status(name, status, resource_version)
            .await
    }
    async fn patch_nodeclaim_pod_event_time(
        &self,
        name: &str,
        time: &str,
    ) -> Result<(), WriteError> {
        self.0.patch_nodeclaim_pod_event_time(name, time).await
    }
    async fn patch_nodeclaim_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.0.patch_nodeclaim_meta(name, patch).await
    }
    async fn delete_nodeclaim(&self, name: &str) -> Result<(), WriteError> {
        self.0.delete_nodeclaim(name).await
    }
    async fn patch_node(&self, name: &str, patch: &NodePatch) -> Result<(), WriteError> {
        self.0.patch_node(name, patch).await
    }
    async fn delete_node(&self, name: &str) -> Result<(), WriteError> {
        self.0.delete_node(name).await
    }
    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<Eviction, WriteError> {
        self.0.evict_pod(namespace, name).await
    }
    async fn update_nodepool_status(
        &self,
        name: &str,
        status: &NodePoolStatus,
    ) -> Result<(), WriteError> {
        self.0.update_nodepool_status(name, status).await
    }
    async fn patch_nodepool_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.0.patch_nodepool_meta(name, patch).await
    }
    async fn patch_nodeclass_status(
        &self,
        name: &str,
        status: &EC2NodeClassStatus,
    ) -> Result<(), WriteError> {
        self.0.patch_nodeclass_status(name, status).await
    }
    async fn patch_nodeclass_meta(&self, name: &str, patch: &MetaPatch) -> Result<(), WriteError> {
        self.0.patch_nodeclass_meta(name, patch).await
    }
    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<(), WriteError> {
        self.0
            .delete_pod(namespace, name, grace_period_seconds)
            .await
    }
}

/// Calls every write once; outcomes do not matter, only the requests sent.
async fn every_write(w: &dyn KubeWriter) {
    let claim: NodeClaim =
        serde_json::from_value(nodewright_testkit::k8s::nodeclaim("default-abcde")).unwrap();
    let mut meta = MetaPatch::default();
    meta.labels.insert("a".into(), Some("b".into()));
    let _ = w.create_nodeclaim(&claim).await;
    let _ = w
        .patch_nodeclaim_status("default-abcde", &NodeClaimStatus::default(), None)
        .await;
    let _ = w
        .patch_nodeclaim_pod_event_time("default-abcde", "2024-06-01T00:00:00Z")
        .await;
    let _ = w.patch_nodeclaim_meta("default-abcde", &meta).await;
    let _ = w.delete_nodeclaim("default-abcde").await;
    let node = NodePatch {
        meta: meta.clone(),
        taints: Some(vec![]),
    };
    let _ = w.patch_node("n1", &node).await;
    let _ = w.delete_node("n1").await;
    let _ = w.evict_pod("web", "web-1").await;
    let _ = w
        .update_nodepool_status("default", &NodePoolStatus::default())
        .await;
    let _ = w.patch_nodepool_meta("default", &meta).await;
    let _ = w
        .patch_nodeclass_status("default", &EC2NodeClassStatus::default())
        .await;
    let _ = w.patch_nodeclass_meta("default", &meta).await;
    let _ = w.delete_pod("web", "web-2", Some(30)).await;
}

async fn wait_for(state: &Shared, done: impl Fn(&[String]) -> bool) {
    for _ in 0..250 {
        if done(&state.lock().unwrap().requests) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "timed out; requests so far: {:?}",
        state.lock().unwrap().requests
    );
}

/// Every request the controller's kube-backed parts send, in RBAC terms; a watcher's list
/// also implies its watch.
async fn observed() -> BTreeSet<Access> {
    let (client, state) = nodewright_testkit::api_server::start().await;

    every_write(&Audited(KubeApi::new(client.clone()))).await;

    let leases = KubeLeaseStore::new(client.clone());
    let record = LeaseRecord {
        holder: Some("a".into()),
        lease_duration: Duration::from_secs(15),
        acquire_time: None,
        renew_time: None,
        transitions: 0,
        resource_version: None,
    };
    let _ = leases.get(OWN, "karpenter-leader-election").await;
    let created = leases
        .create(OWN, "karpenter-leader-election", &record)
        .await
        .unwrap();
    leases
        .update(OWN, "karpenter-leader-election", &created)
        .await
        .unwrap();

    // A repeat (of an event without de-duplication values) is folded into a count patch,
    // written when the sink closes.
    let mut loops = Supervisor::new();
    let events = KubeEvents::new(client.clone(), "karpenter", &mut loops);
    for _ in 0..2 {
        events.publish(Event::new(
            ObjectRef::pod("web", "web-1"),
            EventType::Normal,
            "Ready",
            "Pod is ready",
        ));
    }
    drop(events);
    wait_for(&state, |r| {
        r.iter()
            .any(|r| r.starts_with("PATCH ") && r.contains("/events/"))
    })
    .await;

    // The webhook: its certificate Secret made, then found damaged and replaced; a CRD's
    // conversion read and patched.
    let names = ["nodewright.ns.svc".to_string()];
    crate::webhook::secret::load_or_create(client.clone(), OWN, "nodewright", &names)
        .await
        .unwrap();
    let secret = format!("/api/v1/namespaces/{OWN}/secrets/nodewright-cert");
    state.lock().unwrap().objects.get_mut(&secret).unwrap()["data"]["tls.key"] =
        serde_json::json!("anVuaw==");
    crate::webhook::secret::load_or_create(client.clone(), OWN, "nodewright", &names)
        .await
        .unwrap();
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodepools.karpenter.sh";
    state
        .lock()
        .unwrap()
        .objects
        .insert(crd.into(), nodewright_api::crd::nodepool_crd().to_value());
    let target = crate::webhook::Target::Url {
        url: "https://127.0.0.1:1/convert".into(),
        host: "127.0.0.1".into(),
    };
    let want = crate::webhook::inject::conversion(&target, "PEM");
    let crds = kube::Api::all(client.clone());
    assert!(
        crate::webhook::inject::ensure(&crds, "nodepools.karpenter.sh", &want)
            .await
            .unwrap()
    );

    let cluster = ClusterState::shared();
    let watchers: Vec<_> = Kind::ALL
        .into_iter()
        .map(|k| tokio::spawn(crate::watch::watch(client.clone(), cluster.clone(), k)))
        .collect();
    let lists: Vec<String> = Kind::ALL
        .into_iter()
        .map(|k| {
            let r = api_resource(k);
            match r.group.as_str() {
                "" => format!("/api/{}/{}", r.version, r.plural),
                g => format!("/apis/{g}/{}/{}", r.version, r.plural),
            }
        })
        .collect();
    wait_for(&state, |r| {
        lists
            .iter()
            .all(|l| r.iter().any(|r| r.starts_with(&format!("GET {l}?"))))
    })
    .await;
    for w in watchers {
        w.abort();
    }

    let requests = state.lock().unwrap().requests.clone();
    let mut out = BTreeSet::new();
    for r in &requests {
        let (method, target) = r.split_once(' ').unwrap();
        let path = target.split_once('?').unwrap().0;
        let a = access(method, path);
        if method == "GET" && lists.iter().any(|l| l == path) {
            out.insert(Access {
                verb: "watch".into(),
                ..a.clone()
            });
        }
        out.insert(a);
    }
    out
}

#[tokio::test]
async fn every_request_is_granted_and_every_grant_is_used() {
    let seen = observed().await;
    let denied: Vec<&Access> = seen
        .iter()
        .filter(|a| {
            !allows(
                REQUIRED,
                &a.group,
                &a.resource,
                &a.verb,
                a.namespace.as_deref(),
                OWN,
            )
        })
        .collect();
    assert!(
        denied.is_empty(),
        "requests REQUIRED does not grant: {denied:#?}"
    );
    for p in REQUIRED {
        for verb in p.verbs {
            let used = seen
                .iter()
                .any(|a| a.group == p.group && a.resource == p.resource && a.verb == *verb);
            assert!(
                used,
                "{}/{} {verb} is granted but no request uses it",
                p.group, p.resource
            );
        }
    }
}

#[test]
fn request_paths_read_as_rbac_does() {
    let a = access("POST", "/api/v1/namespaces/web/pods/p/eviction");
    assert_eq!(
        (a.group.as_str(), a.resource.as_str(), a.verb.as_str()),
        ("", "pods/eviction", "create")
    );
    assert_eq!(a.namespace.as_deref(), Some("web"));
    let a = access("GET", "/api/v1/namespaces");
    assert_eq!(
        (a.resource.as_str(), a.verb.as_str()),
        ("namespaces", "list")
    );
    assert_eq!(a.namespace, None);
    let a = access("PATCH", "/apis/karpenter.sh/v1/nodepools/default/status");
    assert_eq!(
        (a.group.as_str(), a.resource.as_str(), a.verb.as_str()),
        ("karpenter.sh", "nodepools/status", "patch")
    );
    let a = access(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/x/leases/lock",
    );
    assert_eq!((a.resource.as_str(), a.verb.as_str()), ("leases", "get"));
}

#[test]
fn scopes_limit_where_a_grant_applies() {
    let perms = required(true);
    assert!(allows(&perms, "", "events", "create", Some("any"), OWN));
    assert!(allows(
        &perms,
        "coordination.k8s.io",
        "leases",
        "update",
        Some(OWN),
        OWN
    ));
    assert!(!allows(
        &perms,
        "coordination.k8s.io",
        "leases",
        "update",
        Some("default"),
        OWN
    ));
    assert!(allows(
        &perms,
        "coordination.k8s.io",
        "leases",
        "patch",
        Some("kube-node-lease"),
        OWN
    ));
    assert!(!allows(REQUIRED, "", "nodes", "create", None, OWN));
    assert!(allows(&perms, "", "nodes", "create", None, OWN));
    // A namespaced grant never covers a cluster-scoped request.
    assert!(!allows(
        &perms,
        "coordination.k8s.io",
        "leases",
        "get",
        None,
        OWN
    ));
}

/// The audit above drives these files' kube calls; an API handle built anywhere else would
/// escape it, so this names the file to add to the audit (and its calls to [`REQUIRED`]).
#[test]
fn kube_api_calls_live_only_in_audited_files() {
    const AUDITED: [&str; 6] = [
        "watch.rs",
        "write/kube.rs",
        "leader.rs",
        "events/writer.rs",
        "webhook/inject.rs",
        "webhook/secret.rs",
    ];
    const CALLS: [&str; 6] = [
        "Api::<",
        "Api::all",
        "Api::namespaced",
        "Api::default_namespaced",
        ".request::<",
        "apiserver_version",
    ];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![root.clone()];
    let mut offenders = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if path.is_dir() {
                if rel != "tests" {
                    stack.push(path);
                }
                continue;
            }
            let test_only = rel.ends_with("tests.rs");
            if test_only || AUDITED.contains(&rel.as_str()) || !rel.ends_with(".rs") {
                continue;
            }
            let src = std::fs::read_to_string(&path).unwrap();
            // Unit tests at the bottom of a file may build clients for test servers.
            let code = src.split("#[cfg(test)]").next().unwrap_or_default();
            if CALLS.iter().any(|c| code.contains(c)) {
                offenders.push(rel);
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "kube API calls outside the permission audit: {offenders:?}"
    );
}
