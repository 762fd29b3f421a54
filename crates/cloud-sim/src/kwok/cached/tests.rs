//! What the agent keeps of what it watches: pods and NodeClaims plan exactly as the whole
//! objects would, without the parts that take most of their memory; of a Node only its name.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use nodewright_api::v1::nodeclaim::NodeClaim;

use super::{keep_claim, keep_for_kubelet, keep_name};
use crate::kwok::machines::machine;
use crate::kwok::{Kubelet, desired_node, pod_plan};

/// A pod of `nodewright bench cluster`'s Deployment as the API server returns it once bound
/// and running: admission's service-account volume and mount, default tolerations and the
/// kubelet's status.
fn bench_pod(name: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "generateName": "scale-6d4cf56db6-", "resourceVersion": "48213",
            "creationTimestamp": "2026-12-03T10:00:00Z",
            "labels": {"app": "scale", "pod-template-hash": "6d4cf56db6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "scale-6d4cf56db6", "uid": "rs-uid", "controller": true,
                "blockOwnerDeletion": true}]
        },
        "spec": {
            "containers": [{
                "name": "pause", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                "imagePullPolicy": "IfNotPresent",
                "resources": {"requests": {"cpu": "750m", "memory": "1228Mi"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"name": "kube-api-access-x7k2p", "readOnly": true,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
            }],
            "volumes": [{"name": "kube-api-access-x7k2p", "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ]}}],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "nodeName": "node-a", "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler", "serviceAccountName": "default",
            "serviceAccount": "default", "securityContext": {}, "priority": 0,
            "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
            "terminationGracePeriodSeconds": 0
        },
        "status": {
            "phase": phase, "qosClass": "Burstable",
            "conditions": [{"type": "PodScheduled", "status": "True",
                "lastTransitionTime": "2026-12-03T10:00:05Z"}]
        }
    })
}

fn parse(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn kept(v: Value) -> Pod {
    let mut p = parse(v);
    keep_for_kubelet(&mut p);
    p
}

/// The kubelet's plan is the same for the kept pods as for the whole ones: a pending pod is
/// started (the status written names the same containers), and a running one, written back
/// with that status, needs nothing more.
#[test]
fn a_kept_pod_plans_as_the_whole_pod() {
    let nodes = BTreeMap::from([(
        "node-a".to_string(),
        Kubelet::Running {
            host_ip: "10.0.0.1".into(),
        },
    )]);
    let now = Timestamp::from_second(1_764_756_100).unwrap();
    let whole = [
        parse(bench_pod("a", "Pending")),
        parse(bench_pod("b", "Pending")),
    ];
    let cached = [
        kept(bench_pod("a", "Pending")),
        kept(bench_pod("b", "Pending")),
    ];
    let planned = pod_plan(&nodes, whole.iter(), now);
    assert_eq!(planned.len(), 2);
    assert_eq!(planned, pod_plan(&nodes, cached.iter(), now));

    let started = |p: &Pod, action: &crate::kwok::PodAction| {
        let crate::kwok::PodAction::Start(_, status) = action else {
            panic!("{action:?}")
        };
        let mut p = p.clone();
        p.status = Some((**status).clone());
        p
    };
    let whole: Vec<Pod> = whole
        .iter()
        .zip(&planned)
        .map(|(p, a)| started(p, a))
        .collect();
    let cached: Vec<Pod> = cached
        .iter()
        .zip(&planned)
        .map(|(p, a)| started(p, a))
        .collect();
    assert!(pod_plan(&nodes, whole.iter(), now).is_empty());
    assert!(pod_plan(&nodes, cached.iter(), now).is_empty());
}

/// A cached pod keeps its identity, its annotations and status, and of its spec what the
/// plan reads; the service-account volume and mount, the tolerations and the containers'
/// resources are gone.
#[test]
fn a_kept_pod_drops_what_the_plan_never_reads() {
    let mut v = bench_pod("a", "Running");
    v["metadata"]["annotations"] = json!({"sim.nodewright.io/run-for": "10m"});
    let whole = parse(v.clone());
    let p = kept(v);
    assert_eq!(p.metadata.uid.as_deref(), Some("uid-a"));
    assert_eq!(p.metadata.annotations, whole.metadata.annotations);
    assert_eq!(p.status, whole.status);
    let spec = p.spec.as_ref().unwrap();
    assert_eq!(spec.volumes, None);
    assert_eq!(spec.tolerations, None);
    assert_eq!(spec.node_name.as_deref(), Some("node-a"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    let c = &spec.containers[0];
    assert_eq!(c.name, "pause");
    assert_eq!(
        c.image.as_deref(),
        Some("public.ecr.aws/eks-distro/kubernetes/pause:3.7")
    );
    assert_eq!((&c.volume_mounts, &c.resources), (&None, &None));
}

/// A NodeClaim as the API server returns it once launched: managed fields, finalizers, the
/// last-applied annotation, requirements, and a status with conditions.
fn launched_claim(name: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {
            "name": name, "uid": format!("uid-{name}"), "resourceVersion": "9912",
            "generateName": "default-", "creationTimestamp": "2026-12-03T10:00:00Z",
            "finalizers": ["karpenter.sh/termination"],
            "labels": {"karpenter.sh/nodepool": "default", "team": "web",
                "node.kubernetes.io/instance-type": "m5.large"},
            "annotations": {"karpenter.sh/nodepool-hash": "4012", "compatibility.karpenter.sh/v1beta1-nodeclass-reference": "{}"},
            "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                "name": "default", "uid": "np-uid", "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "nodewright", "operation": "Update",
                "apiVersion": "karpenter.sh/v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {}}}}]
        },
        "spec": {
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ],
            "resources": {"requests": {"cpu": "750m", "pods": "1"}},
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "cni-not-ready", "effect": "NoSchedule"}],
            "expireAfter": "720h"
        },
        "status": {
            "providerID": "aws:///us-east-1a/i-0abc", "imageID": "ami-0123",
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Launched", "status": "True", "reason": "Launched",
                "message": "", "lastTransitionTime": "2026-12-03T10:00:02Z"}]
        }
    })
}

