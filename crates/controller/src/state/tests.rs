use nodewright_core::time::Timestamp;
use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;
use serde_json::json;

use super::*;

fn pod(v: serde_json::Value) -> Object {
    Object::from_value(Kind::Pod, v).unwrap()
}

/// A pending pod `default/<name>` asking for one cpu, which kube-scheduler found no room for.
fn unschedulable(name: &str) -> serde_json::Value {
    merge(
        k8s::pod("default", name),
        json!({
            "metadata": {"managedFields": [{"manager": "kubectl"}]},
            "spec": {"containers": [{"name": "c", "image": "x",
                "env": [{"name": "A", "value": "b"}],
                "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }),
    )
}

#[test]
fn synced_only_after_every_kind_has_listed() {
    let mut s = ClusterState::default();
    for k in Kind::ALL {
        assert!(!s.synced());
        s.apply(WatchEvent::Init(k));
        s.apply(WatchEvent::InitDone(k));
    }
    assert!(s.synced());
}

#[test]
fn a_relist_replaces_the_kind_atomically() {
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(pod(unschedulable("old"))));
    s.apply(WatchEvent::Init(Kind::Pod));
    s.apply(WatchEvent::InitApply(pod(unschedulable("new"))));
    // Until the list is complete the old view stays.
    assert!(s.pods.contains_key("default/old"));
    s.apply(WatchEvent::InitDone(Kind::Pod));
    assert_eq!(
        s.pods.keys().map(|k| &**k).collect::<Vec<_>>(),
        ["default/new"]
    );
}

#[test]
fn unread_fields_are_stripped() {
    let mut a = unschedulable("a");
    a["spec"]["volumes"] = json!([
        {"name": "kube-api-access", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-a"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "cache", "emptyDir": {}}
    ]);
    // The watched object, before the index takes its record.
    let Object::Pod(p) = pod(a.clone()) else {
        unreachable!()
    };
    assert!(p.metadata.managed_fields.is_none());
    let spec = p.spec.as_ref().unwrap();
    assert!(spec.containers[0].env.is_none());
    // What scheduling and termination read stays: requests, and the claim-backed volumes.
    assert!(spec.containers[0].resources.is_some());
    let volumes: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["data", "scratch"]);
    // The index's record keeps the claims termination reads and the engine's model.
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(pod(a)));
    let p = &s.pods["default/a"];
    assert_eq!((p.namespace(), p.name()), ("default", "a"));
    assert_eq!(p.uid.as_deref(), Some("uid-a"));
    assert!(p.provisionable());
    assert_eq!(p.shape.claims, ["data-a"]);
    let model = p.model().unwrap().as_ref().unwrap();
    assert_eq!(model.volume_claims, ["data-a", "a-scratch"]);
    assert_eq!(model.requests.get("cpu"), 1000);
}

#[test]
fn a_claims_lists_keep_no_spare_room() {
    let requirement = |key: &str| json!({"key": key, "operator": "Exists"});
    let condition = |type_: &str| {
        json!({"type": type_, "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z"})
    };
    let requirements = ["a", "b", "c", "d", "e"].map(requirement);
    let conditions = ["Launched", "Registered", "Initialized", "Ready", "Drifted"].map(condition);
    let claim = merge(
        k8s::nodeclaim("c1"),
        json!({"spec": {"requirements": requirements}, "status": {"conditions": conditions}}),
    );
    // Read from text, as the watch reads it: lists of unknown length grow by doubling.
    let parsed: NodeClaim = serde_json::from_str(&claim.to_string()).unwrap();
    assert!(parsed.spec.requirements.capacity() > 5);
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(Object::NodeClaim(Box::new(parsed))));
    let c = &s.nodeclaims["c1"];
    let requirements = &c.spec.requirements;
    assert_eq!((requirements.len(), requirements.capacity()), (5, 5));
    let conditions = c.status.as_ref().unwrap().conditions.as_ref().unwrap();
    assert_eq!((conditions.len(), conditions.capacity()), (5, 5));
}

#[test]
fn a_nodes_unread_status_is_stripped_and_what_loops_read_kept() {
    let extra = json!({
        "metadata": {"labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "2"}, "capacity": {"cpu": "2"},
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": "container runtime is down",
                "lastHeartbeatTime": "2026-01-01T00:00:10Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "c",
                "kernelVersion": "k", "kubeProxyVersion": "v", "kubeletVersion": "v",
                "machineID": "m", "operatingSystem": "linux", "osImage": "o", "systemUUID": "s"}
        }
    });
    let node = merge(k8s::node("n1", "aws:///z/i-1"), extra);
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(
        Object::from_value(Kind::Node, node).unwrap(),
    ));
    let n = &s.nodes["n1"];
    let status = n.status.as_ref().unwrap();
    assert!(status.node_info.is_none() && status.addresses.is_none());
    assert!(status.daemon_endpoints.is_none());
    let ready = &status.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (ready.message.as_ref(), ready.last_heartbeat_time.as_ref()),
        (None, None)
    );
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("KubeletNotReady"))
    );
    assert!(ready.last_transition_time.is_some());
    assert_eq!(status.allocatable.as_ref().unwrap()["cpu"].0, "2");
    assert_eq!(n.spec.as_ref().unwrap().taints.as_ref().unwrap().len(), 1);
    assert_eq!(
        s.node_labels("n1").unwrap()["karpenter.sh/nodepool"],
        "default"
    );
}

