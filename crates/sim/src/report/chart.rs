//! `--chart FILE.svg`: nodes, pending pods and $/h over the run, as step lines on a shared
//! time axis (counts on the left scale, dollars on the right).

use std::fmt::Write;

use super::{RunReport, Sample, clock};

const W: f64 = 900.0;
const H: f64 = 420.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 70.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 70.0;

fn step_path(
    samples: &[Sample],
    end: f64,
    x: impl Fn(f64) -> f64,
    y: impl Fn(&Sample) -> f64,
) -> String {
    let mut d = String::new();
    for (i, s) in samples.iter().enumerate() {
        let px = x(s.at.as_secs_f64());
        let py = y(s);
        if i == 0 {
            let _ = write!(d, "M{px:.1},{py:.1}");
        } else {
            let _ = write!(d, " H{px:.1} V{py:.1}");
        }
    }
    if let Some(l) = samples.last() {
        let _ = write!(d, " H{:.1} V{:.1}", x(end), y(l));
    }
    d
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Where a time, a count and a price fall on the plot.
struct Scales {
    end: f64,
    max_count: f64,
    max_price: f64,
}

impl Scales {
    fn of(r: &RunReport) -> Self {
        let max_count = r
            .samples
            .iter()
            .map(|s| s.nodes.max(s.pending_pods))
            .max()
            .unwrap_or(0)
            .max(1) as f64;
        let max_price = r
            .samples
            .iter()
            .map(|s| s.price_per_hour)
            .fold(0.0, f64::max)
            .max(0.01);
        Scales {
            end: r.duration.as_secs_f64().max(1.0),
            max_count,
            max_price,
        }
    }

    fn x(&self, t: f64) -> f64 {
        LEFT + t / self.end * (W - LEFT - RIGHT)
    }

    fn y_count(&self, v: f64) -> f64 {
        let plot_h = H - TOP - BOTTOM;
        TOP + plot_h - v / self.max_count * plot_h
    }

    fn y_price(&self, v: f64) -> f64 {
        let plot_h = H - TOP - BOTTOM;
        TOP + plot_h - v / self.max_price * plot_h
    }
}

pub fn svg(r: &RunReport) -> String {
    let sc = Scales::of(r);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="22" font-size="15">nodewright simulate — {} (seed {})</text>"#,
        escape(&r.name),
        r.seed
    );
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>"##
    );
    ticks(&mut o, &sc);
    series(&mut o, r, &sc);
    let _ = writeln!(
        o,
        r##"<text x="{LEFT}" y="{:.1}" fill="#777" font-size="10">{}</text>"##,
        H - 8.0,
        escape(&r.spot_price_note)
    );
    o.push_str("</svg>\n");
    o
}

/// Five ticks on each axis: the clock below, counts on the left, $/h on the right.
fn ticks(o: &mut String, sc: &Scales) {
    let plot_h = H - TOP - BOTTOM;
    for i in 0..=4 {
        let f = i as f64 / 4.0;
        let t = sc.end * f;
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">{}</text>"##,
            sc.x(t),
            TOP + plot_h + 16.0,
            clock(std::time::Duration::from_secs_f64(t))
        );
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">{:.0}</text>"##,
            LEFT - 6.0,
            sc.y_count(sc.max_count * f) + 4.0,
            sc.max_count * f
        );
        let _ = writeln!(
            o,
            r##"<text x="{:.1}" y="{:.1}" fill="#555">${:.3}</text>"##,
            W - RIGHT + 6.0,
            sc.y_price(sc.max_price * f) + 4.0,
            sc.max_price * f
        );
    }
}

/// Nodes, pending pods and $/h as step lines, each with its legend entry.
fn series(o: &mut String, r: &RunReport, sc: &Scales) {
    let x = |t| sc.x(t);
    let series: [(&str, &str, String); 3] = [
        (
            "nodes",
            "#1f77b4",
            step_path(&r.samples, sc.end, x, |s| sc.y_count(s.nodes as f64)),
        ),
        (
            "pending pods",
            "#d62728",
            step_path(&r.samples, sc.end, x, |s| sc.y_count(s.pending_pods as f64)),
        ),
        (
            "$/h",
            "#2ca02c",
            step_path(&r.samples, sc.end, x, |s| sc.y_price(s.price_per_hour)),
        ),
    ];
    for (i, (name, color, d)) in series.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="2"/>"#
        );
        let lx = LEFT + i as f64 * 140.0;
        let ly = H - 28.0;
        let _ = writeln!(
            o,
            r#"<rect x="{lx}" y="{:.1}" width="14" height="4" fill="{color}"/><text x="{:.1}" y="{ly}">{name}</text>"#,
            ly - 5.0,
            lx + 20.0
        );
    }
}
