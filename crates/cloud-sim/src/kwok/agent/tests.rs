//! The agent against the API server stand-in of `nodewright_testkit::api_server`.

use super::*;
use crate::cloud::{SimCloud, SimCloudConfig, SimInstance};
use crate::fleet::FleetConfig;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::{CloudProvider, Instance};
use nodewright_core::resources::Resources;
use nodewright_testkit::api_server::{Shared, start};
use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;
use serde_json::{Value, json};

fn nodeclaim() -> NodeClaim {
    let m5 = json!({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]});
    let extra = json!({"metadata": {"labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"requirements": [m5]}});
    serde_json::from_value(merge(k8s::nodeclaim("nc-1"), extra)).unwrap()
}

fn cloud(termination_delay: Duration) -> Arc<SimCloud> {
    Arc::new(
        SimCloud::new(SimCloudConfig {
            fleet: FleetConfig {
                launch_delay: Duration::ZERO,
                termination_delay,
                ..FleetConfig::default()
            },
            ..SimCloudConfig::default()
        })
        .unwrap(),
    )
}

/// A fake API server holding the NodeClaim `nc-1`, a cloud with its instance running, and
/// an agent that registers at once.
async fn setup(config: AgentConfig) -> (Shared, Arc<SimCloud>, NodeAgent, String) {
    let (client, shared) = start().await;
    let cloud = cloud(Duration::ZERO);
    let nc = nodeclaim();
    shared.lock().unwrap().objects.insert(
        "/apis/karpenter.sh/v1/nodeclaims/nc-1".into(),
        serde_json::to_value(&nc).unwrap(),
    );
    let launched = cloud.create(&nc, None).await.unwrap();
    let agent = NodeAgent::new(
        cloud.clone(),
        client,
        AgentConfig {
            registration_delay: Duration::ZERO,
            ..config
        },
    );
    (shared, cloud, agent, launched.instance.provider_id)
}

fn pod(name: &str, node: &str, extra: Value) -> (String, Value) {
    let v = merge(
        k8s::pod("web", name),
        json!({"metadata": {"resourceVersion": "1"}, "spec": {"nodeName": node},
            "status": {"qosClass": "BestEffort"}}),
    );
    (
        format!("/api/v1/namespaces/web/pods/{name}"),
        merge(v, extra),
    )
}

fn count(shared: &Shared, prefix: &str) -> usize {
    shared
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.starts_with(prefix))
        .count()
}

#[tokio::test]
async fn registers_heartbeats_and_deletes_nodes() {
    let (shared, cloud, mut agent, provider_id) = setup(AgentConfig::default()).await;
    let name = node_name(&provider_id);
    agent.wait_for_watches().await;
    agent.reconcile().await.unwrap();
    {
        let o = &shared.lock().unwrap().objects;
        let node = &o[&format!("/api/v1/nodes/{name}")];
        assert_eq!(node["spec"]["providerID"], json!(provider_id));
        assert_eq!(
            node["metadata"]["labels"]["karpenter.sh/nodepool"],
            "default"
        );
        assert_eq!(node["status"]["conditions"][3]["type"], "Ready");
        let lease =
            &o[&format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")];
        assert_eq!(lease["spec"]["holderIdentity"], json!(name));
    }
    // A second pass neither registers again nor fails.
    agent.reconcile().await.unwrap();
    assert_eq!(count(&shared, "POST /api/v1/nodes"), 1);
    cloud.delete(&provider_id).await.unwrap();
    agent.reconcile().await.unwrap();
    let o = &shared.lock().unwrap().objects;
    assert!(
        !o.contains_key(&format!("/api/v1/nodes/{name}")),
        "the node goes with its instance"
    );
    assert!(!o.keys().any(|k| k.contains("kube-node-lease")));
}

/// Lists (not watches) of `path` the agent sent.
fn lists(shared: &Shared, path: &str) -> usize {
    let prefix = format!("GET {path}?");
    shared
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.starts_with(&prefix) && !r.contains("watch=true"))
        .count()
}

#[tokio::test]
async fn passes_read_nodeclaims_and_nodes_from_watches_not_lists() {
    let (shared, _cloud, mut agent, provider_id) = setup(AgentConfig {
        heartbeat: Duration::ZERO,
        status_report: Duration::ZERO,
        ..AgentConfig::default()
    })
    .await;
    agent.wait_for_watches().await;
    for _ in 0..5 {
        agent.reconcile().await.unwrap();
    }
    // Each watch listed once, before the first pass; the passes listed nothing.
    assert_eq!(lists(&shared, "/apis/karpenter.sh/v1/nodeclaims"), 1);
    assert_eq!(lists(&shared, "/api/v1/nodes"), 1);
    assert_eq!(count(&shared, "POST /api/v1/nodes"), 1);
    let status = format!("PATCH /api/v1/nodes/{}/status", node_name(&provider_id));
    assert_eq!(
        count(&shared, &status),
        5,
        "the status, then four heartbeats"
    );
}

#[tokio::test]
async fn the_agents_own_node_writes_stand_while_the_watch_lags() {
    let (shared, cloud, mut agent, provider_id) = setup(AgentConfig {
        heartbeat: Duration::ZERO,
        status_report: Duration::ZERO,
        ..AgentConfig::default()
    })
    .await;
    let name = node_name(&provider_id);
    agent.wait_for_watches().await;
    let hold = |held: bool| shared.lock().unwrap().watches_held = held;
    hold(true);
    // Created while the watch shows nothing: heartbeated, not created again.
    for _ in 0..3 {
        agent.reconcile().await.unwrap();
    }
    assert_eq!(count(&shared, "POST /api/v1/nodes"), 1);
    let status = format!("PATCH /api/v1/nodes/{name}/status");
    assert_eq!(count(&shared, &status), 3);
    hold(false);
    wait_for_nodes(&agent, |n| n.contains(&name)).await;
    agent.reconcile().await.unwrap();
    assert_eq!(count(&shared, "POST /api/v1/nodes"), 1);

    // Deleted while the watch still shows it: neither deleted again nor heartbeated.
    hold(true);
    cloud.delete(&provider_id).await.unwrap();
    for _ in 0..3 {
        agent.reconcile().await.unwrap();
    }
    assert_eq!(count(&shared, "DELETE /api/v1/nodes/"), 1);
    assert_eq!(count(&shared, &status), 4);
    hold(false);
    wait_for_nodes(&agent, |n| !n.contains(&name)).await;
    agent.reconcile().await.unwrap();
    assert_eq!(count(&shared, "DELETE /api/v1/nodes/"), 1);
    assert_eq!(count(&shared, "POST /api/v1/nodes"), 1);
}

#[tokio::test]
async fn the_lease_is_renewed_every_pass_and_the_status_only_when_a_report_is_due() {
    let (shared, _cloud, mut agent, provider_id) = setup(AgentConfig {
        heartbeat: Duration::ZERO,
        status_report: Duration::from_secs(3600),
        ..AgentConfig::default()
    })
    .await;
    let name = node_name(&provider_id);
    agent.wait_for_watches().await;
    for _ in 0..5 {
        agent.reconcile().await.unwrap();
    }
    let lease = format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}");
    let lease_writes = shared
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| !r.starts_with("GET") && r.contains(&lease))
        .count();
    assert_eq!(lease_writes, 5, "registration, then a renewal every pass");
    let status = format!("PATCH /api/v1/nodes/{name}/status");
    assert_eq!(count(&shared, &status), 1, "only at registration");
}