#[test]
fn a_pods_record_answers_as_the_pod_would() {
    use crate::termination::{drain_group, waits_for};
    let record = |v: serde_json::Value| PodRecord::from_api(&serde_json::from_value(v).unwrap());
    let mut v = unschedulable("a");
    assert!(record(v.clone()).provisionable());
    // Preempting (a nominated node), terminating, or owned by a DaemonSet: not provisionable.
    v["status"]["nominatedNodeName"] = json!("n9");
    assert!(!record(v.clone()).provisionable());
    v["status"]["nominatedNodeName"] = json!("");
    assert!(record(v.clone()).provisionable());
    let mut ds = v.clone();
    ds["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet",
        "name": "d", "uid": "d", "controller": true}]);
    let ds = record(ds);
    assert!(!ds.provisionable());
    assert_eq!(drain_group(&ds), 1);
    assert!(
        ds.model().is_none(),
        "neither bound nor provisionable: no model"
    );
    // Bound and running: a model and a usage on its node; the conditions read.
    v["spec"]["nodeName"] = json!("n1");
    v["spec"]["priorityClassName"] = json!("system-node-critical");
    v["spec"]["tolerations"] = json!([{"key": "karpenter.sh/disrupted", "operator": "Exists"}]);
    v["status"] = json!({"phase": "Running", "startTime": "2024-06-01T00:00:00Z",
        "conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2024-06-01T00:00:01Z"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-06-01T00:00:02Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2024-06-01T00:00:03Z"}]});
    v["metadata"]["labels"] = json!({"b": "2", "a": "1"});
    let r = record(v.clone());
    assert_eq!((r.namespace(), r.name()), ("default", "a"));
    assert_eq!(&**r.key(), "default/a");
    let mut no_namespace = v.clone();
    no_namespace["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let loose = record(no_namespace);
    assert_eq!(
        (loose.namespace(), loose.name(), &**loose.key()),
        ("", "a", "a")
    );
    assert!(!r.provisionable());
    assert_eq!(r.bound_to(), Some("n1"));
    assert_eq!(r.usage().unwrap().requests.get("cpu"), 1000);
    assert!(r.condition_true("Ready") && !r.condition_true("Initialized"));
    assert_eq!(
        r.true_since("PodScheduled"),
        Some(Timestamp(1_717_200_002_000))
    );
    assert_eq!(r.started, Some(Timestamp(1_717_200_000_000)));
    assert_eq!(drain_group(&r), 2, "critical, not a DaemonSet's");
    assert!(
        !waits_for(&r, Timestamp(0)),
        "tolerates the disrupted taint"
    );
    assert_eq!(
        r.labels().into_iter().collect::<Vec<_>>(),
        [("a".into(), "1".into()), ("b".into(), "2".into())]
    );
}

#[test]
fn a_malformed_object_is_an_error_naming_it() {
    let bad = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "broken"},
        "spec": {"containers": "not a list"}});
    let e = Object::from_value(Kind::Pod, bad).unwrap_err();
    assert!(e.starts_with("Pod broken:"), "{e}");
}

#[test]
fn provisionable_pods_are_the_unschedulable_unbound_ones() {
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(pod(unschedulable("a"))));
    let mut ds = unschedulable("ds");
    ds["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]);
    s.apply(WatchEvent::Apply(pod(ds)));
    let mut fresh = unschedulable("fresh");
    fresh["status"] = json!({"phase": "Pending"});
    s.apply(WatchEvent::Apply(pod(fresh)));
    let mut deleting = unschedulable("deleting");
    deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    s.apply(WatchEvent::Apply(pod(deleting)));
    assert_eq!(pending_pods(&s), vec!["default/a"]);
}

#[test]
fn in_flight_claims_count_until_the_watch_reports_them() {
    let mut s = ClusterState::default();
    let claim: NodeClaim = serde_json::from_value(k8s::nodeclaim("default-abcde")).unwrap();
    s.record_created(claim.clone());
    assert_eq!(s.all_claims().count(), 1);
    assert_eq!(s.in_flight_count(), 1);
    s.apply(WatchEvent::Apply(Object::NodeClaim(Box::new(claim))));
    assert_eq!(s.all_claims().count(), 1);
    assert_eq!(s.in_flight_count(), 0);
}

