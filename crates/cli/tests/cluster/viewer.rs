//! `nodewright viewer` on a real control plane, read off a pseudo-terminal: every node the
//! controller launched with its instance type, capacity type, zone, the $/h the simulated
//! cloud offered it at, its pod count and state; the NodePool groups and the totals; claims
//! shown as launching after a scale-up and the screen catching up once they register; a
//! cordon; a consolidation with its reason; and `q` ending it with status 0.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use nodewright_cloud_sim::{SimCloud, SimCloudConfig};

use crate::kit::controller::Launch;
use crate::kit::read::{self, label};
use crate::kit::tty::Tty;
use crate::kit::{ControlPlane, eventually, inflate, pods_running};

/// Nothing is consolidated while the test reads the screen; `spare` has no pods, so it is
/// an empty group.
const NODEPOOLS: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["spot", "on-demand"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m", "r"]}
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: Never}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: spare}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      taints: [{key: spare, effect: NoSchedule}]
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: Never}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: AL2
  role: KarpenterNodeRole-e2e
  subnetSelectorTerms: [{tags: {Name: e2e}}]
  securityGroupSelectorTerms: [{tags: {Name: e2e}}]
  amiSelectorTerms: [{id: ami-0d6c6ac554d62a745}]
"#;

/// One node's line as the API says it should read.
#[derive(Debug)]
struct Expected {
    name: String,
    instance_type: String,
    capacity_type: String,
    zone: String,
    price: f64,
    pods: usize,
}

fn expected(cloud: &SimCloud, nodes: &[Node], pods: &[Pod]) -> Vec<Expected> {
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for p in pods {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        if let (Some(n), false) = (
            read::node_of(p),
            matches!(phase, Some("Succeeded" | "Failed")),
        ) {
            *per_node.entry(n).or_default() += 1;
        }
    }
    let mut out: Vec<Expected> = nodes
        .iter()
        .map(|n| {
            let l = |k: &str| label(n, k).unwrap_or_default().to_string();
            let name = n.metadata.name.clone().unwrap_or_default();
            let (it, ct, zone) = (
                l("node.kubernetes.io/instance-type"),
                l("karpenter.sh/capacity-type"),
                l("topology.kubernetes.io/zone"),
            );
            Expected {
                price: read::offered_price(cloud, &it, &ct, &zone),
                pods: per_node.get(name.as_str()).copied().unwrap_or(0),
                name,
                instance_type: it,
                capacity_type: ct,
                zone,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The screen's line for a row, split into words: name, type, capacity, zone, $/h, two
/// bars with their percentages, pods, age, the arch label, then the state's words.
fn row<'a>(screen: &'a str, name: &str) -> Option<Vec<&'a str>> {
    screen
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&name))
}

/// Why the screen does not show `want` yet, or `None` when it does.
fn mismatch(
    screen: &str,
    want: &[Expected],
    state: &dyn Fn(&str) -> &'static str,
) -> Option<String> {
    let total: f64 = want.iter().map(|e| e.price).sum();
    let pods: usize = want.iter().map(|e| e.pods).sum();
    let head = format!(
        "nodewright viewer · {} nodes · {pods} pods · 0 pending · ${total:.4}/h · ${:.2}/month",
        want.len(),
        total * 730.0
    );
    if screen.lines().next() != Some(head.as_str()) {
        return Some(format!("header is not {head:?}"));
    }
    let group = format!(
        "NodePool default · {} nodes · {pods} pods · ${total:.4}/h",
        want.len()
    );
    if !screen.lines().any(|l| l.starts_with(&group)) {
        return Some(format!("no group line {group:?}"));
    }
    if !screen.contains("NodePool spare · 0 nodes · 0 pods · $0.0000/h") {
        return Some("no empty spare group".into());
    }
    for e in want {
        let Some(w) = row(screen, &e.name) else {
            return Some(format!("no row for {}", e.name));
        };
        let price = format!("{:.4}", e.price);
        let pods = e.pods.to_string();
        let fields = [e.instance_type.as_str(), &e.capacity_type, &e.zone, &price];
        if w.len() < 13 || w[1..5] != fields || w[9] != pods || w[11] != "amd64" {
            return Some(format!("row {:?} is not {e:?}", w.join(" ")));
        }
        if w[12..].join(" ") != state(&e.name) {
            return Some(format!("row {} is not {}", w.join(" "), state(&e.name)));
        }
    }
    // `--sort name`: the rows in name order.
    let order: Vec<&str> = screen
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| want.iter().any(|e| e.name == *w))
        .collect();
    let names: Vec<&str> = want.iter().map(|e| e.name.as_str()).collect();
    (order != names).then(|| format!("rows in order {order:?}, not {names:?}"))
}

