//! The kubelet's part for pods on the agent's Nodes, decided over plain data: a pod bound to
//! one of them starts at once (phase Running, every container running and ready, an IP from
//! the node's range), a pod with a deletion timestamp is confirmed deleted at once, and a pod
//! left on a Node that no longer exists is deleted as the pod garbage collector does.
//!
//! As the kubelet does, a pod with `spec.readinessGates` is Ready only while every gate's
//! condition (set by another controller, a load balancer's for instance) is True; a running
//! pod's Ready condition follows its gates as they change.
//!
//! Nothing really runs, so how long a pod's work takes is said on the pod: with the
//! annotation [`RUN_FOR_ANNOTATION`] (`sim.nodewright.io/run-for: 10m`, the simulator's
//! annotation for Jobs) and `restartPolicy: Never` or `OnFailure`, its containers exit with
//! code 0 that long after the pod started, and the pod Succeeds, as a Job's pod whose work is
//! done. A pod with `spec.activeDeadlineSeconds` that runs past it Fails with reason
//! `DeadlineExceeded`, its containers stopped, as the kubelet does; whichever comes first
//! wins. Without either, containers never exit: a pod of a Deployment restarts its containers
//! anyway (`restartPolicy: Always` ignores the annotation), and a Job's pod without the
//! annotation stays Running until it is deleted. Deletion does not wait out the grace period:
//! simulated containers stop the moment they are asked to, which is what a drain of
//! well-behaved workloads looks like (and what kwok does).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use nodewright_api::stable_hash::fnv1a64;
use nodewright_core::time::parse_go_duration;

use super::cached::KeptPod;

/// How long a pod's containers run before they exit with code 0, as a Go duration (`90s`,
/// `10m`, `1h30m`). The same annotation sets a Job's run time in the simulator.
pub const RUN_FOR_ANNOTATION: &str = "sim.nodewright.io/run-for";

/// What the agent plays on one Node, by name. Pods on Nodes not in the map (another
/// kubelet's, or one of the agent's whose instance is shutting down) are left alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kubelet {
    /// Registered, on a running instance: pods start and deletions are confirmed.
    Running { host_ip: String },
    /// The agent's Node that no longer exists: its pods are orphans.
    Gone,
}

/// A pod by name, with the uid every write is made conditional on, so a pod deleted and
/// recreated under the same name (a StatefulSet's) is never mistaken for its predecessor.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PodAction {
    /// Write this status: the pod's containers are running, and it is Ready unless a
    /// readiness gate holds it back (also sent for a running pod whose gates changed).
    Start(PodRef, Box<PodStatus>),
    /// Delete with a grace period of 0: its containers have stopped, or its Node is gone.
    Delete(PodRef),
    /// Write this status: the pod's containers have exited and it Succeeded or Failed.
    Finish(PodRef, Box<PodStatus>),
}

impl PodAction {
    pub fn pod(&self) -> &PodRef {
        match self {
            PodAction::Start(p, _) | PodAction::Delete(p) | PodAction::Finish(p, _) => p,
        }
    }
}

/// How a running pod ends, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Its work is done ([`RUN_FOR_ANNOTATION`]): every container exits with code 0.
    Completed(Timestamp),
    /// It ran past `spec.activeDeadlineSeconds`: the kubelet stops it and it Fails.
    DeadlineExceeded(Timestamp),
}

impl Ending {
    fn at(self) -> Timestamp {
        match self {
            Ending::Completed(t) | Ending::DeadlineExceeded(t) => t,
        }
    }
}

/// When `pod`, started at its `status.startTime`, ends: at its run time if its containers are
/// not restarted on exit, or at its active deadline, whichever is first (the deadline on a
/// tie: the kubelet enforces it before it would see the exit); `None` if neither applies. An
/// annotation that is not a duration is ignored, as a kubelet ignores annotations.
pub fn ending(pod: &Pod) -> Option<Ending> {
    let start = pod.status.as_ref()?.start_time.as_ref()?.0;
    let spec = pod.spec.as_ref()?;
    let restarts = spec.restart_policy.as_deref().unwrap_or("Always") == "Always";
    let completed = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RUN_FOR_ANNOTATION))
        .filter(|_| !restarts)
        .and_then(|v| parse_go_duration(v))
        .and_then(|d| SignedDuration::try_from(d).ok())
        .and_then(|d| start.checked_add(d).ok())
        .map(Ending::Completed);
    let deadline = spec
        .active_deadline_seconds
        .filter(|s| *s > 0)
        .and_then(|s| start.checked_add(SignedDuration::from_secs(s)).ok())
        .map(Ending::DeadlineExceeded);
    match (completed, deadline) {
        (Some(c), Some(d)) if c.at() < d.at() => Some(c),
        (c, d) => d.or(c),
    }
}