/// Adds NodeClaims `nc-2` to `nc-{n}`, each with its instance running, beside `setup`'s
/// `nc-1`; before the agent's watches start, so their first lists hold them.
async fn more_claims(shared: &Shared, cloud: &SimCloud, n: usize) {
    for i in 2..=n {
        let mut nc = nodeclaim();
        nc.metadata.name = Some(format!("nc-{i}"));
        shared.lock().unwrap().objects.insert(
            format!("/apis/karpenter.sh/v1/nodeclaims/nc-{i}"),
            serde_json::to_value(&nc).unwrap(),
        );
        cloud.create(&nc, None).await.unwrap();
    }
}

#[tokio::test]
async fn nodes_register_together_and_a_failed_one_holds_up_no_other() {
    let (shared, cloud, mut agent, _) = setup(AgentConfig::default()).await;
    more_claims(&shared, &cloud, 8).await;
    agent.wait_for_watches().await;
    {
        let mut s = shared.lock().unwrap();
        s.write_delay = Duration::from_millis(20);
        s.fail_next_status = true;
    }
    assert!(
        agent.reconcile().await.is_err(),
        "the refused write is reported"
    );
    {
        let s = shared.lock().unwrap();
        assert!(s.most_writes_in_flight > 1, "one registration at a time");
        let leases = s.objects.keys().filter(|k| k.contains("/leases/")).count();
        assert_eq!(
            leases, 7,
            "every Node but the one whose status was refused has its Lease"
        );
    }
    // The next pass gives that one its status and Lease without creating it again.
    agent.reconcile().await.unwrap();
    assert_eq!(count(&shared, "POST /api/v1/nodes"), 8);
    let s = shared.lock().unwrap();
    let nodes: Vec<&Value> = (s.objects.iter())
        .filter(|(k, _)| k.starts_with("/api/v1/nodes/"))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(nodes.len(), 8);
    assert!(nodes.iter().all(|n| n["status"]["capacity"]["cpu"] == "2"));
    assert_eq!(
        s.objects.keys().filter(|k| k.contains("/leases/")).count(),
        8
    );
}

