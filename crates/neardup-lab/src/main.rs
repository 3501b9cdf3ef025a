//! `neardup-lab`: the benchmarks ([`neardup_lab::bench::BenchArgs`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// neardup's benchmarks: the signing path over a corpus (`--corpus FILE`), or one of the
/// benchmarks below. Options of the product (signature and detection settings) are those
/// of `neardup`.
#[derive(Parser, Debug)]
#[command(name = "neardup-lab", version, about)]
struct Lab {
    /// TOML config file with [signature] and [detect] sections
    #[arg(long, global = true, env = "NEARDUP_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    bench: neardup_lab::bench::BenchArgs,
}

fn main() -> ExitCode {
    // the heap on huge pages, as the product's binary has it, so the figures are the same;
    // the stop signals the start-again blocked across its exec are unblocked by the
    // handler's installation, then given back their default action: a benchmark stops its
    // stages through their shutdown handles, and a stop signal ends it as any process
    neardup::signals::install_early();
    neardup::allocator::use_huge_pages();
    neardup::allocator::after_exec();
    neardup::signals::restore_default();
    neardup::config::read_renamed_variables();
    let lab = Lab::parse();
    let run = || -> anyhow::Result<()> {
        let file = neardup::config::load_file(lab.config.as_deref())?;
        neardup_lab::bench::run(lab.bench, &file)?;
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("neardup-lab: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
