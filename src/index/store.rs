//! Narrow key-value storage interface used by the index, with an in-memory
//! implementation (tests, small runs) and a RocksDB implementation.
//!
//! The index keeps everything in a handful of column families ([`Family`]).
//! Keys are raw bytes compared lexicographically; every integer inside a key is
//! encoded big-endian so that byte order equals numeric order. The [`Store`]
//! trait offers only what the index algorithms need: point reads, ordered
//! half-open range scans, atomic multi-family batches ([`Batch`]), flushing,
//! compaction and approximate statistics.
//!
//! This module also hosts the small pieces shared by the index modules: the
//! parameter error type [`IndexParamError`] and big-endian key decoding
//! helpers that turn malformed on-disk data into [`StoreError::Corrupt`]
//! instead of panicking.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use rocksdb::{
    BlockBasedOptions, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType, Options,
    ReadOptions, WriteBatch, DB,
};

/// RocksDB name of the [`Family::Meta`] column family.
pub const CF_META: &str = "meta";
/// RocksDB name of the [`Family::Docs`] column family.
pub const CF_DOCS: &str = "docs";
/// RocksDB name of the [`Family::Ids`] column family.
pub const CF_IDS: &str = "ids";
/// RocksDB name of the [`Family::AlgG`] column family.
pub const CF_ALG_G: &str = "alg_g";
/// RocksDB name of the [`Family::AlgH`] column family.
pub const CF_ALG_H: &str = "alg_h";
/// RocksDB name of the [`Family::Stage`] column family.
pub const CF_STAGE: &str = "stage";

/// Column families of the index store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// Index metadata (parameters, format version, counters).
    Meta,
    /// Per-document records.
    Docs,
    /// External id to document number mapping.
    Ids,
    /// Manku et al. permuted fingerprint tables (see `alg_g`).
    AlgG,
    /// Yuan et al. merged group index (see `alg_h`).
    AlgH,
    /// Staging area for the pipeline.
    Stage,
}

impl Family {
    /// Every family, in a fixed order (the order of [`Family::index`]).
    pub const ALL: [Family; 6] = [
        Family::Meta,
        Family::Docs,
        Family::Ids,
        Family::AlgG,
        Family::AlgH,
        Family::Stage,
    ];

    /// The column family name used by RocksDB.
    pub fn name(self) -> &'static str {
        match self {
            Family::Meta => CF_META,
            Family::Docs => CF_DOCS,
            Family::Ids => CF_IDS,
            Family::AlgG => CF_ALG_G,
            Family::AlgH => CF_ALG_H,
            Family::Stage => CF_STAGE,
        }
    }

    /// Position of the family in [`Family::ALL`].
    pub fn index(self) -> usize {
        match self {
            Family::Meta => 0,
            Family::Docs => 1,
            Family::Ids => 2,
            Family::AlgG => 3,
            Family::AlgH => 4,
            Family::Stage => 5,
        }
    }
}

/// Errors of the storage layer and of decoding index data read from it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An error reported by RocksDB.
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// Data read from the store does not have the expected layout.
    #[error("corrupt index data: {0}")]
    Corrupt(String),
    /// A column family is missing from an open database.
    #[error("missing column family {0}")]
    MissingFamily(&'static str),
    /// The database directory could not be created.
    #[error("cannot create index directory {path}: {source}")]
    CreateDir {
        /// The directory that could not be created.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A fingerprint passed to an index has the wrong number of 64-bit words.
    #[error("fingerprint has {got} 64-bit words, the index expects {expected}")]
    FingerprintWidth {
        /// Words expected by the index.
        expected: usize,
        /// Words received.
        got: usize,
    },
}

/// Invalid parameters for one of the index structures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid index parameters: {0}")]
pub struct IndexParamError(pub String);

/// Approximate size of one family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FamilyStats {
    /// Number of keys (exact for [`MemoryStore`], an estimate for [`RocksStore`]).
    pub keys: u64,
    /// Bytes used in memory ([`MemoryStore`]: keys plus values) or on disk plus
    /// memtables ([`RocksStore`]).
    pub bytes: u64,
}

