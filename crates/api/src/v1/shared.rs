//! Types shared by NodePool and NodeClaim: requirements with minValues, taints, node class
//! references, durations that may be `Never`, quantities and status conditions.
//!
//! Every struct keeps fields it does not know in `extra`, so reading and writing an object
//! never loses anything.

use std::collections::BTreeMap;
use std::fmt;
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
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

/// Parses the duration form Karpenter's CRDs accept: one or more `<digits><s|m|h>` groups.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.is_empty() {
        return Err("empty duration".to_string());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(format!("invalid duration {s:?}: unexpected {c:?}")),
        };
        if digits.is_empty() {
            return Err(format!(
                "invalid duration {s:?}: a unit needs a number before it"
            ));
        }
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("invalid duration {s:?}: too large"))?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("invalid duration {s:?}: too large"))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(format!("invalid duration {s:?}: missing unit (s, m or h)"));
    }
    Ok(Duration::from_secs(total))
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
        assert_eq!(NillableDuration::never().duration().unwrap(), None);
        assert_eq!(format_seconds(3600), "1h");
        assert_eq!(format_seconds(90), "1m30s");
        assert_eq!(format_seconds(0), "0s");
    }
}
