//! The report for people: one line per timeline event, then the summary.

use std::fmt::Write;

use super::{RunReport, clock};

pub fn timeline_text(r: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "scenario {} (seed {})", r.name, r.seed);
    for e in &r.timeline {
        let _ = writeln!(out, "{:>9}  {:<19} {}", clock(e.at), e.kind, e.message);
    }
    out
}

fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |u| format!("{:.1}%", u * 100.0))
}

pub fn summary_text(r: &RunReport) -> String {
    let s = &r.summary;
    let mut out = String::new();
    let _ = writeln!(out, "summary after {}", clock(r.duration));
    let _ = writeln!(
        out,
        "  nodes      launched {}, failed launches {}, peak {}, at end {}",
        s.nodes_launched, s.launch_failures, s.max_nodes, s.nodes_at_end
    );
    let _ = writeln!(
        out,
        "  pods       {} at end, {} pending",
        s.pods_at_end, s.pending_at_end
    );
    let _ = writeln!(
        out,
        "  disruption {} command(s), {} node(s) removed, {} rejected on re-check, ${:.4}/h saved, {} relaunch(es) for pods a consolidation moved",
        s.disruption_commands,
        s.nodes_disrupted,
        s.rejected_validations,
        s.savings_per_hour,
        s.consolidation_churn
    );
    if s.interruptions > 0 {
        let _ = writeln!(out, "  spot       {} interruption(s)", s.interruptions);
    }
    let _ = writeln!(
        out,
        "  cost       ${:.4} total, ${:.4}/h on average, ${:.4}/h at end",
        s.total_cost_usd, s.average_per_hour, s.final_per_hour
    );
    let mut steps: Vec<String> = Vec::new();
    let mut last: Option<f64> = None;
    for x in &r.samples {
        if last.is_none_or(|l| (l - x.price_per_hour).abs() > 1e-9) {
            steps.push(format!("{} ${:.4}", clock(x.at), x.price_per_hour));
            last = Some(x.price_per_hour);
        }
    }
    let _ = writeln!(out, "  $/h        {}", readable(&steps).join(" -> "));
    let _ = writeln!(
        out,
        "  cpu        {} requested/allocatable on average, {} at end",
        pct(s.average_cpu_utilisation),
        pct(s.final_cpu_utilisation)
    );
    match (s.fresh_plan_per_hour, s.lower_bound_per_hour) {
        (Some(plan), Some(bound)) => {
            let _ = writeln!(
                out,
                "  bound      running pods re-planned from scratch: ${plan:.4}/h; lower bound ${bound:.4}/h; cluster at end is {} above the bound",
                pct(s.gap_to_bound())
            );
        }
        _ => {
            let _ = writeln!(out, "  bound      n/a (no running pods)");
        }
    }
    let _ = writeln!(out, "  note       {}", r.spot_price_note);
    if !r.violations.is_empty() {
        let _ = writeln!(out, "  INVARIANT VIOLATIONS ({}):", r.violations.len());
        for v in r.violations.iter().take(10) {
            let _ = writeln!(out, "    {v}");
        }
    }
    out
}

/// At most [`MAX_STEPS`] price changes: the first, the last and evenly spaced ones between
/// (with `...` where changes were left out), so a day of churn stays one readable line.
const MAX_STEPS: usize = 24;

fn readable(steps: &[String]) -> Vec<String> {
    if steps.len() <= MAX_STEPS {
        return steps.to_vec();
    }
    let last = steps.len() - 1;
    let mut out = Vec::with_capacity(MAX_STEPS + 1);
    let mut previous = 0;
    for k in 0..MAX_STEPS {
        let i = k * last / (MAX_STEPS - 1);
        if k > 0 && i > previous + 1 {
            out.push("...".to_string());
        }
        out.push(steps[i].clone());
        previous = i;
    }
    out
}