#[test]
fn nominations_follow_their_pods_and_claims() {
    let mut s = ClusterState::default();
    let t0 = nodewright_core::time::Timestamp(1_717_200_000_000);
    s.apply(WatchEvent::Apply(pod(unschedulable("a"))));
    s.apply(WatchEvent::Apply(pod(unschedulable("b"))));
    s.apply(WatchEvent::Apply(pod(unschedulable("c"))));
    let claim: NodeClaim = serde_json::from_value(k8s::nodeclaim("default-abcde")).unwrap();
    s.record_created(claim);
    s.nominate("default/a", "default-abcde", t0);
    s.nominate("default/b", "default-abcde", t0);
    s.nominate("default/c", "default-gone1", t0);
    // A pod deleted while the pass that placed it ran: no nomination outlives it.
    s.nominate("default/deleted", "default-abcde", t0);
    assert!(!s.nominations.contains_key("default/deleted"));
    // In flight: the nomination holds however long the launch takes.
    let later = t0.plus(std::time::Duration::from_secs(600));
    assert!(s.nominated_claim("default/a", later).is_some());
    // A claim that does not exist holds nothing.
    assert!(s.nominated_claim("default/c", t0).is_none());
    // A relist without pod b drops its nomination.
    s.apply(WatchEvent::Init(Kind::Pod));
    s.apply(WatchEvent::InitApply(pod(unschedulable("a"))));
    s.apply(WatchEvent::InitDone(Kind::Pod));
    assert!(s.nominations.contains_key("default/a"));
    assert!(!s.nominations.contains_key("default/b"));
    // Bound, the pod no longer needs it.
    let mut bound = unschedulable("a");
    bound["spec"]["nodeName"] = json!("n1");
    s.apply(WatchEvent::Apply(pod(bound)));
    assert!(s.nominated_claim("default/a", t0).is_none());
}

#[test]
fn snapshots_share_the_index_pods_and_copy_only_the_one_they_move() {
    let mut s = ClusterState::default();
    let t0 = nodewright_core::time::Timestamp(1_717_200_000_000);
    s.apply(WatchEvent::Apply(pod(unschedulable("a"))));
    s.apply(WatchEvent::Apply(pod(unschedulable("b"))));
    s.record_created(serde_json::from_value(k8s::nodeclaim("default-abcde")).unwrap());
    s.nominate("default/b", "default-abcde", t0);
    let (one, _) = s.snapshot(t0, BTreeMap::new());
    let (two, _) = s.snapshot(t0, BTreeMap::new());
    let named = |snap: &nodewright_core::model::Snapshot, name: &str| {
        snap.pods.iter().find(|p| p.name == name).cloned().unwrap()
    };
    // The pending pod is the index's own, in every snapshot: no copy.
    let held = s.pods["default/a"].model().unwrap().as_ref().unwrap();
    assert!(Arc::ptr_eq(&named(&one, "a"), held));
    assert!(Arc::ptr_eq(&named(&one, "a"), &named(&two, "a")));
    // The nominated pod is placed on its claim in the snapshot, on a copy: the index's model
    // stays pending, as the next snapshot must find it.
    assert_eq!(named(&one, "b").node_name.as_deref(), Some("default-abcde"));
    let held = s.pods["default/b"].model().unwrap().as_ref().unwrap();
    assert_eq!(held.node_name, None);
    assert!(!Arc::ptr_eq(&named(&one, "b"), held));
}

#[test]
fn pods_of_one_template_share_it_and_their_shape_until_one_changes() {
    // A record holds its key and its shape by a pointer each, beside what is the pod's own
    // (416 bytes when it held its name, namespace, labels and owner itself; 272 while its
    // conditions were a `Vec`).
    assert_eq!(std::mem::size_of::<PodRecord>(), 264);
    let mut s = ClusterState::default();
    for name in ["a", "b", "c"] {
        s.apply(WatchEvent::Apply(pod(unschedulable(name))));
    }
    let odd = merge(
        unschedulable("c"),
        json!({"metadata": {"labels": {"tier": "x"}}}),
    );
    s.apply(WatchEvent::Apply(pod(odd)));
    let model = |s: &ClusterState, name: &str| {
        let key = format!("default/{name}");
        Arc::clone(s.pods[key.as_str()].model().unwrap().as_ref().unwrap())
    };
    let (a, b, c) = (model(&s, "a"), model(&s, "b"), model(&s, "c"));
    assert!(Arc::ptr_eq(&a.template, &b.template));
    assert!(!Arc::ptr_eq(&a.template, &c.template));
    let record = |name: &str| &s.pods[format!("default/{name}").as_str()];
    assert!(record("a").shares_shape_with(record("b")));
    assert!(!record("a").shares_shape_with(record("c")));
    assert_eq!(c.labels["tier"], "x");
    // Each pod keeps its own identity; a pod's later event shares again.
    assert_eq!((a.name.as_str(), b.name.as_str()), ("a", "b"));
    s.apply(WatchEvent::Apply(pod(unschedulable("c"))));
    assert!(Arc::ptr_eq(&a.template, &model(&s, "c").template));
}

