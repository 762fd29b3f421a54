//! `cargo run --release -p nodewright-sim --example bench_sim -- NODES HOURS`: the
//! simulator benchmark without the command-line crate.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let nodes = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let hours = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2);
    let spec = nodewright_sim::bench::BenchSpec {
        nodes,
        hours,
        seed: 1,
    };
    let text = nodewright_sim::bench::scenario_yaml(&spec);
    let scenario = nodewright_sim::scenario::parse_scenario(
        "bench-sim.yaml",
        &text,
        &std::collections::BTreeMap::<&str, &str>::new(),
    )
    .expect("the generated scenario parses");
    let catalog = nodewright_aws_model::catalog::embedded().expect("embedded catalog");
    let started = std::time::Instant::now();
    let report = nodewright_sim::run(&scenario, &catalog, &mut |_| {}).expect("runs");
    let w = report.work;
    println!(
        "{nodes} nodes {hours} h: {:.2} s, steps {}, solves {} (+{} skipped), plans {} (+{} skipped), peak nodes {}, violations {}",
        started.elapsed().as_secs_f64(),
        w.steps,
        w.solves,
        w.solves_skipped,
        w.plans,
        w.plans_skipped,
        report.summary.max_nodes,
        report.violations.len()
    );
}
