use super::*;
use nodewright_testkit::json::{merge, merge_into};
use nodewright_testkit::k8s;
use serde_json::json;

fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_100).unwrap()
}

fn pod(name: &str, node: &str, extra: serde_json::Value) -> Pod {
    let v = merge(
        k8s::pod("web", name),
        json!({"spec": {"nodeName": node},
                "status": {"qosClass": "Burstable", "conditions": [
                    {"type": "PodScheduled", "status": "True",
                     "lastTransitionTime": "2023-11-14T22:13:30Z"}]}}),
    );
    serde_json::from_value(merge(v, extra)).unwrap()
}

/// The plan for whole pods (as a watch without [`keep_pod`] would hold them) at [`now`].
///
/// [`keep_pod`]: crate::kwok::keep_pod
fn plan_whole<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<PodAction> {
    let kept: Vec<KeptPod> = pods
        .into_iter()
        .map(|p| KeptPod::Whole(Box::new(p.clone())))
        .collect();
    pod_plan(&nodes(), &kept, now())
}

fn nodes() -> BTreeMap<String, Kubelet> {
    BTreeMap::from([
        (
            "ip-10-1-2-3.ec2.internal".to_string(),
            Kubelet::Running {
                host_ip: "10.1.2.3".into(),
            },
        ),
        ("ip-10-9-9-9.ec2.internal".to_string(), Kubelet::Gone),
    ])
}

const NODE: &str = "ip-10-1-2-3.ec2.internal";

fn summary(actions: &[PodAction]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            PodAction::Start(p, _) => format!("start {}", p.name),
            PodAction::Delete(p) => format!("delete {}", p.name),
            PodAction::Finish(p, _) => format!("finish {}", p.name),
        })
        .collect()
}

#[test]
fn a_pod_bound_to_a_running_node_starts() {
    let p = pod(
        "web-1",
        NODE,
        json!({"spec": {"initContainers": [
            {"name": "migrate", "image": "migrate:1"},
            {"name": "proxy", "image": "envoy:1", "restartPolicy": "Always"}
        ]}}),
    );
    let actions = plan_whole([&p]);
    let [PodAction::Start(r, status)] = actions.as_slice() else {
        panic!("expected one start, got {actions:?}");
    };
    assert_eq!(
        (r.namespace.as_str(), r.name.as_str(), r.uid.as_deref()),
        ("web", "web-1", Some("uid-web-1"))
    );
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.host_ip.as_deref(), Some("10.1.2.3"));
    assert_eq!(status.qos_class.as_deref(), Some("Burstable"), "kept");
    assert_eq!(status.start_time, Some(Time(now())));
    let ip: Ipv4Addr = status.pod_ip.as_deref().unwrap().parse().unwrap();
    assert_eq!(ip.octets()[..1], [100]);
    assert!((64..128).contains(&ip.octets()[1]), "inside 100.64.0.0/10");
    assert_eq!(status.pod_ips.as_ref().unwrap()[0].ip, ip.to_string());
    let conditions: BTreeMap<&str, (&str, Option<&Time>)> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| {
            (
                c.type_.as_str(),
                (c.status.as_str(), c.last_transition_time.as_ref()),
            )
        })
        .collect();
    for t in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(conditions[t].0, "True", "{t}");
    }
    assert_eq!(conditions["Ready"].1, Some(&Time(now())));
    assert_eq!(
        conditions["PodScheduled"].1.unwrap().0.as_second(),
        1_700_000_010,
        "the scheduler's transition time is kept"
    );
    let [app] = status.container_statuses.as_deref().unwrap() else {
        panic!("one container status");
    };
    assert_eq!(
        (app.name.as_str(), app.image.as_str(), app.ready),
        ("app", "nginx:1.27", true)
    );
    assert!(app.state.as_ref().unwrap().running.is_some());
    let init = status.init_container_statuses.as_deref().unwrap();
    let terminated = init[0].state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (0, Some("Completed"))
    );
    assert!(init[1].state.as_ref().unwrap().running.is_some(), "sidecar");
}

