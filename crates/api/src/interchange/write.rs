//! Writing the interchange format: the plan as an output document, and a snapshot as an
//! input document (for `bench --dump`).

use super::*;

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// The output document of the interchange format.
pub fn write_output(plan: &Plan, solve_seconds: f64) -> Value {
    let per: Vec<Value> = plan
        .new_claims
        .iter()
        .map(|c| {
            let cheapest = c.cheapest();
            json!({
                "nodePool": c.nodepool,
                "instanceTypes": c.instance_types.iter().take(5).map(|o| plan.name_of(o)).collect::<Vec<_>>(),
                "instanceTypeCount": c.instance_types.len(),
                "pods": c.pods.len(),
                "cheapestPrice": cheapest.map(|o| round(o.price, 6)),
                "cheapestInstanceType": cheapest.map(|o| plan.name_of(o)),
                "cheapestZone": cheapest.map(|o| plan.zone_of(o)),
                "cheapestCapacityType": cheapest.map(|o| o.capacity_type.as_str()),
                "requestedCpu": round(c.requests.get(resources::CPU) as f64 / 1000.0, 3),
                "requestedMemoryMiB": round(c.requests.get(resources::MEMORY) as f64 / MIB, 3),
                "requirements": c.requirements.iter().filter(|r| !r.starts_with(labels::INSTANCE_TYPE)).collect::<Vec<_>>(),
                "podNames": c.pods,
                "minValuesRelaxed": c.min_values_relaxed,
            })
        })
        .collect();
    let errors: Vec<Value> = plan
        .unplaced
        .iter()
        .map(|u| json!({"pod": u.pod, "reason": u.reason}))
        .collect();
    let existing: Vec<Value> = plan
        .placements
        .iter()
        .filter_map(|p| match &p.target {
            nodewright_core::scheduling::Target::Node(n) => Some(json!({"pod": p.pod, "node": n})),
            nodewright_core::scheduling::Target::InFlight(n) => {
                Some(json!({"pod": p.pod, "nodeClaim": n}))
            }
            nodewright_core::scheduling::Target::NewClaim(_) => None,
        })
        .collect();
    json!({
        "pods": plan.pods,
        "scheduled": plan.placements.len(),
        "podErrors": plan.unplaced.len(),
        "nodeClaims": plan.new_claims.len(),
        "totalCheapestPricePerHour": round(plan.cost, 6),
        "lowerBoundPricePerHour": round(plan.lower_bound, 6),
        "gap": round(plan.gap(), 6),
        "solveSeconds": round(solve_seconds, 6),
        "perNodeClaim": per,
        "existingPlacements": existing,
        "errors": errors,
    })
}

fn quantity_string(name: &str, amount: i64) -> String {
    if name == resources::CPU {
        if amount % 1000 == 0 {
            format!("{}", amount / 1000)
        } else {
            format!("{amount}m")
        }
    } else if amount % (1 << 20) == 0 && amount != 0 {
        format!("{}Mi", amount >> 20)
    } else {
        amount.to_string()
    }
}

fn selector_json(s: &nodewright_core::selector::LabelSelector) -> Value {
    let exprs: Vec<Value> = s
        .match_expressions
        .iter()
        .map(|e| {
            let op = match e.operator {
                nodewright_core::selector::SelectorOperator::In => "In",
                nodewright_core::selector::SelectorOperator::NotIn => "NotIn",
                nodewright_core::selector::SelectorOperator::Exists => "Exists",
                nodewright_core::selector::SelectorOperator::DoesNotExist => "DoesNotExist",
            };
            json!({"key": e.key, "operator": op, "values": e.values})
        })
        .collect();
    let mut v = json!({"matchLabels": s.match_labels});
    if !exprs.is_empty() {
        v["matchExpressions"] = Value::Array(exprs);
    }
    v
}

fn term_json(t: &nodewright_core::model::PodAffinityTerm) -> Value {
    let mut v = json!({"topologyKey": t.topology_key});
    if let Some(s) = &t.label_selector {
        v["labelSelector"] = selector_json(s);
    }
    if !t.namespaces.is_empty() {
        v["namespaces"] = json!(t.namespaces);
    }
    v
}

fn node_term_json(t: &nodewright_core::requirements::NodeSelectorTerm) -> Value {
    json!({"matchExpressions": t.match_expressions.iter().map(|r| json!({
        "key": r.key, "operator": r.operator.as_str(), "values": r.values})).collect::<Vec<_>>()})
}

fn toleration_json(t: &nodewright_core::taints::Toleration) -> Value {
    let mut v = json!({"key": t.key, "operator": match t.operator {
        nodewright_core::taints::TolerationOperator::Equal => "Equal",
        nodewright_core::taints::TolerationOperator::Exists => "Exists",
    }});
    if !t.value.is_empty() {
        v["value"] = json!(t.value);
    }
    if let Some(e) = t.effect {
        v["effect"] = json!(e.as_str());
    }
    v
}

