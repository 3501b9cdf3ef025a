//! neardup — a near-duplicate detection stage for web crawlers.
//!
//! A fetched page goes through one pipeline wherever it comes from (a JSONL file, a Kafka
//! topic, a benchmark): markup stripping → tokens → SpotSigs signatures → a 64-bit
//! fingerprint → an index lookup → a verified decision (`unique`, `duplicate`, `skipped`).
//!
//! # Layout
//!
//! The algorithm core is its own crate, `neardup-core` (`crates/neardup-core`), re-exported
//! here under the same names: [`text`], [`signature`], [`index`] and [`dedup`]. Its
//! manifest takes none of the crates below that do I/O, so Cargo holds the layering. The
//! benchmarks are the `neardup-lab` crate (`crates/neardup-lab`), beside the product.
//!
//! - [`prepare`]: one input record decoded, validated and signed, off the deciding thread
//! - [`record`]: page, tagged and dead-letter records, and the signed and changelog records
//!   between the roles of a scaled-out stage, mirroring `schemas/`
//! - [`config`]: one validated configuration from flags, `NEARDUP_*` variables and a TOML file
//! - [`stage`]: the Kafka stage (`run`, `replay`): consumer, producer, offsets, replay
//!   bounds, shutdown, the signer and decider roles and the decider's changelog; it drives
//!   the Deduplicator and decides nothing itself
//! - [`serving`]: folding the near-duplicates of a result set and explaining a decision,
//!   over an index reader (pure of HTTP)
//! - [`shutdown`]: the stop handle the stage, the HTTP server and the index's opening take
//!   (`stage::run(settings, shutdown)`); `main` makes the one stop signals trigger
//! - [`signals`]: stop signals, caught from before `main`, read by `main` only (through
//!   [`shutdown::Shutdown::on_signals`]); [`allocator`]: huge pages for the heap (the binary
//!   starts itself again with the allocator's tunable); [`scheduling`]: the batch policy
//!   for the Kafka stage's threads (no preemption at each hand-off)
//! - [`telemetry`]: metric names, the Prometheus recorder, readiness, logging
//! - [`http`]: the HTTP server (`/metrics`, `/healthz`, `/readyz`, `/v1/group`,
//!   `/v1/explain`) of `run`, `replay` and `serve`
//! - [`cli`]: one module per subcommand (`sign`, `dedup`, `eval`, `index`, `run`, `replay`,
//!   `topics`, `serve`, `group`, `explain`), and the configuration reference it generates
//!
//! # Architecture invariants
//!
//! - `text`, `signature` and `index` never touch the outside world beyond the index
//!   directory they are handed: no network, no async runtime, no metrics, no environment
//!   variables, no signals. They return typed errors and never panic on bad input.
//! - Data flows one way: `cli` → (file or `stage`) → `dedup` → `signature`/`text` and
//!   `index`. Kafka, tokio, HTTP and metrics live only in `stage`, `telemetry`, `http` and
//!   `cli`.
//! - Every persisted or published format carries a version: the index has
//!   [`index::FORMAT_VERSION`], records follow `schemas/*.v1.schema.json`.
//! - Decisions for one index are made one at a time (`&mut Deduplicator`), so two
//!   near-duplicates in flight can never both be judged unique.

pub use neardup_core::{dedup, index, signature, text};

// the broker tests' harness (tests/common), shared with the in-process tests of the stage,
// names this crate as its tests do
#[cfg(test)]
extern crate self as neardup;

pub mod allocator;
pub mod cli;
pub mod config;
pub mod http;
pub mod prepare;
pub mod record;
pub mod scheduling;
pub mod serving;
pub mod shutdown;
pub mod signals;
pub mod stage;
pub mod telemetry;
