//! Interruption-queue messages: the EventBridge events EC2 and AWS Health deliver to the SQS
//! queue named by `INTERRUPTION_QUEUE`, turned into a [`Message`] that says what happened
//! ([`Kind`]), to which instances, and when.
//!
//! The parser is chosen by the envelope's `(version, source, detail-type)`; a combination this
//! module does not act on becomes [`Kind::NoOp`] (the message is still acknowledged), and a
//! body that is not an EventBridge envelope at all is a [`ParseError`]. Nothing here performs
//! I/O or reads a clock.

use std::fmt;

use nodewright_core::time::Timestamp;
use serde::Deserialize;
use serde_json::Value;

mod time;

pub use time::parse_rfc3339;

/// What a message asks of the instances it names (the provider-neutral kinds).
pub use nodewright_core::interruption::InterruptionKind as Kind;

/// One parsed queue message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub kind: Kind,
    /// The EventBridge event id.
    pub id: String,
    /// The EC2 instance ids the event is about, in message order without repeats; empty for
    /// [`Kind::NoOp`].
    pub instance_ids: Vec<String>,
    /// The envelope's `time`: when the event was emitted. `None` when absent or unreadable.
    pub time: Option<Timestamp>,
    /// The source and detail-type, kept for logs.
    pub source: String,
    pub detail_type: String,
}

/// Why a body could not be read as an EventBridge event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unreadable interruption message: {}", self.reason)
    }
}

impl std::error::Error for ParseError {}

pub const EC2_SOURCE: &str = "aws.ec2";
pub const HEALTH_SOURCE: &str = "aws.health";
pub const SPOT_INTERRUPTION: &str = "EC2 Spot Instance Interruption Warning";
pub const REBALANCE_RECOMMENDATION: &str = "EC2 Instance Rebalance Recommendation";
pub const STATE_CHANGE: &str = "EC2 Instance State-change Notification";
pub const HEALTH_EVENT: &str = "AWS Health Event";
pub const CAPACITY_RESERVATION_INTERRUPTION: &str =
    "EC2 Capacity Reservation Instance Interruption Warning";

#[derive(Deserialize)]
struct Envelope {
    version: String,
    #[serde(default)]
    id: String,
    #[serde(rename = "detail-type")]
    detail_type: String,
    source: String,
    #[serde(default)]
    time: Option<String>,
    #[serde(default)]
    detail: Value,
}

/// The `detail` of the EC2 events that name one instance.
#[derive(Deserialize)]
struct InstanceDetail {
    #[serde(rename = "instance-id")]
    instance_id: String,
    #[serde(default)]
    state: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HealthDetail {
    #[serde(default)]
    service: String,
    #[serde(default)]
    event_type_category: String,
    #[serde(default)]
    affected_entities: Vec<AffectedEntity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AffectedEntity {
    #[serde(default)]
    entity_value: String,
}

/// `error`'s field path and message: `detail.instance-id: invalid type ...`.
fn located(error: serde_path_to_error::Error<serde_json::Error>) -> String {
    match error.path().to_string().as_str() {
        "." => error.inner().to_string(),
        path => format!("{path}: {}", error.inner()),
    }
}

/// Parses one SQS message body.
pub fn parse(body: &str) -> Result<Message, ParseError> {
    let unreadable = |why: String| ParseError {
        reason: format!("not an EventBridge event: {why}"),
    };
    let mut json = serde_json::Deserializer::from_str(body);
    let envelope: Envelope =
        serde_path_to_error::deserialize(&mut json).map_err(|e| unreadable(located(e)))?;
    // Text after the event makes it as unreadable as a broken one.
    json.end().map_err(|e| unreadable(e.to_string()))?;
    let (kind, instance_ids) = classify(&envelope)?;
    Ok(Message {
        kind,
        id: envelope.id,
        instance_ids,
        time: envelope.time.as_deref().and_then(parse_rfc3339),
        source: envelope.source,
        detail_type: envelope.detail_type,
    })
}

fn classify(e: &Envelope) -> Result<(Kind, Vec<String>), ParseError> {
    if e.version != "0" {
        return Ok((Kind::NoOp, Vec::new()));
    }
    let one = |kind: Kind| -> Result<(Kind, Vec<String>), ParseError> {
        let d = instance_detail(e)?;
        Ok((kind, vec![d.instance_id]))
    };
    match (e.source.as_str(), e.detail_type.as_str()) {
        (EC2_SOURCE, SPOT_INTERRUPTION) => one(Kind::SpotInterrupted),
        (EC2_SOURCE, REBALANCE_RECOMMENDATION) => one(Kind::RebalanceRecommendation),
        (EC2_SOURCE, CAPACITY_RESERVATION_INTERRUPTION) => {
            one(Kind::CapacityReservationInterrupted)
        }
        (EC2_SOURCE, STATE_CHANGE) => {
            let d = instance_detail(e)?;
            let kind = match d.state.as_deref() {
                Some("stopping" | "stopped") => Kind::InstanceStopped,
                Some("shutting-down" | "terminated") => Kind::InstanceTerminated,
                _ => return Ok((Kind::NoOp, Vec::new())),
            };
            Ok((kind, vec![d.instance_id]))
        }
        (HEALTH_SOURCE, HEALTH_EVENT) => {
            let d: HealthDetail = detail(e)?;
            if d.service != "EC2" || d.event_type_category != "scheduledChange" {
                return Ok((Kind::NoOp, Vec::new()));
            }
            let mut ids: Vec<String> = Vec::new();
            for entity in d.affected_entities {
                if !entity.entity_value.is_empty() && !ids.contains(&entity.entity_value) {
                    ids.push(entity.entity_value);
                }
            }
            Ok((Kind::ScheduledChange, ids))
        }
        _ => Ok((Kind::NoOp, Vec::new())),
    }
}

fn detail<T: for<'de> Deserialize<'de>>(e: &Envelope) -> Result<T, ParseError> {
    serde_path_to_error::deserialize(&e.detail).map_err(|err| {
        let at = match err.path().to_string().as_str() {
            "." => "detail".to_string(),
            path => format!("detail.{path}"),
        };
        ParseError {
            reason: format!("{} ({}): {at}: {}", e.detail_type, e.source, err.inner()),
        }
    })
}

fn instance_detail(e: &Envelope) -> Result<InstanceDetail, ParseError> {
    let d: InstanceDetail = detail(e)?;
    if d.instance_id.is_empty() {
        return Err(ParseError {
            reason: format!(
                "{} ({}): detail.instance-id is empty",
                e.detail_type, e.source
            ),
        });
    }
    Ok(d)
}

#[cfg(test)]
mod tests;
