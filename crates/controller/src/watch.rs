//! kube-runtime watchers feeding [`ClusterState`]: one per kind, each object parsed once into
//! its type ([`Parsed`]), so a single object that does not parse is logged, counted and
//! skipped instead of failing the whole list; each stream restarts with backoff after errors.

mod parsed;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use tracing::{debug, warn};

pub use parsed::{Malformed, Parsed, Watched};

use crate::state::{Kind, SharedState, WatchEvent, lock};
use crate::write::kube::api_resource;

/// Applies one watcher event to the state, skipping (and counting) objects that do not parse.
pub fn apply<K: Watched>(state: &SharedState, event: Event<Parsed<K>>) {
    let kind = K::KIND;
    let convert = |p: Parsed<K>| match p.object {
        Ok(o) => Some(o),
        Err(m) => {
            warn!(kind = kind.name(), error = %m.error, "skipping object that does not parse");
            lock(state).skip();
            None
        }
    };
    let event = match event {
        Event::Apply(o) => convert(o).map(WatchEvent::Apply),
        Event::Delete(o) => convert(o).map(WatchEvent::Delete),
        Event::Init => Some(WatchEvent::Init(kind)),
        Event::InitApply(o) => convert(o).map(WatchEvent::InitApply),
        Event::InitDone => Some(WatchEvent::InitDone(kind)),
    };
    if let Some(e) = event {
        lock(state).apply(e);
    }
}

/// Watches `kind` forever.
pub async fn watch(client: Client, state: SharedState, kind: Kind) {
    match kind {
        Kind::Pod => watch_as::<Pod>(client, state).await,
        Kind::Node => watch_as::<Node>(client, state).await,
        Kind::NodeClaim => watch_as::<NodeClaim>(client, state).await,
        Kind::NodePool => watch_as::<NodePool>(client, state).await,
        Kind::NodeClass => watch_as::<EC2NodeClass>(client, state).await,
        Kind::DaemonSet => watch_as::<DaemonSet>(client, state).await,
        Kind::Pdb => watch_as::<PodDisruptionBudget>(client, state).await,
        Kind::PersistentVolume => watch_as::<PersistentVolume>(client, state).await,
        Kind::PersistentVolumeClaim => watch_as::<PersistentVolumeClaim>(client, state).await,
        Kind::StorageClass => watch_as::<StorageClass>(client, state).await,
        Kind::VolumeAttachment => watch_as::<VolumeAttachment>(client, state).await,
        Kind::Namespace => watch_as::<Namespace>(client, state).await,
    }
}

