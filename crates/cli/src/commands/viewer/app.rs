//! The terminal loop: draw, then wait for a change from the watches (redrawn after a short
//! debounce, so a burst of events is one redraw), a key, or the once-a-second tick that moves
//! the ages on; `q`, Esc or Ctrl-C ends it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::mpsc;

use super::model::{self, Inputs, Settings, View};
use super::options::Sort;
use super::prices::Prices;
use super::render::{self, Chrome};
use super::watch::Watches;

/// Events closer together than this are drawn once.
const DEBOUNCE: Duration = Duration::from_millis(100);

pub struct Config {
    pub resources: Vec<String>,
    pub extra_labels: Vec<String>,
    pub sort: Sort,
    pub prices: Prices,
}

enum Key {
    Quit,
    Scroll(i32),
    Redraw,
}

/// Runs until the user quits; the terminal is restored however it ends.
pub async fn run(watches: Watches, config: Config) -> anyhow::Result<()> {
    let mut terminal =
        ratatui::try_init().map_err(|e| anyhow::anyhow!("the viewer needs a terminal: {e}"))?;
    let result = event_loop(&mut terminal, &watches, &config).await;
    ratatui::try_restore()?;
    result
}

async fn event_loop(
    terminal: &mut DefaultTerminal,
    watches: &Watches,
    config: &Config,
) -> anyhow::Result<()> {
    let (tx, mut keys) = mpsc::unbounded_channel();
    // crossterm's reads block; a plain thread keeps them off the runtime and simply ends
    // with the process.
    std::thread::spawn(move || read_keys(&tx));
    let source = config.prices.source();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut scroll: i32 = 0;
    loop {
        let view = snapshot(watches, config);
        let errors = watches.errors();
        let chrome = Chrome {
            price_source: &source,
            errors: &errors,
            synced: watches.synced(),
            extra_labels: &config.extra_labels,
        };
        scroll = scroll.clamp(0, render::body_len(&view) as i32);
        terminal.draw(|f| render::draw(f, &view, &chrome, scroll as u16))?;
        tokio::select! {
            _ = watches.changed.notified() => tokio::time::sleep(DEBOUNCE).await,
            _ = tick.tick() => {}
            key = keys.recv() => match key {
                None | Some(Key::Quit) => return Ok(()),
                Some(Key::Scroll(by)) => scroll += by,
                Some(Key::Redraw) => {}
            },
        }
    }
}

/// The view of what the watches hold now.
fn snapshot(watches: &Watches, config: &Config) -> View {
    let nodes = watches.nodes.state();
    let pods = watches.pods.state();
    let (claims, unreadable) = watches.nodeclaims();
    let input = Inputs {
        nodes: nodes.iter().map(AsRef::as_ref).collect(),
        pods: pods.iter().map(AsRef::as_ref).collect(),
        claims: claims.iter().collect(),
        nodepools: watches.nodepool_names(),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let settings = Settings {
        resources: &config.resources,
        extra_labels: &config.extra_labels,
        sort: &config.sort,
        prices: &config.prices,
        now,
    };
    let mut view = model::build(&input, &settings);
    view.problems.extend(unreadable);
    view
}

/// Reads keys until the user quits or the terminal goes away (the channel then closes).
fn read_keys(tx: &mpsc::UnboundedSender<Key>) {
    loop {
        let key = match event::read() {
            Err(_) => return,
            Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => match k.code {
                KeyCode::Char('q') | KeyCode::Esc => Key::Quit,
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => Key::Quit,
                KeyCode::Up | KeyCode::Char('k') => Key::Scroll(-1),
                KeyCode::Down | KeyCode::Char('j') => Key::Scroll(1),
                KeyCode::PageUp => Key::Scroll(-20),
                KeyCode::PageDown | KeyCode::Char(' ') => Key::Scroll(20),
                _ => continue,
            },
            Ok(Event::Resize(..)) => Key::Redraw,
            Ok(_) => continue,
        };
        let quit = matches!(key, Key::Quit);
        if tx.send(key).is_err() || quit {
            return;
        }
    }
}