/// Pod addresses come from 100.64.0.0/10 (the shared range EKS custom networking hands to
/// pods), one /22 per Node chosen by the Node's name, so each Node holds up to 1,022 pods
/// with distinct addresses. Two Nodes can draw the same /22; addresses are unique per Node,
/// not across the cluster.
const POD_NETWORK: [u8; 4] = [100, 64, 0, 0];
const POD_NETWORK_BITS: u32 = 10;
const NODE_RANGE_BITS: u32 = 22;
const SLOTS: u64 = (1 << (32 - NODE_RANGE_BITS)) - 2;

fn node_range(node: &str) -> u32 {
    let ranges = 1u64 << (NODE_RANGE_BITS - POD_NETWORK_BITS);
    let index = (fnv1a64(node.as_bytes()) % ranges) as u32;
    u32::from_be_bytes(POD_NETWORK) + (index << (32 - NODE_RANGE_BITS))
}

/// The address for `uid` on `node`: a slot picked by the uid's hash, or the next free one
/// after it when another pod holds it (`used` holds the Node's addresses in use). Stable for
/// as long as the pod lives: it is chosen once and then read back from the pod's status.
pub fn pod_ip(node: &str, uid: &str, used: &BTreeSet<u32>) -> Ipv4Addr {
    let base = node_range(node);
    let first = fnv1a64(uid.as_bytes()) % SLOTS;
    let slot = (0..SLOTS)
        .map(|k| (first + k) % SLOTS)
        .find(|s| !used.contains(&(base + 1 + *s as u32)))
        // A full range (over 1,022 pods) reuses the hashed slot.
        .unwrap_or(first);
    Ipv4Addr::from(base + 1 + slot as u32)
}

fn is_terminal(phase: Option<&str>) -> bool {
    matches!(phase, Some("Succeeded" | "Failed"))
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

fn pod_ref(pod: &Pod) -> PodRef {
    PodRef {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone(),
    }
}

/// What to do for `pods` (any pods: those not bound to a Node in `nodes` are skipped), in
/// (namespace, name) order. A pod already Running, Succeeded or Failed needs nothing, so a
/// pass over thousands of settled pods writes nothing.
pub fn pod_plan<'a>(
    nodes: &BTreeMap<String, Kubelet>,
    pods: impl IntoIterator<Item = &'a KeptPod>,
    now: Timestamp,
) -> Vec<PodAction> {
    let mut mine: BTreeMap<(String, String), (&'a KeptPod, &Kubelet, &str)> = BTreeMap::new();
    let mut used: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for pod in pods {
        let Some(node) = pod.node() else {
            continue;
        };
        let Some((node, kubelet)) = nodes.get_key_value(node) else {
            continue;
        };
        if let Some(ip) = pod.pod_ip().and_then(|ip| ip.parse::<Ipv4Addr>().ok()) {
            used.entry(node).or_default().insert(u32::from(ip));
        }
        let r = pod.reference();
        mine.insert((r.namespace, r.name), (pod, kubelet, node.as_str()));
    }
    let mut out = Vec::new();
    for (kept, kubelet, node) in mine.into_values() {
        let host_ip = match kubelet {
            Kubelet::Gone => {
                out.push(PodAction::Delete(kept.reference()));
                continue;
            }
            Kubelet::Running { host_ip } => host_ip,
        };
        if kept.deleting() {
            out.push(PodAction::Delete(kept.reference()));
            continue;
        }
        // A settled pod has nothing left to write until it is deleted.
        let KeptPod::Whole(pod) = kept else {
            continue;
        };
        if is_terminal(phase(pod)) {
            continue;
        }
        if phase(pod) == Some("Running") {
            if let Some(end) = ending(pod).filter(|e| e.at() <= now) {
                out.push(PodAction::Finish(
                    pod_ref(pod),
                    Box::new(finished_status(pod, end)),
                ));
                continue;
            }
            if let Some(status) = readiness_update(pod, now) {
                out.push(PodAction::Start(pod_ref(pod), Box::new(status)));
            }
            continue;
        }
        let ip = if host_network(pod) {
            host_ip.clone()
        } else {
            let r = pod_ref(pod);
            let key = r
                .uid
                .unwrap_or_else(|| format!("{}/{}", r.namespace, r.name));
            let taken = used.entry(node).or_default();
            let ip = pod_ip(node, &key, taken);
            taken.insert(u32::from(ip));
            ip.to_string()
        };
        out.push(PodAction::Start(
            pod_ref(pod),
            Box::new(running_status(pod, host_ip, &ip, now)),
        ));
    }
    out
}

fn true_condition(type_: &str, since: Option<Time>, now: Timestamp) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: "True".into(),
        last_transition_time: Some(since.unwrap_or(Time(now))),
        ..PodCondition::default()
    }
}

