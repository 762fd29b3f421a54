//! The zonal-shift poller's families. Upstream has none, so they carry the project's own
//! prefix: `nodewright_zonal_shift_transitions_total{zone, state}` counts each zone becoming
//! shifted (`active`) or unshifted (`cleared`), and `nodewright_zonal_shift_active{zone}` is 1
//! while a zone is shifted.

use prometheus_client::registry::Registry;

use crate::metrics::{Counters, Gauges, registered};

pub struct ZonalShiftMetrics {
    transitions: Counters,
    active: Gauges,
}

impl ZonalShiftMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        ZonalShiftMetrics {
            transitions: registered(
                r,
                "nodewright_zonal_shift_transitions",
                "Zones becoming shifted (state=active) or unshifted (state=cleared) by an ARC zonal shift or autoshift.",
            ),
            active: registered(
                r,
                "nodewright_zonal_shift_active",
                "1 while an ARC zonal shift or autoshift moves traffic away from the zone.",
            ),
        }
    }

    /// `zone` became shifted (`active = true`) or its shift ended.
    pub fn shifted(&self, zone: &str, active: bool) {
        let state = if active { "active" } else { "cleared" };
        self.transitions
            .get_or_create(&vec![
                ("zone", zone.to_owned()),
                ("state", state.to_owned()),
            ])
            .inc();
        self.active
            .get_or_create(&vec![("zone", zone.to_owned())])
            .set(if active { 1.0 } else { 0.0 });
    }
}