#[test]
fn claims_listing_the_same_instance_types_share_the_list_with_their_conversions() {
    let claim = |name: &str, types: &[&str]| {
        let types = json!({"spec": {"requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}]}});
        Object::from_value(Kind::NodeClaim, merge(k8s::nodeclaim(name), types)).unwrap()
    };
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(claim("c1", &["m5.large", "m5.xlarge"])));
    s.apply(WatchEvent::Apply(claim("c2", &["m5.large", "m5.xlarge"])));
    s.apply(WatchEvent::Apply(claim("c3", &["m5.large"])));
    let listed = |name: &str| {
        s.nodeclaims[name].spec.requirements[0]
            .values
            .clone()
            .unwrap()
    };
    assert!(Arc::ptr_eq(&listed("c1"), &listed("c2")));
    assert!(!Arc::ptr_eq(&listed("c1"), &listed("c3")));
    let snap = s.snapshot(Timestamp(0), BTreeMap::new()).0;
    for c in &snap.node_claims {
        assert!(Arc::ptr_eq(&c.requirements[0].values, &listed(&c.name)));
    }
}

#[test]
fn claims_of_one_instance_type_and_zone_share_their_labels_nodes_their_annotations() {
    let stamped = json!({"karpenter.sh/nodepool-hash": "42"});
    let claim = |name: &str, zone: &str| {
        let extra = json!({"metadata": {"annotations": stamped,
            "labels": {"node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": zone}}});
        Object::from_value(Kind::NodeClaim, merge(k8s::nodeclaim(name), extra)).unwrap()
    };
    let node = |name: &str| {
        let extra = json!({"metadata": {"annotations": stamped,
            "labels": {"kubernetes.io/hostname": name}}});
        let n = merge(k8s::node(name, &format!("aws:///z/i-{name}")), extra);
        Object::from_value(Kind::Node, n).unwrap()
    };
    let mut s = ClusterState::default();
    for (name, zone) in [
        ("c1", "us-east-1a"),
        ("c2", "us-east-1a"),
        ("c3", "us-east-1b"),
    ] {
        s.apply(WatchEvent::Apply(claim(name, zone)));
    }
    s.apply(WatchEvent::Apply(node("n1")));
    s.apply(WatchEvent::Apply(node("n2")));
    let snap = s.snapshot(Timestamp(0), BTreeMap::new()).0;
    let [c1, c2, c3] = [0, 1, 2].map(|i| &snap.node_claims[i]);
    assert_eq!(c1.labels["topology.kubernetes.io/zone"], "us-east-1a");
    assert!(Arc::ptr_eq(&c1.labels, &c2.labels));
    assert!(!Arc::ptr_eq(&c1.labels, &c3.labels));
    assert!(Arc::ptr_eq(&c1.annotations, &c3.annotations));
    let [n1, n2] = [0, 1].map(|i| &snap.nodes[i]);
    assert_eq!(n2.labels["kubernetes.io/hostname"], "n2");
    assert!(Arc::ptr_eq(&n1.annotations, &n2.annotations));
    assert!(Arc::ptr_eq(&n1.annotations, &c1.annotations));
}

#[test]
fn the_index_holds_one_copy_of_each_pods_key() {
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(pod(unschedulable("a"))));
    let mut bound = unschedulable("b");
    bound["spec"]["nodeName"] = json!("n1");
    s.apply(WatchEvent::Apply(pod(bound)));
    let key = |name: &str| s.pods.get_key_value(name).unwrap().0;
    let pending = s.pending().first().unwrap();
    assert!(Arc::ptr_eq(pending, key("default/a")));
    let on_n1 = s.pods_by_node["n1"].first().unwrap();
    assert!(Arc::ptr_eq(on_n1, key("default/b")));
    assert!(Arc::ptr_eq(s.pods["default/a"].key(), key("default/a")));

    // A pod's next event comes with a key of its own; the index keeps the one it holds, so
    // the sets that name the pod keep pointing at the map's copy, and so do the provisioner's
    // records of it, through a relist too.
    let t0 = Timestamp(1_717_200_000_000);
    let mut a = unschedulable("a");
    a["metadata"]["labels"] = json!({"changed": "yes"});
    s.apply(WatchEvent::Apply(pod(a.clone())));
    s.ack_pod("default/a", t0);
    s.nominate("default/a", "default-abcde", t0);
    let held = |s: &ClusterState| Arc::clone(s.pods.get_key_value("default/a").unwrap().0);
    let one_copy = |s: &ClusterState| {
        let others = [
            s.pods["default/a"].key(),
            s.pending().first().unwrap(),
            s.pod_scheduling.first_key_value().unwrap().0,
            s.nominations.first_key_value().unwrap().0,
        ];
        others.into_iter().all(|k| Arc::ptr_eq(k, &held(s)))
    };
    assert!(one_copy(&s));
    let before = held(&s);
    s.apply(WatchEvent::Init(Kind::Pod));
    s.apply(WatchEvent::InitApply(pod(a)));
    s.apply(WatchEvent::InitDone(Kind::Pod));
    assert!(
        !Arc::ptr_eq(&held(&s), &before),
        "a relist makes the pods anew"
    );
    assert!(one_copy(&s));
    assert_eq!(s.pod_scheduling("default/a").acked, Some(t0));
}

#[test]
fn the_pending_and_per_node_indexes_follow_binds_deletes_and_relists() {
    let mut s = ClusterState::default();
    for n in ["a", "b", "c"] {
        s.apply(WatchEvent::Apply(pod(unschedulable(n))));
    }
    assert_eq!(pending_pods(&s), ["default/a", "default/b", "default/c"]);
    let mut bound = unschedulable("a");
    bound["spec"]["nodeName"] = json!("n1");
    bound["status"] = json!({"phase": "Running"});
    s.apply(WatchEvent::Apply(pod(bound.clone())));
    assert_eq!(pending_pods(&s), ["default/b", "default/c"]);
    assert_eq!(s.pods_on("n1").len(), 1);
    bound["spec"]["nodeName"] = json!("n2");
    s.apply(WatchEvent::Apply(pod(bound.clone())));
    assert!(s.pods_on("n1").is_empty(), "a rebind leaves the old node");
    assert_eq!(s.pods_on("n2").len(), 1);
    s.apply(WatchEvent::Delete(pod(unschedulable("b"))));
    assert_eq!(pending_pods(&s), ["default/c"]);
    s.apply(WatchEvent::Init(Kind::Pod));
    s.apply(WatchEvent::InitApply(pod(unschedulable("d"))));
    s.apply(WatchEvent::InitDone(Kind::Pod));
    assert_eq!(pending_pods(&s), ["default/d"]);
    assert!(s.pods_on("n2").is_empty());

    let node =
        |name: &str, pid: &str| Object::from_value(Kind::Node, k8s::node(name, pid)).unwrap();
    s.apply(WatchEvent::Apply(node("n1", "aws:///a/i-1")));
    assert_eq!(s.node_by_provider_id("aws:///a/i-1").len(), 1);
    s.apply(WatchEvent::Apply(node("n1", "aws:///a/i-2")));
    assert!(s.node_by_provider_id("aws:///a/i-1").is_empty());
    assert_eq!(s.node_by_provider_id("aws:///a/i-2").len(), 1);
}

#[test]
fn cached_pod_models_follow_their_pods() {
    use nodewright_core::resources::CPU;
    let mut s = ClusterState::default();
    let snap_cpu = |s: &ClusterState| -> Vec<(String, i64)> {
        let (snap, _) = s.snapshot(Timestamp(0), Default::default());
        snap.pods
            .iter()
            .map(|p| (p.name.clone(), p.requests.get(CPU)))
            .collect()
    };
    s.apply(WatchEvent::Apply(pod(unschedulable("a"))));
    assert_eq!(snap_cpu(&s), [("a".to_string(), 1000)]);
    // A changed pod is converted again: the snapshot never sees a stale model.
    let mut bigger = unschedulable("a");
    bigger["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("3");
    s.apply(WatchEvent::Apply(pod(bigger.clone())));
    assert_eq!(snap_cpu(&s), [("a".to_string(), 3000)]);
    // Bound, it counts on its node; deleted, it is gone from both.
    bigger["spec"]["nodeName"] = json!("n1");
    bigger["status"] = json!({"phase": "Running"});
    s.apply(WatchEvent::Apply(pod(bigger.clone())));
    assert_eq!(snap_cpu(&s), [("a".to_string(), 3000)]);
    assert_eq!(s.node_usage("n1").unwrap().requests.get(CPU), 3000);
    s.apply(WatchEvent::Delete(pod(bigger)));
    assert!(snap_cpu(&s).is_empty());
    assert!(s.node_usage("n1").is_none());
    // A pod that does not convert is reported by the snapshot, as before.
    let mut bad = unschedulable("b");
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("lots");
    s.apply(WatchEvent::Apply(pod(bad)));
    let (snap, problems) = s.snapshot(Timestamp(0), Default::default());
    assert!(snap.pods.is_empty());
    assert!(
        problems.iter().any(|p| p.starts_with("Pod default/b:")),
        "{problems:?}"
    );
}

#[test]
fn a_converted_node_keeps_its_resource_version() {
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "resourceVersion": "4711", "labels": {"a": "b"}},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}}
    }))
    .unwrap();
    let n = convert::node(&node).unwrap();
    assert_eq!(n.resource_version, "4711");
}

