//! The cluster facts launches and class validation use, kept for the life of the provider.
//!
//! EKS may not answer `DescribeCluster` when the controller starts (no permission yet, the
//! cluster still being created, a network hiccup). The endpoint and CA have fallbacks, the
//! service CIDR has none, and AL2023 nodes cannot join without it; so while it is unknown, the
//! next caller that needs it asks EKS again, at most once per window so a failing EKS is not
//! asked on every reconcile and launch. Once EKS gives a CIDR it is kept.

use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use super::{EksClusterFacts, KnownClusterFacts, combine, describe_cluster};
use crate::AwsClients;
use crate::error::AwsError;
use crate::launch::ClusterInfo;

/// The shortest time between two `DescribeCluster` calls while the service CIDR is unknown.
/// Shorter than the class requeue, so a class waiting on the CIDR is retried on each of them.
pub const ASK_AGAIN_EVERY: Duration = Duration::from_secs(30);

/// Where the facts came from when EKS can be asked again.
#[derive(Debug)]
struct EksSource {
    known: KnownClusterFacts,
    every: Duration,
    last_asked: Mutex<Option<Instant>>,
}

/// How nodes reach the cluster, as currently known.
#[derive(Debug)]
pub struct ClusterFacts {
    info: RwLock<ClusterInfo>,
    eks: Option<EksSource>,
}

impl Default for ClusterFacts {
    fn default() -> Self {
        ClusterFacts::fixed(ClusterInfo::default())
    }
}

/// Whether EKS may be asked again at `now`, last asked at `last`.
fn ask_due(last: Option<Instant>, now: Instant, every: Duration) -> bool {
    last.is_none_or(|at| now.saturating_duration_since(at) >= every)
}

impl ClusterFacts {
    /// Facts given as they are: EKS is never asked.
    pub fn fixed(info: ClusterInfo) -> Self {
        ClusterFacts {
            info: RwLock::new(info),
            eks: None,
        }
    }

    /// Facts `info` combined from `known` and EKS's answer at `asked_at` (`None`: not asked
    /// yet); while they lack the service CIDR, EKS is asked again at most once per `every`.
    pub fn from_eks(
        known: KnownClusterFacts,
        info: ClusterInfo,
        asked_at: Option<Instant>,
        every: Duration,
    ) -> Self {
        ClusterFacts {
            info: RwLock::new(info),
            eks: Some(EksSource {
                known,
                every,
                last_asked: Mutex::new(asked_at),
            }),
        }
    }

    /// Asks EKS now ([`super::resolve`]) and keeps asking while the service CIDR is unknown.
    pub async fn resolve(clients: &AwsClients, known: KnownClusterFacts, every: Duration) -> Self {
        let info = super::resolve(clients, &known).await;
        ClusterFacts::from_eks(known, info, Some(Instant::now()), every)
    }

