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
mod tests;
