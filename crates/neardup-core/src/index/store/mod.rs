//! Narrow key-value storage interface used by the index, with an in-memory
//! implementation (tests, small runs) and a RocksDB implementation.
//!
//! The index keeps everything in a handful of column families ([`Column`]).
//! Keys are raw bytes compared lexicographically; every integer inside a key is
//! encoded big-endian so that byte order equals numeric order. The [`Store`]
//! trait offers only what the index algorithms need: point reads, ordered
//! half-open range scans, atomic multi-family batches ([`Batch`]), flushing,
//! compaction and approximate statistics.
//!
//! This module also hosts the small pieces shared by the index modules: the
//! parameter error type [`IndexParamError`] and big-endian key decoding
//! helpers that turn malformed on-disk data into [`StoreError::Corrupt`]
//! instead of panicking. The two stores are in `memory.rs` and `rocks.rs`.

mod api;
mod memory;
mod rocks;
#[cfg(test)]
mod tests;

pub use api::*;
pub use memory::MemoryStore;
pub use rocks::RocksStore;