fn container_id(pod: &Pod, container: &str) -> String {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    format!(
        "containerd://{:016x}",
        fnv1a64(format!("{uid}/{container}").as_bytes())
    )
}

fn running(pod: &Pod, c: &Container, now: Timestamp) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        image_id: String::new(),
        container_id: Some(container_id(pod, &c.name)),
        ready: true,
        started: Some(true),
        restart_count: 0,
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(now)),
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

fn completed(pod: &Pod, c: &Container, now: Timestamp) -> ContainerStatus {
    ContainerStatus {
        started: Some(false),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(container_id(pod, &c.name)),
                exit_code: 0,
                reason: Some("Completed".into()),
                started_at: Some(Time(now)),
                finished_at: Some(Time(now)),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        }),
        ..running(pod, c, now)
    }
}

/// A container that was running (since `started_at`) and exited with `exit_code` at `at`.
fn exited(
    pod: &Pod,
    c: &ContainerStatus,
    exit_code: i32,
    reason: &str,
    at: Timestamp,
) -> ContainerStatus {
    let started_at = c
        .state
        .as_ref()
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.clone());
    ContainerStatus {
        ready: false,
        started: Some(false),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(container_id(pod, &c.name)),
                exit_code,
                reason: Some(reason.into()),
                started_at,
                finished_at: Some(Time(at)),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        }),
        ..c.clone()
    }
}

/// The status a kubelet reports once `pod` has ended: phase Succeeded (every container exited
/// 0) or Failed with reason `DeadlineExceeded` (every container stopped by SIGTERM, 143);
/// running sidecars stop with them. The pod and its containers are no longer Ready; its
/// addresses and the conditions the agent does not own are kept.
pub fn finished_status(pod: &Pod, end: Ending) -> PodStatus {
    let mut status = pod.status.clone().unwrap_or_default();
    let at = end.at();
    let (phase, exit_code, exit_reason, not_ready) = match end {
        Ending::Completed(_) => ("Succeeded", 0, "Completed", "PodCompleted"),
        Ending::DeadlineExceeded(_) => ("Failed", 143, "Error", "PodFailed"),
    };
    status.phase = Some(phase.into());
    if let Ending::DeadlineExceeded(_) = end {
        status.reason = Some("DeadlineExceeded".into());
        status.message =
            Some("Pod was active on the node longer than the specified deadline".into());
    }
    for c in status.conditions.iter_mut().flatten() {
        if matches!(c.type_.as_str(), "Ready" | "ContainersReady") && c.status != "False" {
            *c = PodCondition {
                type_: c.type_.clone(),
                status: "False".into(),
                reason: Some(not_ready.into()),
                last_transition_time: Some(Time(at)),
                ..PodCondition::default()
            };
        }
    }
    let stop = |c: &ContainerStatus| {
        let running = c.state.as_ref().is_some_and(|s| s.running.is_some());
        if running {
            exited(pod, c, exit_code, exit_reason, at)
        } else {
            c.clone()
        }
    };
    if let Some(cs) = status.container_statuses.as_mut() {
        *cs = cs.iter().map(stop).collect();
    }
    if let Some(cs) = status.init_container_statuses.as_mut() {
        *cs = cs.iter().map(stop).collect();
    }
    status
}

