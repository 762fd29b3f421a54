//! `nodewright explain pod NS/NAME` and `nodewright explain node NAME`: a running cluster read
//! through its API server (see [`super::live`]) and asked, with the core code the controller
//! runs, why a pod is pending or where it would go (`scheduling::explain`: every NodePool's
//! and node's answer), and why a node is or is not disrupted (one round of
//! `disruption::plan`: its verdict and the command it is in; `disruption::plan::explain`: each
//! method's verdict).

use std::process::ExitCode;

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use nodewright_core::disruption::EngineSimulator;
use nodewright_core::disruption::plan::Settings;
use nodewright_core::disruption::plan::explain::{NodeExplanation, explain_node};
use nodewright_core::labels;
use nodewright_core::model::{ConsolidationPolicy, Snapshot};
use nodewright_core::scheduling::explain::{Answer, Explanation, Outcome, explain_pod};
use serde_json::{Value, json};

use super::live::policies::{self, Policies, PolicyArgs};
use super::live::{self, ClusterArgs};
use super::plan_disruption::{replacement_text, round};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(ClapArgs, Debug)]
pub struct Common {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub policies: PolicyArgs,
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Format,
}

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Subcommand, Debug)]
pub enum What {
    /// Why a pod is pending, or where it would go: what the provisioner's solve does with it,
    /// then every NodePool's answer for it alone (the requirement, taint, limit, resource,
    /// topology or volume rule that refuses it, or the instance types that remain) and every
    /// node's.
    Pod {
        /// `NAMESPACE/NAME` (a bare `NAME` is in `default`).
        pod: String,
        #[command(flatten)]
        common: Common,
    },
    /// Why a node is or is not being disrupted: its verdict in one disruption round, each
    /// method's own (expiration, drift, emptiness, multi- and single-node consolidation:
    /// do-not-disrupt pod, PDB, budget, consolidateAfter left, no cheaper replacement ...)
    /// and the command it would be part of.
    Node {
        name: String,
        #[command(flatten)]
        common: Common,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = match &args.what {
        What::Pod { pod, common } => {
            let key = if pod.contains('/') {
                pod.clone()
            } else {
                format!("default/{pod}")
            };
            let (s, p) = read(common)?;
            let e = explain_pod(&s, &p.settings.scheduling_options(), &key).ok_or_else(|| {
                anyhow::anyhow!(
                    "pod {key} not found in the cluster ({} pods listed)",
                    s.pods.len()
                )
            })?;
            match common.output {
                Format::Text => format!("{}\n{}", p.line(), pod_text(&e)),
                Format::Json => {
                    let mut v = pod_json(&e);
                    v["controllerSettings"] = settings_json(&p);
                    serde_json::to_string_pretty(&v)? + "\n"
                }
            }
        }
        What::Node { name, common } => {
            let (s, p) = read(common)?;
            node_explanation(&s, &p, name, common.output)?
        }
    };
    crate::output::emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The cluster's snapshot and the settings its controller decides under.
fn read(common: &Common) -> anyhow::Result<(Snapshot, Policies)> {
    let now = live::wall_now()?;
    live::block_on(async {
        let snapshot = live::read(&common.cluster, now).await?;
        let policies = policies::read(&common.cluster, &common.policies).await?;
        Ok((snapshot, policies))
    })
}

fn settings_json(p: &Policies) -> Value {
    let s = &p.settings;
    json!({
        "source": p.source,
        "spotToSpotConsolidation": s.feature_gates.spot_to_spot_consolidation,
        "preferencePolicy": s.preference_policy,
        "minValuesPolicy": s.min_values_policy,
    })
}

/// At most `n` names, then how many more.
fn some(names: &[String], n: usize) -> String {
    let mut out = names.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > n {
        out.push_str(&format!(" (+{} more)", names.len() - n));
    }
    out
}

fn outcome_text(o: &Outcome) -> String {
    match o {
        Outcome::Bound(node) => {
            format!("runs on node {node}; the answers below are for it pending again")
        }
        Outcome::Ignored(why) => format!("not placed by the autoscaler: {why}"),
        Outcome::Existing { node, in_flight } => format!(
            "pending; the provisioner would put it on {} {node}",
            if *in_flight {
                "in-flight NodeClaim"
            } else {
                "node"
            }
        ),
        Outcome::NewClaim {
            nodepool,
            instance_types,
            price,
        } => format!(
            "pending; the provisioner would launch a NodeClaim of NodePool {nodepool} for it, \
             cheapest {} at ${price:.4}/h, {} instance type option{}",
            instance_types.first().map(String::as_str).unwrap_or("-"),
            instance_types.len(),
            if instance_types.len() == 1 { "" } else { "s" }
        ),
        Outcome::Unplaced(why) => format!("pending; nothing can take it: {why}"),
    }
}

fn answer_text(a: &Answer, pool: bool) -> String {
    match (&a.verdict, pool) {
        (Ok(its), true) => format!(
            "takes it; {} instance types remain: {}",
            its.len(),
            some(its, 8)
        ),
        (Ok(_), false) => "takes it".to_string(),
        (Err(why), _) => format!("refuses: {why}"),
    }
}

fn pod_text(e: &Explanation) -> String {
    let mut out = format!("pod {}: {}\n", e.pod, outcome_text(&e.outcome));
    if let Outcome::Ignored(_) = e.outcome {
        return out;
    }
    let width = e
        .nodepools
        .iter()
        .chain(&e.nodes)
        .map(|a| a.name.len())
        .max()
        .unwrap_or(0);
    out.push_str("\nNodePools:\n");
    if e.nodepools.is_empty() {
        out.push_str("  (none)\n");
    }
    for a in &e.nodepools {
        out.push_str(&format!("  {:<width$}  {}\n", a.name, answer_text(a, true)));
    }
    out.push_str("\nnodes and in-flight NodeClaims:\n");
    if e.nodes.is_empty() {
        out.push_str("  (none)\n");
    }
    for a in &e.nodes {
        out.push_str(&format!(
            "  {:<width$}  {}\n",
            a.name,
            answer_text(a, false)
        ));
    }
    out
}

fn answer_json(a: &Answer) -> Value {
    match &a.verdict {
        Ok(its) => json!({"name": a.name, "accepts": true, "instanceTypes": its}),
        Err(why) => json!({"name": a.name, "accepts": false, "reason": why}),
    }
}

fn pod_json(e: &Explanation) -> Value {
    let outcome = match &e.outcome {
        Outcome::Bound(node) => json!({"kind": "bound", "node": node}),
        Outcome::Ignored(why) => json!({"kind": "ignored", "reason": why}),
        Outcome::Existing { node, in_flight } => {
            json!({"kind": "existing", "node": node, "inFlight": in_flight})
        }
        Outcome::NewClaim {
            nodepool,
            instance_types,
            price,
        } => json!({
            "kind": "newNodeClaim",
            "nodePool": nodepool,
            "instanceTypes": instance_types,
            "pricePerHour": round(*price),
        }),
        Outcome::Unplaced(why) => json!({"kind": "unplaced", "reason": why}),
    };
    json!({
        "pod": e.pod,
        "outcome": outcome,
        "nodePools": e.nodepools.iter().map(answer_json).collect::<Vec<_>>(),
        "nodes": e.nodes.iter().map(answer_json).collect::<Vec<_>>(),
    })
}

/// The node's verdict in one full round (every candidate simulated, as `plan --disruption`
/// does) and each method's own, with what it runs and its NodePool's disruption settings.
/// The disruption round as the controller's loop plans it: its feature gates and its
/// scheduling policies.
fn planning(p: &Policies) -> (EngineSimulator, Settings) {
    let sim = EngineSimulator {
        options: p.settings.scheduling_options(),
        ..EngineSimulator::default()
    };
    let settings = Settings {
        features: p.settings.consolidation_features(),
        ..Settings::default()
    };
    (sim, settings)
}

fn node_explanation(
    s: &Snapshot,
    p: &Policies,
    name: &str,
    format: Format,
) -> anyhow::Result<String> {
    let node = s.nodes.iter().find(|n| n.name == name);
    let (sim, settings) = planning(p);
    let (Some(node), Some(e)) = (node, explain_node(s, &sim, settings, name)) else {
        anyhow::bail!(
            "node {name} not found in the cluster ({} nodes listed)",
            s.nodes.len()
        );
    };
    let label = |k: &str| node.labels.get(k).cloned().unwrap_or_else(|| "-".into());
    let claim = s
        .node_claims
        .iter()
        .find(|c| c.node_name.as_deref() == Some(name))
        .map(|c| c.name.clone());
    let pool_name = label(labels::NODEPOOL);
    let pool = s.nodepools.iter().find(|p| p.name == pool_name);
    let pods: Vec<String> = s
        .pods
        .iter()
        .filter(|q| q.node_name.as_deref() == Some(name) && !q.is_daemonset_pod())
        .map(|q| q.key())
        .collect();
    let (policy, after) = match pool {
        Some(np) => (
            match np.disruption.consolidation_policy {
                ConsolidationPolicy::WhenEmpty => "WhenEmpty",
                ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
                ConsolidationPolicy::Balanced => "Balanced",
            },
            np.disruption
                .consolidate_after
                .map_or("Never".to_string(), |d| format!("{}s", d.as_secs())),
        ),
        None => ("-", "-".to_string()),
    };
    if let Format::Json = format {
        let v = json!({
            "node": name,
            "nodeClaim": claim,
            "nodePool": pool_name,
            "instanceType": label(labels::INSTANCE_TYPE),
            "zone": label(labels::ZONE),
            "capacityType": label(labels::CAPACITY_TYPE),
            "pods": pods,
            "consolidationPolicy": policy,
            "consolidateAfter": after,
            "controllerSettings": settings_json(p),
            "verdict": e.round.as_ref().map(|v| json!({"code": v.code, "message": v.message})),
            "methods": e.methods.iter().map(|m| json!({
                "method": m.method.as_str(),
                "code": m.code,
                "message": m.message,
            })).collect::<Vec<_>>(),
            "commands": e.commands.iter().map(|c| json!({
                "method": c.method.as_str(),
                "decision": c.decision.as_str(),
                "nodes": c.targets.iter().map(|t| t.node.clone()).collect::<Vec<_>>(),
                "replacement": replacement_text(c),
                "savingsPerHour": round(c.savings_per_hour),
            })).collect::<Vec<_>>(),
        });
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let mut out = format!(
        "{}\nnode {name}: NodeClaim {}, NodePool {pool_name}, {} {} in {}\n",
        p.line(),
        claim.as_deref().unwrap_or("-"),
        label(labels::INSTANCE_TYPE),
        label(labels::CAPACITY_TYPE),
        label(labels::ZONE),
    );
    out.push_str(&format!(
        "NodePool {pool_name}: consolidationPolicy {policy}, consolidateAfter {after}\n"
    ));
    out.push_str(&format!("pods ({}): {}\n", pods.len(), some(&pods, 8)));
    out.push_str(&methods_text(&e));
    for c in &e.commands {
        let nodes: Vec<&str> = c.targets.iter().map(|t| t.node.as_str()).collect();
        out.push_str(&format!(
            "command: {} {} of {}, replacement {}, saves ${:.4}/h\n",
            c.method.as_str(),
            c.decision.as_str(),
            nodes.join(","),
            replacement_text(c),
            c.savings_per_hour
        ));
    }
    Ok(out)
}

/// The round's verdict, then one line per method: its verdict and code.
fn methods_text(e: &NodeExplanation) -> String {
    let mut out = match &e.round {
        Some(v) => format!("this round: {} ({})\n", v.message, v.code),
        None => "this round: nothing (the round did not consider this node)\n".to_string(),
    };
    out.push_str("each method:\n");
    let width = e
        .methods
        .iter()
        .map(|m| m.method.as_str().len())
        .max()
        .unwrap_or(0);
    for m in &e.methods {
        out.push_str(&format!(
            "  {:<width$}  {} ({})\n",
            m.method.as_str(),
            m.message,
            m.code
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explanation() -> Explanation {
        let types: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
        Explanation {
            pod: "default/p".into(),
            outcome: Outcome::Unplaced("NodePool a: requirements: zone".into()),
            nodepools: vec![
                Answer {
                    name: "a".into(),
                    verdict: Err("requirements: zone".into()),
                },
                Answer {
                    name: "wide".into(),
                    verdict: Ok(types),
                },
            ],
            nodes: vec![Answer {
                name: "node-1".into(),
                verdict: Ok(vec![]),
            }],
        }
    }

    #[test]
    fn the_round_is_planned_under_the_controllers_gates_and_policies() {
        let mut settings = nodewright_controller::settings::Settings::default();
        let (sim, plan) = planning(&Policies {
            settings: settings.clone(),
            source: "defaults".into(),
        });
        assert!(!plan.features.spot_to_spot_consolidation);
        assert!(!sim.options.min_values_best_effort);
        settings.feature_gates.spot_to_spot_consolidation = true;
        settings.min_values_policy = "BestEffort".into();
        settings.preference_policy = "Ignore".into();
        let (sim, plan) = planning(&Policies {
            settings,
            source: "flags".into(),
        });
        assert!(plan.features.spot_to_spot_consolidation);
        assert!(sim.options.min_values_best_effort && sim.options.ignore_preferences);
    }

    #[test]
    fn text_names_each_refusal_and_shortens_long_type_lists() {
        let text = pod_text(&explanation());
        assert!(text.starts_with("pod default/p: pending; nothing can take it: NodePool a"));
        assert!(
            text.contains("  a       refuses: requirements: zone\n"),
            "{text}"
        );
        assert!(
            text.contains("  wide    takes it; 10 instance types remain: t0, t1, t2, t3, t4, t5, t6, t7 (+2 more)\n"),
            "{text}"
        );
        assert!(text.contains("  node-1  takes it\n"), "{text}");
    }

    #[test]
    fn json_keeps_every_answer() {
        let v = pod_json(&explanation());
        assert_eq!(v["outcome"]["kind"], "unplaced");
        assert_eq!(v["nodePools"][0]["accepts"], false);
        assert_eq!(v["nodePools"][0]["reason"], "requirements: zone");
        assert_eq!(
            v["nodePools"][1]["instanceTypes"].as_array().map(Vec::len),
            Some(10)
        );
        assert_eq!(v["nodes"][0]["accepts"], true);
    }

    #[test]
    fn node_text_gives_the_round_then_one_aligned_line_per_method() {
        use nodewright_core::disruption::Method;
        use nodewright_core::disruption::plan::Verdict;
        use nodewright_core::disruption::plan::explain::MethodVerdict;
        let m = |method, code: &str, message: &str| MethodVerdict {
            method,
            code: code.into(),
            message: message.into(),
        };
        let e = NodeExplanation {
            round: Some(Verdict {
                node: "n".into(),
                code: "pod-do-not-disrupt".into(),
                message: "do-not-disrupt pod default/p".into(),
            }),
            commands: vec![],
            methods: vec![
                m(Method::Drift, "not-drifted", "not drifted"),
                m(
                    Method::SingleNodeConsolidation,
                    "pod-do-not-disrupt",
                    "do-not-disrupt pod default/p",
                ),
            ],
        };
        assert_eq!(
            methods_text(&e),
            "this round: do-not-disrupt pod default/p (pod-do-not-disrupt)\n\
             each method:\n\
             \x20 drift                      not drifted (not-drifted)\n\
             \x20 single-node-consolidation  do-not-disrupt pod default/p (pod-do-not-disrupt)\n"
        );
    }
}
