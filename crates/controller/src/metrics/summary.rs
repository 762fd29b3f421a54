//! Prometheus summaries, which prometheus-client does not have: upstream exports
//! `karpenter_pods_startup_duration_seconds` and `karpenter_nodes_termination_duration_seconds`
//! as summaries, and dashboards read their `quantile` series. A summary keeps a cumulative
//! `_sum` and `_count` and, as client_golang's default, quantiles over the observations of
//! the last ten minutes (the window moves in five steps of two minutes, as its age buckets do).
//! The quantiles are exact over the window rather than client_golang's estimates within the
//! objectives' error bounds, so every value it reports lies within those bounds.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The quantiles upstream's summaries report (Karpenter's `SummaryObjectives`).
pub const QUANTILES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];
/// How long an observation counts towards the quantiles (client_golang's `DefMaxAge`).
const MAX_AGE: Duration = Duration::from_secs(10 * 60);
/// The window drops observations in steps of `MAX_AGE / AGE_BUCKETS`.
const AGE_BUCKETS: u32 = 5;
/// Observations kept per series at most, so a burst cannot grow memory without bound.
const MAX_KEPT: usize = 10_000;

#[derive(Default)]
struct Series {
    sum: f64,
    count: u64,
    /// (when the step began, the observations made in it), oldest first.
    window: VecDeque<(Instant, Vec<f64>)>,
}

impl Series {
    fn observe(&mut self, v: f64, now: Instant) {
        self.sum += v;
        self.count += 1;
        let step = MAX_AGE / AGE_BUCKETS;
        match self.window.back_mut() {
            Some((began, values)) if now.duration_since(*began) < step => values.push(v),
            _ => self.window.push_back((now, vec![v])),
        }
        if self.window.iter().map(|(_, v)| v.len()).sum::<usize>() > MAX_KEPT {
            self.window.pop_front();
        }
    }

    /// The window's observations, sorted, after dropping the steps older than `MAX_AGE`.
    fn recent(&mut self, now: Instant) -> Vec<f64> {
        while self
            .window
            .front()
            .is_some_and(|(began, _)| now.duration_since(*began) >= MAX_AGE)
        {
            self.window.pop_front();
        }
        let mut all: Vec<f64> = self.window.iter().flat_map(|(_, v)| v.clone()).collect();
        all.sort_by(f64::total_cmp);
        all
    }
}

/// The `q` quantile of sorted `values` (nearest rank), NaN when there are none, as
/// client_golang reports a summary with nothing in its window.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let rank = (q * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// One summary family; `label` names its one label, if it has one.
pub struct Summary {
    name: &'static str,
    help: &'static str,
    label: Option<&'static str>,
    series: Mutex<BTreeMap<String, Series>>,
}

impl Summary {
    pub const fn new(name: &'static str, help: &'static str, label: Option<&'static str>) -> Self {
        Summary {
            name,
            help,
            label,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// One observation of the series whose label value is `value` (ignored without a label).
    pub fn observe(&self, value: &str, v: f64) {
        self.observe_at(value, v, Instant::now());
    }

    fn observe_at(&self, value: &str, v: f64, now: Instant) {
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let key = if self.label.is_some() { value } else { "" };
        series.entry(key.to_owned()).or_default().observe(v, now);
    }

    /// The family in OpenMetrics text: its descriptor, and its series (an unlabelled summary's
    /// one series always, as client_golang's; a labelled one's once observed).
    pub fn encode(&self, out: &mut String) {
        self.encode_at(out, Instant::now());
    }

    fn encode_at(&self, out: &mut String, now: Instant) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} summary", self.name);
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        if self.label.is_none() {
            series.entry(String::new()).or_default();
        }
        for (value, s) in series.iter_mut() {
            let labels = |extra: Option<String>| -> String {
                let mut pairs: Vec<String> = extra.into_iter().collect();
                if let Some(label) = self.label {
                    pairs.push(format!("{label}=\"{}\"", escape(value)));
                }
                if pairs.is_empty() {
                    String::new()
                } else {
                    format!("{{{}}}", pairs.join(","))
                }
            };
            let recent = s.recent(now);
            for q in QUANTILES {
                let v = quantile(&recent, q);
                let _ = writeln!(
                    out,
                    "{}{} {}",
                    self.name,
                    labels(Some(format!("quantile=\"{}\"", number(q)))),
                    number(v)
                );
            }
            let _ = writeln!(out, "{}_sum{} {}", self.name, labels(None), number(s.sum));
            let _ = writeln!(out, "{}_count{} {}", self.name, labels(None), s.count);
        }
    }
}

/// A float as the rest of the exposition writes one (`1.0`, `0.5`, `NaN`).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v:?}")
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &Summary, now: Instant) -> Vec<String> {
        let mut out = String::new();
        s.encode_at(&mut out, now);
        out.lines().map(str::to_owned).collect()
    }

    #[test]
    fn quantiles_are_over_the_last_ten_minutes_and_sum_and_count_over_all() {
        let s = Summary::new("x_seconds", "help", Some("nodepool"));
        let t0 = Instant::now();
        for v in 1..=100 {
            s.observe_at("default", f64::from(v), t0);
        }
        let l = lines(&s, t0);
        assert_eq!(l[1], "# TYPE x_seconds summary");
        for want in [
            r#"x_seconds{quantile="0.0",nodepool="default"} 1.0"#,
            r#"x_seconds{quantile="0.5",nodepool="default"} 50.0"#,
            r#"x_seconds{quantile="0.9",nodepool="default"} 90.0"#,
            r#"x_seconds{quantile="0.99",nodepool="default"} 99.0"#,
            r#"x_seconds{quantile="1.0",nodepool="default"} 100.0"#,
            r#"x_seconds_sum{nodepool="default"} 5050.0"#,
            r#"x_seconds_count{nodepool="default"} 100"#,
        ] {
            assert!(l.iter().any(|x| x == want), "{want} not in {l:#?}");
        }
        let later = t0 + MAX_AGE + Duration::from_secs(1);
        s.observe_at("default", 7.0, later);
        let l = lines(&s, later);
        assert!(l.contains(&r#"x_seconds{quantile="0.0",nodepool="default"} 7.0"#.into()));
        assert!(l.contains(&r#"x_seconds{quantile="1.0",nodepool="default"} 7.0"#.into()));
        assert!(l.contains(&r#"x_seconds_count{nodepool="default"} 101"#.into()));
    }

    #[test]
    fn an_unlabelled_summary_with_an_empty_window_reports_nan() {
        let s = Summary::new("y", "help", None);
        assert!(lines(&s, Instant::now()).contains(&"y_count 0".into()));
        let labelled = Summary::new("z", "help", Some("nodepool"));
        assert_eq!(
            lines(&labelled, Instant::now()).len(),
            2,
            "only the descriptor"
        );
        let t0 = Instant::now();
        s.observe_at("ignored", 3.0, t0);
        let l = lines(&s, t0 + MAX_AGE * 2);
        assert!(l.contains(&r#"y{quantile="0.5"} NaN"#.into()), "{l:#?}");
        assert!(l.contains(&"y_sum 3.0".into()), "{l:#?}");
        assert!(l.contains(&"y_count 1".into()), "{l:#?}");
    }
}
