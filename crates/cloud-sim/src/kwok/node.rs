//! The Node a kubelet registers for a simulated instance, and which Nodes to register,
//! heartbeat or delete, decided over plain data ([`desired_node`], [`plan`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::InstanceState;
use nodewright_core::labels;
use nodewright_core::resources::{Resources, format_amount};
use tokio::time::Instant;

use crate::cloud::SimInstance;
use crate::fleet::private_ip;

/// Marks the Nodes this agent registered, so it never touches anyone else's.
pub const AGENT_LABEL: &str = "sim.nodewright/agent";
use nodewright_core::taints::UNREGISTERED_TAINT;
const KUBELET_VERSION: &str = "v1.33.0-eks-sim";

/// `ip-10-x-y-z.ec2.internal`, from the instance's private address ([`private_ip`]): the same
/// instance always gets the same name, and no two of a fleet's instances share one.
pub fn node_name(provider_id: &str) -> String {
    let [x, y, z] = private_ip(provider_id);
    format!("ip-10-{x}-{y}-{z}.ec2.internal")
}

/// The Node's InternalIP, `10.x.y.z` as in its name.
pub fn node_ip(provider_id: &str) -> String {
    let [x, y, z] = private_ip(provider_id);
    format!("10.{x}.{y}.{z}")
}

pub(crate) fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.iter()
        .map(|(k, v)| (k.to_owned(), Quantity(format_amount(k, v))))
        .collect()
}

fn taint(t: &nodewright_api::v1::Taint) -> Taint {
    Taint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: t.effect.clone(),
        time_added: None,
    }
}

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> NodeCondition {
    NodeCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The Node a kubelet on `instance` registers for `claim`: the claim's labels plus the
/// instance's well-known labels and hostname; the `karpenter.sh/unregistered` taint, the
/// claim's taints and its startup taints; capacity and allocatable of the instance type.
pub fn desired_node(instance: &SimInstance, claim: &NodeClaim, now: Timestamp) -> Node {
    let name = node_name(&instance.instance.provider_id);
    let mut node_labels = claim.metadata.labels.clone().unwrap_or_default();
    for (k, v) in instance.labels.iter() {
        node_labels.insert(k.clone(), v.clone());
    }
    node_labels.insert(labels::HOSTNAME.into(), name.clone());
    node_labels
        .entry(labels::OS.into())
        .or_insert_with(|| "linux".into());
    node_labels.insert(AGENT_LABEL.into(), "true".into());

    let mut taints = vec![Taint {
        key: UNREGISTERED_TAINT.into(),
        value: None,
        effect: "NoExecute".into(),
        time_added: None,
    }];
    let claim_taints = claim.spec.taints.iter().flatten();
    let startup = claim.spec.startup_taints.iter().flatten();
    for t in claim_taints.chain(startup) {
        if !taints
            .iter()
            .any(|x| x.key == t.key && x.effect == t.effect)
        {
            taints.push(taint(t));
        }
    }

    let ip = node_ip(&instance.instance.provider_id);
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(node_labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(instance.instance.provider_id.clone()),
            taints: Some(taints),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(quantities(&instance.capacity)),
            allocatable: Some(quantities(&instance.allocatable)),
            conditions: Some(vec![
                condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                    now,
                ),
                condition(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                    now,
                ),
                condition(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                    now,
                ),
                condition(
                    "Ready",
                    "True",
                    "KubeletReady",
                    "kubelet is posting ready status",
                    now,
                ),
            ]),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: ip,
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: name.clone(),
                },
                NodeAddress {
                    type_: "InternalDNS".into(),
                    address: name,
                },
            ]),
            node_info: Some(NodeSystemInfo {
                architecture: node_labels.get(labels::ARCH).cloned().unwrap_or_default(),
                operating_system: node_labels.get(labels::OS).cloned().unwrap_or_default(),
                kubelet_version: KUBELET_VERSION.into(),
                kube_proxy_version: KUBELET_VERSION.into(),
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    }
}

/// The cluster's NodeClaims by name, as the agent's watch keeps them.
pub type Claims = BTreeMap<String, Arc<NodeClaim>>;

/// One step of the agent.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Register this Node (and its Lease).
    Register(Box<Node>),
    /// Renew this Node's Lease, and write its status when a report is due.
    Heartbeat(String),
    /// Delete this Node (and its Lease): its instance is gone.
    Delete(String),
}

/// What to do, given the cloud's instances, the cluster's NodeClaims by name and the names of
/// the Nodes this agent registered. An instance registers once it has been running for
/// `register_after` since launch and its claim exists; a Node whose instance is terminated
/// (or unknown) is deleted; every other registered Node on a running instance gets a
/// heartbeat. Output is sorted by node name.
pub fn plan(
    instances: &[SimInstance],
    claims: &Claims,
    registered: &BTreeSet<String>,
    now: Instant,
    register_after: Duration,
    wall: Timestamp,
) -> Vec<Action> {
    let mut out: BTreeMap<String, Action> = BTreeMap::new();
    let mut alive = BTreeSet::new();
    for i in instances {
        let name = node_name(&i.instance.provider_id);
        match i.instance.state {
            InstanceState::Terminated => continue,
            InstanceState::Pending | InstanceState::ShuttingDown => {
                // A shutting-down instance's kubelet has stopped: no heartbeat, but the Node
                // stays until the instance is gone.
                alive.insert(name);
                continue;
            }
            InstanceState::Running => {}
        }
        alive.insert(name.clone());
        if registered.contains(&name) {
            out.insert(name.clone(), Action::Heartbeat(name));
            continue;
        }
        if now.duration_since(i.launched_at()) < register_after {
            continue;
        }
        let Some(claim) = i.instance.nodeclaim().and_then(|c| claims.get(c)) else {
            continue;
        };
        out.insert(
            name,
            Action::Register(Box::new(desired_node(i, claim, wall))),
        );
    }
    for name in registered {
        if !alive.contains(name) {
            out.insert(name.clone(), Action::Delete(name.clone()));
        }
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests;