#[test]
fn a_nodepool_deleted_or_made_anew_loses_its_registration_record() {
    let pool = |uid: &str| -> Object {
        let meta = json!({"metadata": {"uid": uid, "generation": 1}});
        Object::from_value(Kind::NodePool, merge(k8s::nodepool("p"), meta)).unwrap()
    };
    let of_p = json!({"metadata": {"labels": {"karpenter.sh/nodepool": "p"}}});
    let claim: NodeClaim = serde_json::from_value(merge(k8s::nodeclaim("c"), of_p)).unwrap();
    let failed = |s: &mut ClusterState| {
        for _ in 0..4 {
            s.record_registration(&claim, Err("registration timeout".into()));
        }
    };
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(pool("one")));
    failed(&mut s);
    let current = |s: &ClusterState| s.registration_status(s.nodepools.get("p").unwrap());
    assert_ne!(
        current(&s),
        nodewright_core::registration_health::Status::Unknown
    );
    // The same pool updated keeps it.
    s.apply(WatchEvent::Apply(pool("one")));
    assert_ne!(
        current(&s),
        nodewright_core::registration_health::Status::Unknown
    );
    // Made anew under the same name, it starts over.
    s.apply(WatchEvent::Apply(pool("two")));
    assert_eq!(
        current(&s),
        nodewright_core::registration_health::Status::Unknown
    );
    failed(&mut s);
    s.apply(WatchEvent::Delete(pool("two")));
    assert!(s.registration_health.is_empty());
}

