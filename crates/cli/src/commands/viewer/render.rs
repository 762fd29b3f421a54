//! The view as lines of text: a totals header, then per NodePool a heading and one line per
//! node with fixed-width columns and usage bars. Pure, so tests read exactly what the
//! terminal shows; `draw` only places the lines in a frame.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::model::{Group, Row, Totals, Usage, View};
use super::prices::HOURS_PER_MONTH;
use super::state::State;

const BAR: usize = 10;
const TOTAL_BAR: usize = 20;

/// What the screen shows besides the view: the prices' source and the watches' health.
pub struct Chrome<'a> {
    pub price_source: &'a str,
    /// Watch errors still unresolved, one line each.
    pub errors: &'a [String],
    pub synced: bool,
    pub extra_labels: &'a [String],
}

/// Draws the header and footer fixed and the body scrolled by `scroll` lines.
pub fn draw(frame: &mut Frame<'_>, view: &View, chrome: &Chrome<'_>, scroll: u16) {
    let head = header(view, chrome);
    let foot = footer(view, chrome);
    let [top, body, bottom] = Layout::vertical([
        Constraint::Length(head.len() as u16),
        Constraint::Min(1),
        Constraint::Length(foot.len() as u16),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(head), top);
    frame.render_widget(
        Paragraph::new(body_lines(view, chrome)).scroll((scroll, 0)),
        body,
    );
    frame.render_widget(Paragraph::new(foot), bottom);
}

fn header(view: &View, chrome: &Chrome<'_>) -> Vec<Line<'static>> {
    let t = &view.totals;
    let mut first = format!(
        "nodewright viewer · {} · {} pods · {} pending · {}",
        counted(t),
        t.pods,
        view.pending_pods,
        cost(t)
    );
    if !chrome.synced {
        first.push_str(" · listing…");
    }
    let mut usage = vec![Span::raw("total  ")];
    for u in &t.usage {
        usage.extend(bar(u, TOTAL_BAR));
        usage.push(Span::raw(format!(
            " {}/{}    ",
            human(&u.resource, u.requested),
            human(&u.resource, u.allocatable)
        )));
    }
    vec![
        Line::styled(first, Style::new().add_modifier(Modifier::BOLD)),
        Line::from(usage),
        Line::raw(""),
    ]
}

fn footer(view: &View, chrome: &Chrome<'_>) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let warn = Style::new().fg(Color::Red);
    for e in chrome.errors {
        out.push(Line::styled(format!("watch error: {e}"), warn));
    }
    if let Some(first) = view.problems.first() {
        let more = view.problems.len() - 1;
        let tail = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        out.push(Line::styled(format!("unreadable: {first}{tail}"), warn));
    }
    let keys = Style::new().fg(Color::DarkGray);
    out.push(Line::styled(
        format!("q quit · ↑↓ scroll · {}", chrome.price_source),
        keys,
    ));
    out
}

/// `3 nodes`, and `· 2 launching` while claims wait for their Nodes.
fn counted(t: &Totals) -> String {
    match t.launching {
        0 => format!("{} nodes", t.nodes),
        n => format!("{} nodes · {n} launching", t.nodes),
    }
}

/// `$0.4440/h · $324.12/month`, with a note when some rows have no price.
fn cost(t: &Totals) -> String {
    let mut s = format!(
        "${:.4}/h · ${:.2}/month",
        t.per_hour,
        t.per_hour * HOURS_PER_MONTH
    );
    if t.unpriced > 0 {
        s.push_str(&format!(" (+{} unpriced)", t.unpriced));
    }
    s
}

/// Column widths: the widest cell of each, at least the heading.
struct Widths {
    name: usize,
    instance_type: usize,
    zone: usize,
    extra: Vec<usize>,
}

fn widths(view: &View, extra_labels: &[String]) -> Widths {
    let rows = || view.groups.iter().flat_map(|g| &g.rows);
    let widest = |min: usize, f: &dyn Fn(&Row) -> usize| rows().map(f).fold(min, usize::max);
    Widths {
        name: widest(4, &|r| r.name.chars().count()),
        instance_type: widest(4, &|r| r.instance_type.len()),
        zone: widest(4, &|r| r.zone.len()),
        extra: (0..extra_labels.len())
            .map(|i| widest(extra_labels[i].len(), &|r| r.extra[i].len()))
            .collect(),
    }
}

/// How many lines the scrolled part holds: per group a heading, the column names, its rows
/// and a blank line.
pub fn body_len(view: &View) -> usize {
    view.groups.iter().map(|g| g.rows.len() + 3).sum()
}

fn body_lines(view: &View, chrome: &Chrome<'_>) -> Vec<Line<'static>> {
    let w = widths(view, chrome.extra_labels);
    let mut out = Vec::new();
    for g in &view.groups {
        out.push(group_heading(g));
        out.push(column_heading(&w, view, chrome.extra_labels));
        out.extend(g.rows.iter().map(|r| row_line(r, &w)));
        out.push(Line::raw(""));
    }
    out
}

fn group_heading(g: &Group) -> Line<'static> {
    let title = match &g.nodepool {
        Some(np) => format!("NodePool {np}"),
        None => "Nodes without a NodePool".to_string(),
    };
    Line::styled(
        format!(
            "{title} · {} · {} pods · {}",
            counted(&g.totals),
            g.totals.pods,
            cost(&g.totals)
        ),
        Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
    )
}

fn column_heading(w: &Widths, view: &View, extra_labels: &[String]) -> Line<'static> {
    let mut s = format!(
        "  {:nw$}  {:tw$}  {:9}  {:zw$}  {:>7}",
        "NAME",
        "TYPE",
        "CAPACITY",
        "ZONE",
        "$/H",
        nw = w.name,
        tw = w.instance_type,
        zw = w.zone
    );
    for u in &view.totals.usage {
        s.push_str(&format!("  {:15}", u.resource.to_uppercase()));
    }
    s.push_str(&format!("  {:>4}  {:>4}", "PODS", "AGE"));
    for (label, width) in extra_labels.iter().zip(&w.extra) {
        s.push_str(&format!("  {label:width$}"));
    }
    s.push_str("  STATE");
    Line::styled(s, Style::new().add_modifier(Modifier::DIM))
}

fn row_line(r: &Row, w: &Widths) -> Line<'static> {
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_string()
        } else {
            s.to_string()
        }
    };
    let price = r.price.map_or("-".to_string(), |p| format!("{p:.4}"));
    let mut spans = vec![Span::raw(format!(
        "  {:nw$}  {:tw$}  {:9}  {:zw$}  {price:>7}",
        r.name,
        dash(&r.instance_type),
        dash(&r.capacity_type),
        dash(&r.zone),
        nw = w.name,
        tw = w.instance_type,
        zw = w.zone
    ))];
    for u in &r.usage {
        spans.push(Span::raw("  "));
        spans.extend(bar(u, BAR));
    }
    let since = r.age.map_or("-".to_string(), age);
    spans.push(Span::raw(format!("  {:>4}  {since:>4}", r.pods)));
    for (value, width) in r.extra.iter().zip(&w.extra) {
        spans.push(Span::raw(format!("  {:width$}", dash(value))));
    }
    spans.push(Span::raw("  "));
    spans.push(Span::styled(r.state.to_string(), state_style(&r.state)));
    Line::from(spans)
}

