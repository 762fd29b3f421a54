//! Scenario files: the cluster's manifests, the simulated cloud's knobs and timed steps.
//!
//! ```yaml
//! name: eksdemo
//! seed: 1
//! until: 15m
//! cloud: { launchDelay: 3s, registrationDelay: 35s, terminationDelay: 30s }
//! manifests:
//!   - file: ../fixtures/seed-manifests/04-nodepool-ec2nodeclass-v1.yaml
//! steps:
//!   - { at: 10s, scale: inflate/inflate, replicas: 10 }
//!   - { advance: 5m }
//!   - { scale: inflate/inflate, replicas: 5 }
//! ```
//!
//! Every error names the file, the field path (`steps[2].replicas`) and what is wrong.

pub mod limits;
mod parse;
#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use nodewright_api::document::Document;
use nodewright_core::model::CapacityType;
use thiserror::Error;

pub use parse::{FileSource, ScenarioSource, parse_scenario};

use crate::cloud::CloudConfig;

/// The kinds a scenario may apply.
pub const SUPPORTED_KINDS: &[&str] = &[
    "NodePool",
    "EC2NodeClass",
    "Provisioner",
    "AWSNodeTemplate",
    "Deployment",
    "StatefulSet",
    "Job",
    "Pod",
    "DaemonSet",
    "PodDisruptionBudget",
    "StorageClass",
];

#[derive(Clone, Debug)]
pub struct Scenario {
    /// Where it was read from, for messages.
    pub file: String,
    pub name: String,
    pub description: String,
    /// Seeds every random choice (API errors, interruptions), so a run is reproducible.
    pub seed: u64,
    /// Virtual time at which the run stops; `None` runs until the cluster settles.
    pub until: Option<Duration>,
    pub cloud: CloudConfig,
    /// Applied at time zero, in order.
    pub manifests: Vec<Document>,
    /// Sorted by time; ties keep file order.
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug)]
pub struct Step {
    /// Position in the file's `steps` list.
    pub index: usize,
    pub at: Duration,
    pub action: Action,
}

/// An object named by a step: `Kind/name` or `Kind/namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{ns}/{}", self.kind, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

/// Which nodes an `interrupt` step reclaims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InterruptTarget {
    Node(String),
    /// The oldest `count` nodes matching every given field (ties by name).
    Matching {
        capacity_type: Option<CapacityType>,
        instance_type: Option<String>,
        zone: Option<String>,
        count: u32,
    },
}

#[derive(Clone, Debug)]
pub enum Action {
    Apply(Vec<Document>),
    Delete(ObjectRef),
    /// A Deployment or StatefulSet (`namespace/name` or `name` in `default`).
    Scale {
        namespace: String,
        name: String,
        replicas: u32,
    },
    Interrupt(InterruptTarget),
    /// Only moves time on.
    Advance,
}

/// A problem in a scenario: which file, which field, what is wrong.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{file}: {}{reason}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct ScenarioError {
    pub file: String,
    /// Field path such as `steps[2].replicas`; empty for whole-file problems.
    pub path: String,
    pub reason: String,
}
