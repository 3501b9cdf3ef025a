//! `neardup index stats|compact|expire`: operate on an index directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::Subcommand;

use crate::config::parse_duration;
use crate::index::{Index, RocksStore};

/// Index subcommands.
#[derive(Subcommand, Debug)]
pub enum IndexCommand {
    /// Print the format version, the parameters and the size of every column family (JSON)
    Stats {
        /// Index directory
        #[arg(long, env = "NEARDUP_INDEX")]
        index: PathBuf,
    },
    /// Compact every column family
    Compact {
        /// Index directory
        #[arg(long, env = "NEARDUP_INDEX")]
        index: PathBuf,
    },
    /// Remove documents first seen before a time, with their index entries
    Expire {
        /// Index directory
        #[arg(long, env = "NEARDUP_INDEX")]
        index: PathBuf,
        /// Remove documents first seen longer ago than this (e.g. 7d)
        #[arg(long, value_parser = parse_duration)]
        older_than: Option<Duration>,
        /// Remove documents first seen before this RFC 3339 time
        #[arg(long)]
        before: Option<String>,
    },
}

fn open(index: &Path) -> Result<Index> {
    if !index.join("CURRENT").exists() {
        bail!(
            "{} is not an index directory (no RocksDB files)",
            index.display()
        );
    }
    let store =
        RocksStore::open(index).with_context(|| format!("cannot open {}", index.display()))?;
    Index::open_existing(Box::new(store))
        .with_context(|| format!("cannot open index {}", index.display()))
}

/// Runs an index subcommand.
pub fn run(cmd: IndexCommand) -> Result<()> {
    match cmd {
        IndexCommand::Stats { index } => {
            let idx = open(&index)?;
            println!("{}", serde_json::to_string_pretty(&idx.stats()?)?);
        }
        IndexCommand::Compact { index } => {
            let idx = open(&index)?;
            idx.compact()?;
            eprintln!("neardup index compact: done");
        }
        IndexCommand::Expire {
            index,
            older_than,
            before,
        } => {
            let cutoff = match (older_than, before) {
                (Some(d), None) => {
                    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
                    now - d.as_secs() as i64
                }
                (None, Some(t)) => crate::record::parse_time(&t)
                    .with_context(|| format!("--before {t:?} is not an RFC 3339 time"))?,
                _ => bail!("give exactly one of --older-than and --before"),
            };
            let mut idx = open(&index)?;
            let n = idx.expire(cutoff)?;
            idx.flush()?;
            println!("{{\"expired\":{n}}}");
        }
    }
    Ok(())
}
