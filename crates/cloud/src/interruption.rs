//! The interruption feed: notices from the cloud that instances are about to go away (spot
//! reclaims, scheduled retirements, stops), read from a queue the controller polls. A provider
//! parses its own wire format; the controller sees only [`Interruption`]s and acknowledges each
//! delivery once it has acted, so a crash in between means the notice comes again.

use async_trait::async_trait;
use nodewright_core::time::Timestamp;

use crate::CloudError;

pub use nodewright_core::interruption::InterruptionKind;

/// One parsed notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interruption {
    pub kind: InterruptionKind,
    /// The notice's own id (for logs).
    pub id: String,
    /// The cloud's instance ids (the last segment of a provider id), without repeats.
    pub instance_ids: Vec<String>,
    /// When the cloud emitted the notice.
    pub time: Option<Timestamp>,
}

/// Identifies one delivery for [`InterruptionSource::ack`]; opaque to the controller.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AckHandle(pub String);

/// One delivery: the parsed notice, or why its body could not be read (such a delivery is
/// acknowledged all the same, since reading it again cannot help).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub message: Result<Interruption, String>,
    pub ack: AckHandle,
}

/// The pool an interrupted claim ran in, read from its labels: the controller hands it back to
/// the source so the provider can keep the replacement out of that pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterruptedOffering {
    pub kind: InterruptionKind,
    pub instance_type: String,
    pub zone: String,
    /// The claim's capacity reservation, when it ran in one.
    pub reservation_id: Option<String>,
}

/// A queue of interruption notices.
#[async_trait]
pub trait InterruptionSource: Send + Sync {
    /// The next deliveries, waiting up to the source's poll time; empty when none arrived.
    /// Deliveries not acknowledged come back later.
    async fn receive(&self) -> Result<Vec<Delivery>, CloudError>;

    /// Removes a delivery from the queue for good.
    async fn ack(&self, handle: &AckHandle) -> Result<(), CloudError>;

    /// A notice interrupted a claim running in `offering`. Sources whose provider keeps no
    /// capacity memory ignore it.
    fn offering_interrupted(&self, _offering: &InterruptedOffering) {}
}
