//! `nodewright`: one binary for every way of running the engine.
//!
//! `main` only parses arguments and dispatches; each subcommand lives in its own module under
//! `commands/` and returns its exit code.

use std::process::ExitCode;

use clap::Parser;

mod commands;
mod output;

/// Decisions build and drop many short-lived vectors, strings and maps. With glibc's
/// allocator about a fifth of the simulator's main-thread samples were in malloc and free;
/// with mimalloc the benchmark day runs in about 85% of the time, for about 40 MB more at
/// its peak (`docs/PERFORMANCE.md`, "The allocator"). The `system-allocator` feature leaves
/// it out, for heap profilers.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "nodewright",
    version,
    about = "Just-in-time nodes for Kubernetes, Karpenter-compatible"
)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

fn main() -> ExitCode {
    // Output piped into `head` or `grep -q` ends quietly, as other command-line tools do,
    // instead of a panic from `println!` on the closed pipe.
    sigpipe::reset();
    let cli = Cli::parse();
    match commands::run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
