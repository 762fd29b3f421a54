//! Upstream's time limits on the consolidation searches, on the wall clock: a multi-node
//! search stops after a minute and a single-node one after three, each counted from its own
//! start, keeping the best command found by then. Core asks between simulations
//! ([`plan::Deadline`]); the round counts the searches that stopped in
//! `karpenter_voluntary_disruption_consolidation_timeouts_total`.

use std::cell::Cell;
use std::time::{Duration, Instant};

use nodewright_core::disruption::Method;
use nodewright_core::disruption::plan;

/// How long each consolidation search may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchTimeouts {
    pub multi_node: Duration,
    pub single_node: Duration,
}

impl Default for SearchTimeouts {
    fn default() -> Self {
        SearchTimeouts {
            multi_node: plan::MULTI_NODE_TIMEOUT,
            single_node: plan::SINGLE_NODE_TIMEOUT,
        }
    }
}

/// One round's deadline: when the running search started.
pub(super) struct WallDeadline {
    timeouts: SearchTimeouts,
    started: Cell<Instant>,
}

impl WallDeadline {
    pub(super) fn new(timeouts: SearchTimeouts) -> Self {
        WallDeadline {
            timeouts,
            started: Cell::new(Instant::now()),
        }
    }
}

impl plan::Deadline for WallDeadline {
    fn start(&self, _: Method) {
        self.started.set(Instant::now());
    }

    fn passed(&self, method: Method) -> bool {
        let limit = match method {
            Method::MultiNodeConsolidation => self.timeouts.multi_node,
            _ => self.timeouts.single_node,
        };
        self.started.get().elapsed() >= limit
    }
}
