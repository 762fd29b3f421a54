//! `nodewright bench`: benchmarks of the engine.

use std::process::ExitCode;

use clap::Args;

#[derive(Args, Debug)]
pub struct BenchArgs {}

pub fn run(_args: BenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("no benchmark selected")
}
