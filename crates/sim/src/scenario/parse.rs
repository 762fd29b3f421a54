//! From YAML text to a [`Scenario`], checking every field on the way.

use std::collections::BTreeMap;
use std::path::{Path as FsPath, PathBuf};
use std::time::Duration;

use nodewright_api::document::{Document, parse_documents};
use nodewright_api::error::Path;
use nodewright_core::model::CapacityType;
use nodewright_core::time::parse_go_duration;
use serde_json::{Map, Value};

use super::limits;
use super::{SUPPORTED_KINDS, Scenario, ScenarioError};
use crate::cloud::{CatalogFile, CloudConfig};
use crate::report::clock;
use nodewright_cloud_sim::OfferingPattern;

mod steps;
use steps::step;

/// Where `file:` references are read from: the file system next to the scenario, or an
/// embedded table for the built-in demo.
pub trait ScenarioSource {
    fn read(&self, path: &str) -> Result<String, String>;
}

/// Reads `file:` references relative to a directory.
pub struct FileSource {
    pub base: PathBuf,
}

impl ScenarioSource for FileSource {
    fn read(&self, path: &str) -> Result<String, String> {
        let full = if FsPath::new(path).is_absolute() {
            PathBuf::from(path)
        } else {
            self.base.join(path)
        };
        nodewright_api::document::read_text(&full).map_err(|e| e.to_string())
    }
}

/// Embedded files by the name scenarios use for them.
impl ScenarioSource for BTreeMap<&'static str, &'static str> {
    fn read(&self, path: &str) -> Result<String, String> {
        self.get(path)
            .map(|s| s.to_string())
            .ok_or_else(|| format!("no embedded file named {path}"))
    }
}

struct Ctx<'a> {
    file: &'a str,
    source: &'a dyn ScenarioSource,
}

impl Ctx<'_> {
    fn err(&self, path: &Path, reason: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_string(),
            path: path.to_string(),
            reason: reason.into(),
        }
    }

    fn object<'v>(
        &self,
        v: &'v Value,
        path: &Path,
    ) -> Result<&'v Map<String, Value>, ScenarioError> {
        v.as_object()
            .ok_or_else(|| self.err(path, format!("expected a mapping, found {}", kind_of(v))))
    }

    fn string<'v>(&self, v: &'v Value, path: &Path) -> Result<&'v str, ScenarioError> {
        v.as_str()
            .ok_or_else(|| self.err(path, format!("expected a string, found {}", kind_of(v))))
    }

    fn list<'v>(
        &self,
        v: &'v Value,
        path: &Path,
        what: &str,
    ) -> Result<&'v Vec<Value>, ScenarioError> {
        v.as_array().ok_or_else(|| {
            self.err(
                path,
                format!("expected a list of {what}, found {}", kind_of(v)),
            )
        })
    }

    fn duration(&self, v: &Value, path: &Path) -> Result<Duration, ScenarioError> {
        let s = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) if n.as_u64() == Some(0) => "0s".to_string(),
            other => {
                return Err(self.err(
                    path,
                    format!(
                        "expected a duration such as 30s or 5m, found {}",
                        kind_of(other)
                    ),
                ));
            }
        };
        parse_go_duration(&s).ok_or_else(|| {
            self.err(
                path,
                format!("{s:?} is not a duration (use forms like 500ms, 30s, 5m, 1h30m)"),
            )
        })
    }

    /// One of the cloud's delays: a duration, neither negative nor past
    /// [`limits::MAX_CLOUD_DELAY`].
    fn delay(&self, v: &Value, path: &Path) -> Result<Duration, ScenarioError> {
        let negative = match v {
            Value::String(s) => s.trim().starts_with('-'),
            Value::Number(n) => n.as_f64().is_some_and(|f| f < 0.0),
            _ => false,
        };
        if negative {
            return Err(self.err(
                path,
                format!("{} is negative: a delay is 0s or more", show(v)),
            ));
        }
        let d = self.duration(v, path)?;
        match limits::too_long_a_delay(d, &show(v)) {
            Some(reason) => Err(self.err(path, reason)),
            None => Ok(d),
        }
    }

    fn count(&self, v: &Value, path: &Path) -> Result<u32, ScenarioError> {
        if let Some(n) = v.as_u64().filter(|n| *n > u64::from(u32::MAX)) {
            return Err(self.err(path, format!("{n} is too large (at most {})", u32::MAX)));
        }
        v.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                self.err(
                    path,
                    format!("expected a non-negative integer, found {}", show(v)),
                )
            })
    }

    fn fraction(&self, v: &Value, path: &Path) -> Result<f64, ScenarioError> {
        match v.as_f64() {
            Some(f) if (0.0..=1.0).contains(&f) => Ok(f),
            _ => Err(self.err(
                path,
                format!("expected a number from 0 to 1, found {}", show(v)),
            )),
        }
    }

    fn non_negative(&self, v: &Value, path: &Path) -> Result<f64, ScenarioError> {
        match v.as_f64() {
            Some(f) if f >= 0.0 && f.is_finite() => Ok(f),
            _ => Err(self.err(
                path,
                format!("expected a non-negative number, found {}", show(v)),
            )),
        }
    }

    fn optional_string(
        &self,
        map: &Map<String, Value>,
        path: &Path,
        key: &str,
    ) -> Result<Option<String>, ScenarioError> {
        map.get(key)
            .map(|v| self.string(v, &path.field(key)).map(str::to_string))
            .transpose()
    }

    fn unknown_fields(
        &self,
        map: &Map<String, Value>,
        path: &Path,
        known: &[&str],
    ) -> Result<(), ScenarioError> {
        match map.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(self.err(
                &path.field(k),
                format!("unknown field (expected one of: {})", known.join(", ")),
            )),
            None => Ok(()),
        }
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Array(_) | Value::Object(_) | Value::Null => kind_of(v).to_string(),
        other => other.to_string(),
    }
}

