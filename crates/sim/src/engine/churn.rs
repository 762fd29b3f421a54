//! Consolidation churn: a launch by the provisioner for pods a consolidation had just moved.
//! A consolidation evicts a node's pods because its simulation found them room elsewhere (or
//! on the command's replacement); when the cluster's scheduler then leaves one of them (its
//! ReplicaSet's new pod) pending and the provisioner launches capacity for it, the command
//! disrupted pods for nothing. The report counts such launches; they should not happen.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use nodewright_core::time::Timestamp;

/// How long after an eviction a launch for the workload's new pod still counts.
pub const WINDOW: Duration = Duration::from_secs(3 * 60);

#[derive(Debug, Default)]
pub struct ChurnWatch {
    /// Per workload `(namespace, controller)`, when consolidations evicted its pods and no
    /// replacement pod has been created for them yet.
    evicted: BTreeMap<(String, String), VecDeque<Timestamp>>,
    /// New pods standing in for consolidation-evicted ones, with when the eviction was.
    replacing: BTreeMap<String, Timestamp>,
    /// Launches that counted.
    pub launches: usize,
}

impl ChurnWatch {
    /// A consolidation evicted a pod of `workload` at `now`.
    pub fn evicted(&mut self, workload: (String, String), now: Timestamp) {
        self.evicted.entry(workload).or_default().push_back(now);
    }

    /// The controller of `workload` created `pod` at `now`: it replaces the oldest
    /// consolidation eviction of that workload still within the window, if any.
    pub fn created(&mut self, pod: &str, workload: &(String, String), now: Timestamp) {
        let Some(queue) = self.evicted.get_mut(workload) else {
            return;
        };
        while queue.front().is_some_and(|t| now.since(*t) > WINDOW) {
            queue.pop_front();
        }
        if let Some(t) = queue.pop_front() {
            self.replacing.insert(pod.to_string(), t);
        }
        if queue.is_empty() {
            self.evicted.remove(workload);
        }
    }

    /// The provisioner launches a claim for `pods` at `now`: whether that is churn.
    pub fn launched_for(&mut self, pods: &[String], now: Timestamp) -> bool {
        self.replacing.retain(|_, t| now.since(*t) <= WINDOW);
        let churn = pods.iter().any(|p| self.replacing.contains_key(p));
        if churn {
            self.launches += 1;
            for p in pods {
                self.replacing.remove(p);
            }
        }
        churn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp(s * 1000)
    }

    fn app() -> (String, String) {
        ("ns".into(), "app".into())
    }

    #[test]
    fn a_launch_for_the_new_pod_of_an_evicted_one_counts_once() {
        let mut w = ChurnWatch::default();
        w.evicted(app(), at(0));
        w.created("ns/app-9", &app(), at(1));
        w.created("ns/app-10", &app(), at(1));
        assert!(
            !w.launched_for(&["ns/app-10".into()], at(2)),
            "not a replacement"
        );
        assert!(w.launched_for(&["ns/app-9".into()], at(2)));
        assert!(!w.launched_for(&["ns/app-9".into()], at(3)), "counted once");
        assert_eq!(w.launches, 1);
    }

    #[test]
    fn old_evictions_and_other_workloads_do_not_count() {
        let mut w = ChurnWatch::default();
        w.evicted(app(), at(0));
        w.created("ns/other-1", &("ns".into(), "other".into()), at(1));
        w.created("ns/app-1", &app(), at(400));
        assert!(!w.launched_for(&["ns/other-1".into(), "ns/app-1".into()], at(401)));
        w.evicted(app(), at(500));
        w.created("ns/app-2", &app(), at(501));
        assert!(
            !w.launched_for(&["ns/app-2".into()], at(501 + 181)),
            "past the window"
        );
        assert_eq!(w.launches, 0);
    }
}