    /// The facts as they stand.
    pub fn current(&self) -> ClusterInfo {
        self.info.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The facts, after asking EKS again if the service CIDR is unknown and the window since
    /// the last question has passed.
    pub async fn current_with_service_cidr(&self, clients: &AwsClients) -> ClusterInfo {
        if let Some(known) = self.claim_question(Instant::now()) {
            let answer = describe_cluster(clients, &known.name).await;
            self.learn(answer);
        }
        self.current()
    }

    /// The facts to ask EKS with, when it is time to ask; the question is recorded at `now`
    /// before it is sent, so concurrent callers do not ask twice in one window.
    fn claim_question(&self, now: Instant) -> Option<&KnownClusterFacts> {
        let eks = self.eks.as_ref()?;
        if self.current().service_cidr.is_some() {
            return None;
        }
        let mut last = eks.last_asked.lock().unwrap_or_else(|p| p.into_inner());
        if !ask_due(*last, now, eks.every) {
            return None;
        }
        *last = Some(now);
        Some(&eks.known)
    }

    /// Takes in EKS's answer. A CIDR once known is kept; a failed call only updates why the
    /// CIDR is unknown, so the endpoint and CA stay what they were.
    fn learn(&self, answer: Result<EksClusterFacts, AwsError>) {
        let Some(eks) = &self.eks else {
            return;
        };
        let mut info = self.info.write().unwrap_or_else(|p| p.into_inner());
        if info.service_cidr.is_some() {
            return;
        }
        let fresh = combine(&eks.known, &answer);
        match (&answer, &fresh.service_cidr) {
            (Ok(_), Some(cidr)) => {
                tracing::info!(cluster = %eks.known.name, service_cidr = %cidr, "EKS DescribeCluster gave the service CIDR");
                *info = fresh;
            }
            (Ok(_), None) => *info = fresh,
            (Err(e), _) => {
                tracing::warn!(cluster = %eks.known.name, error = %e, "EKS DescribeCluster failed again; AL2023 nodes cannot be launched without the service CIDR");
                info.service_cidr_unknown = fresh.service_cidr_unknown;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> KnownClusterFacts {
        KnownClusterFacts {
            name: "prod".into(),
            api_server: "https://10.0.0.1:443".into(),
            ..Default::default()
        }
    }

    fn failed(message: &str) -> Result<EksClusterFacts, AwsError> {
        Err(AwsError::new("DescribeCluster", message.to_string()))
    }

    fn answered(cidr: Option<&str>) -> Result<EksClusterFacts, AwsError> {
        Ok(EksClusterFacts {
            endpoint: Some("https://eks.example".into()),
            ca_bundle: Some("RUtT".into()),
            service_cidr: cidr.map(str::to_string),
            arn: None,
            version: None,
        })
    }

    fn started_without_cidr(every: Duration, at: Instant) -> ClusterFacts {
        let info = combine(&known(), &failed("ResourceNotFoundException: first"));
        ClusterFacts::from_eks(known(), info, Some(at), every)
    }

    #[test]
    fn eks_is_asked_again_only_once_the_window_has_passed() {
        let start = Instant::now();
        let every = Duration::from_secs(30);
        let facts = started_without_cidr(every, start);
        assert!(
            facts
                .claim_question(start + Duration::from_secs(29))
                .is_none()
        );
        assert!(facts.claim_question(start + every).is_some());
        // That question opened a new window.
        assert!(
            facts
                .claim_question(start + every + Duration::from_secs(1))
                .is_none()
        );
        assert!(facts.claim_question(start + every * 2).is_some());
    }

    #[test]
    fn a_failed_question_updates_the_reason_and_keeps_the_rest() {
        let facts = started_without_cidr(Duration::ZERO, Instant::now());
        let before = facts.current();
        facts.learn(failed("AccessDeniedException: later"));
        let after = facts.current();
        assert_eq!(after.endpoint, before.endpoint);
        assert_eq!(after.service_cidr, None);
        let why = after.service_cidr_unknown.unwrap();
        assert!(why.contains("AccessDeniedException: later"), "{why}");
    }

    #[test]
    fn an_answer_with_the_cidr_is_kept_and_ends_the_questions() {
        let facts = started_without_cidr(Duration::ZERO, Instant::now());
        facts.learn(answered(Some("172.20.0.0/16")));
        let info = facts.current();
        assert_eq!(info.service_cidr.as_deref(), Some("172.20.0.0/16"));
        assert_eq!(info.service_cidr_unknown, None);
        assert_eq!(info.endpoint, "https://eks.example");
        assert!(facts.claim_question(Instant::now()).is_none());
        // Later answers do not take it away.
        facts.learn(failed("Throttling"));
        facts.learn(answered(None));
        assert_eq!(
            facts.current().service_cidr.as_deref(),
            Some("172.20.0.0/16")
        );
    }

    #[test]
    fn fixed_facts_never_ask() {
        let facts = ClusterFacts::fixed(ClusterInfo::default());
        assert!(facts.claim_question(Instant::now()).is_none());
        facts.learn(answered(Some("10.0.0.0/16")));
        assert_eq!(facts.current().service_cidr, None);
    }
}
