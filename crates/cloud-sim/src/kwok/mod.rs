//! The node agent: plays the kubelet for [`SimCloud`](crate::SimCloud) instances, as kwok
//! does. For each running instance launched for a NodeClaim it registers a Node the way an
//! EKS node bootstrapped from Karpenter's user data would (name, labels, taints, capacity,
//! providerID, a Ready condition), keeps it alive (its Lease in `kube-node-lease`, and its
//! status every five minutes as a kubelet reports it), and deletes it once the instance has
//! terminated. For the pods bound to those Nodes it reports their containers running and
//! Ready, ends them when their work is done or their deadline passes (see [`pod`]), and
//! confirms their deletion.
//!
//! What should exist is decided by pure functions over plain data ([`node::plan`] for Nodes,
//! [`pod::pod_plan`] for pods); [`NodeAgent`] only watches, applies the plans and sleeps.

mod agent;
mod cached;
pub mod machines;
pub mod node;
pub mod pod;
mod watches;
mod writes;

pub use agent::{AgentConfig, AgentError, NodeAgent};
pub use cached::{KeptPod, SettledPod, keep_pod};
pub use machines::{ClaimMachines, Machines, ProviderMachines};
pub use node::{AGENT_LABEL, Action, Claims, desired_node, node_ip, node_name, plan};
pub use pod::{
    Ending, Kubelet, PodAction, PodRef, RUN_FOR_ANNOTATION, ending, finished_status, pod_plan,
    running_status,
};