/// A `core` pod as a `core/v1` Pod document (the fields the scheduler reads).
pub fn pod_json(p: &nodewright_core::model::Pod) -> Value {
    let requests: serde_json::Map<String, Value> = p
        .requests
        .iter()
        .filter(|(k, _)| *k != resources::PODS)
        .map(|(k, v)| (k.to_string(), Value::String(quantity_string(k, v))))
        .collect();
    let mut spec = json!({
        "containers": [{"name": "main", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
                        "resources": {"requests": requests}}]
    });
    if !p.node_selector.is_empty() {
        spec["nodeSelector"] = json!(p.node_selector);
    }
    if let Some(n) = &p.node_name {
        spec["nodeName"] = json!(n);
    }
    if !p.tolerations.is_empty() {
        spec["tolerations"] = p.tolerations.iter().map(toleration_json).collect();
    }
    if !p.topology_spread.is_empty() {
        spec["topologySpreadConstraints"] = p.topology_spread.iter().map(spread_json).collect();
    }
    let affinity = affinity_json(p);
    if !affinity.is_empty() {
        spec["affinity"] = Value::Object(affinity);
    }
    let created = k8s_openapi::jiff::Timestamp::from_millisecond(p.creation_timestamp.0)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": p.name, "namespace": p.namespace, "uid": p.uid, "labels": p.labels,
                     "creationTimestamp": created},
        "spec": spec,
        "status": {"phase": if p.node_name.is_some() { "Running" } else { "Pending" }}
    })
}

/// A topology spread constraint as the Pod's spec writes it.
fn spread_json(c: &nodewright_core::model::TopologySpreadConstraint) -> Value {
    let mut v = json!({
        "maxSkew": c.max_skew,
        "topologyKey": c.topology_key,
        "whenUnsatisfiable": match c.when_unsatisfiable {
            nodewright_core::model::WhenUnsatisfiable::DoNotSchedule => "DoNotSchedule",
            nodewright_core::model::WhenUnsatisfiable::ScheduleAnyway => "ScheduleAnyway",
        },
    });
    if let Some(s) = &c.label_selector {
        v["labelSelector"] = selector_json(s);
    }
    if let Some(m) = c.min_domains {
        v["minDomains"] = json!(m);
    }
    v
}

/// The pod's node affinity, pod affinity and anti-affinity as `spec.affinity` (empty when
/// it has none).
fn affinity_json(p: &nodewright_core::model::Pod) -> serde_json::Map<String, Value> {
    let mut affinity = serde_json::Map::new();
    let mut node_aff = serde_json::Map::new();
    if !p.required_node_affinity.is_empty() {
        node_aff.insert(
            "requiredDuringSchedulingIgnoredDuringExecution".into(),
            json!({"nodeSelectorTerms": p.required_node_affinity.iter().map(node_term_json).collect::<Vec<_>>()}),
        );
    }
    if !p.preferred_node_affinity.is_empty() {
        node_aff.insert(
            "preferredDuringSchedulingIgnoredDuringExecution".into(),
            p.preferred_node_affinity
                .iter()
                .map(|w| json!({"weight": w.weight, "preference": node_term_json(&w.term)}))
                .collect(),
        );
    }
    if !node_aff.is_empty() {
        affinity.insert("nodeAffinity".into(), Value::Object(node_aff));
    }
    for (name, req, pref) in [
        ("podAffinity", &p.pod_affinity, &p.preferred_pod_affinity),
        (
            "podAntiAffinity",
            &p.pod_anti_affinity,
            &p.preferred_pod_anti_affinity,
        ),
    ] {
        let mut m = serde_json::Map::new();
        if !req.is_empty() {
            m.insert(
                "requiredDuringSchedulingIgnoredDuringExecution".into(),
                req.iter().map(term_json).collect(),
            );
        }
        if !pref.is_empty() {
            m.insert(
                "preferredDuringSchedulingIgnoredDuringExecution".into(),
                pref.iter()
                    .map(|w| json!({"weight": w.weight, "podAffinityTerm": term_json(&w.term)}))
                    .collect(),
            );
        }
        if !m.is_empty() {
            affinity.insert(name.into(), Value::Object(m));
        }
    }
    affinity
}

/// A `core` node as a `core/v1` Node document (labels, taints, capacity, allocatable).
pub fn node_json(n: &Node) -> Value {
    let q = |r: &Resources| -> serde_json::Map<String, Value> {
        r.iter()
            .map(|(k, v)| (k.to_string(), Value::String(quantity_string(k, v))))
            .collect()
    };
    let taints: Vec<Value> = n
        .taints
        .iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect.as_str()}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n.name, "labels": n.labels},
        "spec": {"taints": taints, "unschedulable": n.unschedulable},
        "status": {"capacity": q(&n.capacity), "allocatable": q(&n.allocatable),
                   "conditions": [{"type": "Ready", "status": if n.ready { "True" } else { "False" }}]}
    })
}

