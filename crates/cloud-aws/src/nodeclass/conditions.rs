//! Status conditions: one per resolved part plus `Ready`, which is true only when every part
//! is. A condition keeps its `lastTransitionTime` while its status does not change.

use nodewright_api::aws::common::Condition;
use nodewright_core::time::Timestamp;

pub const SUBNETS_READY: &str = "SubnetsReady";
pub const SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
pub const AMIS_READY: &str = "AMIsReady";
pub const INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
pub const CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
pub const READY: &str = "Ready";

/// The outcome of one part: `Ok(())` or a (reason, message).
pub type Outcome = Result<(), (String, String)>;

/// RFC 3339 in UTC with second precision (`2026-11-22T01:05:26Z`).
pub fn rfc3339(t: Timestamp) -> String {
    let secs = t.unix_seconds();
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Builds the conditions for `parts` (type, outcome) plus `Ready`, carrying transition times
/// over from `previous` when a condition's status is unchanged.
pub fn conditions(
    parts: &[(&str, Outcome)],
    previous: &[Condition],
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let now = rfc3339(now);
    let make = |type_: &str, outcome: &Outcome| {
        let (status, reason, message) = match outcome {
            Ok(()) => ("True", type_.to_string(), String::new()),
            Err((r, m)) => ("False", r.clone(), m.clone()),
        };
        let since = previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| now.clone());
        Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            last_transition_time: Some(since),
            observed_generation: generation,
            reason: Some(reason),
            message: (!message.is_empty()).then_some(message),
            extra: Default::default(),
        }
    };
    let mut out: Vec<Condition> = parts.iter().map(|(t, o)| make(t, o)).collect();
    let not_ready: Vec<&str> = parts
        .iter()
        .filter(|(_, o)| o.is_err())
        .map(|(t, _)| *t)
        .collect();
    let ready: Outcome = if not_ready.is_empty() {
        Ok(())
    } else {
        Err((
            "UnhealthyDependents".to_string(),
            format!("{} not ready", not_ready.join(", ")),
        ))
    };
    out.push(make(READY, &ready));
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

/// `ValidationSucceeded`: the class's own settings are checked only once everything it
/// depends on resolved (`DependenciesNotReady` until then); `spec.tags` may not carry a key the
/// controller owns (`TagValidationFailed`).
pub fn validation(
    dependencies: &[(&str, Outcome)],
    tags: &std::collections::BTreeMap<String, String>,
) -> Outcome {
    let waiting: Vec<&str> = dependencies
        .iter()
        .filter(|(_, o)| o.is_err())
        .map(|(t, _)| *t)
        .collect();
    if !waiting.is_empty() {
        return Err((
            "DependenciesNotReady".into(),
            format!("waiting on {}", waiting.join(", ")),
        ));
    }
    if let Some(key) = nodewright_aws_model::launch::restricted_tag(tags) {
        return Err((
            "TagValidationFailed".into(),
            format!("spec.tags: the tag key {key:?} is restricted"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(Timestamp(0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(Timestamp(1_709_210_096_000)),
            "2024-02-29T12:34:56Z"
        );
    }

    #[test]
    fn ready_needs_every_part_and_keeps_transition_times() {
        let t0 = Timestamp(1_000_000_000_000);
        let t1 = Timestamp(1_000_000_060_000);
        let first = conditions(
            &[
                (SUBNETS_READY, Ok(())),
                (AMIS_READY, Err(("AMINotFound".into(), "none".into()))),
            ],
            &[],
            Some(1),
            t0,
        );
        let ready = first.iter().find(|c| c.type_ == READY).unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(ready.message.as_deref(), Some("AMIsReady not ready"));
        let second = conditions(
            &[(SUBNETS_READY, Ok(())), (AMIS_READY, Ok(()))],
            &first,
            Some(1),
            t1,
        );
        let subnets = second.iter().find(|c| c.type_ == SUBNETS_READY).unwrap();
        assert_eq!(subnets.last_transition_time, Some(rfc3339(t0)));
        let ready = second.iter().find(|c| c.type_ == READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.last_transition_time.clone()),
            ("True", Some(rfc3339(t1)))
        );
    }

    #[test]
    fn validation_waits_on_dependencies_then_checks_tags() {
        let tags = |k: &str| [(k.to_string(), "x".to_string())].into();
        let bad = [(
            SUBNETS_READY,
            Err(("SubnetsNotFound".into(), String::new())),
        )];
        let e = validation(&bad, &tags("team")).unwrap_err();
        assert_eq!(e.0, "DependenciesNotReady");
        assert!(e.1.contains(SUBNETS_READY));
        let ok = [(SUBNETS_READY, Ok(()))];
        assert_eq!(validation(&ok, &tags("team")), Ok(()));
        for key in [
            "karpenter.sh/nodepool",
            "karpenter.sh/nodeclaim",
            "karpenter.k8s.aws/ec2nodeclass",
            "kubernetes.io/cluster/prod",
            "eks:eks-cluster-name",
        ] {
            let e = validation(&ok, &tags(key)).unwrap_err();
            assert_eq!(e.0, "TagValidationFailed", "{key}");
            assert!(e.1.contains(key));
        }
    }
}