/// Over the kind's `ApiResource`, so that one object that does not parse is skipped instead of
/// failing the whole list.
async fn watch_as<K: Watched + 'static>(client: Client, state: SharedState) {
    let kind = K::KIND;
    let api: Api<Parsed<K>> = Api::all_with(client, &api_resource(kind));
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => apply(&state, event),
            Err(e) => warn!(kind = kind.name(), error = %e, "watch error; retrying with backoff"),
        }
    }
    debug!(kind = kind.name(), "watch stream ended");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ClusterState, Object};
    use kube::Resource;

    fn parsed<K: Watched>(v: serde_json::Value) -> Parsed<K> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_bad_object_is_skipped_and_the_stream_goes_on() {
        let state = ClusterState::shared();
        apply::<Pod>(&state, Event::Init);
        let bad = parsed::<Pod>(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "bad", "namespace": "d", "resourceVersion": "7"},
            "spec": {"containers": 7}}));
        // The watcher still reads the bad object's resource version.
        assert_eq!(bad.meta().resource_version.as_deref(), Some("7"));
        let error = &bad.object.as_ref().unwrap_err().error;
        assert!(
            error.contains("Pod bad") && error.contains("sequence"),
            "{error}"
        );
        apply(&state, Event::InitApply(bad));
        apply(
            &state,
            Event::InitApply(parsed::<Pod>(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "good", "namespace": "d"},
                "spec": {"containers": []}}))),
        );
        apply::<Pod>(&state, Event::InitDone);
        let s = lock(&state);
        assert_eq!(s.skipped, 1);
        assert!(s.pods.contains_key("d/good"));
        assert!(s.is_synced(Kind::Pod));
    }

    #[test]
    fn list_items_without_api_version_and_kind_parse_as_their_kind() {
        // The API server leaves both out of a list's items; the karpenter.sh types require them.
        let pool = parsed::<NodePool>(serde_json::json!({
            "metadata": {"name": "default", "managedFields": [{"manager": "kubectl"}]},
            "spec": {"template": {"spec": {"requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}));
        let Ok(Object::NodePool(pool)) = pool.object else {
            panic!("{:?}", pool.object)
        };
        assert_eq!(pool.api_version, "karpenter.sh/v1");
        assert_eq!(pool.kind, "NodePool");
        assert!(pool.metadata.managed_fields.is_none(), "stripped");
        let pod = parsed::<Pod>(serde_json::json!({
            "metadata": {"name": "p", "namespace": "d", "managedFields": [{"manager": "kubectl"}]},
            "spec": {"containers": []}}));
        let Ok(Object::Pod(pod)) = pod.object else {
            panic!("{:?}", pod.object)
        };
        assert!(pod.metadata.managed_fields.is_none(), "stripped");
    }

    #[test]
    fn what_is_not_an_object_is_malformed_not_a_panic() {
        for v in [
            serde_json::json!(7),
            serde_json::json!(null),
            serde_json::json!([1]),
        ] {
            let p = parsed::<NodeClaim>(v.clone());
            let m = p.object.unwrap_err();
            assert!(m.error.contains("NodeClaim"), "{v}: {}", m.error);
        }
    }

    #[test]
    fn a_recorded_watch_event_becomes_a_nodeclaim() {
        let text = include_str!("../tests/fixtures/watch-nodeclaim-event.json");
        let ev: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(ev["type"], "MODIFIED");
        let p = parsed::<NodeClaim>(ev["object"].clone());
        let Ok(Object::NodeClaim(c)) = p.object else {
            panic!("{:?}", p.object)
        };
        let status = c.status.as_ref().unwrap();
        assert_eq!(
            status.provider_id.as_deref(),
            Some("aws:///us-west-2a/i-0a1b2c3d4e5f67890")
        );
        assert!(c.metadata.managed_fields.is_none(), "stripped");
        let core = crate::state::convert::nodeclaim(&c).unwrap();
        assert!(core.launched && core.registered && core.initialized);
        assert_eq!(core.nodepool, "default");
        assert_eq!(
            core.node_name.as_deref(),
            Some("ip-192-168-12-34.us-west-2.compute.internal")
        );
    }

    #[test]
    fn a_list_reads_as_the_client_reads_it() {
        // kube's client reads a list's page as an `ObjectList` of the watched type; the items
        // carry neither `apiVersion` nor `kind`, and one bad item spoils none of the others.
        let page = r#"{"kind": "NodeClaimList", "apiVersion": "karpenter.sh/v1",
            "metadata": {"resourceVersion": "40"},
            "items": [{"metadata": {"name": "a", "resourceVersion": "38"},
                       "spec": {"requirements": [], "nodeClassRef":
                           {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}},
                      {"metadata": {"name": "b", "resourceVersion": "39"}, "spec": 5}]}"#;
        let list: kube::api::ObjectList<Parsed<NodeClaim>> = serde_json::from_str(page).unwrap();
        assert_eq!(list.metadata.resource_version.as_deref(), Some("40"));
        assert!(matches!(list.items[0].object, Ok(Object::NodeClaim(_))));
        let bad = list.items[1].object.as_ref().unwrap_err();
        assert_eq!(bad.meta.resource_version.as_deref(), Some("39"));
        assert!(bad.error.contains("NodeClaim b"), "{}", bad.error);
    }

    #[test]
    fn a_watch_event_line_reads_as_the_client_reads_it() {
        // kube's client reads each line of a watch as a `WatchEvent` of the watched type.
        let text = include_str!("../tests/fixtures/watch-nodeclaim-event.json");
        let line = serde_json::to_string(&serde_json::from_str::<serde_json::Value>(text).unwrap())
            .unwrap();
        let ev: kube::api::WatchEvent<Parsed<NodeClaim>> = serde_json::from_str(&line).unwrap();
        let kube::api::WatchEvent::Modified(p) = ev else {
            panic!("{ev:?}")
        };
        assert!(matches!(p.object, Ok(Object::NodeClaim(_))));
    }
}
