//! A scale-down without churn: two zone-spread Deployments on the real kube-scheduler are
//! scaled from 24 pods to 6, consolidation removes or replaces the emptied nodes (the fleet's
//! $/h falls), and no NodeClaim is provisioned for pending pods while it does. A consolidation whose evicted pods
//! did not fit where its simulation put them would show as such a launch (the simulator counts
//! the same thing as "relaunches for pods a consolidation moved").

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright_cloud_sim::{SimCloud, SimCloudConfig};

use crate::kit::controller::Launch;
use crate::kit::read::{self, running};
use crate::kit::{ControlPlane, assert_clean_log, eventually, manifests, pods_running};

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
"#;

fn spread(app: &str, replicas: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {app}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {app}}}}}
  template:
    metadata: {{labels: {{app: {app}}}}}
    spec:
      terminationGracePeriodSeconds: 0
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: DoNotSchedule
          labelSelector: {{matchLabels: {{app: {app}}}}}
      containers:
        - name: app
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {{requests: {{cpu: "1", memory: 1Gi}}}}
"#
    )
}

/// NodeClaims the provisioner created for pending pods, from the controller's own counter.
fn provisioned(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("karpenter_nodeclaims_created_total{"))
        .filter(|l| l.contains(r#"reason="provisioned""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The nodes' $/h, and one line per node (type, zone, its pods' apps) for the failure text.
fn fleet(cloud: &SimCloud, nodes: &[Node], pods: &[Pod]) -> (f64, String) {
    let mut apps: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in running(pods) {
        let app = p.metadata.labels.as_ref().and_then(|l| l.get("app"));
        if let (Some(node), Some(app)) = (read::node_of(p), app) {
            apps.entry(node).or_default().push(app);
        }
    }
    let mut text = String::new();
    let mut cost = 0.0;
    for n in nodes {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        let price = read::node_price(cloud, n);
        cost += price;
        let l = |k: &str| read::label(n, k).unwrap_or_default();
        let _ = writeln!(
            text,
            "  {name} {} {} ${price:.4}/h {:?}",
            l("node.kubernetes.io/instance-type"),
            l("topology.kubernetes.io/zone"),
            apps.get(name).cloned().unwrap_or_default()
        );
    }
    (cost, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_zone_spread_deployments_down_launches_nothing_for_moved_pods() {
    let Some(cp) = ControlPlane::start("churn") else {
        return;
    };
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright").start();
    ctl.wait_ready().await;
    cp.apply(manifests::NODE_CLASS).unwrap();
    cp.apply(POOL).unwrap();
    for app in ["web", "api"] {
        cp.apply(&spread(app, 12)).unwrap();
    }
    let client = cp.client().await;
    pods_running(&client, 24, Duration::from_secs(240))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let cloud = SimCloud::new(SimCloudConfig::default()).unwrap();
    let (peak_cost, peak_fleet) = fleet(
        &cloud,
        &read::nodes(&client).await,
        &read::pods(&client, "default").await,
    );
    let before = provisioned(&ctl.metrics().await);
    assert!(before > 0, "the scale-up provisioned claims");

    for app in ["web", "api"] {
        cp.kubectl(&["scale", "deployment", app, "--replicas=3"]);
    }
    // Settled: 6 pods Running, every claim has its node, no node tainted for disruption,
    // and the claims unchanged for a minute.
    let last = Arc::new(Mutex::new((Vec::new(), Instant::now())));
    eventually(Duration::from_secs(480), "consolidation to settle", || {
        let client = client.clone();
        let last = last.clone();
        async move {
            let mut names: Vec<String> = Vec::new();
            let claims = read::nodeclaims(&client).await;
            let nodes = read::nodes(&client).await;
            let pods = read::pods(&client, "default").await;
            names.extend(claims.iter().map(|c| read::name(c).to_string()));
            names.sort();
            let mut last = last.lock().unwrap();
            if names != last.0 {
                *last = (names, Instant::now());
            }
            let disrupting = nodes.iter().any(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == "karpenter.sh/disrupted"))
            });
            let quiet = last.1.elapsed() >= Duration::from_secs(60);
            (running(&pods).len() == 6 && nodes.len() == claims.len() && !disrupting && quiet)
                .then_some(())
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let (settled_cost, settled_fleet) = fleet(
        &cloud,
        &read::nodes(&client).await,
        &read::pods(&client, "default").await,
    );
    let after = provisioned(&ctl.metrics().await);
    eprintln!(
        "churn: ${peak_cost:.4}/h at the peak, ${settled_cost:.4}/h settled; provisioned {before} before the scale-down, {after} after\npeak:\n{peak_fleet}settled:\n{settled_fleet}"
    );
    // Deletes and cheaper replacements both count: which one wins depends on where the
    // ReplicaSets' scale-down left the 6 pods, which the test does not choose.
    assert!(
        settled_cost < peak_cost - 1e-9,
        "consolidation lowered the fleet's cost: ${peak_cost:.4}/h -> ${settled_cost:.4}/h\n{}",
        ctl.log_text()
    );
    assert_eq!(
        after,
        before,
        "claims provisioned for pending pods during the scale-down (churn)\n{}",
        ctl.log_text()
    );
    assert_clean_log(&ctl.log_text());
}