/// One operation of a [`Batch`], borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set `key` to `value` in `family`.
    Put {
        /// Target family.
        family: Family,
        /// Key bytes.
        key: &'a [u8],
        /// Value bytes.
        value: &'a [u8],
    },
    /// Remove `key` from `family` (no error if absent).
    Delete {
        /// Target family.
        family: Family,
        /// Key bytes.
        key: &'a [u8],
    },
}

/// Position of one operation inside the batch buffer.
#[derive(Debug, Clone, Copy)]
struct OpRef {
    family: Family,
    put: bool,
    start: usize,
    key_end: usize,
    end: usize,
}

/// Writes of one page, applied atomically, in insertion order, by
/// [`Store::write`].
///
/// Keys and values are appended to one shared buffer, so building a batch
/// does not allocate per key once the buffers have grown.
#[derive(Default, Debug, Clone)]
pub struct Batch {
    data: Vec<u8>,
    ops: Vec<OpRef>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// An empty batch with room for `bytes` of keys and values and `ops` operations.
    pub fn with_capacity(bytes: usize, ops: usize) -> Batch {
        Batch {
            data: Vec::with_capacity(bytes),
            ops: Vec::with_capacity(ops),
        }
    }

    /// Bytes of the queued keys and values.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Queues `key = value` in `f`.
    pub fn put(&mut self, f: Family, key: &[u8], value: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(key);
        let key_end = self.data.len();
        self.data.extend_from_slice(value);
        self.ops.push(OpRef {
            family: f,
            put: true,
            start,
            key_end,
            end: self.data.len(),
        });
    }

    /// Queues the deletion of `key` in `f`.
    pub fn delete(&mut self, f: Family, key: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(key);
        let end = self.data.len();
        self.ops.push(OpRef {
            family: f,
            put: false,
            start,
            key_end: end,
            end,
        });
    }

    /// Number of queued operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when no operation is queued.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every queued operation, keeping the allocated buffers.
    pub fn clear(&mut self) {
        self.data.clear();
        self.ops.clear();
    }

    /// The queued operations in insertion order.
    pub fn ops(&self) -> impl Iterator<Item = BatchOp<'_>> + '_ {
        self.ops.iter().map(move |op| {
            let key = &self.data[op.start..op.key_end];
            if op.put {
                BatchOp::Put {
                    family: op.family,
                    key,
                    value: &self.data[op.key_end..op.end],
                }
            } else {
                BatchOp::Delete {
                    family: op.family,
                    key,
                }
            }
        })
    }
}