/// Why `pod`'s readiness gates hold it back, in the kubelet's words; `None` when every
/// gate's condition is True (or the pod has no gates).
fn gates_not_ready(pod: &Pod) -> Option<String> {
    let gates = pod.spec.as_ref().and_then(|s| s.readiness_gates.as_ref())?;
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let unready: Vec<String> = gates
        .iter()
        .filter_map(|g| {
            let found = conditions
                .into_iter()
                .flatten()
                .find(|c| c.type_ == g.condition_type);
            match found {
                None => Some(format!(
                    "corresponding condition of pod readiness gate \"{}\" does not exist.",
                    g.condition_type
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                    g.condition_type, c.status
                )),
                Some(_) => None,
            }
        })
        .collect();
    (!unready.is_empty()).then(|| unready.join(", "))
}

/// The pod's Ready condition with every container ready: True, or False with the kubelet's
/// `ReadinessGatesNotReady` reason. The transition time is `since` when the status is
/// unchanged, else `now`.
fn ready_condition(pod: &Pod, previous: Option<&PodCondition>, now: Timestamp) -> PodCondition {
    let held = gates_not_ready(pod);
    let status = if held.is_some() { "False" } else { "True" };
    let since = previous
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone());
    PodCondition {
        type_: "Ready".into(),
        status: status.into(),
        last_transition_time: Some(since.unwrap_or(Time(now))),
        reason: held.is_some().then(|| "ReadinessGatesNotReady".into()),
        message: held,
        ..PodCondition::default()
    }
}

/// The status of a running `pod` whose Ready condition no longer matches its readiness gates,
/// or `None` when it does (a pod without gates always does once it runs).
fn readiness_update(pod: &Pod, now: Timestamp) -> Option<PodStatus> {
    pod.spec.as_ref()?.readiness_gates.as_ref()?;
    let mut status = pod.status.clone().unwrap_or_default();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let previous = conditions.iter().position(|c| c.type_ == "Ready");
    let want = ready_condition(pod, previous.map(|i| &conditions[i]), now);
    match previous {
        Some(i) if conditions[i].status == want.status && conditions[i].message == want.message => {
            return None;
        }
        Some(i) => conditions[i] = want,
        None => conditions.push(want),
    }
    Some(status)
}

/// The status a kubelet reports once `pod`'s containers have started: init containers ran
/// to completion (sidecars, init containers with `restartPolicy: Always`, keep running),
/// every container is running and ready, and the pod is Ready unless one of its readiness
/// gates is not True. Fields the agent does not own (QoS class, other conditions such as
/// `DisruptionTarget` or the gates' own) are kept.
pub fn running_status(pod: &Pod, host_ip: &str, pod_ip: &str, now: Timestamp) -> PodStatus {
    let mut status = pod.status.clone().unwrap_or_default();
    let existing = |type_: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_ && c.status == "True")
            .and_then(|c| c.last_transition_time.clone())
    };
    let scheduled = existing("PodScheduled");
    let ours = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ];
    let mut conditions: Vec<PodCondition> = ours
        .iter()
        .map(|t| {
            if *t == "Ready" {
                return ready_condition(pod, None, now);
            }
            let since = (*t == "PodScheduled").then(|| scheduled.clone()).flatten();
            true_condition(t, since, now)
        })
        .collect();
    conditions.extend(
        status
            .conditions
            .iter()
            .flatten()
            .filter(|c| !ours.contains(&c.type_.as_str()))
            .cloned(),
    );
    let spec = pod.spec.clone().unwrap_or_default();
    status.phase = Some("Running".into());
    status.conditions = Some(conditions);
    status.host_ip = Some(host_ip.into());
    status.host_ips = Some(vec![HostIP { ip: host_ip.into() }]);
    status.pod_ip = Some(pod_ip.into());
    status.pod_ips = Some(vec![PodIP { ip: pod_ip.into() }]);
    status.start_time = status.start_time.or(Some(Time(now)));
    status.container_statuses = Some(
        spec.containers
            .iter()
            .map(|c| running(pod, c, now))
            .collect(),
    );
    status.init_container_statuses = spec.init_containers.map(|init| {
        init.iter()
            .map(|c| {
                if c.restart_policy.as_deref() == Some("Always") {
                    running(pod, c, now)
                } else {
                    completed(pod, c, now)
                }
            })
            .collect()
    });
    status
}

#[cfg(test)]
mod tests {
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
            Some(
                "the status of pod readiness gate \"example.com/warm\" is not \"True\", but False"
            )
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
}
