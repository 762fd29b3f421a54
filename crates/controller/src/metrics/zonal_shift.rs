//! The zonal-shift poller's families. Upstream has none, so they carry the project's own
//! prefix: `nodewright_zonal_shift_transitions_total{zone, state}` counts each zone becoming
//! shifted (`active`) or unshifted (`cleared`), and `nodewright_zonal_shift_active{zone}` is 1
//! while a zone is shifted.

use prometheus_client::registry::Registry;

use super::{Counters, Gauges, Metrics};

pub(super) struct ZonalShiftMetrics {
    transitions: Counters,
    active: Gauges,
}

impl ZonalShiftMetrics {
    pub(super) fn register(r: &mut Registry) -> Self {
        let transitions = Counters::default();
        super::register(
            r,
            "nodewright_zonal_shift_transitions",
            "Zones becoming shifted (state=active) or unshifted (state=cleared) by an ARC zonal shift or autoshift.",
            transitions.clone(),
        );
        let active = Gauges::default();
        super::register(
            r,
            "nodewright_zonal_shift_active",
            "1 while an ARC zonal shift or autoshift moves traffic away from the zone.",
            active.clone(),
        );
        ZonalShiftMetrics {
            transitions,
            active,
        }
    }
}

impl Metrics {
    /// `zone` became shifted (`active = true`) or its shift ended.
    pub fn zonal_shift(&self, zone: &str, active: bool) {
        let state = if active { "active" } else { "cleared" };
        self.zonal_shift
            .transitions
            .get_or_create(&vec![
                ("zone", zone.to_owned()),
                ("state", state.to_owned()),
            ])
            .inc();
        self.zonal_shift
            .active
            .get_or_create(&vec![("zone", zone.to_owned())])
            .set(if active { 1.0 } else { 0.0 });
    }
}