fn instance(claim: &str) -> nodewright_cloud::Instance {
    nodewright_cloud::Instance {
        provider_id: "aws:///us-east-1a/i-0abc".into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: nodewright_core::model::CapacityType::OnDemand,
        image_id: None,
        state: nodewright_cloud::InstanceState::Running,
        launched_at: None,
        tags: BTreeMap::from([("karpenter.sh/nodeclaim".to_string(), claim.to_string())]),
    }
}

/// Registration reads the same of a kept claim as of the whole one: the instance it makes
/// of the claim's status, and the Node it makes of the claim.
#[test]
fn a_kept_claim_registers_as_the_whole_claim() {
    let whole: NodeClaim = serde_json::from_value(launched_claim("nc-1")).unwrap();
    let dynamic: DynamicObject = serde_json::from_value(launched_claim("nc-1")).unwrap();
    let kept = keep_claim(dynamic);
    assert_eq!(kept.name, "nc-1");
    let kept = kept.claim.unwrap();
    let seen = tokio::time::Instant::now();
    let from_whole = machine(instance("nc-1"), &whole, seen).unwrap();
    let from_kept = machine(instance("nc-1"), &kept, seen).unwrap();
    assert_eq!(from_whole, from_kept);
    let now = Timestamp::from_second(1_764_756_100).unwrap();
    assert_eq!(
        desired_node(&from_whole, &whole, now),
        desired_node(&from_kept, &kept, now)
    );
    // What registration never reads is gone.
    assert!(kept.spec.requirements.is_empty());
    assert_eq!(kept.spec.resources, None);
    assert_eq!(kept.metadata.managed_fields, None);
    assert_eq!(kept.metadata.annotations, None);
    assert_eq!(kept.status.as_ref().unwrap().conditions, None);
}

/// A claim that does not parse stays in the store by name, with nothing to register from.
#[test]
fn a_claim_that_does_not_parse_is_kept_by_name_only() {
    let mut v = launched_claim("bad");
    v["spec"]["taints"] = json!(7);
    let kept = keep_claim(serde_json::from_value(v).unwrap());
    assert_eq!(kept.name, "bad");
    assert!(kept.claim.is_none());
    // A list's items may leave out the kind: the claim still parses.
    let mut v = launched_claim("bare");
    v.as_object_mut().unwrap().remove("kind");
    v.as_object_mut().unwrap().remove("apiVersion");
    assert!(
        keep_claim(serde_json::from_value(v).unwrap())
            .claim
            .is_some()
    );
}

#[test]
fn of_a_node_only_the_name_is_kept() {
    let mut n: PartialObjectMeta<Node> = serde_json::from_value(json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": {"name": "ip-10-1-2-3.ec2.internal", "uid": "u", "resourceVersion": "7",
            "labels": {"sim.nodewright/agent": "true"},
            "managedFields": [{"manager": "sim", "operation": "Update"}]}
    }))
    .unwrap();
    keep_name(&mut n);
    assert_eq!(n.types, None);
    assert_eq!(
        n.metadata,
        ObjectMeta {
            name: Some("ip-10-1-2-3.ec2.internal".into()),
            ..ObjectMeta::default()
        }
    );
}
