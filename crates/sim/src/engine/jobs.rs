//! Jobs: a bound Job pod succeeds `run-for` after it started and leaves its node.

use super::*;

impl Engine<'_> {
    /// Schedules the success of every newly bound Job pod, `run-for` after it started.
    pub(super) fn schedule_job_runs(&mut self) {
        let runs: BTreeMap<(String, String), Duration> = self
            .cluster
            .workloads
            .iter()
            .filter_map(|(k, w)| w.job.and_then(|j| j.run_for).map(|d| (k.clone(), d)))
            .collect();
        if runs.is_empty() {
            return;
        }
        let mut due = Vec::new();
        for p in self.cluster.pods().values() {
            let (Some(o), Some(start)) = (&p.owner, p.start_time) else {
                continue;
            };
            if o.kind != "Job" || p.node_name.is_none() || self.job_timers.contains(&p.key()) {
                continue;
            }
            if let Some(d) = runs.get(&(p.namespace.clone(), o.name.clone())) {
                due.push((p.key(), start.plus(*d)));
            }
        }
        for (key, at) in due {
            self.job_timers.insert(key.clone());
            self.queue.push(at, Event::PodSucceeded(key));
        }
    }

    /// A Job pod that is still running when its run ends succeeds and leaves its node.
    pub(super) fn pod_succeeded(&mut self, key: &str) {
        self.job_timers.remove(key);
        let Some(p) = self.cluster.pods().get(key) else {
            return;
        };
        if p.deletion_timestamp.is_some() || p.node_name.is_none() {
            return;
        }
        let job = (
            p.namespace.clone(),
            p.owner.as_ref().map(|o| o.name.clone()).unwrap_or_default(),
        );
        self.cluster.remove_pod(key, self.now);
        let Some(w) = self.cluster.workloads.get_mut(&job) else {
            return;
        };
        let Some(spec) = w.job.as_mut() else {
            return;
        };
        spec.succeeded += 1;
        let (done, of) = (spec.succeeded, spec.completions);
        if done == of {
            self.log(
                "job-complete",
                format!("Job/{}/{}: {done}/{of} completions", job.0, job.1),
            );
        }
    }
}
