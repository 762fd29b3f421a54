//! The subcommands. Each variant's arguments and behaviour live in `commands/<name>.rs`.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum Command {}

pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {}
}
