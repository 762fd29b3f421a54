//! Test-only fault injection at the controller's two client edges, for proving on a real
//! control plane that the controller survives a flaky API server and a flaky cloud.
//!
//! Off unless `NODEWRIGHT_TEST_FAULTS` (or `--test-faults`) is set, and then only with a value
//! that says exactly what to break: `kube=0.1,cloud=0.1,seed=7` (each edge's share of calls
//! that fail, a seed the value must name, and optionally `timeout=1s`). A value that is not
//! exactly that stops the start. When unset the layers are not built at all, so the calls
//! pay nothing.
//!
//! A faulty call fails in one of four ways, drawn evenly from the one seeded [`Rng`]:
//! throttled (a 429, EC2's `RequestLimitExceeded`) or a server error (a 500, EC2's
//! `InternalError`), both refused before the server sees the call; a timeout (nothing sent,
//! an error after `timeout`); or a dropped connection, where the call *is* carried out and
//! only its answer is lost (a NodeClaim created, an instance launched, that the controller
//! does not know of). Each edge counts its calls and faults in
//! `nodewright_fault_injection_calls_total{edge}` and
//! `nodewright_fault_injection_faults_total{edge, fault}`.

pub mod cloud;
pub mod kube;
pub mod metrics;

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewright_core::rng::Rng;
use thiserror::Error;

use crate::metrics::Metrics;
use crate::settings::{SettingsError, format_duration, parse_duration};

/// The setting's environment variable.
pub const ENV: &str = "NODEWRIGHT_TEST_FAULTS";

/// What to break, parsed from the setting.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultPlan {
    /// Share of Kubernetes API calls that fail, in `[0, 1]`.
    pub kube: f64,
    /// Share of cloud-provider calls that fail, in `[0, 1]`.
    pub cloud: f64,
    pub seed: u64,
    /// How long a timed-out call waits before it fails.
    pub timeout: Duration,
}

impl FromStr for FaultPlan {
    type Err = SettingsError;

    fn from_str(value: &str) -> Result<Self, SettingsError> {
        let invalid = |reason: String| SettingsError::Invalid { field: ENV, reason };
        let rate = |key: &str, v: &str| -> Result<f64, SettingsError> {
            match v.trim().parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                _ => Err(invalid(format!(
                    "{key}={v:?}: expected a share from 0 to 1"
                ))),
            }
        };
        let (mut kube, mut cloud, mut seed) = (0.0, 0.0, None);
        let mut timeout = Duration::from_secs(1);
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (key, v) = entry.split_once('=').ok_or_else(|| {
                invalid(format!(
                    "{entry:?}: expected key=value (kube, cloud, seed, timeout)"
                ))
            })?;
            match key.trim() {
                "kube" => kube = rate(key, v)?,
                "cloud" => cloud = rate(key, v)?,
                "seed" => {
                    let s = v.trim().parse::<u64>().map_err(|_| {
                        invalid(format!("seed={v:?}: expected a non-negative integer"))
                    })?;
                    seed = Some(s);
                }
                "timeout" => timeout = parse_duration(v)?,
                other => {
                    return Err(invalid(format!(
                        "unknown key {other:?} (known: kube, cloud, seed, timeout)"
                    )));
                }
            }
        }
        let seed = seed.ok_or_else(|| {
            invalid("names no seed; test-only fault injection runs only when set on purpose, e.g. kube=0.1,cloud=0.1,seed=1".into())
        })?;
        if kube == 0.0 && cloud == 0.0 {
            return Err(invalid(
                "breaks nothing: give kube or cloud a share above 0, or leave it unset".into(),
            ));
        }
        Ok(FaultPlan {
            kube,
            cloud,
            seed,
            timeout,
        })
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kube={},cloud={},seed={},timeout={}",
            self.kube,
            self.cloud,
            self.seed,
            format_duration(self.timeout)
        )
    }
}

/// How an injected fault fails a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Throttled,
    ServerError,
    Timeout,
    Dropped,
}

impl Fault {
    pub const ALL: [Fault; 4] = [
        Fault::Throttled,
        Fault::ServerError,
        Fault::Timeout,
        Fault::Dropped,
    ];

    /// The metric's `fault` label.
    pub fn label(self) -> &'static str {
        match self {
            Fault::Throttled => "throttled",
            Fault::ServerError => "server-error",
            Fault::Timeout => "timeout",
            Fault::Dropped => "dropped",
        }
    }
}

/// The error a timed-out or dropped call ends with.
#[derive(Clone, Debug, Error, PartialEq)]
#[error("injected fault ({ENV}): {what}")]
pub struct Injected {
    pub what: &'static str,
}

impl Injected {
    pub fn of(fault: Fault) -> Injected {
        let what = match fault {
            Fault::Throttled => "throttled",
            Fault::ServerError => "server error",
            Fault::Timeout => "the call timed out",
            Fault::Dropped => "the connection dropped before the response",
        };
        Injected { what }
    }
}

/// One edge's draws: a seeded generator, the share of calls to fail, and the counters.
pub struct Injector {
    edge: &'static str,
    rate: f64,
    pub timeout: Duration,
    rng: Mutex<Rng>,
    metrics: Arc<Metrics>,
}

impl Injector {
    /// The injector for `edge` (`kube` or `cloud`), or `None` when the plan leaves it alone.
    /// Each edge draws from a generator of its own, so one edge's traffic does not shift
    /// the other's faults.
    pub fn new(edge: &'static str, plan: &FaultPlan, metrics: Arc<Metrics>) -> Option<Arc<Self>> {
        let rate = match edge {
            "kube" => plan.kube,
            _ => plan.cloud,
        };
        let salt = edge
            .bytes()
            .fold(0u64, |h, b| h.rotate_left(8) ^ u64::from(b));
        (rate > 0.0).then(|| {
            Arc::new(Injector {
                edge,
                rate,
                timeout: plan.timeout,
                rng: Mutex::new(Rng::new(plan.seed ^ salt)),
                metrics,
            })
        })
    }

    /// Counts a call and says whether, and how, it fails.
    pub fn draw(&self) -> Option<Fault> {
        let fault = {
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            rng.chance(self.rate).then(|| *rng.pick(&Fault::ALL))
        };
        self.metrics
            .faults
            .drawn(self.edge, fault.map(Fault::label));
        fault
    }
}

#[cfg(test)]
mod tests;
