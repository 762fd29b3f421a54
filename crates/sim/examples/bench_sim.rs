//! `cargo run --release -p nodewright-sim --example bench_sim -- NODES HOURS`: the
//! simulator benchmark without the command-line crate (which also builds the AWS SDK).
//! `-- FILE.yaml` runs a scenario file and prints its timeline and summary instead.

/// The allocator the `nodewright` binary uses, so this measures what the command does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(path) = args.get(1).filter(|a| a.ends_with(".yaml")) {
        let text = std::fs::read_to_string(path).expect("readable scenario");
        let source = nodewright_sim::scenario::FileSource {
            base: std::path::Path::new(path)
                .parent()
                .unwrap_or(std::path::Path::new("."))
                .to_path_buf(),
        };
        let scenario = nodewright_sim::scenario::parse_scenario(path, &text, &source)
            .unwrap_or_else(|e| panic!("{e}"));
        let catalog = nodewright_aws_model::catalog::embedded().expect("embedded catalog");
        let report = nodewright_sim::run(&scenario, &catalog, &mut |_| {}).expect("runs");
        print!("{}", nodewright_sim::report::timeline_text(&report));
        print!("{}", nodewright_sim::report::summary_text(&report));
        for v in &report.violations {
            println!("violation: {v}");
        }
        return;
    }
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
    // A reader that stops after the first line (`| head -1`) is not an error worth a panic.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
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
    let s = &report.summary;
    let _ = writeln!(
        out,
        "commands {}, relaunches {}, day's cost ${:.2}, at end ${:.2}/h",
        s.disruption_commands, s.consolidation_churn, s.total_cost_usd, s.final_per_hour
    );
    // `BENCH_SIM_TIMELINE=1` also prints the timeline, to read what a decision did.
    if std::env::var_os("BENCH_SIM_TIMELINE").is_some() {
        let _ = write!(out, "{}", nodewright_sim::report::timeline_text(&report));
    }
    if let Some((ran, waited)) = main_thread_times() {
        let _ = writeln!(
            out,
            "main thread: {ran:.2} s on a core, {waited:.2} s runnable but waiting for one"
        );
    }
}

/// The main thread's time on a core and time spent ready to run but waiting for a core, from
/// the kernel's scheduler statistics (Linux only): the first says how much work the thread
/// did, the second how much the other threads (and the rest of the machine) held it up.
fn main_thread_times() -> Option<(f64, f64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let ran = fields.next()??;
    let waited = fields.next()??;
    Some((ran as f64 / 1e9, waited as f64 / 1e9))
}
