//! What the disruption loop did during the scale-down, in virtual time: rounds planned and
//! skipped and what planning cost, commands started, rejected and rolled back, how long each
//! command waited for its replacements, and how long a deleted claim took to drain and
//! terminate. With `--trace-disruption` every journal entry is printed as it happens.

use std::collections::BTreeMap;
use std::time::Duration;

use nodewright_controller::disruption::journal::{Entry, What};
use nodewright_controller::state::ClusterState;
use nodewright_core::time::Timestamp;

pub struct Trace {
    print: bool,
    start: Timestamp,
    planned: u64,
    planned_with_commands: u64,
    planning: Duration,
    skipped: u64,
    started: u64,
    started_nodes: usize,
    rejected: u64,
    rolled_back: u64,
    /// When the last round with commands planned them, for the validation wait.
    last_planned: Option<Timestamp>,
    validation_waits: Vec<Duration>,
    replacement_waits: Vec<Duration>,
    /// Claims seen deleting, since when.
    deleting: BTreeMap<String, Timestamp>,
    terminations: Vec<Duration>,
}

fn label(w: What) -> &'static str {
    match w {
        What::Skipped => "Skipped",
        What::Planned => "Planned",
        What::Started => "Started",
        What::Rejected => "Rejected",
        What::Terminated => "Terminated",
        What::RolledBack => "RolledBack",
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn mean_max(v: &[Duration]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let sum: Duration = v.iter().sum();
    let max = v.iter().max().copied().unwrap_or_default();
    (secs(sum) / v.len() as f64, secs(max))
}

impl Trace {
    pub fn new(print: bool, start: Timestamp) -> Self {
        Trace {
            print,
            start,
            planned: 0,
            planned_with_commands: 0,
            planning: Duration::ZERO,
            skipped: 0,
            started: 0,
            started_nodes: 0,
            rejected: 0,
            rolled_back: 0,
            last_planned: None,
            validation_waits: Vec::new(),
            replacement_waits: Vec::new(),
            deleting: BTreeMap::new(),
            terminations: Vec::new(),
        }
    }

    /// Takes in the journal's new entries, with the index as it is now.
    pub fn observe(&mut self, entries: Vec<Entry>, s: &ClusterState) {
        for e in entries {
            match e.what {
                What::Skipped => self.skipped += 1,
                What::Planned => {
                    self.planned += 1;
                    self.planning += e.took.unwrap_or_default();
                    if e.nodes > 0 {
                        self.planned_with_commands += 1;
                        self.last_planned = Some(e.at);
                    }
                }
                What::Started | What::Rejected => {
                    if e.what == What::Started {
                        self.started += 1;
                        self.started_nodes += e.nodes;
                    } else {
                        self.rejected += 1;
                    }
                    if let Some(p) = self.last_planned {
                        self.validation_waits.push(e.at.since(p));
                    }
                }
                What::Terminated => self.replacement_waits.extend(e.took),
                What::RolledBack => self.rolled_back += 1,
            }
            if self.print && (e.what != What::Skipped || self.skipped % 30 == 1) {
                let deleting = s
                    .nodeclaims
                    .values()
                    .filter(|c| c.metadata.deletion_timestamp.is_some())
                    .count();
                println!(
                    "  {:>8.1} s  {:<10} nodes {:>4} ({deleting:>3} deleting), pending pods {:>4}: {}",
                    secs(e.at.since(self.start)),
                    label(e.what),
                    s.nodes.len(),
                    s.pending().len(),
                    e.detail
                );
            }
        }
    }

    /// Follows claims from their deletion until they are gone (drain and termination).
    pub fn watch_claims(&mut self, s: &ClusterState, now: Timestamp) {
        for (name, c) in &s.nodeclaims {
            if c.metadata.deletion_timestamp.is_some() {
                self.deleting.entry(name.clone()).or_insert(now);
            }
        }
        let gone: Vec<String> = self
            .deleting
            .keys()
            .filter(|k| !s.nodeclaims.contains_key(*k))
            .cloned()
            .collect();
        for k in gone {
            if let Some(since) = self.deleting.remove(&k) {
                self.terminations.push(now.since(since));
            }
        }
    }

    pub fn print_summary(&self) {
        let per_round = if self.planned == 0 {
            0.0
        } else {
            secs(self.planning) * 1000.0 / self.planned as f64
        };
        println!(
            "  disruption rounds    {} planned ({} with commands, {per_round:.0} ms each), {} skipped (consolidated)",
            self.planned, self.planned_with_commands, self.skipped
        );
        println!(
            "  commands             {} started ({} nodes), {} rejected on re-check, {} rolled back",
            self.started, self.started_nodes, self.rejected, self.rolled_back
        );
        let (v, vmax) = mean_max(&self.validation_waits);
        let (r, rmax) = mean_max(&self.replacement_waits);
        let (t, tmax) = mean_max(&self.terminations);
        println!("  validation wait      {v:.1} s mean, {vmax:.1} s max (virtual)");
        println!(
            "  replacement wait     {r:.1} s mean, {rmax:.1} s max over {} command(s) (start to targets deleted)",
            self.replacement_waits.len()
        );
        println!(
            "  drain + termination  {t:.1} s mean, {tmax:.1} s max over {} claim(s) (delete to gone)",
            self.terminations.len()
        );
    }
}
