//! The node repair loop's event, with upstream's reason and message.

use std::time::Duration;

use crate::events::{Event, EventType, ObjectRef};

/// A blocked repair is re-judged every pass; say so at most once per object in this time.
const BLOCKED_EVERY: Duration = Duration::from_secs(300);

/// `NodeRepairBlocked`, on the Node, its NodeClaim and its NodePool.
pub fn node_repair_blocked(object: ObjectRef, message: &str) -> Event {
    Event::new(object, EventType::Warning, "NodeRepairBlocked", message)
        .dedupe_on(&[], BLOCKED_EVERY)
}