#[tokio::test]
async fn heartbeats_go_out_together_and_a_failed_one_holds_up_no_other() {
    let (shared, cloud, mut agent, _) = setup(AgentConfig {
        heartbeat: Duration::ZERO,
        status_report: Duration::ZERO,
        ..AgentConfig::default()
    })
    .await;
    more_claims(&shared, &cloud, 8).await;
    agent.wait_for_watches().await;
    agent.reconcile().await.unwrap();
    assert_eq!(count(&shared, "POST /api/v1/nodes"), 8);
    {
        let mut s = shared.lock().unwrap();
        s.write_delay = Duration::from_millis(20);
        s.most_writes_in_flight = 0;
        s.fail_next_status = true;
        s.requests.clear();
    }
    assert!(
        agent.reconcile().await.is_err(),
        "the refused write is reported"
    );
    let s = shared.lock().unwrap();
    assert!(
        s.most_writes_in_flight > 1,
        "one write at a time: a pass over thousands of Nodes outlasts their Leases"
    );
    let renewed = s
        .requests
        .iter()
        .filter(|r| r.starts_with("PATCH") && r.contains("/leases/"))
        .count();
    let statuses = s
        .requests
        .iter()
        .filter(|r| r.starts_with("PATCH /api/v1/nodes/") && r.contains("/status"))
        .count();
    assert_eq!(renewed, 8, "every Lease renewed, the refused status aside");
    assert_eq!(statuses, 8, "every status written, one of them refused");
}

