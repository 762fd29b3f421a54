//! Types shared by NodePool and NodeClaim: requirements with minValues, taints, node class
//! references, durations that may be `Never`, quantities and status conditions.
//!
//! Every struct keeps fields it does not know in `extra`, so reading and writing an object
//! never loses anything.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Fields a type does not model, kept verbatim.
pub type Extra = BTreeMap<String, serde_json::Value>;

/// A resource quantity as written: `1000`, `"500m"`, `"1Gi"`. The written form is kept so an
/// object round-trips unchanged; `crate::quantity` turns it into integers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    Number(serde_json::Number),
    String(String),
}

impl Quantity {
    pub fn text(&self) -> String {
        match self {
            Quantity::Number(n) => n.to_string(),
            Quantity::String(s) => s.clone(),
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

/// `cpu`, `memory`, `nodes`, ... to quantities.
pub type ResourceList = BTreeMap<String, Quantity>;

/// `{key, operator, values, minValues}`; operators include Karpenter's Gte and Lte.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    pub key: String,
    pub operator: String,
    /// Shared: a NodeClaim's list of instance types is often every other claim's too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Arc<[String]>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl NodeSelectorRequirementWithMinValues {
    pub fn new(key: &str, operator: &str, values: &[&str]) -> Self {
        NodeSelectorRequirementWithMinValues {
            key: key.to_string(),
            operator: operator.to_string(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
            ..Default::default()
        }
    }

    pub fn values(&self) -> &[String] {
        self.values.as_deref().unwrap_or(&[])
    }
}

/// A node taint (core/v1 Taint).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Which node class (for AWS, an EC2NodeClass) a NodePool or NodeClaim uses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReference {
    pub group: String,
    pub kind: String,
    pub name: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A duration string (`"720h"`, `"1h30m"`) or `"Never"`. The text is kept as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NillableDuration(pub String);

impl NillableDuration {
    pub fn new(s: &str) -> Self {
        NillableDuration(s.to_string())
    }

    pub fn never() -> Self {
        NillableDuration("Never".to_string())
    }

    pub fn is_never(&self) -> bool {
        self.0 == "Never"
    }

    /// `Ok(None)` for `Never`, the duration otherwise.
    pub fn duration(&self) -> Result<Option<Duration>, String> {
        if self.is_never() {
            return Ok(None);
        }
        parse_duration(&self.0).map(Some)
    }
}

/// The longest duration Karpenter can hold: it reads these fields into Go's `time.Duration`,
/// nanoseconds in an `int64`, whose `time.ParseDuration` refuses anything longer.
pub const MAX_DURATION: &str = "2562047h47m16.854775807s";

/// Why a duration string cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// Not `<digits><s|m|h>` groups.
    Syntax(String),
    /// Well formed, but longer than Go's `time.Duration` holds.
    TooLong(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Syntax(m) => f.write_str(m),
            DurationError::TooLong(s) => write!(
                f,
                "invalid duration {s:?}: longer than {MAX_DURATION}, the most Go's time.Duration (which Karpenter reads it into) holds"
            ),
        }
    }
}

/// Parses the duration form Karpenter's CRDs accept: one or more `<digits><s|m|h>` groups.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    read_duration(s).map_err(|e| e.to_string())
}

/// [`parse_duration`], telling a malformed duration from one that is too long.
pub fn read_duration(s: &str) -> Result<Duration, DurationError> {
    const NANOS: u128 = 1_000_000_000;
    if s.is_empty() {
        return Err(DurationError::Syntax("empty duration".to_string()));
    }
    let syntax = |why: String| DurationError::Syntax(format!("invalid duration {s:?}: {why}"));
    // Nanoseconds, as Go counts them; `None` once past what a u128 holds (far past the limit).
    let mut total: Option<u128> = Some(0);
    let mut digits = 0usize;
    let mut number: Option<u128> = Some(0);
    for c in s.chars() {
        if let Some(d) = c.to_digit(10) {
            digits += 1;
            number = number.and_then(|n| n.checked_mul(10)?.checked_add(u128::from(d)));
            continue;
        }
        let unit = match c {
            's' => NANOS,
            'm' => 60 * NANOS,
            'h' => 3600 * NANOS,
            _ => return Err(syntax(format!("unexpected {c:?}"))),
        };
        if digits == 0 {
            return Err(syntax("a unit needs a number before it".to_string()));
        }
        total = total.and_then(|t| t.checked_add(number?.checked_mul(unit)?));
        (digits, number) = (0, Some(0));
    }
    if digits > 0 {
        return Err(syntax("missing unit (s, m or h)".to_string()));
    }
    match total {
        Some(ns) if ns <= i64::MAX as u128 => Ok(Duration::from_nanos(ns as u64)),
        _ => Err(DurationError::TooLong(s.to_string())),
    }
}

/// Formats whole seconds in the compact form the CRDs accept: `3600` → `1h`, `90` → `1m30s`.
pub fn format_seconds(secs: u64) -> String {
    if secs == 0 {
        return "0s".to_string();
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// A status condition (`type`, `status`, `lastTransitionTime` required; `reason` may be empty).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("720h").unwrap(),
            Duration::from_secs(720 * 3600)
        );
        assert_eq!(
            parse_duration("1h30m5s").unwrap(),
            Duration::from_secs(5405)
        );
        assert!(parse_duration("1.5h").is_err());
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("h").is_err());
        assert_eq!(
            read_duration("2562047h47m16s").unwrap(),
            Duration::from_secs(2562047 * 3600 + 47 * 60 + 16)
        );
        for long in [
            "2562047h47m17s",
            "2562048h",
            "99999999999999999999s",
            &"9".repeat(60),
        ] {
            let long = if long.ends_with(char::is_numeric) {
                format!("{long}h")
            } else {
                long.to_string()
            };
            assert_eq!(
                read_duration(&long),
                Err(DurationError::TooLong(long.clone())),
                "{long}"
            );
        }
        assert_eq!(NillableDuration::never().duration().unwrap(), None);
        assert_eq!(format_seconds(3600), "1h");
        assert_eq!(format_seconds(90), "1m30s");
        assert_eq!(format_seconds(0), "0s");
    }
}
