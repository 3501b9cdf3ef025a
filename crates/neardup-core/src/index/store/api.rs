//! What the index asks of a store, and what both stores share: the column families, the
//! batch, the [`Store`] trait, the errors and the key helpers. A leaf of its own, so that the
//! two stores take it from here rather than from their parent, which re-exports it.

use std::path::{Path, PathBuf};

/// RocksDB name of the [`Column::Meta`] column family.
pub const CF_META: &str = "meta";
/// RocksDB name of the [`Column::Docs`] column family.
pub const CF_DOCS: &str = "docs";
/// RocksDB name of the [`Column::Ids`] column family.
pub const CF_IDS: &str = "ids";
/// RocksDB name of the [`Column::AlgG`] column family.
pub const CF_ALG_G: &str = "alg_g";
/// RocksDB name of the [`Column::AlgH`] column family.
pub const CF_ALG_H: &str = "alg_h";
/// RocksDB name of the [`Column::Stage`] column family.
pub const CF_STAGE: &str = "stage";
/// RocksDB name of the [`Column::Fingerprints`] column family.
pub const CF_FINGERPRINTS: &str = "fingerprints";

/// Column families of the index store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    /// Index metadata (parameters, format version, counters).
    Meta,
    /// Per-document records.
    Docs,
    /// External id to document number mapping.
    Ids,
    /// alg.G's tables on disk, before format 6 (emptied when such an index is opened).
    AlgG,
    /// alg.H's tables on disk, before format 6 (emptied when such an index is opened).
    AlgH,
    /// Staging area for the pipeline.
    Stage,
    /// The fingerprints of the unique documents, the durable copy of alg.G's and alg.H's
    /// in-memory tables (`fptables`).
    Fingerprints,
}

impl Column {
    /// Every family, in a fixed order (the order of [`Column::index`]).
    pub const ALL: [Column; 7] = [
        Column::Meta,
        Column::Docs,
        Column::Ids,
        Column::AlgG,
        Column::AlgH,
        Column::Stage,
        Column::Fingerprints,
    ];

    /// The column family name used by RocksDB.
    pub fn name(self) -> &'static str {
        match self {
            Column::Meta => CF_META,
            Column::Docs => CF_DOCS,
            Column::Ids => CF_IDS,
            Column::AlgG => CF_ALG_G,
            Column::AlgH => CF_ALG_H,
            Column::Stage => CF_STAGE,
            Column::Fingerprints => CF_FINGERPRINTS,
        }
    }

    /// Position of the family in [`Column::ALL`].
    pub fn index(self) -> usize {
        match self {
            Column::Meta => 0,
            Column::Docs => 1,
            Column::Ids => 2,
            Column::AlgG => 3,
            Column::AlgH => 4,
            Column::Stage => 5,
            Column::Fingerprints => 6,
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
    /// Number of keys (exact for [`MemoryStore`](super::MemoryStore), an estimate for [`RocksStore`](super::RocksStore)).
    pub keys: u64,
    /// Bytes used in memory ([`MemoryStore`](super::MemoryStore): keys plus values) or on disk plus
    /// memtables ([`RocksStore`](super::RocksStore)).
    pub bytes: u64,
}

/// One operation of a [`Batch`], borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set `key` to `value` in `family`.
    Put {
        /// Target family.
        family: Column,
        /// Key bytes.
        key: &'a [u8],
        /// Value bytes.
        value: &'a [u8],
    },
    /// Remove `key` from `family` (no error if absent).
    Delete {
        /// Target family.
        family: Column,
        /// Key bytes.
        key: &'a [u8],
    },
}

/// Position of one operation inside the batch buffer.
#[derive(Debug, Clone, Copy)]
struct OpRef {
    family: Column,
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
    pub fn put(&mut self, f: Column, key: &[u8], value: &[u8]) {
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
    pub fn delete(&mut self, f: Column, key: &[u8]) {
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
    fn get(&self, family: Column, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Reads many keys of one family at once (one batched lookup in RocksDB).
    fn get_many(&self, family: Column, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
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
        family: Column,
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

    /// Writes a consistent copy of this store, as it is now, to the new directory `dst`
    /// (hard links for the table files where the file system allows), while it stays open:
    /// for a store on disk that this process writes only.
    fn checkpoint_to(&self, dst: &Path) -> Result<(), StoreError> {
        Err(StoreError::Corrupt(format!(
            "a store not on disk has no copy to write to {}",
            dst.display()
        )))
    }

    /// The directory of a store on disk that this process writes, where the index keeps
    /// files beside the database (the lists snapshot); `None` for the in-memory store and
    /// read-only followers.
    fn dir(&self) -> Option<&Path> {
        None
    }

    /// Approximate (number of keys, bytes on disk or in memory) per family, for `index stats`.
    fn family_stats(&self, family: Column) -> Result<FamilyStats, StoreError>;
}