#[test]
fn settled_pods_and_pods_elsewhere_need_nothing() {
    let running = pod("running", NODE, json!({"status": {"phase": "Running"}}));
    let done = pod("done", NODE, json!({"status": {"phase": "Succeeded"}}));
    let elsewhere = pod("elsewhere", "kind-worker", json!({}));
    let unbound: Pod = serde_json::from_value(json!({
        "metadata": {"name": "unbound", "namespace": "web"},
        "spec": {"containers": [{"name": "app"}]}
    }))
    .unwrap();
    let terminating_elsewhere = pod(
        "t",
        "kind-worker",
        json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:30Z"}}),
    );
    let pods = [running, done, elsewhere, unbound, terminating_elsewhere];
    assert!(plan_whole(&pods).is_empty());
}

#[test]
fn terminating_pods_and_orphans_are_deleted() {
    let terminating = pod(
        "terminating",
        NODE,
        json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:30Z"},
                   "status": {"phase": "Running"}}),
    );
    let orphan = pod(
        "orphan",
        "ip-10-9-9-9.ec2.internal",
        json!({"status": {"phase": "Running"}}),
    );
    let new = pod("new", NODE, json!({}));
    let actions = plan_whole([&terminating, &orphan, &new]);
    assert_eq!(
        summary(&actions),
        ["start new", "delete orphan", "delete terminating"]
    );
    assert_eq!(
        actions[2].pod().uid.as_deref(),
        Some("uid-terminating"),
        "the delete is made conditional on the uid"
    );
}

#[test]
fn addresses_are_stable_and_distinct_on_a_node() {
    let used = BTreeSet::new();
    let a = pod_ip(NODE, "uid-a", &used);
    assert_eq!(a, pod_ip(NODE, "uid-a", &used));
    // Another pod whose hash lands on a taken address gets the next one.
    let taken = BTreeSet::from([u32::from(a)]);
    let b = pod_ip(NODE, "uid-a", &taken);
    assert_eq!(u32::from(b), u32::from(a) + 1);
    // The same Node's pods stay in one /22.
    let c = pod_ip(NODE, "uid-c", &used);
    assert_eq!(u32::from(a) >> 10, u32::from(c) >> 10);

    // Many pods starting at once on one Node, some already addressed, never share one.
    let mut pods: Vec<Pod> = (0..300)
        .map(|i| pod(&format!("p{i}"), NODE, json!({})))
        .collect();
    let existing = pod_ip(NODE, "uid-p7", &used).to_string();
    pods.push(pod(
        "old",
        NODE,
        json!({"status": {"phase": "Running", "podIP": existing}}),
    ));
    let mut ips: BTreeSet<String> = plan_whole(&pods)
        .iter()
        .map(|a| match a {
            PodAction::Start(_, s) => s.pod_ip.clone().unwrap(),
            PodAction::Delete(_) | PodAction::Finish(..) => panic!("only starts"),
        })
        .collect();
    assert_eq!(ips.len(), 300);
    assert!(
        ips.insert(existing),
        "the running pod's address is not reused"
    );
}

#[test]
fn a_host_network_pod_takes_the_node_address() {
    let p = pod("ds", NODE, json!({"spec": {"hostNetwork": true}}));
    let actions = plan_whole([&p]);
    let [PodAction::Start(_, status)] = actions.as_slice() else {
        panic!("expected one start, got {actions:?}");
    };
    assert_eq!(status.pod_ip.as_deref(), Some("10.1.2.3"));
}

fn condition<'a>(status: &'a PodStatus, type_: &str) -> &'a PodCondition {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition"))
}

fn started(actions: &[PodAction]) -> &PodStatus {
    let [PodAction::Start(_, status)] = actions else {
        panic!("expected one start, got {actions:?}");
    };
    status
}

#[test]
fn a_readiness_gate_without_its_condition_keeps_the_pod_unready() {
    let gated = json!({"spec": {"readinessGates": [
        {"conditionType": "target-health.elbv2.k8s.aws/web"},
        {"conditionType": "example.com/warm"}
    ]}});
    let p = pod("web-1", NODE, gated.clone());
    let actions = plan_whole([&p]);
    let status = started(&actions);
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(condition(status, "ContainersReady").status, "True");
    let ready = condition(status, "Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("ReadinessGatesNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some(
            "corresponding condition of pod readiness gate \"target-health.elbv2.k8s.aws/web\" does not exist., corresponding condition of pod readiness gate \"example.com/warm\" does not exist."
        )
    );

    // One gate True, the other False: still not Ready, and the message names the False one.
    let mut half = gated.clone();
    merge_into(
        &mut half,
        json!({"status": {"conditions": [
            {"type": "target-health.elbv2.k8s.aws/web", "status": "True"},
            {"type": "example.com/warm", "status": "False"}
        ]}}),
    );
    let p = pod("web-2", NODE, half);
    let actions = plan_whole([&p]);
    let ready = condition(started(&actions), "Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(
        ready.message.as_deref(),
        Some("the status of pod readiness gate \"example.com/warm\" is not \"True\", but False")
    );
    // The gates' own conditions belong to their controllers and are kept.
    assert_eq!(
        condition(started(&actions), "example.com/warm").status,
        "False"
    );
}

