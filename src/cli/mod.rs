//! The command line: one module per subcommand.

pub mod dedup;
pub mod eval;
pub mod explain;
pub mod group;
pub mod index;
pub mod input;
pub mod reference;
pub mod report;
pub mod run;
pub mod serve;
pub mod sign;
pub mod topics;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Near-duplicate detection for web crawlers: SpotSigs signatures, 64-bit fingerprints and a
/// RocksDB index. Every option is also a NEARDUP_* environment variable and a key in the
/// --config file.
#[derive(Parser, Debug)]
#[command(name = "neardup", version, about)]
pub struct Cli {
    /// TOML config file with [signature], [detect], [dedup], [kafka], [stage] and [replay] sections
    #[arg(long, global = true, env = "NEARDUP_CONFIG")]
    pub config: Option<PathBuf>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Whether a command turns a stop signal into a clean stop (`run`, `replay`, `serve`); the
/// others act on it as any process does.
pub fn stops_cleanly(cli: &Cli) -> bool {
    matches!(
        cli.command,
        Command::Run(_) | Command::Replay(_) | Command::Serve(_)
    )
}

/// Whether `cli` is the Kafka stage (`run`, `replay`), whose threads hand each record on
/// and take the batch scheduling policy ([`crate::scheduling`]).
pub fn hands_records_on(cli: &Cli) -> bool {
    matches!(cli.command, Command::Run(_) | Command::Replay(_))
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Deduplicate page JSONL into tagged unique / duplicate JSONL with a local index (no broker)
    Dedup(dedup::DedupArgs),
    /// Print the signatures and fingerprint of each page of a page JSONL
    Sign(sign::SignArgs),
    /// Precision, recall and F1 on a labelled corpus, for each method × threshold
    Eval(eval::EvalArgs),
    /// The Kafka stage: consume pages, produce tagged records to the unique / duplicate
    /// topics and bad records to the dead-letter topic, until SIGTERM
    Run(run::RunArgs),
    /// Replay a historical topic from earliest, a time or offsets to the end offsets seen at
    /// start, then print a JSON summary
    Replay(run::ReplayArgs),
    /// Operate on an index directory
    #[command(subcommand)]
    Index(index::IndexCommand),
    /// Create the topics the stage writes (outputs, signed, changelog) with the settings
    /// its guarantees need
    #[command(subcommand)]
    Topics(topics::TopicsCommand),
    /// Serve POST /v1/group and GET /v1/explain/{id} (and /metrics, /healthz, /readyz) over
    /// an index another process may be writing, until SIGTERM
    Serve(serve::ServeArgs),
    /// Fold the near-duplicates of a result set (ids in an index and/or inline pages)
    Group(group::GroupArgs),
    /// Why a page was decided as it was: the stored decision, the canonical page, the
    /// similarity, shared and unshared signatures; for two ids, every method's view
    Explain(explain::ExplainArgs),
}

/// Runs a parsed command line; `run`, `replay` and `serve` stop cleanly when `shutdown`
/// is triggered. `main` passes the handle of the stop signals and, for the other commands,
/// gives the signals back their default action first ([`stops_cleanly`]).
pub fn run(cli: Cli, shutdown: crate::shutdown::Shutdown) -> Result<ExitCode> {
    let file = crate::config::load_file(cli.config.as_deref())?;
    match cli.command {
        Command::Dedup(a) => dedup::run(a, &file).map(|_| ExitCode::SUCCESS),
        Command::Sign(a) => sign::run(a, &file).map(|_| ExitCode::SUCCESS),
        Command::Eval(a) => eval::run(a, &file).map(|_| ExitCode::SUCCESS),
        Command::Run(a) => {
            run::run(a, cli.config.as_deref(), &file, shutdown).map(|_| ExitCode::SUCCESS)
        }
        Command::Replay(a) => {
            run::replay(a, cli.config.as_deref(), &file, shutdown).map(|_| ExitCode::SUCCESS)
        }
        Command::Index(c) => index::run(c).map(|_| ExitCode::SUCCESS),
        Command::Topics(c) => topics::run(c, &file).map(|_| ExitCode::SUCCESS),
        Command::Serve(a) => serve::run(a, &file, shutdown).map(|_| ExitCode::SUCCESS),
        Command::Group(a) => group::run(a, &file).map(|_| ExitCode::SUCCESS),
        Command::Explain(a) => explain::run(a).map(|_| ExitCode::SUCCESS),
    }
}
