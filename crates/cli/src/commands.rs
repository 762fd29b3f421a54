//! The subcommands. Each variant's arguments and behaviour live in `commands/<name>.rs`.

use std::process::ExitCode;

use clap::Subcommand;

pub mod bench;
pub mod plan;

#[derive(Subcommand)]
pub enum Command {
    /// Plan one snapshot: where every pending pod goes and which nodes to launch.
    Plan(plan::PlanArgs),
    /// Benchmarks of the engine.
    Bench(bench::BenchArgs),
}

pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Plan(a) => plan::run(a),
        Command::Bench(a) => bench::run(a),
    }
}
