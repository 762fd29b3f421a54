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

use super::{KeptPod, keep_claim, keep_for_kubelet, keep_name, keep_pod};
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

fn kept_whole(v: Value) -> Pod {
    let mut p = parse(v);
    keep_for_kubelet(&mut p);
    p
}

fn whole(v: Value) -> KeptPod {
    KeptPod::Whole(Box::new(parse(v)))
}

fn running_on(node: &str) -> BTreeMap<String, Kubelet> {
    BTreeMap::from([(
        node.to_string(),
        Kubelet::Running {
            host_ip: "10.0.0.1".into(),
        },
    )])
}

/// The kubelet's plan is the same for the kept pods as for the whole ones: a pending pod is
/// started (the status written names the same containers), and a running one, written back
/// with that status, needs nothing more; kept, it is settled.
#[test]
fn a_kept_pod_plans_as_the_whole_pod() {
    let nodes = running_on("node-a");
    let now = Timestamp::from_second(1_764_756_100).unwrap();
    let pending = [bench_pod("a", "Pending"), bench_pod("b", "Pending")];
    let wholes: Vec<KeptPod> = pending.iter().cloned().map(whole).collect();
    let cached: Vec<KeptPod> = pending
        .iter()
        .cloned()
        .map(|v| keep_pod(parse(v)))
        .collect();
    assert!(cached.iter().all(|p| matches!(p, KeptPod::Whole(_))));
    let planned = pod_plan(&nodes, &wholes, now);
    assert_eq!(planned.len(), 2);
    assert_eq!(planned, pod_plan(&nodes, &cached, now));

    let started: Vec<Pod> = pending
        .iter()
        .zip(&planned)
        .map(|(v, action)| {
            let crate::kwok::PodAction::Start(_, status) = action else {
                panic!("{action:?}")
            };
            let mut p = parse(v.clone());
            p.status = Some((**status).clone());
            p
        })
        .collect();
    let wholes: Vec<KeptPod> = started
        .iter()
        .map(|p| KeptPod::Whole(Box::new(p.clone())))
        .collect();
    let cached: Vec<KeptPod> = started.iter().cloned().map(keep_pod).collect();
    assert!(
        cached.iter().all(|p| matches!(p, KeptPod::Settled(_))),
        "{cached:?}"
    );
    assert!(pod_plan(&nodes, &wholes, now).is_empty());
    assert!(pod_plan(&nodes, &cached, now).is_empty());
}

/// A running pod with nothing left to write is kept as a few strings, and plans as the whole
/// pod does: nothing while its Node runs, a delete once it is being deleted or its Node is
/// gone, and its address is never handed to another pod on its Node.
#[test]
fn a_settled_pod_is_kept_small_and_plans_as_the_whole_pod() {
    let now = Timestamp::from_second(1_764_756_100).unwrap();
    let mut running = bench_pod("a", "Running");
    running["status"]["startTime"] = json!("2026-12-03T10:00:06Z");
    // The address the pending pod below would draw on an empty Node.
    let nodes = running_on("node-a");
    let alone = pod_plan(&nodes, &[whole(bench_pod("b", "Pending"))], now);
    let [crate::kwok::PodAction::Start(_, status)] = alone.as_slice() else {
        panic!("{alone:?}")
    };
    running["status"]["podIP"] = json!(status.pod_ip.clone().unwrap());

    let kept = keep_pod(parse(running.clone()));
    let KeptPod::Settled(s) = &kept else {
        panic!("{kept:?}")
    };
    assert_eq!(
        (s.pod.name.as_str(), s.pod.uid.as_deref(), s.node.as_str()),
        ("a", Some("uid-a"), "node-a")
    );
    assert_eq!(s.pod_ip, status.pod_ip);

    let mut deleting = running.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-12-03T10:05:00Z");
    let gone = BTreeMap::from([("node-a".to_string(), Kubelet::Gone)]);
    for (nodes, pod) in [(&nodes, &running), (&nodes, &deleting), (&gone, &running)] {
        let with_pending = |p: KeptPod| [p, whole(bench_pod("b", "Pending"))];
        let planned = pod_plan(nodes, &with_pending(whole(pod.clone())), now);
        assert_eq!(
            planned,
            pod_plan(nodes, &with_pending(keep_pod(parse(pod.clone()))), now)
        );
        assert!(!planned.is_empty());
    }
    let planned = pod_plan(&nodes, &[kept, whole(bench_pod("b", "Pending"))], now);
    let [crate::kwok::PodAction::Start(_, status_b)] = planned.as_slice() else {
        panic!("{planned:?}")
    };
    assert_ne!(
        status_b.pod_ip, status.pod_ip,
        "the settled pod's address is taken"
    );
}

