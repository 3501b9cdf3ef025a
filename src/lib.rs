//! neardup — a near-duplicate detection stage for web crawlers.
//!
//! A fetched page goes through one pipeline wherever it comes from (a JSONL file, a Kafka
//! topic, a benchmark): markup stripping → tokens → SpotSigs signatures → a 64-bit
//! fingerprint → an index lookup → a verified decision (`unique`, `duplicate`, `skipped`).
//!
//! # Layout
//!
//! - [`text`]: markup stripping into text blocks, tokens, stemming, stopword data (pure)
//! - [`signature`]: SpotSigs, sentence shingles, fingerprints, similarity, result-set grouping (pure)
//! - [`index`]: the storage interface (in-memory and RocksDB), alg.G, alg.H, exact-Jaccard
//!   lists, the document store and the index format version
//! - [`dedup`]: the [`dedup::Deduplicator`], the one entry point: page in, decision out
//! - [`record`]: page, tagged and dead-letter records, and the signed and changelog records
//!   between the roles of a scaled-out stage, mirroring `schemas/`
//! - [`config`]: one validated configuration from flags, `NEARDUP_*` variables and a TOML file
//! - [`stage`]: the Kafka stage (`run`, `replay`): consumer, producer, offsets, replay
//!   bounds, shutdown, the signer and decider roles and the decider's changelog; it drives
//!   the Deduplicator and decides nothing itself
//! - [`serving`]: folding the near-duplicates of a result set and explaining a decision,
//!   over an index reader (pure of HTTP)
//! - [`signals`]: stop signals, caught from before `main`; [`allocator`]: huge pages for
//!   the heap (the binary starts itself again with the allocator's tunable)
//! - [`telemetry`]: metric names, the Prometheus recorder, readiness, logging
//! - [`http`]: the HTTP server (`/metrics`, `/healthz`, `/readyz`, `/v1/group`,
//!   `/v1/explain`) of `run`, `replay` and `serve`
//! - [`cli`]: one module per subcommand (`sign`, `dedup`, `eval`, `bench`, `index`, `run`,
//!   `replay`, `topics`, `serve`, `group`, `explain`)
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

pub mod allocator;
pub mod cli;
pub mod config;
pub mod dedup;
pub mod http;
pub mod index;
pub mod record;
pub mod serving;
pub mod signals;
pub mod signature;
pub mod stage;
pub mod telemetry;
pub mod text;
