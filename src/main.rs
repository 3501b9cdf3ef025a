//! The `neardup` command: parse, build, run.

use std::process::ExitCode;

use clap::Parser;

/// Stop signals are caught from before `main` (see `neardup::signals`): a SIGTERM that
/// arrives while the stage starts stops it cleanly instead of killing it.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static CATCH_STOP_SIGNALS: extern "C" fn() = neardup::signals::install_early;

fn main() -> ExitCode {
    #[cfg(not(target_os = "linux"))]
    neardup::signals::install_early();
    neardup::allocator::use_huge_pages();
    neardup::allocator::after_exec();
    neardup::config::read_renamed_variables();
    let cli = neardup::cli::Cli::parse();
    if neardup::cli::hands_records_on(&cli) {
        neardup::scheduling::batch();
    }
    // the one place that reads stop signals: the commands that stop cleanly get their
    // handle, the others the signals' default action
    if !neardup::cli::stops_cleanly(&cli) {
        neardup::signals::restore_default();
    }
    match neardup::cli::run(cli, neardup::shutdown::Shutdown::on_signals()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("neardup: error: {e:#}");
            ExitCode::from(neardup::stage::exit_code(&e))
        }
    }
}
