//! What the simulator refuses to run: scenarios it could not finish in bounded memory and
//! time. Each limit is far beyond a real cluster and a real question, and each refusal names
//! the limit and the field that crossed it.
//!
//! The simulator holds every pod and wakes at least every 10 s of virtual time (the
//! disruption loop's poll), so memory grows with the pods a scenario asks for at once and
//! time with how long it runs.

use std::time::Duration;

use crate::report::clock;

/// Pods at once, over all workloads: Kubernetes' own tested maximum for one cluster (its
/// scalability thresholds: 150,000 pods, 5,000 nodes). A replica count or a Job's
/// completions above it is refused too.
pub const MAX_PODS: u64 = 150_000;

/// Virtual time a run may cover (`until`, and every step's time): 31 days, a month of hourly
/// steps. An idle cluster costs about 360 disruption polls an hour of it.
pub const MAX_RUN: Duration = Duration::from_secs(31 * 24 * 3600);

/// The longest launch, registration or termination delay a scenario's cloud may have: a day.
/// A real instance runs, registers or terminates in minutes, and a claim not registered in
/// 15 minutes is deleted by liveness, so a longer delay is a mistake, not a question.
pub const MAX_CLOUD_DELAY: Duration = Duration::from_secs(24 * 3600);

/// Why a cloud delay of `d`, written `shown` in the scenario, is too long.
pub fn too_long_a_delay(d: Duration, shown: &str) -> Option<String> {
    (d > MAX_CLOUD_DELAY).then(|| {
        format!(
            "{shown} is longer than the simulated cloud takes: at most {}h",
            MAX_CLOUD_DELAY.as_secs() / 3600
        )
    })
}

/// Why a replica count (or a Job's completions) of `n` is too many.
pub fn too_many_pods(n: u64) -> Option<String> {
    (n > MAX_PODS).then(|| {
        format!(
            "{n} is more than the simulator runs: at most {MAX_PODS} pods at once (Kubernetes' tested maximum for a cluster)"
        )
    })
}

/// Why `n` pods wanted at once by all workloads together are too many.
pub fn too_many_pods_at_once(n: u64) -> Option<String> {
    (n > MAX_PODS).then(|| {
        format!(
            "the Deployments, StatefulSets, Jobs and Pods applied by now want {n} pods at once, more than the simulator runs: at most {MAX_PODS} (Kubernetes' tested maximum for a cluster)"
        )
    })
}

/// Why a run reaching `at` is too long.
pub fn too_long(at: Duration) -> Option<String> {
    (at > MAX_RUN).then(|| {
        format!(
            "{} is past the longest run the simulator does: {}h (31 days) of virtual time",
            clock(at),
            MAX_RUN.as_secs() / 3600
        )
    })
}