/// Parses scenario `text` read from `file`; `file:` references are read through `source`.
pub fn parse_scenario(
    file: &str,
    text: &str,
    source: &dyn ScenarioSource,
) -> Result<Scenario, ScenarioError> {
    let ctx = Ctx { file, source };
    let root_path = Path::default();
    let value: Value = serde_yaml::from_str(text).map_err(|e| ScenarioError {
        file: file.to_string(),
        path: String::new(),
        reason: format!("not valid YAML: {e}"),
    })?;
    let root = ctx.object(&value, &root_path)?;
    ctx.unknown_fields(
        root,
        &root_path,
        &[
            "name",
            "description",
            "seed",
            "until",
            "cloud",
            "manifests",
            "steps",
        ],
    )?;
    let name = match ctx.optional_string(root, &root_path, "name")? {
        Some(n) => n,
        None => FsPath::new(file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let description = ctx
        .optional_string(root, &root_path, "description")?
        .unwrap_or_default();
    let seed = match root.get("seed") {
        Some(v) => v.as_u64().ok_or_else(|| {
            ctx.err(
                &root_path.field("seed"),
                format!("expected a non-negative integer, found {}", show(v)),
            )
        })?,
        None => 1,
    };
    let until = root
        .get("until")
        .map(|v| ctx.duration(v, &root_path.field("until")))
        .transpose()?;
    if let Some(reason) = until.and_then(limits::too_long) {
        return Err(ctx.err(&root_path.field("until"), reason));
    }
    let cloud = match root.get("cloud") {
        Some(v) => cloud(&ctx, v, &root_path.field("cloud"))?,
        None => CloudConfig::default(),
    };
    let manifests = match root.get("manifests").filter(|v| !v.is_null()) {
        Some(v) => manifest_list(&ctx, v, &root_path.field("manifests"))?,
        None => Vec::new(),
    };
    let mut steps = Vec::new();
    if let Some(v) = root.get("steps").filter(|v| !v.is_null()) {
        let path = root_path.field("steps");
        let list = ctx.list(v, &path, "steps")?;
        let mut cursor = Duration::ZERO;
        for (i, s) in list.iter().enumerate() {
            let step = step(&ctx, s, &path.index(i), i, cursor)?;
            cursor = step.at;
            steps.push(step);
        }
    }
    if let Some(until) = until
        && let Some(late) = steps.iter().find(|s| s.at > until)
    {
        return Err(ctx.err(
            &root_path.field("steps").index(late.index),
            format!(
                "step at {} is after the end of the run (until: {})",
                clock(late.at),
                clock(until)
            ),
        ));
    }
    Ok(Scenario {
        file: file.to_string(),
        name,
        description,
        seed,
        until,
        cloud,
        manifests,
        steps,
    })
}

fn cloud(ctx: &Ctx<'_>, v: &Value, path: &Path) -> Result<CloudConfig, ScenarioError> {
    let map = ctx.object(v, path)?;
    ctx.unknown_fields(
        map,
        path,
        &[
            "region",
            "zones",
            "launchDelay",
            "registrationDelay",
            "terminationDelay",
            "apiErrorRate",
            "insufficientCapacity",
            "spotInterruptionsPerHour",
            "instanceTypes",
        ],
    )?;
    let mut c = CloudConfig::default();
    if let Some(v) = map.get("instanceTypes") {
        let at = path.field("instanceTypes");
        let file = v.as_str().ok_or_else(|| {
            ctx.err(
                &at,
                format!("expected the name of a catalog file, found {}", show(v)),
            )
        })?;
        let text = ctx.source.read(file).map_err(|e| ctx.err(&at, e))?;
        c.instance_types = Some(CatalogFile::parse(file, &text).map_err(|e| ctx.err(&at, e))?);
    }
    if let Some(r) = ctx.optional_string(map, path, "region")? {
        c.region = r;
    }
    if let Some(v) = map.get("zones") {
        let p = path.field("zones");
        c.zones = ctx
            .list(v, &p, "zone names")?
            .iter()
            .enumerate()
            .map(|(i, z)| ctx.string(z, &p.index(i)).map(str::to_string))
            .collect::<Result<_, _>>()?;
        if c.zones.is_empty() {
            return Err(ctx.err(&p, "at least one zone is needed"));
        }
    }
    if let Some(v) = map.get("launchDelay") {
        c.launch_delay = ctx.delay(v, &path.field("launchDelay"))?;
    }
    if let Some(v) = map.get("registrationDelay") {
        c.registration_delay = ctx.delay(v, &path.field("registrationDelay"))?;
    }
    if let Some(v) = map.get("terminationDelay") {
        c.fleet.termination_delay = ctx.delay(v, &path.field("terminationDelay"))?;
    }
    if let Some(v) = map.get("apiErrorRate") {
        c.fleet.api_error_rate = ctx.fraction(v, &path.field("apiErrorRate"))?;
    }
    if let Some(v) = map.get("spotInterruptionsPerHour") {
        c.fleet.spot_interruptions_per_hour =
            ctx.non_negative(v, &path.field("spotInterruptionsPerHour"))?;
    }
    if let Some(v) = map.get("insufficientCapacity") {
        let p = path.field("insufficientCapacity");
        for (i, o) in ctx.list(v, &p, "offerings")?.iter().enumerate() {
            let op = p.index(i);
            let m = ctx.object(o, &op)?;
            ctx.unknown_fields(m, &op, &["instanceType", "zone", "capacityType"])?;
            let capacity_type = ctx
                .optional_string(m, &op, "capacityType")?
                .map(|s| {
                    CapacityType::parse(&s).ok_or_else(|| {
                        ctx.err(
                            &op.field("capacityType"),
                            format!("{s:?} is not one of on-demand, spot, reserved"),
                        )
                    })
                })
                .transpose()?;
            c.fleet.insufficient_capacity.push(OfferingPattern {
                instance_type: ctx.optional_string(m, &op, "instanceType")?,
                zone: ctx.optional_string(m, &op, "zone")?,
                capacity_type,
            });
        }
    }
    Ok(c)
}

/// A list of `{file: path}` or `{inline: manifest}` entries.
fn manifest_list(ctx: &Ctx<'_>, v: &Value, path: &Path) -> Result<Vec<Document>, ScenarioError> {
    let mut out = Vec::new();
    for (i, entry) in ctx
        .list(v, path, "{file: ...} or {inline: ...} entries")?
        .iter()
        .enumerate()
    {
        out.extend(manifest_entry(ctx, entry, &path.index(i))?);
    }
    Ok(out)
}

fn manifest_entry(ctx: &Ctx<'_>, v: &Value, path: &Path) -> Result<Vec<Document>, ScenarioError> {
    let map = ctx.object(v, path)?;
    ctx.unknown_fields(map, path, &["file", "inline"])?;
    let docs = match (map.get("file"), map.get("inline")) {
        (Some(f), None) => {
            let fp = path.field("file");
            let name = ctx.string(f, &fp)?;
            let text = ctx.source.read(name).map_err(|e| ctx.err(&fp, e))?;
            parse_documents(name, &text).map_err(|e| ctx.err(&fp, e.to_string()))?
        }
        (None, Some(inline)) => {
            let ip = path.field("inline");
            let source = format!("{}:{}", ctx.file, ip);
            match inline {
                Value::String(text) => {
                    parse_documents(&source, text).map_err(|e| ctx.err(&ip, e.to_string()))?
                }
                Value::Object(_) => vec![Document {
                    source,
                    index: 0,
                    value: inline.clone(),
                }],
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(index, value)| Document {
                        source: source.clone(),
                        index,
                        value: value.clone(),
                    })
                    .collect(),
                other => {
                    return Err(ctx.err(
                        &ip,
                        format!("expected a manifest, found {}", kind_of(other)),
                    ));
                }
            }
        }
        (Some(_), Some(_)) => return Err(ctx.err(path, "give either file or inline, not both")),
        (None, None) => return Err(ctx.err(path, "expected file: PATH or inline: MANIFEST")),
    };
    for d in &docs {
        if !SUPPORTED_KINDS.contains(&d.kind()) {
            return Err(ctx.err(
                path,
                format!(
                    "{}: kind {:?} is not supported in scenarios (supported: {})",
                    d.describe(),
                    d.kind(),
                    SUPPORTED_KINDS.join(", ")
                ),
            ));
        }
        if d.name().is_empty() {
            return Err(ctx.err(path, format!("{}: metadata.name is required", d.describe())));
        }
    }
    Ok(docs)
}
