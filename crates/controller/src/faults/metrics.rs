//! The test-only fault injection's counters (see `crate::faults`), under the project's own
//! prefix: `nodewright_fault_injection_calls_total{edge}` counts every call an injecting edge
//! saw, `nodewright_fault_injection_faults_total{edge, fault}` the ones it failed. Nothing is
//! counted when injection is off.

use prometheus_client::registry::Registry;

use crate::metrics::{Counters, registered};

pub struct FaultMetrics {
    calls: Counters,
    faults: Counters,
}

impl FaultMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        FaultMetrics {
            calls: registered(
                r,
                "nodewright_fault_injection_calls",
                "Calls seen by a test-only fault-injecting client edge (kube or cloud).",
            ),
            faults: registered(
                r,
                "nodewright_fault_injection_faults",
                "Calls a test-only fault-injecting client edge failed on purpose, by fault.",
            ),
        }
    }

    /// A call on `edge`, failed with `fault` if any.
    pub fn drawn(&self, edge: &str, fault: Option<&str>) {
        self.calls
            .get_or_create(&vec![("edge", edge.to_owned())])
            .inc();
        if let Some(fault) = fault {
            self.faults
                .get_or_create(&vec![
                    ("edge", edge.to_owned()),
                    ("fault", fault.to_owned()),
                ])
                .inc();
        }
    }
}
