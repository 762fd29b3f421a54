//! The status writers' events, with upstream's reasons and messages.

use std::time::Duration;

use crate::events::{Event, EventType, ObjectRef};

/// Upstream says it again every ten minutes while the class waits.
const WAITING_EVERY: Duration = Duration::from_secs(600);

/// `WaitingOnNodeClaimTermination`: a deleted EC2NodeClass waits for the NodeClaims that
/// name it (at most five named, then how many more).
pub fn waiting_on_nodeclaim_termination(class: ObjectRef, claims: &[String]) -> Event {
    let mut names = claims
        .iter()
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if claims.len() > 5 {
        names.push_str(&format!(" and {} other(s)", claims.len() - 5));
    }
    Event::new(
        class,
        EventType::Normal,
        "WaitingOnNodeClaimTermination",
        format!("Waiting on NodeClaim termination for {names}"),
    )
    .dedupe_on(&[], WAITING_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_five_then_counts_the_rest() {
        let claims: Vec<String> = (1..=7).map(|i| format!("c{i}")).collect();
        let e = waiting_on_nodeclaim_termination(ObjectRef::ec2nodeclass("d"), &claims);
        assert_eq!(
            e.message,
            "Waiting on NodeClaim termination for c1, c2, c3, c4, c5 and 2 other(s)"
        );
        let e = waiting_on_nodeclaim_termination(ObjectRef::ec2nodeclass("d"), &claims[..1]);
        assert_eq!(e.message, "Waiting on NodeClaim termination for c1");
    }
}
