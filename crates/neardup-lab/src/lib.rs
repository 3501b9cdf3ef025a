//! neardup's benchmarks, kept beside the product and out of it: the shipped `neardup`
//! binary has no bench mode; `neardup-lab` runs them.
//!
//! # Layout
//!
//! - [`bench`]: the signing path stage by stage next to a floor, and the whole decision
//!   path; the Kafka stage against file mode through a broker ([`bench_stage`])
//! - [`bench_index`]: the index at scale, per method; [`bench_tables`]: alg.G's and alg.H's
//!   tables alone
//! - [`bench_serve`]: result sets through `/v1/group`; [`bench_scaleout`]: signers and a
//!   decider through a broker; [`bench_shards`]: the sharded decider, simulated
//! - [`synthetic`]: synthetic pages with the statistics of real ones
//!
//! The modules name the product's parts as `crate::…`, as they did inside it: the
//! re-exports below are those parts.

pub use neardup::{
    allocator, cli, config, http, prepare, record, serving, shutdown, signals, stage, telemetry,
};
pub use neardup_core::{dedup, index, signature, text};

pub mod bench;
pub mod bench_index;
pub mod bench_scaleout;
pub mod bench_serve;
pub mod bench_shards;
pub mod bench_stage;
pub mod bench_tables;
pub mod synthetic;

/// The `neardup` binary built beside this one (the scale-out benchmark runs it as signer
/// and decider processes).
pub fn neardup_binary() -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context as _;
    let lab = std::env::current_exe().context("the running binary")?;
    let exe = lab.with_file_name(format!("neardup{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        exe.exists(),
        "{} not found beside {}: build both (cargo build --release --workspace)",
        exe.display(),
        lab.display()
    );
    Ok(exe)
}
