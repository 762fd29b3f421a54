//! Test-only failpoints: `NODEWRIGHT_TEST_FAILPOINT` names one place where the process exits
//! at once, as a crash or an OOM kill there would end it, so the suite can prove that a
//! restarted controller finishes what the dead one left half done.
//!
//! - `after-launch`: the cloud has launched an instance for a NodeClaim, and the claim's
//!   status does not name it yet (the instance leaks unless garbage collection finds it).
//! - `after-terminate`: the cloud has accepted an instance's termination, and the claim's or
//!   Node's finalizer is still on (the object lingers unless the next pass releases it).
//!
//! Unset, [`reached`] reads one static and returns.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use tracing::error;

use crate::settings::SettingsError;

/// The setting's environment variable.
pub const ENV: &str = "NODEWRIGHT_TEST_FAILPOINT";

/// The exit status of a process stopped at a failpoint, so a test tells it from a crash.
pub const EXIT_CODE: i32 = 86;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failpoint {
    AfterLaunch,
    AfterTerminate,
}

impl Failpoint {
    pub fn name(self) -> &'static str {
        match self {
            Failpoint::AfterLaunch => "after-launch",
            Failpoint::AfterTerminate => "after-terminate",
        }
    }
}

impl FromStr for Failpoint {
    type Err = SettingsError;
    fn from_str(value: &str) -> Result<Self, SettingsError> {
        match value.trim() {
            "after-launch" => Ok(Failpoint::AfterLaunch),
            "after-terminate" => Ok(Failpoint::AfterTerminate),
            other => Err(SettingsError::Invalid {
                field: ENV,
                reason: format!(
                    "unknown failpoint {other:?} (known: after-launch, after-terminate)"
                ),
            }),
        }
    }
}

impl fmt::Display for Failpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

static ARMED: OnceLock<Failpoint> = OnceLock::new();

/// Arms `point` for the life of the process (the first call wins).
pub fn arm(point: Failpoint) {
    let _ = ARMED.set(point);
}

/// Exits the process with [`EXIT_CODE`] if `point` is the armed failpoint.
pub fn reached(point: Failpoint) {
    if ARMED.get() == Some(&point) {
        error!(
            failpoint = point.name(),
            "TEST ONLY: failpoint reached; exiting"
        );
        std::process::exit(EXIT_CODE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_unknown_ones_are_refused() {
        for p in [Failpoint::AfterLaunch, Failpoint::AfterTerminate] {
            assert_eq!(p.name().parse::<Failpoint>().unwrap(), p);
        }
        let e = "after-lunch".parse::<Failpoint>().unwrap_err().to_string();
        assert!(e.contains(ENV) && e.contains("after-lunch"), "{e}");
    }

    #[test]
    fn an_unarmed_failpoint_returns() {
        // Nothing in the unit tests arms one; reaching it must not exit.
        reached(Failpoint::AfterLaunch);
        reached(Failpoint::AfterTerminate);
    }
}
