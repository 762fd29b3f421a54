//! The drawn screen, read back from ratatui's test backend.

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::super::model::{Group, Row, Totals, Usage, View};
use super::super::state::State;
use super::*;

fn usage(resource: &str, requested: i64, allocatable: i64) -> Usage {
    Usage {
        resource: resource.into(),
        requested,
        allocatable,
    }
}

fn row(name: &str, state: State, price: Option<f64>) -> Row {
    Row {
        name: name.into(),
        nodepool: Some("default".into()),
        instance_type: "m5.large".into(),
        capacity_type: "spot".into(),
        zone: "us-east-1a".into(),
        price,
        usage: vec![usage("cpu", 1500, 1930), usage("memory", 0, 0)],
        pods: 3,
        age: Some(4000),
        state,
        extra: vec!["blue".into()],
        labels: Default::default(),
    }
}

fn screen(view: &View, errors: &[String]) -> Vec<String> {
    let mut t = Terminal::new(TestBackend::new(140, 14)).unwrap();
    let extra = ["team".to_string()];
    let chrome = Chrome {
        price_source: "prices: test",
        errors,
        synced: true,
        extra_labels: &extra,
    };
    t.draw(|f| draw(f, view, &chrome, 0)).unwrap();
    let buf = t.backend().buffer();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

#[test]
fn the_screen_shows_totals_groups_rows_and_the_footer() {
    let rows = vec![
        row("ip-10-0-0-1.ec2.internal", State::Ready, Some(0.0336)),
        row("default-abcde", State::Launching, None),
    ];
    let totals = Totals {
        nodes: 1,
        launching: 1,
        pods: 6,
        per_hour: 0.0336,
        unpriced: 1,
        usage: vec![usage("cpu", 3000, 3860), usage("memory", 3 << 30, 16 << 30)],
    };
    let view = View {
        groups: vec![Group {
            nodepool: Some("default".into()),
            rows,
            totals: totals.clone(),
        }],
        totals,
        pending_pods: 4,
        problems: vec!["Pod a/b: bad".into(), "Pod a/c: bad".into()],
    };
    let s = screen(&view, &["nodeclaims: 404".into()]);
    assert_eq!(
        s[0],
        "nodewright viewer · 1 nodes · 1 launching · 6 pods · 4 pending · $0.0336/h · $24.53/month (+1 unpriced)"
    );
    assert_eq!(
        s[1],
        "total  ████████████████░░░░  78% 3/3.9    ████░░░░░░░░░░░░░░░░  19% 3Gi/16Gi"
    );
    assert!(
        s[3].starts_with("NodePool default · 1 nodes · 1 launching · 6 pods · $0.0336/h"),
        "{}",
        s[3]
    );
    assert_eq!(
        s[4],
        "  NAME                      TYPE      CAPACITY   ZONE            $/H  CPU              MEMORY           PODS   AGE  team  STATE"
    );
    assert_eq!(
        s[5],
        "  ip-10-0-0-1.ec2.internal  m5.large  spot       us-east-1a   0.0336  ████████░░  78%                -     3   66m  blue  ready"
    );
    assert!(
        s[6].contains("       -  ████████░░  78%") && s[6].ends_with("launching"),
        "{}",
        s[6]
    );
    assert_eq!(s[11], "watch error: nodeclaims: 404");
    assert_eq!(s[12], "unreadable: Pod a/b: bad (and 1 more)");
    assert_eq!(s[13], "q quit · ↑↓ scroll · prices: test");
}

#[test]
fn amounts_and_ages_read_as_people_write_them() {
    assert_eq!(human("cpu", 1500), "1.5");
    assert_eq!(human("cpu", 2000), "2");
    assert_eq!(human("memory", 3 << 29), "1.5Gi");
    assert_eq!(human("pods", 29), "29");
    assert_eq!(age(59), "59s");
    assert_eq!(age(600), "10m");
    assert_eq!(age(3 * 3600), "3h");
    assert_eq!(age(3 * 86_400), "3d");
}