#[test]
fn a_running_pod_becomes_ready_when_its_gates_turn_true() {
    let gate = "target-health.elbv2.k8s.aws/web";
    let unready = |gate_status: &str| {
        pod(
            "web-1",
            NODE,
            json!({"spec": {"readinessGates": [{"conditionType": gate}]},
                       "status": {"phase": "Running", "conditions": [
                    {"type": "PodScheduled", "status": "True",
                     "lastTransitionTime": "2023-11-14T22:13:30Z"},
                    {"type": "ContainersReady", "status": "True",
                     "lastTransitionTime": "2023-11-14T22:13:30Z"},
                    {"type": "Ready", "status": "False", "reason": "ReadinessGatesNotReady",
                     "message": format!("corresponding condition of pod readiness gate \"{gate}\" does not exist."),
                     "lastTransitionTime": "2023-11-14T22:13:30Z"},
                    {"type": gate, "status": gate_status}]}}),
        )
    };
    // The gate is still False: Ready stays False, but the message changes with it.
    let actions = plan_whole([&unready("False")]);
    let ready = condition(started(&actions), "Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(
        ready.last_transition_time.as_ref().unwrap().0.as_second(),
        1_700_000_010,
        "no transition: the time is kept"
    );
    // The gate turned True: the pod becomes Ready now.
    let p = unready("True");
    let actions = plan_whole([&p]);
    let status = started(&actions);
    let ready = condition(status, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("True", None)
    );
    assert_eq!(ready.last_transition_time, Some(Time(now())));
    assert_eq!(condition(status, gate).status, "True");
    // Once Ready matches the gates, there is nothing more to write.
    let mut settled = p.clone();
    settled.status = Some(status.clone());
    assert!(plan_whole([&settled]).is_empty());
    // A running pod without gates is never rewritten (see also the settled-pods test).
    let plain = pod("plain", NODE, json!({"status": {"phase": "Running"}}));
    assert!(plan_whole([&plain]).is_empty());
}

/// A pod the agent started at `now() - age_secs`, with `extra` merged in.
fn started_pod(name: &str, age_secs: i64, extra: serde_json::Value) -> Pod {
    let start = Timestamp::from_second(now().as_second() - age_secs).unwrap();
    let mut p = pod(name, NODE, extra);
    let status = running_status(&p, "10.1.2.3", "100.64.0.9", start);
    p.status = Some(status);
    p
}

fn finished(actions: &[PodAction]) -> &PodStatus {
    let [PodAction::Finish(_, status)] = actions else {
        panic!("expected one finish, got {actions:?}");
    };
    status
}

fn job(run_for: &str) -> serde_json::Value {
    json!({"metadata": {"annotations": {RUN_FOR_ANNOTATION: run_for}},
               "spec": {"restartPolicy": "Never"}})
}

#[test]
fn a_job_pod_succeeds_once_its_run_time_is_up() {
    // Nine minutes into ten: still running, nothing to write.
    let p = started_pod("batch-1", 540, job("10m"));
    assert!(plan_whole([&p]).is_empty());

    let p = started_pod("batch-1", 600, job("10m"));
    let actions = plan_whole([&p]);
    let status = finished(&actions);
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    assert_eq!(status.reason, None);
    assert_eq!(status.pod_ip.as_deref(), Some("100.64.0.9"), "kept");
    let [app] = status.container_statuses.as_deref().unwrap() else {
        panic!("one container status");
    };
    assert!(!app.ready);
    let t = app.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));
    assert_eq!(t.finished_at, Some(Time(now())));
    assert_eq!(
        t.started_at.as_ref().map(|s| s.0.as_second()),
        Some(now().as_second() - 600),
        "the container ran from the pod's start"
    );
    let ready = condition(status, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("PodCompleted"))
    );
    assert_eq!(condition(status, "ContainersReady").status, "False");
    assert_eq!(condition(status, "PodScheduled").status, "True", "kept");

    // Finished a while ago (the agent was down): the exit is dated when it happened.
    let p = started_pod("batch-1", 900, job("10m"));
    let actions = plan_whole([&p]);
    let t = finished(&actions).container_statuses.as_ref().unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .unwrap();
    assert_eq!(
        t.finished_at.map(|f| f.0.as_second()),
        Some(now().as_second() - 300)
    );

    // Once the pod is Succeeded there is nothing more to do.
    let mut done = p.clone();
    done.status = Some(finished(&actions).clone());
    assert!(plan_whole([&done]).is_empty());
}

