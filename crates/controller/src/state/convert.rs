//! API objects the planner needs into `core` model types: `api`'s conversions (the same ones
//! `plan` and `explain` use on a cluster's objects), with errors naming the object and a
//! PodDisruptionBudget without a status allowing nothing.

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::policy::v1::PodDisruptionBudget as ApiPdb;
use k8s_openapi::api::storage::v1::StorageClass as ApiStorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use nodewright_api::error::Path;
use nodewright_api::v1::nodeclaim::NodeClaim as ApiClaim;
use nodewright_api::v1::shared::ResourceList;
use nodewright_core::model::{
    Node, NodeClaim, PersistentVolume, PersistentVolumeClaim, PodDisruptionBudget, StorageClass,
};
use nodewright_core::resources::Resources;
use nodewright_core::selector::LabelSelector;

use crate::clock::from_time;

/// A live Node: `api`'s conversion plus annotations and timestamps.
pub fn node(n: &api::Node) -> Result<Node, String> {
    let name = n.metadata.name.clone().unwrap_or_default();
    let mut out = nodewright_api::interchange::node(n, &Path::root("node"))
        .map_err(|e| format!("Node {name}: {e}"))?;
    out.annotations = n.metadata.annotations.clone().unwrap_or_default().into();
    out.resource_version = n.metadata.resource_version.clone().unwrap_or_default();
    out.creation_timestamp = n
        .metadata
        .creation_timestamp
        .as_ref()
        .map(from_time)
        .unwrap_or_default();
    Ok(out)
}

/// `api`'s conversion of a resource list; a quantity that does not parse is an error.
pub fn resources(list: Option<&ResourceList>) -> Result<Resources, String> {
    nodewright_api::cluster::resource_list(list, &Path::root("resources"))
        .map_err(|e| e.to_string())
}

/// A NodeClaim as the scheduler and the disruption planner see it: `api`'s conversion, the
/// same one `plan` and `explain` use on a cluster's objects.
pub fn nodeclaim(c: &ApiClaim) -> Result<NodeClaim, String> {
    nodewright_api::cluster::nodeclaim(c).map_err(|e| {
        let name = c.metadata.name.as_deref().unwrap_or_default();
        format!("NodeClaim {name}: {e}")
    })
}

pub fn label_selector(s: &meta::LabelSelector) -> Result<LabelSelector, String> {
    nodewright_api::workload::label_selector(s, &Path::root("selector")).map_err(|e| e.to_string())
}

/// `api`'s conversion, with a budget whose status the disruption controller has not written
/// yet allowing no disruption (the eviction API refuses evictions until it has).
pub fn pdb(p: &ApiPdb) -> Result<PodDisruptionBudget, String> {
    let mut out = nodewright_api::cluster::pdb(p, &[]).map_err(|e| {
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        let name = p.metadata.name.as_deref().unwrap_or_default();
        format!("PodDisruptionBudget {ns}/{name}: {e}")
    })?;
    if p.status.is_none() {
        out.disruptions_allowed = 0;
    }
    Ok(out)
}

pub fn pv(v: &api::PersistentVolume) -> Result<PersistentVolume, String> {
    nodewright_api::cluster::pv(v).map_err(|e| {
        let name = v.metadata.name.as_deref().unwrap_or_default();
        format!("PersistentVolume {name}: {e}")
    })
}

pub fn pvc(c: &api::PersistentVolumeClaim) -> PersistentVolumeClaim {
    nodewright_api::cluster::pvc(c)
}

pub fn storage_class(s: &ApiStorageClass) -> Result<StorageClass, String> {
    nodewright_api::cluster::storage_class(s).map_err(|e| {
        let name = s.metadata.name.as_deref().unwrap_or_default();
        format!("StorageClass {name}: {e}")
    })
}
