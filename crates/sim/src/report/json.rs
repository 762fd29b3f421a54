//! The report for machines (`--output json`).

use serde_json::{Value, json};

use super::RunReport;

fn round(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

pub fn to_json(r: &RunReport) -> Value {
    let s = &r.summary;
    json!({
        "scenario": r.name,
        "seed": r.seed,
        "durationSeconds": r.duration.as_secs_f64(),
                "priceNote": r.spot_price_note,
        "summary": {
            "nodesLaunched": s.nodes_launched,
            "launchFailures": s.launch_failures,
            "maxNodes": s.max_nodes,
            "nodesAtEnd": s.nodes_at_end,
            "podsAtEnd": s.pods_at_end,
            "pendingAtEnd": s.pending_at_end,
            "nodesDisrupted": s.nodes_disrupted,
            "disruptionCommands": s.disruption_commands,
            "rejectedValidations": s.rejected_validations,
            "consolidationChurn": s.consolidation_churn,
            "savingsPerHour": round(s.savings_per_hour),
            "interruptions": s.interruptions,
            "totalCostUsd": round(s.total_cost_usd),
            "averagePerHour": round(s.average_per_hour),
            "finalPerHour": round(s.final_per_hour),
            "averageCpuUtilisation": s.average_cpu_utilisation.map(round),
            "finalCpuUtilisation": s.final_cpu_utilisation.map(round),
            "freshPlanPerHour": s.fresh_plan_per_hour.map(round),
            "lowerBoundPerHour": s.lower_bound_per_hour.map(round),
            "gapToLowerBound": s.gap_to_bound().map(round),
        },
        "timeline": r.timeline.iter().map(|e| json!({
            "atSeconds": e.at.as_secs_f64(),
            "kind": e.kind,
            "message": e.message,
        })).collect::<Vec<_>>(),
        "samples": r.samples.iter().map(|x| json!({
            "atSeconds": x.at.as_secs_f64(),
            "nodes": x.nodes,
            "readyNodes": x.ready_nodes,
            "pods": x.pods,
            "pendingPods": x.pending_pods,
            "pricePerHour": round(x.price_per_hour),
            "cpuRequestedMilli": x.cpu_requested_milli,
            "cpuAllocatableMilli": x.cpu_allocatable_milli,
        })).collect::<Vec<_>>(),
        "violations": r.violations,
    })
}