#[test]
fn a_pod_past_its_active_deadline_fails() {
    let mut extra = job("10m");
    merge_into(&mut extra, json!({"spec": {"activeDeadlineSeconds": 300}}));
    assert!(plan_whole([&started_pod("b", 299, extra.clone())]).is_empty());
    let p = started_pod("b", 300, extra);
    let actions = plan_whole([&p]);
    let status = finished(&actions);
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
    let t = status.container_statuses.as_ref().unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .unwrap();
    assert_eq!(t.exit_code, 143);
    assert_eq!(
        condition(status, "Ready").reason.as_deref(),
        Some("PodFailed")
    );

    // Any pod has a deadline, a Deployment's too; a run time shorter than the deadline
    // completes first.
    let deployment = json!({"spec": {"activeDeadlineSeconds": 60}});
    let actions = plan_whole([&started_pod("d", 60, deployment)]);
    assert_eq!(finished(&actions).phase.as_deref(), Some("Failed"));
    let mut quick = job("1m");
    merge_into(&mut quick, json!({"spec": {"activeDeadlineSeconds": 300}}));
    let actions = plan_whole([&started_pod("q", 600, quick)]);
    assert_eq!(finished(&actions).phase.as_deref(), Some("Succeeded"));
}

#[test]
fn a_run_time_needs_containers_that_are_not_restarted_and_a_duration() {
    // restartPolicy Always (the default) restarts an exited container: the pod runs on.
    let always = json!({"metadata": {"annotations": {RUN_FOR_ANNOTATION: "1m"}}});
    assert!(plan_whole([&started_pod("web", 600, always)]).is_empty());
    // OnFailure: an exit with code 0 ends the pod.
    let mut on_failure = job("1m");
    merge_into(
        &mut on_failure,
        json!({"spec": {"restartPolicy": "OnFailure"}}),
    );
    let actions = plan_whole([&started_pod("j", 60, on_failure)]);
    assert_eq!(finished(&actions).phase.as_deref(), Some("Succeeded"));
    // Not a duration: ignored.
    assert!(plan_whole([&started_pod("j", 600, job("soon"))]).is_empty());
    // A pod not started yet starts first; its run time counts from then.
    let fresh = pod("j", NODE, job("0s"));
    let actions = plan_whole([&fresh]);
    let status = started(&actions);
    let mut running = fresh.clone();
    running.status = Some(status.clone());
    let actions = plan_whole([&running]);
    assert_eq!(finished(&actions).phase.as_deref(), Some("Succeeded"));
}

#[test]
fn sidecars_stop_with_the_pod() {
    let mut extra = job("1m");
    merge_into(
        &mut extra,
        json!({"spec": {"initContainers": [
            {"name": "migrate", "image": "migrate:1"},
            {"name": "proxy", "image": "envoy:1", "restartPolicy": "Always"}
        ]}}),
    );
    let actions = plan_whole([&started_pod("j", 60, extra)]);
    let init = finished(&actions).init_container_statuses.clone().unwrap();
    let states: Vec<(i32, Option<Time>)> = init
        .iter()
        .map(|c| {
            let t = c.state.as_ref().unwrap().terminated.as_ref().unwrap();
            (t.exit_code, t.finished_at.clone())
        })
        .collect();
    let start = Time(Timestamp::from_second(now().as_second() - 60).unwrap());
    assert_eq!(
        states,
        [(0, Some(start)), (0, Some(Time(now())))],
        "the init container's own exit is kept; the sidecar stops now"
    );
}
