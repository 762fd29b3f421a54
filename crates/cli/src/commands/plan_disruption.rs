//! `nodewright plan --disruption`: one planning round of voluntary disruption over a snapshot of
//! a running cluster, with every command and a verdict (and its reason) for every node.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use nodewright_api::{cluster, document, interchange};
use nodewright_aws_model::{NodeClassInput, Settings as AwsSettings, SpotPrices, Zone};
use nodewright_core::disruption::Command;
use nodewright_core::disruption::EngineSimulator;
use nodewright_core::disruption::plan::{DisruptionPlan, Settings, plan};
use nodewright_core::labels;
use nodewright_core::model::{InstanceType, Snapshot};
use nodewright_core::time::Timestamp;
use serde_json::{Value, json};

use super::plan::{Output, PlanArgs};

/// The region assumed when no node carries a region label.
const DEFAULT_REGION: &str = "us-east-1";

fn now(arg: Option<&str>) -> anyhow::Result<Timestamp> {
    match arg {
        Some(t) => cluster::parse_time(t).map_err(|e| anyhow::anyhow!("--now: {e}")),
        None => super::live::wall_now(),
    }
}

fn read_catalog_file(path: &Path) -> anyhow::Result<Vec<InstanceType>> {
    let name = path.display().to_string();
    let text = nodewright_api::document::read_text(path)?;
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("{name}: not valid JSON"))?;
    Ok(interchange::read_catalog(&name, &v)?)
}

/// The embedded AWS catalog as an AL2023 NodeClass in the nodes' region would list it, over
/// every zone of that region, with the catalog's synthetic spot prices.
fn aws_catalog(docs: &[document::Document]) -> anyhow::Result<Vec<InstanceType>> {
    let region = docs
        .iter()
        .filter(|d| d.kind() == "Node")
        .find_map(|d| {
            d.value
                .pointer("/metadata/labels")
                .and_then(|l| l.get(labels::REGION))
                .and_then(Value::as_str)
        })
        .unwrap_or(DEFAULT_REGION)
        .to_string();
    let catalog =
        nodewright_aws_model::catalog::embedded().context("loading the embedded AWS catalog")?;
    let zones: Vec<Zone> = catalog.zones(&region).into_iter().map(Zone::new).collect();
    if zones.is_empty() {
        bail!("the embedded AWS catalog has no region {region:?}; pass --instance-types");
    }
    Ok(catalog.instance_types(
        &region,
        &zones,
        &AwsSettings::default(),
        &NodeClassInput::new(nodewright_aws_model::AmiFamily::AL2023),
        &SpotPrices::synthetic(),
    ))
}

/// Reads the cluster: an interchange document (its own catalog) or manifests plus a catalog.
pub fn load(input: &Path, catalog: Option<&Path>, at: Timestamp) -> anyhow::Result<Snapshot> {
    let name = input.display().to_string();
    if input.is_file() {
        let text = nodewright_api::document::read_text(input)?;
        if let Ok(v) = serde_json::from_str::<Value>(&text)
            && v.get("instanceTypes").is_some()
        {
            let its = match catalog {
                Some(c) => read_catalog_file(c)?,
                None => interchange::read_catalog(&name, &v)?,
            };
            return Ok(cluster::read_cluster(
                cluster::interchange_documents(&name, &v),
                its,
                at,
            )?);
        }
    }
    let docs = document::read_documents(input)?;
    let its = match catalog {
        Some(c) => read_catalog_file(c)?,
        None => aws_catalog(&docs)?,
    };
    Ok(cluster::read_cluster(docs, its, at)?)
}

pub fn run(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let at = now(args.now.as_deref())?;
    let snapshot = match &args.input {
        Some(input) => load(input, args.instance_types.as_deref(), at)?,
        None => super::live::block_on(super::live::read(&args.cluster, at))?,
    };
    let p = plan(&snapshot, &EngineSimulator::default(), Settings::default());
    let text = match args.output {
        Output::Json => serde_json::to_string_pretty(&to_json(&p, at))? + "\n",
        Output::Table => table(&snapshot, &p, at),
    };
    crate::output::emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn rfc3339(t: Timestamp) -> String {
    cluster::format_time(t)
}

pub fn replacement_text(c: &Command) -> String {
    if c.replacements.is_empty() {
        return "-".into();
    }
    c.replacements
        .iter()
        .map(|r| {
            format!(
                "{} (${:.4}/h, {} option{})",
                r.instance_types.first().map(String::as_str).unwrap_or("?"),
                r.price,
                r.instance_types.len(),
                if r.instance_types.len() == 1 { "" } else { "s" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn table(s: &Snapshot, p: &DisruptionPlan, at: Timestamp) -> String {
    let mut out = format!(
        "disruption plan at {}: {} nodes, {} commands, saves ${:.4}/h\n\n",
        rfc3339(at),
        s.nodes.len(),
        p.commands.len(),
        p.savings_per_hour()
    );
    if p.commands.is_empty() {
        out.push_str("no disruption commands\n");
    } else {
        out.push_str(&format!(
            "{:<3} {:<26} {:<9} {:<32} {:<36} {:>10}\n",
            "#", "METHOD", "DECISION", "NODES", "REPLACEMENT", "$/H SAVED"
        ));
        for (i, c) in p.commands.iter().enumerate() {
            let nodes: Vec<&str> = c.targets.iter().map(|t| t.node.as_str()).collect();
            out.push_str(&format!(
                "{:<3} {:<26} {:<9} {:<32} {:<36} {:>10.4}\n",
                i,
                c.method.as_str(),
                c.decision.as_str(),
                nodes.join(","),
                replacement_text(c),
                c.savings_per_hour
            ));
        }
    }
    out.push('\n');
    let width = p
        .verdicts
        .iter()
        .map(|v| v.node.len())
        .max()
        .unwrap_or(4)
        .max(4);
    out.push_str(&format!(
        "{:<width$} {:<24} {}\n",
        "NODE", "VERDICT", "REASON"
    ));
    for v in &p.verdicts {
        out.push_str(&format!(
            "{:<width$} {:<24} {}\n",
            v.node, v.code, v.message
        ));
    }
    out
}

fn to_json(p: &DisruptionPlan, at: Timestamp) -> Value {
    let commands: Vec<Value> = p
        .commands
        .iter()
        .map(|c| {
            json!({
                "method": c.method.as_str(),
                "decision": c.decision.as_str(),
                "reason": c.method.reason_label(),
                "savingsPerHour": round(c.savings_per_hour),
                "targets": c.targets.iter().map(|t| json!({
                    "node": t.node,
                    "nodeClaim": t.nodeclaim,
                    "nodePool": t.nodepool,
                    "instanceType": t.instance_type,
                    "zone": t.zone,
                    "capacityType": t.capacity_type,
                    "pricePerHour": round(t.price),
                    "pods": t.pods,
                })).collect::<Vec<_>>(),
                "replacements": c.replacements.iter().map(|r| json!({
                    "nodePool": r.nodepool,
                    "instanceTypes": r.instance_types,
                    "pricePerHour": round(r.price),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let verdicts: Vec<Value> = p
        .verdicts
        .iter()
        .map(|v| json!({"node": v.node, "code": v.code, "message": v.message}))
        .collect();
    json!({
        "now": rfc3339(at),
        "savingsPerHour": round(p.savings_per_hour()),
        "commands": commands,
        "verdicts": verdicts,
    })
}

/// Prices to 1e-6 $/h, so the output does not carry float noise.
pub fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