async fn all_pods(client: &kube::Client) -> Vec<Pod> {
    let api: Api<Pod> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Waits until the screen matches the cluster as the API shows it, with every node in
/// `state`; returns the screen.
async fn screen_matches(
    tty: &Tty,
    client: &kube::Client,
    cloud: &SimCloud,
    what: &str,
    state: &dyn Fn(&str) -> &'static str,
) -> String {
    // What was wrong with the last screen read, for the failure message.
    let last = std::cell::RefCell::new(String::new());
    let result = eventually(Duration::from_secs(60), what, || {
        let screen = tty.screen();
        let client = client.clone();
        let last = &last;
        async move {
            let nodes = read::nodes(&client).await;
            let pods = all_pods(&client).await;
            match mismatch(&screen, &expected(cloud, &nodes, &pods), state) {
                None => Some(screen),
                Some(why) => {
                    *last.borrow_mut() = format!("{why}\n{screen}");
                    None
                }
            }
        }
    })
    .await;
    result.unwrap_or_else(|e| panic!("{e}: {}", last.borrow()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewer_shows_the_live_cluster_and_follows_it() {
    let Some(cp) = ControlPlane::start("viewer") else {
        return;
    };
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright").start();
    ctl.wait_ready().await;
    cp.apply(NODEPOOLS).unwrap();
    cp.apply(&inflate(3)).unwrap();
    let client = cp.client().await;
    pods_running(&client, 3, Duration::from_secs(180))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let cloud = SimCloud::new(SimCloudConfig::default()).unwrap();

    let kubeconfig = cp.kubeconfig.to_string_lossy().to_string();
    let args = [
        "viewer",
        "--kubeconfig",
        &kubeconfig,
        "--extra-labels",
        "kubernetes.io/arch",
        "--sort",
        "name",
    ];
    let mut tty = Tty::spawn(&args, 40, 200);
    let first = screen_matches(&tty, &client, &cloud, "the first screen", &|_| "ready").await;
    eprintln!("viewer, 3 pods:\n{first}");

    // `--node-selector` narrows on the server: no on-demand node runs, so none shows. A
    // selector the server cannot parse is refused before the screen takes over.
    let on_demand = [
        &args[..3],
        &["--node-selector", "karpenter.sh/capacity-type=on-demand"],
    ]
    .concat();
    let narrow = Tty::spawn(&on_demand, 40, 200);
    eventually(
        Duration::from_secs(30),
        "an empty view of on-demand nodes",
        || {
            let screen = narrow.screen();
            async move {
                let head = screen.lines().next().unwrap_or_default();
                (head.starts_with("nodewright viewer · 0 nodes · 0 pods · 0 pending · $0.0000/h")
                    && screen.contains("NodePool spare · 0 nodes")
                    && !screen.contains("ip-10-"))
                .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", narrow.screen()));
    drop(narrow);
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([&args[..3], &["--node-selector", "a in (b"]].concat())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--node-selector \"a in (b\""), "{stderr}");

    // A scale-up: claims with no Node yet read as launching, then as ready nodes.
    cp.kubectl(&["scale", "deployment/inflate", "--replicas=12"]);
    let launching = eventually(
        Duration::from_secs(60),
        "a launching claim on screen",
        || {
            let screen = tty.screen();
            async move {
                screen
                    .lines()
                    .any(|l| l.trim_start().starts_with("default-") && l.ends_with("launching"))
                    .then_some(())
                    .filter(|_| {
                        screen
                            .lines()
                            .next()
                            .is_some_and(|h| h.contains(" launching · "))
                    })
                    .map(|_| screen)
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", tty.screen()));
    eprintln!("viewer, scaling up:\n{launching}");
    pods_running(&client, 12, Duration::from_secs(180))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));

    // A cordon shows on the next screen, with every other node ready.
    let nodes = read::nodes(&client).await;
    let cordoned = nodes[0].metadata.name.clone().unwrap();
    cp.kubectl(&["cordon", &cordoned]);
    let state = |n: &str| if n == cordoned { "cordoned" } else { "ready" };
    let after = screen_matches(
        &tty,
        &client,
        &cloud,
        "the screen after the scale-up",
        &state,
    )
    .await;
    eprintln!("viewer, 12 pods, one node cordoned:\n{after}");
    std::fs::write(cp.dir.join("viewer-screen.txt"), &after).unwrap();

    // Consolidation on and the deployment scaled down: a node taken away shows as
    // disrupted or deleting, with the method the controller recorded on its claim.
    cp.kubectl(&["uncordon", &cordoned]);
    cp.kubectl(&["scale", "deployment/inflate", "--replicas=2"]);
    cp.kubectl(&[
        "patch",
        "nodepool",
        "default",
        "--type=merge",
        "-p",
        r#"{"spec":{"disruption":{"consolidationPolicy":"WhenEmptyOrUnderutilized","consolidateAfter":"0s"}}}"#,
    ]);
    let disrupting = eventually(
        Duration::from_secs(120),
        "a node being disrupted, with its reason",
        || {
            let screen = tty.screen();
            async move {
                screen
                    .lines()
                    .any(|l| {
                        let l = l.trim_end();
                        (l.contains(" disrupting (") || l.contains(" deleting ("))
                            && ["(Empty)", "(Underutilized)"]
                                .iter()
                                .any(|r| l.ends_with(r))
                    })
                    .then_some(screen)
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}\n{}", tty.screen(), ctl.log_text()));
    eprintln!("viewer, consolidating:\n{disrupting}");

    tty.type_keys("q");
    let code = tty.wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(0), "the viewer exits 0 on q:\n{}", tty.screen());
}
