//! Reading the cluster as the tests need it: NodeClaims as JSON (their CRD is ours), pods,
//! nodes and events through kube-rs.

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use nodewright_aws_model::AmiFamily;
use nodewright_cloud_sim::SimCloud;
use nodewright_core::model::CapacityType;
use serde_json::Value;

pub fn nodeclaim_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
        "nodeclaims",
    )
}

pub fn nodepool_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
        "nodepools",
    )
}

pub fn ec2nodeclass_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.k8s.aws", "v1", "EC2NodeClass"),
        "ec2nodeclasses",
    )
}

async fn list_json(client: &kube::Client, resource: &ApiResource) -> Vec<Value> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

pub async fn nodeclaims(client: &kube::Client) -> Vec<Value> {
    list_json(client, &nodeclaim_resource()).await
}

pub async fn nodepools(client: &kube::Client) -> Vec<Value> {
    list_json(client, &nodepool_resource()).await
}

pub async fn ec2nodeclasses(client: &kube::Client) -> Vec<Value> {
    list_json(client, &ec2nodeclass_resource()).await
}

pub async fn pods(client: &kube::Client, namespace: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

pub async fn nodes(client: &kube::Client) -> Vec<Node> {
    let api: Api<Node> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Every core/v1 Event in the cluster.
pub async fn events(client: &kube::Client) -> Vec<Event> {
    let api: Api<Event> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// A condition's status ("True", "False", "Unknown") in an object's `status.conditions`.
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a str> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?["status"]
        .as_str()
}

pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// Pods that are bound and Running.
pub fn running(pods: &[Pod]) -> Vec<&Pod> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect()
}

pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The hourly price the simulated cloud offers `instance_type` at in `zone`: what the
/// controller chose the node at.
pub fn offered_price(
    cloud: &SimCloud,
    instance_type: &str,
    capacity_type: &str,
    zone: &str,
) -> f64 {
    let types = cloud.family_types(AmiFamily::AL2);
    let it = types
        .iter()
        .find(|t| t.name == instance_type)
        .unwrap_or_else(|| panic!("{instance_type} in the simulated cloud's catalog"));
    let ct = match capacity_type {
        "spot" => CapacityType::Spot,
        _ => CapacityType::OnDemand,
    };
    it.offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == ct)
        .unwrap_or_else(|| panic!("an offering of {instance_type} {capacity_type} in {zone}"))
        .price
}

/// A Node's price, from its instance type, capacity type and zone labels.
pub fn node_price(cloud: &SimCloud, node: &Node) -> f64 {
    let l = |k: &str| label(node, k).unwrap_or_default();
    offered_price(
        cloud,
        l("node.kubernetes.io/instance-type"),
        l("karpenter.sh/capacity-type"),
        l("topology.kubernetes.io/zone"),
    )
}