/// Single-valued `In` requirements other than the ones every type carries implicitly: the
/// labels an instance type puts on its nodes.
fn instance_type_labels(it: &InstanceType) -> serde_json::Map<String, Value> {
    it.requirements
        .iter()
        .filter(|r| {
            r.operator == Operator::In
                && r.values.len() == 1
                && ![labels::ARCH, labels::OS, labels::INSTANCE_TYPE].contains(&r.key.as_str())
        })
        .map(|r| (r.key.clone(), Value::String(r.values[0].clone())))
        .collect()
}

fn instance_type_json(it: &InstanceType) -> Value {
    let a = it.allocatable();
    let arch = it
        .requirements
        .iter()
        .find(|r| r.key == labels::ARCH)
        .and_then(|r| r.values.first().cloned())
        .unwrap_or_else(|| "amd64".into());
    let mut v = json!({
        "name": it.name,
        "cpu": a.get(resources::CPU) as f64 / 1000.0,
        "memoryMiB": a.get(resources::MEMORY) as f64 / MIB,
        "pods": a.get(resources::PODS),
        "arch": arch,
        "offerings": it.offerings.iter().map(|o| json!({
            "zone": o.zone, "capacityType": o.capacity_type.as_str(), "price": o.price, "available": o.available
        })).collect::<Vec<_>>(),
        "capacityCpu": it.capacity.get(resources::CPU) as f64 / 1000.0,
        "capacityMemoryMiB": it.capacity.get(resources::MEMORY) as f64 / MIB,
        "overheadCpu": it.overhead.total().get(resources::CPU) as f64 / 1000.0,
        "overheadMemoryMiB": it.overhead.total().get(resources::MEMORY) as f64 / MIB,
    });
    let l = instance_type_labels(it);
    if !l.is_empty() {
        v["labels"] = Value::Object(l);
    }
    let extended: serde_json::Map<String, Value> = it
        .capacity
        .iter()
        .filter(|(k, _)| {
            ![
                resources::CPU,
                resources::MEMORY,
                resources::PODS,
                resources::EPHEMERAL_STORAGE,
            ]
            .contains(k)
        })
        .map(|(k, q)| (k.to_string(), Value::String(quantity_string(k, q))))
        .collect();
    if !extended.is_empty() {
        v["resources"] = Value::Object(extended);
    }
    v
}

fn taints_json(ts: &[Taint]) -> Vec<Value> {
    ts.iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect.as_str()}))
        .collect()
}

/// A NodePool as a `karpenter.sh/v1` document: the fields [`nodepool`] reads.
fn nodepool_json(np: &NodePool) -> Value {
    let limits: serde_json::Map<String, Value> = np
        .limits
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(quantity_string(k, v))))
        .collect();
    let requirements: Vec<Value> = np
        .template
        .requirements
        .iter()
        .map(|r| {
            let mut v = json!({"key": r.key, "operator": r.operator.as_str(), "values": r.values});
            if let Some(m) = r.min_values {
                v["minValues"] = json!(m);
            }
            v
        })
        .collect();
    let mut spec = json!({
        "template": {
            "metadata": {"labels": np.template.labels},
            "spec": {"requirements": requirements,
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
        "limits": limits,
    });
    if np.weight != 0 {
        spec["weight"] = json!(np.weight);
    }
    if !np.template.taints.is_empty() {
        spec["template"]["spec"]["taints"] = taints_json(&np.template.taints).into();
    }
    if !np.template.startup_taints.is_empty() {
        spec["template"]["spec"]["startupTaints"] = taints_json(&np.template.startup_taints).into();
    }
    json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": np.name}, "spec": spec})
}

fn daemonset_json(ds: &nodewright_core::model::DaemonSet) -> Value {
    let pod = pod_json(&ds.pod);
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": ds.name, "namespace": ds.namespace},
        "spec": {"selector": {"matchLabels": ds.pod.labels},
                 "template": {"metadata": {"labels": ds.pod.labels}, "spec": pod["spec"]}}
    })
}

/// A snapshot as an interchange input document: the first NodePool's catalog (the format has
/// one for all NodePools), every NodePool, DaemonSet, node and pod.
pub fn write_input(s: &Snapshot, meta: Value) -> Value {
    let its = s
        .nodepools
        .first()
        .and_then(|np| s.instance_types.get(&np.name))
        .map(|v| v.as_slice())
        .unwrap_or(&[]);
    json!({
        "meta": meta,
        "instanceTypes": its.iter().map(instance_type_json).collect::<Vec<_>>(),
        "pods": s.pods.iter().map(|p| pod_json(p)).collect::<Vec<_>>(),
        "nodes": s.nodes.iter().map(|n| node_json(n)).collect::<Vec<_>>(),
        "daemonSets": s.daemonsets.iter().map(daemonset_json).collect::<Vec<_>>(),
        "nodePools": s.nodepools.iter().map(nodepool_json).collect::<Vec<_>>(),
    })
}

/// A catalog as an interchange document: `meta` and `instanceTypes` (what `plan
/// --instance-types`, `simulate --instance-types` and [`super::read_catalog`] read).
pub fn write_catalog(its: &[InstanceType], meta: Value) -> Value {
    json!({
        "meta": meta,
        "instanceTypes": its.iter().map(instance_type_json).collect::<Vec<_>>(),
    })
}