/// Waits until the agent's Node watch shows what `shown` asks for.
async fn wait_for_nodes(agent: &NodeAgent, shown: impl Fn(&BTreeSet<String>) -> bool) {
    for _ in 0..500 {
        if shown(&agent.watches.as_ref().unwrap().node_names()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the Node watch never caught up");
}

#[tokio::test]
async fn nothing_is_done_until_the_watches_have_listed() {
    let (shared, _cloud, mut agent, _) = setup(AgentConfig::default()).await;
    shared.lock().unwrap().lists_fail = true;
    for _ in 0..3 {
        agent.reconcile().await.unwrap();
    }
    assert_eq!(count(&shared, "POST"), 0);
    assert_eq!(count(&shared, "PATCH"), 0);
    shared.lock().unwrap().lists_fail = false;
    agent.wait_for_watches().await;
    agent.reconcile().await.unwrap();
    assert_eq!(count(&shared, "POST /api/v1/nodes"), 1);
}

#[tokio::test]
async fn a_node_whose_first_status_write_failed_gets_its_capacity_on_the_next_heartbeat() {
    let (shared, _cloud, mut agent, provider_id) = setup(AgentConfig {
        heartbeat: Duration::ZERO,
        ..AgentConfig::default()
    })
    .await;
    agent.wait_for_watches().await;
    shared.lock().unwrap().fail_next_status = true;
    let key = format!("/api/v1/nodes/{}", node_name(&provider_id));
    assert!(agent.reconcile().await.is_err());
    assert!(
        shared.lock().unwrap().objects[&key]["status"].is_null(),
        "created without a status"
    );
    agent.reconcile().await.unwrap();
    let o = &shared.lock().unwrap().objects;
    assert_eq!(o[&key]["status"]["capacity"]["cpu"], "2");
    assert_eq!(o[&key]["status"]["allocatable"]["cpu"], "1930m");
}

#[tokio::test]
async fn pods_on_its_nodes_start_and_terminating_ones_are_deleted() {
    let (shared, cloud, mut agent, provider_id) = setup(AgentConfig::default()).await;
    let node = node_name(&provider_id);
    let (pending, p) = pod("web-1", &node, json!({}));
    let (terminating, t) = pod(
        "web-2",
        &node,
        json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:50Z"},
               "status": {"phase": "Running"}}),
    );
    let (foreign, f) = pod("other", "kind-worker", json!({}));
    {
        let o = &mut shared.lock().unwrap().objects;
        o.insert(pending.clone(), p);
        o.insert(terminating.clone(), t);
        o.insert(foreign.clone(), f);
    }
    agent.wait_for_watches().await;
    agent.reconcile().await.unwrap();
    {
        let o = &shared.lock().unwrap().objects;
        let status = &o[&pending]["status"];
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["hostIP"], json!(node_ip(&provider_id)));
        assert!(
            status["podIP"].as_str().unwrap().starts_with("100."),
            "{status}"
        );
        assert_eq!(status["qosClass"], "BestEffort", "kept");
        assert_eq!(status["containerStatuses"][0]["ready"], true);
        assert!(
            !o.contains_key(&terminating),
            "deleted with a grace period of 0 (a graceful delete only marks it)"
        );
        assert_eq!(o[&foreign]["status"]["phase"], "Pending", "not ours");
    }
    // Settled pods are not written again, whether or not the watch has caught up.
    for _ in 0..3 {
        agent.reconcile().await.unwrap();
    }
    assert_eq!(count(&shared, "PATCH /api/v1/namespaces/web/pods/"), 1);
    assert_eq!(count(&shared, "DELETE /api/v1/namespaces/web/pods/"), 1);

    // The instance goes, its Node with it, and the pod left on it is deleted as an orphan.
    cloud.delete(&provider_id).await.unwrap();
    agent.reconcile().await.unwrap();
    let o = &shared.lock().unwrap().objects;
    assert!(!o.contains_key(&pending), "the orphan is deleted");
    assert!(o.contains_key(&foreign));
}

