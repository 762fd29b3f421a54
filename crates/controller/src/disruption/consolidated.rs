//! The consolidated marker in the controller: a round that found nothing to do lets the next
//! rounds skip planning until the index changes (the [`ClusterState::changes`] counter moves),
//! something the decision depends on lapses with time alone (`consolidateAfter` elapses, a
//! `do-not-disrupt` annotation's duration ends, a claim expires or becomes old enough for the
//! instance-type drift check), or five minutes pass ([`ConsolidationState`]'s own TTL, which
//! also covers what the cloud changes: prices, offerings).
//!
//! [`ClusterState::changes`]: crate::state::ClusterState::changes

use std::time::Duration;

use nodewright_core::cadence::ConsolidationState;
use nodewright_core::disruption::candidates::Blocker;
use nodewright_core::model::Snapshot;
use nodewright_core::time::Timestamp;

/// A claim this old is checked for instance-type drift (upstream's one hour).
const INSTANCE_TYPE_CHECK_AGE: Duration = Duration::from_secs(60 * 60);

#[derive(Clone, Debug)]
pub struct Marker {
    state: ConsolidationState,
    /// The index's change counter at the last round.
    seen: Option<u64>,
    /// When the last round's verdicts change with time alone.
    timed: Option<Timestamp>,
}

impl Marker {
    pub fn new(now: Timestamp) -> Self {
        Marker {
            state: ConsolidationState::new(now),
            seen: None,
            timed: None,
        }
    }

    /// Whether a round at `now` may be skipped, the index's counter reading `changes`.
    pub fn skip(&mut self, changes: u64, now: Timestamp) -> bool {
        if self.seen != Some(changes) {
            self.seen = Some(changes);
            self.timed = None;
            self.state.changed(now);
        } else if self.timed.is_some_and(|t| t <= now) {
            self.timed = None;
            self.state.changed(now);
        }
        self.state.is_consolidated(now)
    }

    /// The round at `now` found nothing and no scheduled budget held it back; `timed` is the
    /// next instant its verdicts change with time alone.
    pub fn found_nothing(&mut self, now: Timestamp, timed: Option<Timestamp>) {
        self.state.mark_consolidated(now);
        self.timed = timed;
    }
}

/// The first instant after `snap.now` at which a verdict of a round over `snap` can change
/// with no event: a `consolidateAfter` or `do-not-disrupt` wait ends (from the graceful
/// selection's `blocked`), a claim expires or reaches the instance-type drift check's age.
pub fn next_timed_change(snap: &Snapshot, blocked: &[(String, Blocker)]) -> Option<Timestamp> {
    let now = snap.now;
    let waits = blocked.iter().filter_map(|(_, b)| match b {
        Blocker::ConsolidateAfter { remaining } => Some(now.plus(*remaining)),
        Blocker::PodDoNotDisrupt { until, .. } => *until,
        _ => None,
    });
    let claims = snap.node_claims.iter().flat_map(|c| {
        let expire_after = c.expire_after.or_else(|| {
            snap.nodepools
                .iter()
                .find(|p| p.name == c.nodepool)
                .and_then(|p| p.template.expire_after)
        });
        [
            expire_after.map(|e| c.creation_timestamp.plus(e)),
            Some(c.creation_timestamp.plus(INSTANCE_TYPE_CHECK_AGE)),
        ]
        .into_iter()
        .flatten()
    });
    waits.chain(claims).filter(|t| *t > now).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: i64) -> Timestamp {
        Timestamp(secs * 1000)
    }

    #[test]
    fn an_unchanged_index_skips_until_the_counter_moves() {
        let mut m = Marker::new(s(0));
        assert!(!m.skip(7, s(0)));
        m.found_nothing(s(0), None);
        assert!(m.skip(7, s(10)));
        assert!(m.skip(7, s(290)));
        assert!(!m.skip(8, s(300)));
        m.found_nothing(s(300), None);
        assert!(m.skip(8, s(310)));
    }

    #[test]
    fn a_timed_change_ends_the_skip_at_its_instant() {
        let mut m = Marker::new(s(0));
        assert!(!m.skip(1, s(0)));
        m.found_nothing(s(0), Some(s(25)));
        assert!(m.skip(1, s(20)));
        assert!(!m.skip(1, s(25)));
        // The round at 25 s runs and finds nothing again, with nothing timed left.
        m.found_nothing(s(25), None);
        assert!(m.skip(1, s(35)));
    }

    #[test]
    fn a_verdict_lapses_after_five_minutes_without_changes() {
        let mut m = Marker::new(s(0));
        assert!(!m.skip(1, s(0)));
        m.found_nothing(s(0), None);
        assert!(m.skip(1, s(299)));
        assert!(!m.skip(1, s(300)));
    }

    #[test]
    fn the_next_timed_change_is_the_earliest_wait_or_expiry() {
        use nodewright_core::model::NodeClaim;
        let mut snap = Snapshot {
            now: s(100),
            ..Snapshot::default()
        };
        let mut c = NodeClaim {
            creation_timestamp: s(0),
            expire_after: Some(Duration::from_secs(500)),
            ..NodeClaim::default()
        };
        snap.node_claims.push(c.clone().into());
        assert_eq!(next_timed_change(&snap, &[]), Some(s(500)));
        let blocked = vec![(
            "n".to_string(),
            Blocker::ConsolidateAfter {
                remaining: Duration::from_secs(30),
            },
        )];
        assert_eq!(next_timed_change(&snap, &blocked), Some(s(130)));
        // Past instants are not changes to come; the drift check's age still is.
        c.expire_after = Some(Duration::from_secs(50));
        snap.node_claims = vec![c.into()];
        assert_eq!(next_timed_change(&snap, &[]), Some(s(3600)));
    }
}