/// A pod the kubelet's part may still write is kept whole: not yet running, held by a
/// readiness gate, or bound to end (a run time on a pod not restarted, or a deadline).
#[test]
fn pods_that_still_need_the_kubelet_are_kept_whole() {
    let mut cases = vec![bench_pod("a", "Pending")];
    let mut gated = bench_pod("a", "Running");
    gated["spec"]["readinessGates"] = json!([{"conditionType": "example.com/lb"}]);
    cases.push(gated);
    let mut job = bench_pod("a", "Running");
    job["spec"]["restartPolicy"] = json!("Never");
    job["metadata"]["annotations"] = json!({"sim.nodewright.io/run-for": "10m"});
    job["status"]["startTime"] = json!("2026-12-03T10:00:06Z");
    cases.push(job);
    let mut deadline = bench_pod("a", "Running");
    deadline["spec"]["activeDeadlineSeconds"] = json!(600);
    deadline["status"]["startTime"] = json!("2026-12-03T10:00:06Z");
    cases.push(deadline);
    for v in cases {
        let kept = keep_pod(parse(v.clone()));
        let KeptPod::Whole(p) = kept else {
            panic!("{v}: {kept:?}")
        };
        assert_eq!(*p, kept_whole(v));
    }
}

/// A cached pod keeps its identity, its annotations and status, and of its spec what the
/// plan reads; the service-account volume and mount, the tolerations and the containers'
/// resources are gone.
#[test]
fn a_kept_pod_drops_what_the_plan_never_reads() {
    let mut v = bench_pod("a", "Running");
    v["metadata"]["annotations"] = json!({"sim.nodewright.io/run-for": "10m"});
    let whole = parse(v.clone());
    let p = kept_whole(v);
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

/// An agent apart from the simulated cloud makes the same instance of a kept claim as of the
/// whole one; it registers its Node only once the cloud's boot and the kubelet's start are
/// over, and never while the claim is being deleted (the controller deletes that Node itself).
#[tokio::test(start_paused = true)]
async fn claims_alone_stand_for_the_simulated_clouds_instances() {
    use crate::kwok::machines::{ClaimMachines, Machines};
    use crate::kwok::{Action, Claims, plan};
    use nodewright_cloud::InstanceState;
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use std::time::Duration;

    let mut v = launched_claim("nc-1");
    v["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("us-east-1a");
    v["metadata"]["labels"]["karpenter.sh/capacity-type"] = json!("spot");
    let whole: NodeClaim = serde_json::from_value(v.clone()).unwrap();
    let kept = keep_claim(serde_json::from_value(v.clone()).unwrap())
        .claim
        .unwrap();
    let mut unlaunched = launched_claim("nc-2");
    unlaunched["status"] = json!({});
    let claims = |c: Arc<NodeClaim>| -> Claims {
        BTreeMap::from([
            ("nc-1".to_string(), c),
            (
                "nc-2".to_string(),
                Arc::new(serde_json::from_value(unlaunched.clone()).unwrap()),
            ),
        ])
    };
    let boot = Duration::from_secs(5);
    let machines = ClaimMachines::new(boot);
    let from_whole = machines.machines(&claims(Arc::new(whole))).await.unwrap();
    let from_kept = machines.machines(&claims(kept.clone())).await.unwrap();
    assert_eq!(from_whole, from_kept);
    let [m] = &from_kept[..] else {
        panic!("one instance, for the launched claim only: {from_kept:?}");
    };
    assert_eq!(
        (
            m.instance.provider_id.as_str(),
            m.instance.instance_type.as_str(),
            m.instance.zone.as_str(),
            m.instance.capacity_type,
            m.instance.state,
            m.instance.nodeclaim(),
        ),
        (
            "aws:///us-east-1a/i-0abc",
            "m5.large",
            "us-east-1a",
            nodewright_core::model::CapacityType::Spot,
            InstanceState::Running,
            Some("nc-1"),
        )
    );
    assert_eq!(machines.boot_time(), boot);

    let wall = Timestamp::from_second(1_764_756_100).unwrap();
    let register_after = boot + Duration::from_secs(10);
    let none = BTreeSet::new();
    let first_seen = tokio::time::Instant::now();
    tokio::time::advance(register_after - Duration::from_secs(1)).await;
    let booting = machines.machines(&claims(kept.clone())).await.unwrap();
    let at = tokio::time::Instant::now();
    assert_eq!(booting[0].launched_at(), first_seen);
    assert_eq!(
        plan(
            &booting,
            &claims(kept.clone()),
            &none,
            at,
            register_after,
            wall
        ),
        vec![]
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    let booted = machines.machines(&claims(kept.clone())).await.unwrap();
    let at = tokio::time::Instant::now();
    let actions = plan(
        &booted,
        &claims(kept.clone()),
        &none,
        at,
        register_after,
        wall,
    );
    assert!(matches!(&actions[..], [Action::Register(_)]), "{actions:?}");

    // Being deleted: the instance shuts down; its Node is neither registered again nor
    // kept alive, and it goes with the claim.
    let mut deleting = v.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-12-03T10:05:00Z");
    let deleting = keep_claim(serde_json::from_value(deleting).unwrap())
        .claim
        .unwrap();
    let shutting = machines.machines(&claims(deleting.clone())).await.unwrap();
    assert_eq!(shutting[0].instance.state, InstanceState::ShuttingDown);
    assert_eq!(
        plan(
            &shutting,
            &claims(deleting.clone()),
            &none,
            at,
            register_after,
            wall
        ),
        vec![]
    );
    let node = crate::kwok::node_name("aws:///us-east-1a/i-0abc");
    let registered = BTreeSet::from([node.clone()]);
    assert_eq!(
        plan(
            &shutting,
            &claims(deleting),
            &registered,
            at,
            register_after,
            wall
        ),
        vec![]
    );
    // Registered and being deleted, the instance runs on (its kubelet deletes the pods the
    // drain evicts) until the controller terminates it.
    let mut draining = v.clone();
    draining["metadata"]["deletionTimestamp"] = json!("2026-12-03T10:05:00Z");
    draining["status"]["nodeName"] = json!(node.clone());
    let kept_draining = keep_claim(serde_json::from_value(draining.clone()).unwrap())
        .claim
        .unwrap();
    let running = machines.machines(&claims(kept_draining)).await.unwrap();
    assert_eq!(running[0].instance.state, InstanceState::Running);
    assert_eq!(
        plan(
            &running,
            &claims(kept.clone()),
            &registered,
            at,
            register_after,
            wall
        ),
        vec![Action::Heartbeat(node.clone())]
    );
    let mut terminating = draining;
    terminating["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "InstanceTerminating", "status": "True", "reason": "InstanceTerminating"}));
    let kept_terminating = keep_claim(serde_json::from_value(terminating).unwrap())
        .claim
        .unwrap();
    let kept_conditions = kept_terminating.status.as_ref().unwrap().conditions.clone();
    assert_eq!(
        kept_conditions
            .unwrap()
            .iter()
            .map(|c| c.type_.as_str())
            .collect::<Vec<_>>(),
        ["InstanceTerminating"],
        "only the condition the agent reads is kept"
    );
    let stopped = machines.machines(&claims(kept_terminating)).await.unwrap();
    assert_eq!(stopped[0].instance.state, InstanceState::ShuttingDown);

    let gone = machines.machines(&BTreeMap::new()).await.unwrap();
    assert_eq!(
        plan(
            &gone,
            &BTreeMap::new(),
            &registered,
            at,
            register_after,
            wall
        ),
        vec![Action::Delete(node)]
    );
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