#[tokio::test]
async fn a_pod_bound_later_arrives_through_the_watch() {
    let (shared, _cloud, mut agent, provider_id) = setup(AgentConfig::default()).await;
    agent.wait_for_watches().await;
    agent.reconcile().await.unwrap();
    let (key, p) = pod("late", &node_name(&provider_id), json!({}));
    shared.lock().unwrap().objects.insert(key.clone(), p);
    for _ in 0..200 {
        agent.reconcile().await.unwrap();
        if shared.lock().unwrap().objects[&key]["status"]["phase"] == "Running" {
            let watched = shared
                .lock()
                .unwrap()
                .requests
                .iter()
                .any(|r| r.starts_with("GET /api/v1/pods?") && r.contains("watch=true"));
            assert!(watched, "the pod came through the watch");
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the pod never started");
}

fn instance(provider_id: &str, state: InstanceState) -> SimInstance {
    SimInstance::for_tests(
        Instance {
            provider_id: provider_id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: nodewright_core::model::CapacityType::OnDemand,
            image_id: None,
            state,
            launched_at: None,
            tags: BTreeMap::new(),
        },
        Resources::new(),
        Resources::new(),
        BTreeMap::new(),
        Instant::now(),
    )
}

#[test]
fn kubelets_run_on_registered_running_instances_and_are_gone_with_their_nodes() {
    let running = instance("aws:///z/i-run", InstanceState::Running);
    let stopping = instance("aws:///z/i-stop", InstanceState::ShuttingDown);
    let terminated = instance("aws:///z/i-gone", InstanceState::Terminated);
    let young = instance("aws:///z/i-new", InstanceState::Running);
    let n = |i: &SimInstance| node_name(&i.instance.provider_id);
    let listed = BTreeSet::from([
        n(&running),
        n(&stopping),
        n(&terminated),
        "ip-10-0-0-1.ec2.internal".to_string(),
    ]);
    // This pass deleted the terminated instance's Node and the one with no instance.
    let registered = BTreeSet::from([n(&running), n(&stopping)]);
    let k = kubelets(
        &[
            running.clone(),
            stopping.clone(),
            terminated.clone(),
            young.clone(),
        ],
        &listed,
        &registered,
    );
    assert_eq!(
        k,
        BTreeMap::from([
            (
                n(&running),
                Kubelet::Running {
                    host_ip: node_ip("aws:///z/i-run")
                }
            ),
            (n(&terminated), Kubelet::Gone),
            (n(&young), Kubelet::Gone),
            ("ip-10-0-0-1.ec2.internal".to_string(), Kubelet::Gone),
        ])
    );
}

#[tokio::test]
async fn pods_finish_when_their_work_is_done_or_their_deadline_passes() {
    let (shared, _cloud, mut agent, provider_id) = setup(AgentConfig::default()).await;
    let node = node_name(&provider_id);
    // A Job's pod whose work takes no time, and a pod that has run past its deadline.
    let (job, j) = pod(
        "job-1",
        &node,
        json!({"metadata": {"annotations": {"sim.nodewright.io/run-for": "0s"}},
               "spec": {"restartPolicy": "Never"}}),
    );
    let (late, l) = pod(
        "late",
        &node,
        json!({"spec": {"activeDeadlineSeconds": 60},
               "status": {"phase": "Running", "startTime": "2023-11-14T22:13:20Z",
                          "containerStatuses": [{"name": "app", "image": "nginx:1.27",
                              "imageID": "", "ready": true, "restartCount": 0,
                              "state": {"running": {"startedAt": "2023-11-14T22:13:20Z"}}}]}}),
    );
    {
        let o = &mut shared.lock().unwrap().objects;
        o.insert(job.clone(), j);
        o.insert(late.clone(), l);
    }
    agent.wait_for_watches().await;
    // The first pass starts the Job's pod and stops the late one; the next finishes the Job's.
    agent.reconcile().await.unwrap();
    {
        let o = &shared.lock().unwrap().objects;
        assert_eq!(o[&job]["status"]["phase"], "Running");
        let status = &o[&late]["status"];
        assert_eq!(status["phase"], "Failed");
        assert_eq!(status["reason"], "DeadlineExceeded");
        assert_eq!(
            status["containerStatuses"][0]["state"]["terminated"]["startedAt"],
            "2023-11-14T22:13:20Z"
        );
    }
    agent.reconcile().await.unwrap();
    {
        let o = &shared.lock().unwrap().objects;
        let status = &o[&job]["status"];
        assert_eq!(status["phase"], "Succeeded");
        let terminated = &status["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(terminated["exitCode"], 0);
        assert_eq!(terminated["reason"], "Completed");
        assert_eq!(status["containerStatuses"][0]["ready"], false);
    }
    // Finished pods are not written again, whether or not the watch has caught up.
    for _ in 0..3 {
        agent.reconcile().await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(count(&shared, "PATCH /api/v1/namespaces/web/pods/"), 3);
    assert_eq!(count(&shared, "DELETE /api/v1/namespaces/web/pods/"), 0);
}
