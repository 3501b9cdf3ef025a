//! The `neardup` command: parse, build, run.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = neardup::cli::Cli::parse();
    match neardup::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("neardup: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
