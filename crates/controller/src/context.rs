//! What every loop of the controller shares: the cluster's index, the API writer, the cloud
//! provider, the clock, the metrics and the event sink. One value, cloned into each loop, so a
//! loop takes one argument and no two loops are wired to different halves of the process.

use std::sync::Arc;

use nodewright_cloud::CloudProvider;

use crate::clock::Clock;
use crate::events::EventSink;
use crate::metrics::Metrics;
use crate::state::SharedState;
use crate::write::KubeWriter;

#[derive(Clone)]
pub struct Context {
    /// The watched objects, indexed.
    pub state: SharedState,
    /// Every write to the API server goes through it.
    pub writer: Arc<dyn KubeWriter>,
    pub cloud: Arc<dyn CloudProvider>,
    pub clock: Clock,
    pub metrics: Arc<Metrics>,
    pub events: Arc<dyn EventSink>,
}

impl Context {
    /// The same context with `cloud` in place of its cloud (a loop's own metered view of it).
    pub fn with_cloud(&self, cloud: Arc<dyn CloudProvider>) -> Context {
        Context {
            cloud,
            ..self.clone()
        }
    }
}
