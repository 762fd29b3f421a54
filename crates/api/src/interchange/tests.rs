//! Reading catalogs, NodePools and manifests; the sample plans with no errors.

mod fields {
    use super::super::*;

    #[test]
    fn instance_type_allocatable_is_exact() {
        let v = json!({"name": "it", "cpu": 0.9, "memoryMiB": 2038, "pods": 10, "capacityCpu": 1, "capacityMemoryMiB": 2048,
            "offerings": [{"zone": "z1", "capacityType": "spot", "price": 0.31, "available": true}]});
        let it = instance_type(&v, &Path::root("instanceTypes").index(0)).unwrap();
        let a = it.allocatable();
        assert_eq!(a.get("cpu"), 900);
        assert_eq!(a.get("memory"), 2038 << 20);
        assert_eq!(it.capacity.get("cpu"), 1000);
        assert_eq!(it.offerings[0].capacity_type, CapacityType::Spot);
    }

    #[test]
    fn bad_offering_names_its_path() {
        let v = json!({"instanceTypes": [{"name": "it", "cpu": 1, "memoryMiB": 1,
            "offerings": [{"zone": "z", "capacityType": "cheap", "price": 1}]}], "pods": []});
        let e = read_input("in.json", &v.to_string()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "in.json: instanceTypes[0].offerings[0].capacityType: unknown capacity type \"cheap\""
        );
    }

    #[test]
    fn nodepool_fields() {
        let np = nodepool(&json!({"metadata": {"name": "gpu"}, "spec": {"weight": 10,
            "limits": {"cpu": "10M", "memory": "1000Gi"},
            "template": {"metadata": {"labels": {"team": "a"}}, "spec": {
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"], "minValues": 1}],
                "taints": [{"key": "gpu", "effect": "NoSchedule"}]}}}}))
        .unwrap();
        assert_eq!(np.name, "gpu");
        assert_eq!(np.weight, 10);
        assert_eq!(np.limits.get("cpu"), 10_000_000_000);
        assert_eq!(np.template.requirements[0].min_values, Some(1));
        assert_eq!(np.template.taints[0].effect, TaintEffect::NoSchedule);
        assert_eq!(
            np.template.labels.get("team").map(String::as_str),
            Some("a")
        );
    }
}

mod sample {
    use super::super::*;
    use nodewright_core::scheduling::{Options, solve};

    fn sample() -> String {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/bench/sample-diverse-100.json"
        );
        std::fs::read_to_string(path).expect("fixture present")
    }

    #[test]
    fn sample_plans_without_errors() {
        let s = read_input("sample-diverse-100.json", &sample()).unwrap();
        assert_eq!(s.pods.len(), 100);
        let plan = solve(&s, &Options::default());
        assert!(plan.unplaced.is_empty(), "{:?}", plan.unplaced.first());
        assert_eq!(plan.placements.len(), 100);
        // Twenty hostname anti-affinity pods need twenty nodes.
        assert_eq!(plan.new_claims.len(), 20);
        let out = write_output(&plan, 0.1);
        assert_eq!(out["podErrors"], 0);
        assert_eq!(out["scheduled"], 100);
        assert!(
            out["lowerBoundPricePerHour"].as_f64().unwrap()
                <= out["totalCheapestPricePerHour"].as_f64().unwrap()
        );
    }

    #[test]
    fn written_inputs_read_back_the_same() {
        let s = read_input("sample-diverse-100.json", &sample()).unwrap();
        let again = read_input("again", &write_input(&s, json!({})).to_string()).unwrap();
        assert_eq!(
            again.pods,
            s.pods
                .iter()
                .map(|p| {
                    let mut p = (**p).clone();
                    p.owner = None;
                    std::sync::Arc::new(p)
                })
                .collect::<Vec<_>>()
        );
        let a = solve(&s, &Options::default());
        let b = solve(&again, &Options::default());
        assert_eq!(a.cost, b.cost);
    }
}

mod manifests {
    use super::super::*;
    use crate::document::parse_documents;
    use nodewright_core::scheduling::{Options, solve};

    const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  limits: {cpu: "100"}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: a, resources: {requests: {cpu: 200m, memory: 128Mi}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: w, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"#;

    #[test]
    fn manifests_plan_with_their_nodepool_and_daemons() {
        let docs = parse_documents("cluster.yaml", MANIFESTS).unwrap();
        let catalog = read_catalog(
            "catalog",
            &json!({"instanceTypes": [
                {"name": "small", "cpu": 2, "memoryMiB": 4096, "pods": 20,
                 "offerings": [{"zone": "z1", "capacityType": "on-demand", "price": 0.1},
                               {"zone": "z1", "capacityType": "spot", "price": 0.03}]},
                {"name": "large", "cpu": 8, "memoryMiB": 16384, "pods": 50,
                 "offerings": [{"zone": "z1", "capacityType": "on-demand", "price": 0.4}]}
            ]}),
        )
        .unwrap();
        let s = read_manifests(&docs, catalog).unwrap();
        assert_eq!(s.pods.len(), 4);
        assert_eq!(s.daemonsets.len(), 1);
        assert_eq!(s.nodepools[0].name, "general");
        let plan = solve(&s, &Options::default());
        assert!(plan.unplaced.is_empty(), "{:?}", plan.unplaced);
        // The NodePool allows on-demand only, and every claim carries the daemon's 200m.
        for c in &plan.new_claims {
            assert_eq!(
                c.cheapest().unwrap().capacity_type,
                nodewright_core::model::CapacityType::OnDemand
            );
            assert!(c.requests.get("cpu") >= 1200, "daemon overhead is included");
        }
    }
}
