//! kube-runtime watchers feeding [`ClusterState`]: one per kind, over the dynamic API so a
//! single object that does not parse is logged, counted and skipped instead of failing the
//! whole list; each stream restarts with backoff after errors.

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tracing::{debug, warn};

use crate::state::{Kind, Object, SharedState, WatchEvent, lock};
use crate::write::kube::api_resource;

/// Converts one watched object, or says why it cannot be used.
pub fn typed(kind: Kind, o: DynamicObject) -> Result<Object, String> {
    let mut v = serde_json::to_value(&o).map_err(|e| e.to_string())?;
    // The dynamic type may omit these; typed objects expect them.
    let (_, _, k, _, _) = kind.gvk();
    v["apiVersion"] = serde_json::Value::String(kind.api_version());
    v["kind"] = serde_json::Value::String(k.to_string());
    Object::from_value(kind, v)
}

/// Applies one watcher event to the state, skipping (and counting) objects that do not parse.
pub fn apply(state: &SharedState, kind: Kind, event: Event<DynamicObject>) {
    let convert = |o: DynamicObject| match typed(kind, o) {
        Ok(o) => Some(o),
        Err(e) => {
            warn!(kind = kind.name(), error = %e, "skipping object that does not parse");
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
    let api: Api<DynamicObject> = Api::all_with(client, &api_resource(kind));
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => apply(&state, kind, event),
            Err(e) => warn!(kind = kind.name(), error = %e, "watch error; retrying with backoff"),
        }
    }
    debug!(kind = kind.name(), "watch stream ended");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ClusterState;

    fn dynamic(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_bad_object_is_skipped_and_the_stream_goes_on() {
        let state = ClusterState::shared();
        apply(&state, Kind::Pod, Event::Init);
        apply(
            &state,
            Kind::Pod,
            Event::InitApply(dynamic(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "d"},
                "spec": {"containers": 7}}))),
        );
        apply(
            &state,
            Kind::Pod,
            Event::InitApply(dynamic(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "good", "namespace": "d"},
                "spec": {"containers": []}}))),
        );
        apply(&state, Kind::Pod, Event::InitDone);
        let s = lock(&state);
        assert_eq!(s.skipped, 1);
        assert!(s.pods.contains_key("d/good"));
        assert!(s.is_synced(Kind::Pod));
    }

    #[test]
    fn a_recorded_watch_event_becomes_a_nodeclaim() {
        let text = include_str!("../tests/fixtures/watch-nodeclaim-event.json");
        let ev: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(ev["type"], "MODIFIED");
        let o = typed(Kind::NodeClaim, dynamic(ev["object"].clone())).unwrap();
        let Object::NodeClaim(c) = o else { panic!() };
        let status = c.status.unwrap();
        assert_eq!(
            status.provider_id.as_deref(),
            Some("aws:///us-west-2a/i-0a1b2c3d4e5f67890")
        );
        assert!(c.metadata.managed_fields.is_none(), "stripped");
        let core = crate::state::convert::nodeclaim(&match typed(
            Kind::NodeClaim,
            dynamic(ev["object"].clone()),
        )
        .unwrap()
        {
            Object::NodeClaim(c) => *c,
            _ => unreachable!(),
        })
        .unwrap();
        assert!(core.launched && core.registered && core.initialized);
        assert_eq!(core.nodepool, "default");
        assert_eq!(
            core.node_name.as_deref(),
            Some("ip-192-168-12-34.us-west-2.compute.internal")
        );
    }
}
