//! A record of what the disruption executor did and when: rounds planned or skipped (with
//! their cost and the budgets they saw), commands re-checked, started, finished or rolled
//! back. Off unless asked for; benchmarks and tests read it to see how a scale-down unfolds.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nodewright_core::disruption::Command;
use nodewright_core::disruption::queue::{Failure, Running};
use nodewright_core::time::Timestamp;

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub at: Timestamp,
    pub what: What,
    /// Nodes concerned: a round's command targets, or a command's targets.
    pub nodes: usize,
    /// A round's planning time (wall clock), or how long a finished command ran (the
    /// clock's time since it started).
    pub took: Option<Duration>,
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// A round skipped: nothing changed since a round found nothing.
    Skipped,
    /// A round planned; the detail says what, at what cost, against which budgets.
    Planned,
    /// A command passed its re-check or needed none, and started.
    Started,
    /// A command failed its re-check.
    Rejected,
    /// A command's replacements are initialized; its targets are deleted.
    Terminated,
    /// A command failed (replacement lost, timeout) and its targets were released; the
    /// detail ends with why, in core's words ([`Failure`]'s).
    RolledBack,
}

impl Entry {
    pub fn new(at: Timestamp, what: What, detail: String) -> Self {
        Entry {
            at,
            what,
            nodes: 0,
            took: None,
            detail,
        }
    }

    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    pub fn took(mut self, d: Duration) -> Self {
        self.took = Some(d);
        self
    }
}

#[derive(Default)]
pub struct Journal {
    on: AtomicBool,
    entries: Mutex<Vec<Entry>>,
}

impl Journal {
    pub fn enable(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Records an entry when enabled; it is only built then.
    pub fn record(&self, entry: impl FnOnce() -> Entry) {
        if self.enabled() {
            self.entries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(entry());
        }
    }

    /// The entries recorded since the last call.
    pub fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.entries.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A command in a few words: method, decision, how many targets and replacements.
pub(super) fn brief(c: &Command) -> String {
    format!(
        "{} {} of {} node(s) with {} replacement(s), saving ${:.3}/h",
        c.method.as_str(),
        c.decision.as_str(),
        c.targets.len(),
        c.replacements.len(),
        c.savings_per_hour
    )
}

pub(super) fn started_entry(now: Timestamp, c: &Command) -> Entry {
    Entry::new(now, What::Started, c.to_string()).nodes(c.targets.len())
}

pub(super) fn finished_entry(now: Timestamp, what: What, r: &Running) -> Entry {
    Entry::new(now, what, brief(&r.command))
        .nodes(r.command.targets.len())
        .took(now.since(r.started))
}

/// A rolled-back command, with why (core's wording, as the simulator's timeline has it).
pub(super) fn rolled_back_entry(now: Timestamp, r: &Running, why: &Failure) -> Entry {
    let mut entry = finished_entry(now, What::RolledBack, r);
    entry.detail = format!("{}: {why}", entry.detail);
    entry
}
