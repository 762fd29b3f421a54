//! Kubernetes workloads into `core` pods: a Pod as served by the API, or a controller
//! (Deployment, ReplicaSet, StatefulSet, Job, DaemonSet) expanded to the pods it would create.

mod controllers;
mod pod;

pub use controllers::{Workload, daemonset_pod, expand_document, expand_template};
pub use pod::{effective_requests, label_selector, pod_from_api, term as node_selector_term};

use crate::error::FieldError;

/// A workload problem, located in its source document.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("{object}: {error}")]
pub struct WorkloadError {
    /// `file[index] Kind/name` or `Kind namespace/name`.
    pub object: String,
    pub error: FieldError,
}