/// Storage used by the index.
///
/// Implementations must be safe to share between threads. Callbacks passed to
/// [`Store::scan`] must not write to the same store (the in-memory store holds
/// a read lock during the scan).
pub trait Store: Send + Sync {
    /// Reads the value of `key` in `family`.
    fn get(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Reads many keys of one family at once (one batched lookup in RocksDB).
    fn get_many(&self, family: Family, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        keys.iter().map(|k| self.get(family, k)).collect()
    }

    /// A read-only follower of another process's store reads what that process wrote
    /// since it opened or last caught up; every other store is always current.
    fn catch_up(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Visits the entries with lo <= key < hi in ascending key order; stops early when `visit` returns false.
    ///
    /// An empty range (`lo >= hi`) visits nothing.
    fn scan(
        &self,
        family: Family,
        lo: &[u8],
        hi: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError>;

    /// Applies all operations of the batch atomically (one RocksDB `WriteBatch`); on return
    /// they are in the log's file, so they survive the death of the process.
    ///
    /// Operations are applied in insertion order, so a later operation on the
    /// same key wins.
    fn write(&self, batch: Batch) -> Result<(), StoreError>;

    /// [`Store::write`], but the log of the write may stay in the process until the next
    /// [`Store::flush_wal`] (or `write`): for the decisions, whose log the deciding loops
    /// write out once for a batch before they publish any of it, and a restore's documents
    /// (written out at its end, before its marker is removed). Readers of this store see
    /// the write at once.
    fn write_buffered(&self, batch: Batch) -> Result<(), StoreError> {
        self.write(batch)
    }

    /// Flushes buffered writes (memtables) to durable storage.
    fn flush(&self) -> Result<(), StoreError>;

    /// Hands the write-ahead log's buffer to the operating system: a
    /// [`Store::write_buffered`] survives the death of the process only once this (or a
    /// later [`Store::write`]) has returned, so a caller that publishes what it wrote (a
    /// decision produced, an offset stored, an output line written) calls this first.
    /// Nothing to do for the in-memory store.
    fn flush_wal(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Full compaction of every family.
    fn compact(&self) -> Result<(), StoreError>;

    /// The directory of a store on disk that this process writes, where the index keeps
    /// files beside the database (the lists snapshot); `None` for the in-memory store and
    /// read-only followers.
    fn dir(&self) -> Option<&Path> {
        None
    }

    /// Approximate (number of keys, bytes on disk or in memory) per family, for `index stats`.
    fn family_stats(&self, family: Family) -> Result<FamilyStats, StoreError>;
}

type Tables = [BTreeMap<Vec<u8>, Vec<u8>>; 7];

/// In-memory [`Store`]: one ordered map per family behind a single lock, so
/// batches are applied atomically with respect to readers.
#[derive(Debug, Default)]
pub struct MemoryStore {
    tables: RwLock<Tables>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, Tables> {
        // A poisoned lock only means another thread panicked while holding it;
        // every write applies a whole batch, so the maps remain usable.
        self.tables
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_lock(&self) -> RwLockWriteGuard<'_, Tables> {
        self.tables
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Store for MemoryStore {
    fn get(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.read()[family.index()].get(key).cloned())
    }

    fn scan(
        &self,
        family: Family,
        lo: &[u8],
        hi: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        if lo >= hi {
            return Ok(());
        }
        let tables = self.read();
        let range =
            tables[family.index()].range::<[u8], _>((Bound::Included(lo), Bound::Excluded(hi)));
        for (k, v) in range {
            if !visit(k, v) {
                break;
            }
        }
        Ok(())
    }

    fn write(&self, batch: Batch) -> Result<(), StoreError> {
        let mut tables = self.write_lock();
        for op in batch.ops() {
            match op {
                BatchOp::Put { family, key, value } => {
                    tables[family.index()].insert(key.to_vec(), value.to_vec());
                }
                BatchOp::Delete { family, key } => {
                    tables[family.index()].remove(key);
                }
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn compact(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn family_stats(&self, family: Family) -> Result<FamilyStats, StoreError> {
        let tables = self.read();
        let table = &tables[family.index()];
        let bytes = table.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
        Ok(FamilyStats {
            keys: table.len() as u64,
            bytes,
        })
    }
}

/// RocksDB-backed [`Store`] with one column family per [`Family`].
///
/// The write-ahead log is on, so dropping the store loses nothing that
/// [`Store::write`] acknowledged.
pub struct RocksStore {
    db: DB,
    path: PathBuf,
    /// Opened as a read-only follower ([`RocksStore::open_secondary`]).
    secondary: bool,
}

impl std::fmt::Debug for RocksStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Database and column family options, shared by every family.
fn options() -> Options {
    options_with(None)
}

/// [`options`] with a block cache shared by every family (else RocksDB's default).
fn options_with(cache: Option<&rocksdb::Cache>) -> Options {
    let mut table = BlockBasedOptions::default();
    if let Some(c) = cache {
        table.set_block_cache(c);
    }
    // 10 bits per key: about 1% false positives for point reads.
    table.set_bloom_filter(10.0, false);
    // a hash index in each data block: a point read finds its key without the binary
    // search and the scan after it (a data block written without one reads as before)
    table.set_data_block_index_type(rocksdb::DataBlockIndexType::BinaryAndHash);
    table.set_data_block_hash_ratio(0.75);

    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_compression_type(DBCompressionType::Lz4);
    opts.set_write_buffer_size(64 << 20);
    opts.set_block_based_table_factory(&table);
    opts.increase_parallelism(2);
    // retention deletes whole documents: files dense with deletions are compacted soon, so
    // the space of expired entries comes back instead of piling up as tombstones
    opts.add_compact_on_deletion_collector_factory(10_000, 5_000, 0.5);
    // all memtables together stay under 256 MiB, whatever the number of families
    opts.set_db_write_buffer_size(256 << 20);
    // a family whose memtable stays small (meta rewrites the same few keys) never fills it,
    // so it is never flushed and keeps every write-ahead log file since its oldest entry:
    // past 256 MiB of logs the families that hold the oldest file are flushed, so the logs
    // stay bounded (by default the bound is four times all write buffers, several GB; a
    // 1M-record soak saw the index directory reach 1.5 GB)
    opts.set_max_total_wal_size(256 << 20);
    // the log of a write stays in the process until `flush_wal`: `write` calls it at once,
    // and the deciding loops write the log of a batch of decisions (`write_buffered`) once,
    // before any of them is published, instead of one system call a decision
    opts.set_manual_wal_flush(true);
    opts
}

impl Drop for RocksStore {
    /// The log's buffer is written out when the store closes, as every write before a clean
    /// close survives it.
    fn drop(&mut self) {
        if let Err(e) = self.flush_wal() {
            tracing::warn!(error = %e, path = %self.path.display(), "cannot write the index's log at close");
        }
    }
}

impl RocksStore {
    /// Opens (or creates) the database at `path`, creating the directory and
    /// any missing column family.
    pub fn open(path: &Path) -> Result<RocksStore, StoreError> {
        std::fs::create_dir_all(path).map_err(|source| StoreError::CreateDir {
            path: path.to_path_buf(),
            source,
        })?;
        let opts = options();
        // Every existing family must be opened too, or RocksDB refuses to open.
        let mut names: Vec<String> = Family::ALL.iter().map(|f| f.name().to_owned()).collect();
        if let Ok(existing) = DB::list_cf(&opts, path) {
            for name in existing {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        let descriptors = names
            .into_iter()
            .map(|name| ColumnFamilyDescriptor::new(name, options()));
        let db = DB::open_cf_descriptors(&opts, path, descriptors)?;
        let store = RocksStore {
            db,
            path: path.to_path_buf(),
            secondary: false,
        };
        for f in Family::ALL {
            store.cf(f)?;
        }
        Ok(store)
    }

    /// Opens the database at `path`, which another process may be writing, as a read-only
    /// follower (a RocksDB secondary instance, its own files in `own`): it sees what the
    /// writer had written when it opened, and more after each [`Store::catch_up`]. Writes
    /// are refused.
    ///
    /// `block_cache` bytes of uncompressed blocks are cached (shared by the families): a
    /// serving process reads documents at random, and a read that misses the cache costs a
    /// block read and its decompression.
    pub fn open_secondary(
        path: &Path,
        own: &Path,
        block_cache: usize,
    ) -> Result<RocksStore, StoreError> {
        if !path.join("CURRENT").exists() {
            return Err(StoreError::Corrupt(format!(
                "{} is not an index directory",
                path.display()
            )));
        }
        std::fs::create_dir_all(own).map_err(|source| StoreError::CreateDir {
            path: own.to_path_buf(),
            source,
        })?;
        let cache = rocksdb::Cache::new_lru_cache(block_cache);
        let mut opts = options_with(Some(&cache));
        opts.create_if_missing(false);
        opts.create_missing_column_families(false);
        // a secondary instance keeps every table file open
        opts.set_max_open_files(-1);
        let names = DB::list_cf(&opts, path)?;
        let descriptors = names
            .into_iter()
            .map(|name| ColumnFamilyDescriptor::new(name, options_with(Some(&cache))));
        let db = DB::open_cf_descriptors_as_secondary(&opts, path, own, descriptors)?;
        let store = RocksStore {
            db,
            path: path.to_path_buf(),
            secondary: true,
        };
        for f in Family::ALL {
            store.cf(f)?;
        }
        Ok(store)
    }

    /// Writes a consistent copy of the database at `src` to the new directory `dst` (hard
    /// links for the table files where the file system allows). The contents at `src` are
    /// not changed.
    pub fn checkpoint(src: &Path, dst: &Path) -> Result<(), StoreError> {
        if !src.join("CURRENT").exists() {
            return Err(StoreError::Corrupt(format!(
                "{} is not an index directory",
                src.display()
            )));
        }
        let store = RocksStore::open(src)?;
        rocksdb::checkpoint::Checkpoint::new(&store.db)?.create_checkpoint(dst)?;
        Ok(())
    }

    /// Directory of the database.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn cf(&self, family: Family) -> Result<&ColumnFamily, StoreError> {
        self.db
            .cf_handle(family.name())
            .ok_or(StoreError::MissingFamily(family.name()))
    }
}

impl Store for RocksStore {
    fn dir(&self) -> Option<&Path> {
        (!self.secondary).then_some(self.path.as_path())
    }

    fn get_many(&self, family: Family, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let cf = self.cf(family)?;
        self.db
            .batched_multi_get_cf(cf, keys.iter().copied(), false)
            .into_iter()
            .map(|r| r.map(|v| v.map(|p| p.to_vec())).map_err(StoreError::from))
            .collect()
    }

    fn catch_up(&self) -> Result<(), StoreError> {
        if self.secondary {
            self.db.try_catch_up_with_primary()?;
        }
        Ok(())
    }

    fn get(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.db.get_cf(self.cf(family)?, key)?)
    }

    fn scan(
        &self,
        family: Family,
        lo: &[u8],
        hi: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        if lo >= hi {
            return Ok(());
        }
        let cf = self.cf(family)?;
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(lo);
        ro.set_iterate_upper_bound(hi);
        let mut it = self.db.raw_iterator_cf_opt(cf, ro);
        it.seek(lo);
        while let Some((k, v)) = it.item() {
            if !visit(k, v) {
                break;
            }
            it.next();
        }
        it.status()?;
        Ok(())
    }

    fn write(&self, batch: Batch) -> Result<(), StoreError> {
        self.write_buffered(batch)?;
        self.flush_wal()
    }

    fn write_buffered(&self, batch: Batch) -> Result<(), StoreError> {
        let mut cfs: [Option<&ColumnFamily>; Family::ALL.len()] = [None; Family::ALL.len()];
        // the batch's bytes and, for each operation, a tag, a family and two lengths: one
        // allocation, never grown
        let mut wb = WriteBatch::with_capacity_bytes(12 + batch.bytes() + 16 * batch.len());
        for op in batch.ops() {
            let family = match op {
                BatchOp::Put { family, .. } | BatchOp::Delete { family, .. } => family,
            };
            let cf = match cfs[family.index()] {
                Some(cf) => cf,
                None => *cfs[family.index()].insert(self.cf(family)?),
            };
            match op {
                BatchOp::Put { key, value, .. } => wb.put_cf(cf, key, value),
                BatchOp::Delete { key, .. } => wb.delete_cf(cf, key),
            }
        }
        self.db.write(wb)?;
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.flush_wal()?;
        for f in Family::ALL {
            self.db.flush_cf(self.cf(f)?)?;
        }
        Ok(())
    }

    fn flush_wal(&self) -> Result<(), StoreError> {
        if !self.secondary {
            self.db.flush_wal(false)?;
        }
        Ok(())
    }

    fn compact(&self) -> Result<(), StoreError> {
        for f in Family::ALL {
            self.db
                .compact_range_cf(self.cf(f)?, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }

    fn family_stats(&self, family: Family) -> Result<FamilyStats, StoreError> {
        let cf = self.cf(family)?;
        let prop = |name: &str| -> Result<u64, StoreError> {
            Ok(self.db.property_int_value_cf(cf, name)?.unwrap_or(0))
        };
        Ok(FamilyStats {
            keys: prop("rocksdb.estimate-num-keys")?,
            bytes: prop("rocksdb.total-sst-files-size")?
                .saturating_add(prop("rocksdb.cur-size-all-mem-tables")?),
        })
    }
}

/// Reads the big-endian `u64` at `bytes[at..at + 8]`, or reports corruption
/// naming `what`.
pub(crate) fn read_u64(bytes: &[u8], at: usize, what: &str) -> Result<u64, StoreError> {
    bytes
        .get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| {
            StoreError::Corrupt(format!(
                "{what}: expected 8 bytes at offset {at}, record has {} bytes",
                bytes.len()
            ))
        })
}

/// Reports a record of unexpected length as corruption.
pub(crate) fn check_len(bytes: &[u8], expected: usize, what: &str) -> Result<(), StoreError> {
    if bytes.len() == expected {
        Ok(())
    } else {
        Err(StoreError::Corrupt(format!(
            "{what}: expected {expected} bytes, found {}",
            bytes.len()
        )))
    }
}

/// Bytes appended to a key prefix to form an exclusive scan bound above every
/// key that starts with that prefix and has at most 8 more bytes: such a key
/// is either a proper prefix of `prefix ++ SCAN_PAST` or smaller at some byte.
pub(crate) const SCAN_PAST: [u8; 9] = [0xff; 9];

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn collect(store: &dyn Store, f: Family, lo: &[u8], hi: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        store
            .scan(f, lo, hi, &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                true
            })
            .unwrap();
        out
    }

    fn keys(store: &dyn Store, f: Family, lo: &[u8], hi: &[u8]) -> Vec<Vec<u8>> {
        collect(store, f, lo, hi)
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    fn put_get_delete(store: &dyn Store) {
        assert_eq!(store.get(Family::Docs, b"a").unwrap(), None);
        let mut b = Batch::default();
        b.put(Family::Docs, b"a", b"1");
        b.put(Family::Docs, b"b", b"");
        store.write(b).unwrap();
        assert_eq!(store.get(Family::Docs, b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(store.get(Family::Docs, b"b").unwrap(), Some(Vec::new()));

        let mut b = Batch::default();
        b.put(Family::Docs, b"a", b"2");
        store.write(b).unwrap();
        assert_eq!(store.get(Family::Docs, b"a").unwrap(), Some(b"2".to_vec()));

        let mut b = Batch::default();
        b.delete(Family::Docs, b"a");
        b.delete(Family::Docs, b"missing");
        store.write(b).unwrap();
        assert_eq!(store.get(Family::Docs, b"a").unwrap(), None);
        assert_eq!(store.get(Family::Docs, b"b").unwrap(), Some(Vec::new()));

        // An empty batch is fine.
        store.write(Batch::default()).unwrap();
    }

    fn batch_order(store: &dyn Store) {
        let mut b = Batch::default();
        b.put(Family::Meta, b"x", b"1");
        b.delete(Family::Meta, b"x");
        b.delete(Family::Meta, b"y");
        b.put(Family::Meta, b"y", b"2");
        b.put(Family::Meta, b"z", b"1");
        b.put(Family::Meta, b"z", b"3");
        assert_eq!(b.len(), 6);
        store.write(b).unwrap();
        assert_eq!(store.get(Family::Meta, b"x").unwrap(), None);
        assert_eq!(store.get(Family::Meta, b"y").unwrap(), Some(b"2".to_vec()));
        assert_eq!(store.get(Family::Meta, b"z").unwrap(), Some(b"3".to_vec()));
    }

    /// A writer repeatedly puts the same counter under two keys in two
    /// families, in one batch; a reader reading key A then key B must never
    /// see B older than A.
    fn batch_atomicity(store: &dyn Store) {
        const ROUNDS: u64 = 2000;
        let done = AtomicBool::new(false);
        let read_u = |f: Family, k: &[u8]| -> u64 {
            store
                .get(f, k)
                .unwrap()
                .map(|v| u64::from_be_bytes(v.try_into().unwrap()))
                .unwrap_or(0)
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 1..=ROUNDS {
                    let mut b = Batch::default();
                    b.put(Family::Stage, b"atom-a", &i.to_be_bytes());
                    b.put(Family::Ids, b"atom-b", &i.to_be_bytes());
                    store.write(b).unwrap();
                }
                done.store(true, Ordering::SeqCst);
            });
            let mut checks = 0u64;
            while !done.load(Ordering::SeqCst) || checks < 10 {
                let a = read_u(Family::Stage, b"atom-a");
                let b = read_u(Family::Ids, b"atom-b");
                assert!(b >= a, "saw a={a} but older b={b}");
                checks += 1;
            }
        });
        assert_eq!(read_u(Family::Stage, b"atom-a"), ROUNDS);
        assert_eq!(read_u(Family::Ids, b"atom-b"), ROUNDS);
    }

    fn scans(store: &dyn Store) {
        let all: [&[u8]; 9] = [
            b"",
            b"\x00",
            b"a",
            b"a\x00",
            b"ab",
            b"abc",
            b"b",
            b"b\xff",
            b"\xff\xff",
        ];
        // Insert out of order to check ordering.
        let mut b = Batch::default();
        for k in all.iter().rev() {
            b.put(Family::AlgG, k, &[k.len() as u8]);
        }
        store.write(b).unwrap();

        let everything = keys(store, Family::AlgG, b"", &[0xff; 4]);
        let expected: Vec<Vec<u8>> = all.iter().map(|k| k.to_vec()).collect();
        assert_eq!(everything, expected);

        // [lo, hi): lo included, hi excluded.
        assert_eq!(
            keys(store, Family::AlgG, b"a", b"abc"),
            vec![b"a".to_vec(), b"a\x00".to_vec(), b"ab".to_vec()]
        );
        // Prefix scan for "a" with the SCAN_PAST convention.
        let mut hi = b"a".to_vec();
        hi.extend_from_slice(&SCAN_PAST);
        assert_eq!(keys(store, Family::AlgG, b"a", &hi).len(), 4);
        // Bounds between keys.
        assert_eq!(
            keys(store, Family::AlgG, b"aa", b"b\x00"),
            vec![b"ab".to_vec(), b"abc".to_vec(), b"b".to_vec()]
        );
        // Empty and inverted ranges.
        assert!(keys(store, Family::AlgG, b"a", b"a").is_empty());
        assert!(keys(store, Family::AlgG, b"b", b"a").is_empty());
        // Values come with their keys.
        let kv = collect(store, Family::AlgG, b"abc", b"abd");
        assert_eq!(kv, vec![(b"abc".to_vec(), vec![3u8])]);

        // Early stop.
        let mut seen = Vec::new();
        store
            .scan(Family::AlgG, b"", &[0xff; 4], &mut |k, _| {
                seen.push(k.to_vec());
                seen.len() < 3
            })
            .unwrap();
        assert_eq!(seen, expected[..3].to_vec());
    }

    fn isolation(store: &dyn Store) {
        let mut b = Batch::default();
        for f in Family::ALL {
            b.put(f, b"shared", f.name().as_bytes());
        }
        store.write(b).unwrap();
        for f in Family::ALL {
            assert_eq!(
                store.get(f, b"shared").unwrap(),
                Some(f.name().as_bytes().to_vec())
            );
        }
        let mut b = Batch::default();
        b.delete(Family::AlgH, b"shared");
        store.write(b).unwrap();
        assert_eq!(store.get(Family::AlgH, b"shared").unwrap(), None);
        assert!(keys(store, Family::AlgH, b"", b"\xff").is_empty());
        for f in Family::ALL {
            if f != Family::AlgH {
                assert!(store.get(f, b"shared").unwrap().is_some(), "{f:?}");
            }
        }
        assert_eq!(keys(store, Family::Ids, b"shared", b"shared\x00").len(), 1);
    }

    fn maintenance(store: &dyn Store) {
        let mut b = Batch::default();
        for i in 0u32..100 {
            b.put(Family::Docs, &i.to_be_bytes(), b"value");
        }
        store.write(b).unwrap();
        store.flush().unwrap();
        store.compact().unwrap();
        let stats = store.family_stats(Family::Docs).unwrap();
        assert!(stats.keys > 0 && stats.bytes > 0, "{stats:?}");
        assert_eq!(
            keys(store, Family::Docs, &[0; 4], &[0, 0, 0, 100]).len(),
            100
        );
    }

    /// The shared suite, run against every implementation.
    fn suite(store: &dyn Store) {
        put_get_delete(store);
        batch_order(store);
        batch_atomicity(store);
        scans(store);
        isolation(store);
        maintenance(store);
    }

    #[test]
    fn memory_store_suite() {
        suite(&MemoryStore::new());
    }

    #[test]
    fn rocks_store_suite() {
        let dir = tempfile::tempdir().unwrap();
        let store = RocksStore::open(&dir.path().join("db")).unwrap();
        assert_eq!(store.path(), dir.path().join("db"));
        suite(&store);
    }

    #[test]
    fn memory_store_stats_are_exact() {
        let store = MemoryStore::new();
        let mut b = Batch::default();
        b.put(Family::Ids, b"ab", b"cde");
        b.put(Family::Ids, b"x", b"");
        store.write(b).unwrap();
        let stats = store.family_stats(Family::Ids).unwrap();
        assert_eq!(stats, FamilyStats { keys: 2, bytes: 6 });
        assert_eq!(
            store.family_stats(Family::Docs).unwrap(),
            FamilyStats::default()
        );
    }

    #[test]
    fn rocks_store_reopen_keeps_data() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = RocksStore::open(dir.path()).unwrap();
            let mut b = Batch::default();
            b.put(Family::Meta, b"version", b"1");
            b.put(Family::AlgH, b"k", b"v");
            store.write(b).unwrap();
        }
        let store = RocksStore::open(dir.path()).unwrap();
        assert_eq!(
            store.get(Family::Meta, b"version").unwrap(),
            Some(b"1".to_vec())
        );
        assert_eq!(store.get(Family::AlgH, b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(store.get(Family::AlgG, b"k").unwrap(), None);
    }

    /// A buffered write reaches the log's file, where a process that follows the store (and
    /// a restart after the writer's death) reads it, only once `flush_wal` has returned; the
    /// writer itself reads it at once; a plain write is in the file on return.
    #[test]
    fn rocks_store_log_is_written_out_by_flush_wal() {
        let dir = tempfile::tempdir().unwrap();
        let primary = RocksStore::open(&dir.path().join("db")).unwrap();
        let mut b = Batch::new();
        b.put(Family::Docs, b"k1", b"v1");
        primary.write_buffered(b).unwrap();
        assert_eq!(
            primary.get(Family::Docs, b"k1").unwrap(),
            Some(b"v1".to_vec())
        );
        let follower =
            RocksStore::open_secondary(&dir.path().join("db"), &dir.path().join("own"), 1 << 20)
                .unwrap();
        follower.catch_up().unwrap();
        assert_eq!(follower.get(Family::Docs, b"k1").unwrap(), None);
        primary.flush_wal().unwrap();
        follower.catch_up().unwrap();
        assert_eq!(
            follower.get(Family::Docs, b"k1").unwrap(),
            Some(b"v1".to_vec())
        );
        // a plain write is in the file on return
        let mut b = Batch::new();
        b.put(Family::Meta, b"k2", b"v2");
        primary.write(b).unwrap();
        follower.catch_up().unwrap();
        assert_eq!(
            follower.get(Family::Meta, b"k2").unwrap(),
            Some(b"v2".to_vec())
        );
        // a follower writes nothing, its flush_wal included
        follower.flush_wal().unwrap();
    }

    #[test]
    fn family_names_and_indices() {
        for (i, f) in Family::ALL.into_iter().enumerate() {
            assert_eq!(f.index(), i);
        }
        let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names, ["meta", "docs", "ids", "alg_g", "alg_h", "stage"]);
    }

    #[test]
    fn batch_ops_roundtrip() {
        let mut b = Batch::new();
        assert!(b.is_empty());
        b.put(Family::Docs, b"k1", b"v1");
        b.delete(Family::Ids, b"k2");
        let ops: Vec<BatchOp<'_>> = b.ops().collect();
        assert_eq!(
            ops,
            vec![
                BatchOp::Put {
                    family: Family::Docs,
                    key: b"k1",
                    value: b"v1"
                },
                BatchOp::Delete {
                    family: Family::Ids,
                    key: b"k2"
                },
            ]
        );
        b.clear();
        assert!(b.is_empty());
    }

    #[test]
    fn decode_helpers_report_corruption() {
        assert_eq!(read_u64(&[0, 0, 0, 0, 0, 0, 0, 0, 7], 1, "x").unwrap(), 7);
        assert!(matches!(
            read_u64(&[1, 2, 3], 0, "x"),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(
            read_u64(&[0; 8], 4, "x"),
            Err(StoreError::Corrupt(_))
        ));
        assert!(check_len(&[0; 4], 4, "x").is_ok());
        assert!(matches!(
            check_len(&[0; 3], 4, "x"),
            Err(StoreError::Corrupt(_))
        ));
    }
}