/// A claim's registered Node that kube-scheduler filled with other pods keeps only the
/// nominees that still fit beside them; the rest go back to the solve (upstream counts an
/// existing node's room by what is bound there). A claim with no Node keeps all of its own.
#[test]
fn nominees_a_full_node_cannot_hold_go_back_to_the_solve() {
    let t0 = nodewright_core::time::Timestamp(1_717_200_000_000);
    let snapshot_at = |node_cpu: &str, registered: bool| {
        let mut s = ClusterState::default();
        let mut claim = k8s::nodeclaim("default-abcde");
        if registered {
            claim["status"] = json!({"nodeName": "n1", "providerID": "aws:///z/i-1"});
            let mut node = k8s::node("n1", "aws:///z/i-1");
            node["status"] = json!({"allocatable": {"cpu": node_cpu, "pods": "110"},
                "capacity": {"cpu": node_cpu, "pods": "110"}});
            s.apply(WatchEvent::Apply(
                Object::from_value(Kind::Node, node).unwrap(),
            ));
        }
        s.apply(WatchEvent::Apply(
            Object::from_value(Kind::NodeClaim, claim).unwrap(),
        ));
        // Bound by kube-scheduler, though nominated elsewhere.
        for name in ["x", "y"] {
            let mut p = unschedulable(name);
            p["spec"]["nodeName"] = json!("n1");
            p["status"] = json!({"phase": "Running"});
            s.apply(WatchEvent::Apply(pod(p)));
        }
        for name in ["a", "b"] {
            s.apply(WatchEvent::Apply(pod(unschedulable(name))));
            s.nominate(&format!("default/{name}"), "default-abcde", t0);
        }
        let (snap, problems) = s.snapshot(t0, BTreeMap::new());
        assert!(problems.is_empty(), "{problems:?}");
        let on = |name: &str| {
            snap.pods
                .iter()
                .find(|p| p.name == name)
                .and_then(|p| p.node_name.clone())
        };
        (on("a"), on("b"))
    };
    let n1 = || Some("n1".to_string());
    assert_eq!(snapshot_at("2", true), (None, None));
    assert_eq!(snapshot_at("3", true), (n1(), None));
    assert_eq!(snapshot_at("4", true), (n1(), n1()));
    let claim = || Some("default-abcde".to_string());
    assert_eq!(snapshot_at("2", false), (claim(), claim()));
}

