//! The agent's cached pods: they plan exactly as the whole pods would, without the parts of
//! the spec that take most of a pod's memory.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::keep_for_kubelet;
use crate::kwok::{Kubelet, pod_plan};

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