/// `██████░░░░  63%`: filled in proportion to requested over allocatable (full when over).
fn bar(u: &Usage, width: usize) -> Vec<Span<'static>> {
    let Some(f) = (u.allocatable > 0).then(|| u.requested as f64 / u.allocatable as f64) else {
        return vec![Span::raw(format!("{:width$}    -", ""))];
    };
    let filled = ((f * width as f64).round() as usize).min(width);
    let color = match f {
        f if f > 0.9 => Color::Red,
        f if f > 0.6 => Color::Yellow,
        _ => Color::Green,
    };
    vec![
        Span::styled("█".repeat(filled), Style::new().fg(color)),
        Span::styled("░".repeat(width - filled), Style::new().fg(Color::DarkGray)),
        Span::raw(format!(" {:>3}%", (f * 100.0).round() as i64)),
    ]
}

fn state_style(s: &State) -> Style {
    let color = match s {
        State::Ready => Color::Green,
        State::Launching => Color::Yellow,
        State::Cordoned => Color::Gray,
        State::NotReady => Color::Magenta,
        State::Disrupting(_) | State::Deleting(_) => Color::Red,
    };
    Style::new().fg(color)
}

/// `45s`, `12m`, `3h`, `2d`: the largest unit, as kubectl prints ages.
pub fn age(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7_200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3_600),
        s => format!("{}d", s / 86_400),
    }
}

/// An amount for people: cores for cpu, GiB for memory and storage, a count otherwise.
pub fn human(resource: &str, amount: i64) -> String {
    let trim = |x: f64| {
        let s = format!("{x:.1}");
        s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
    };
    match resource {
        "cpu" => trim(amount as f64 / 1000.0),
        "memory" | "ephemeral-storage" => {
            format!("{}Gi", trim(amount as f64 / (1u64 << 30) as f64))
        }
        _ => amount.to_string(),
    }
}

#[cfg(test)]
mod tests;