/// A claim's Node that has joined before its kubelet wrote its status holds nothing by its
/// own account; until the claim is initialized it is counted as holding what the claim
/// launched with (upstream does the same), so its nominees keep their places there instead of
/// being launched for again. Once initialized, the Node's own status counts.
#[test]
fn a_node_not_yet_initialized_holds_what_its_claim_launched_with() {
    let t0 = nodewright_core::time::Timestamp(1_717_200_000_000);
    let nominees_on = |initialized: bool| {
        let mut s = ClusterState::default();
        let mut claim = k8s::nodeclaim("default-abcde");
        let condition = if initialized { "True" } else { "False" };
        claim["status"] = json!({"nodeName": "n1", "providerID": "aws:///z/i-1",
            "allocatable": {"cpu": "4", "pods": "110"}, "capacity": {"cpu": "4", "pods": "110"},
            "conditions": [{"type": "Initialized", "status": condition,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        // No status yet: a kubelet creates its Node first and writes the status after.
        s.apply(WatchEvent::Apply(
            Object::from_value(Kind::Node, k8s::node("n1", "aws:///z/i-1")).unwrap(),
        ));
        s.apply(WatchEvent::Apply(
            Object::from_value(Kind::NodeClaim, claim).unwrap(),
        ));
        for name in ["a", "b"] {
            s.apply(WatchEvent::Apply(pod(unschedulable(name))));
            s.nominate(&format!("default/{name}"), "default-abcde", t0);
        }
        let (snap, problems) = s.snapshot(t0, BTreeMap::new());
        assert!(problems.is_empty(), "{problems:?}");
        // The index's own Node is untouched; the snapshot holds a copy.
        assert!(s.nodes["n1"].status.is_none());
        snap.pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some("n1"))
            .count()
    };
    assert_eq!(nominees_on(false), 2);
    assert_eq!(nominees_on(true), 0);
}

#[test]
fn a_nodes_heartbeat_is_stored_but_changes_nothing_the_loops_read() {
    let node = |version: &str, heartbeat: &str, ready: &str| {
        let extra = json!({
            "metadata": {"resourceVersion": version,
                "managedFields": [{"manager": "kubelet", "time": heartbeat}]},
            "status": {"conditions": [{"type": "Ready", "status": ready,
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        });
        Object::from_value(Kind::Node, merge(k8s::node("n1", "aws:///z/i-1"), extra)).unwrap()
    };
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(node("1", "2026-01-01T00:00:10Z", "True")));
    let (changes, nodes, status) = (s.changes(), s.node_log.head(), s.status_log.head());
    s.apply(WatchEvent::Apply(node("2", "2026-01-01T00:00:20Z", "True")));
    assert_eq!(s.changes(), changes, "a heartbeat is no change");
    assert!(matches!(s.node_log.since(Some(nodes)), changes::Since::Keys(k) if k.is_empty()));
    assert!(matches!(s.status_log.since(Some(status)), changes::Since::Keys(k) if k.is_empty()));
    // The copy is the new one all the same: patches are conditioned on its resourceVersion.
    assert_eq!(
        s.nodes["n1"].metadata.resource_version.as_deref(),
        Some("2")
    );
    assert_eq!(s.node_by_provider_id("aws:///z/i-1").len(), 1);
    s.apply(WatchEvent::Apply(node(
        "3",
        "2026-01-01T00:00:30Z",
        "False",
    )));
    assert_ne!(s.changes(), changes, "a condition that moves is a change");
    assert!(matches!(s.node_log.since(Some(nodes)), changes::Since::Keys(k) if k == ["n1"]));
}

#[test]
fn a_pod_event_that_leaves_its_record_as_it_was_changes_nothing() {
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(pod(unschedulable("a"))));
    let (changes, pods) = (s.changes(), s.pod_log.head());
    // Only what the record does not keep moved: the version and a container's status.
    let mut again = unschedulable("a");
    again["metadata"]["resourceVersion"] = json!("2");
    again["status"]["containerStatuses"] = json!([{"name": "c", "image": "x", "imageID": "",
        "ready": false, "restartCount": 1}]);
    s.apply(WatchEvent::Apply(pod(again)));
    assert_eq!(s.changes(), changes);
    assert!(matches!(s.pod_log.since(Some(pods)), changes::Since::Keys(k) if k.is_empty()));
    let mut bound = unschedulable("a");
    bound["spec"]["nodeName"] = json!("n1");
    s.apply(WatchEvent::Apply(pod(bound)));
    assert_ne!(s.changes(), changes);
    assert!(s.pending().is_empty());
}

#[test]
fn snapshots_share_each_nodes_and_claims_conversion_until_it_changes() {
    let node = |version: &str, heartbeat: &str, team: &str| {
        let extra = json!({
            "metadata": {"resourceVersion": version, "labels": {"team": team}},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        });
        Object::from_value(Kind::Node, merge(k8s::node("n1", "aws:///z/i-1"), extra)).unwrap()
    };
    let claim = |team: &str| {
        let extra = json!({"metadata": {"labels": {"team": team}}});
        Object::from_value(Kind::NodeClaim, merge(k8s::nodeclaim("c1"), extra)).unwrap()
    };
    let mut s = ClusterState::default();
    s.apply(WatchEvent::Apply(node("1", "2026-01-01T00:00:10Z", "a")));
    s.apply(WatchEvent::Apply(claim("a")));
    let snap = |s: &ClusterState| s.snapshot(Timestamp(0), BTreeMap::new()).0;
    let first = snap(&s);
    let second = snap(&s);
    assert!(Arc::ptr_eq(&first.nodes[0], &second.nodes[0]));
    assert!(Arc::ptr_eq(&first.node_claims[0], &second.node_claims[0]));

    // A heartbeat keeps the conversion; a change of what core reads makes a new one.
    s.apply(WatchEvent::Apply(node("2", "2026-01-01T00:00:20Z", "a")));
    assert!(Arc::ptr_eq(&first.nodes[0], &snap(&s).nodes[0]));
    s.apply(WatchEvent::Apply(node("3", "2026-01-01T00:00:30Z", "b")));
    s.apply(WatchEvent::Apply(claim("b")));
    let changed = snap(&s);
    assert_eq!(changed.nodes[0].labels["team"], "b");
    assert_eq!(changed.nodes[0].resource_version, "3");
    assert_eq!(changed.node_claims[0].labels["team"], "b");

    // Deleted, or dropped by a relist, it is gone from the next snapshot.
    s.apply(WatchEvent::Delete(claim("b")));
    assert!(snap(&s).node_claims.is_empty());
    s.apply(WatchEvent::Init(Kind::Node));
    s.apply(WatchEvent::InitDone(Kind::Node));
    assert!(snap(&s).nodes.is_empty());
}

#[test]
fn a_nodes_labels_are_held_once_by_its_conversion() {
    // Each version a heartbeat ten seconds after the last.
    let node = |version: u32, zone: &str, cpu: &str| {
        let heartbeat = format!("2026-01-01T00:{:02}:{:02}Z", version / 6, version % 6 * 10);
        let extra = json!({
            "metadata": {"resourceVersion": version.to_string(),
                "labels": {"karpenter.sh/nodepool": "default", "topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"cpu": cpu}, "conditions": [{"type": "Ready",
                "status": "True", "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        });
        Object::from_value(Kind::Node, merge(k8s::node("n1", "aws:///z/i-1"), extra)).unwrap()
    };
    let labels = |zone: &str| {
        BTreeMap::from([
            ("karpenter.sh/nodepool".to_string(), "default".to_string()),
            ("topology.kubernetes.io/zone".to_string(), zone.to_string()),
        ])
    };
    let mut s = ClusterState::default();
    let mut bound = unschedulable("a");
    bound["spec"]["nodeName"] = json!("n1");
    s.apply(WatchEvent::Apply(pod(bound)));
    s.apply(WatchEvent::Apply(node(1, "z1", "2")));
    assert_eq!(
        s.nodes["n1"].metadata.labels, None,
        "the conversion holds them"
    );
    assert_eq!(s.node_labels("n1"), Some(&labels("z1")));
    assert_eq!(
        s.node_object("n1").unwrap().metadata.labels,
        Some(labels("z1"))
    );

    // A heartbeat is still no change, though the new copy carries the labels and the index's
    // does not.
    let (changes, pods) = (s.changes(), s.pod_log.head());
    s.apply(WatchEvent::Apply(node(2, "z1", "2")));
    assert_eq!(s.changes(), changes);
    assert_eq!(s.node_labels("n1"), Some(&labels("z1")));

    // A label the pods' gauge rows carry, moved with a heartbeat, is a change to the Node and
    // to the pods bound to it.
    s.apply(WatchEvent::Apply(node(3, "z2", "2")));
    assert_ne!(s.changes(), changes);
    assert_eq!(s.node_labels("n1"), Some(&labels("z2")));
    assert!(matches!(s.pod_log.since(Some(pods)), changes::Since::Keys(k) if k.len() == 1));

    // A Node that does not convert keeps its labels, through a heartbeat too.
    s.apply(WatchEvent::Apply(node(4, "z2", "lots")));
    assert_eq!(s.nodes["n1"].metadata.labels, Some(labels("z2")));
    let changes = s.changes();
    s.apply(WatchEvent::Apply(node(5, "z2", "lots")));
    assert_eq!(s.changes(), changes);
    assert_eq!(s.nodes["n1"].metadata.labels, Some(labels("z2")));
    assert_eq!(s.node_labels("n1"), Some(&labels("z2")));
    // Converting again, it hands them over.
    s.apply(WatchEvent::Apply(node(6, "z2", "2")));
    assert_eq!(s.nodes["n1"].metadata.labels, None);
    assert_eq!(s.node_labels("n1"), Some(&labels("z2")));
}

#[test]
fn a_bound_pods_usage_names_its_node_by_the_records_node_name() {
    // No second copy of the node's name: the model is the engine's pod and the usage.
    assert_eq!(std::mem::size_of::<pod::PodModel>(), 80);
    let mut s = ClusterState::default();
    let mut bound = unschedulable("a");
    bound["spec"]["nodeName"] = json!("n1");
    bound["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "250m"}});
    s.apply(WatchEvent::Apply(pod(bound.clone())));
    let (node, usage) = s.pods["default/a"].counts_on().unwrap();
    assert_eq!((node, usage.requests.get("cpu")), ("n1", 250));
    assert_eq!(s.node_usage("n1").unwrap().requests.get("cpu"), 250);
    // Finished, it counts nowhere.
    bound["status"]["phase"] = json!("Succeeded");
    s.apply(WatchEvent::Apply(pod(bound)));
    assert_eq!(s.pods["default/a"].counts_on(), None);
    assert!(s.node_usage("n1").is_none());
}
