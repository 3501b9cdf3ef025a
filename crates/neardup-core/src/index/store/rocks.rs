//! The RocksDB [`Store`]: one column family per [`Column`], the log written out on demand
//! for decisions ([`Store::write_buffered`]).

use std::path::{Path, PathBuf};

use rocksdb::{
    BlockBasedOptions, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType, Options,
    ReadOptions, WriteBatch, DB,
};

use super::api::*;

/// RocksDB-backed [`Store`] with one column family per [`Column`].
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
        let mut names: Vec<String> = Column::ALL.iter().map(|f| f.name().to_owned()).collect();
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
        for f in Column::ALL {
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
        // a reader never reads the fingerprints, which an index made before format 6 lacks
        // until a writer opens it
        for f in Column::ALL
            .into_iter()
            .filter(|&f| f != Column::Fingerprints)
        {
            store.cf(f)?;
        }
        Ok(store)
    }

    /// Removes the database at `path` and the directory, once no process has it open (the
    /// database's lock is taken first: refused while another process holds it).
    pub fn destroy(path: &Path) -> Result<(), StoreError> {
        if path.join("CURRENT").exists() {
            DB::destroy(&options(), path)?;
        }
        // (the database's files gone, the directory may be too)
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::CreateDir {
                path: path.to_path_buf(),
                source: e,
            }),
            _ => Ok(()),
        }
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

    fn cf(&self, family: Column) -> Result<&ColumnFamily, StoreError> {
        self.db
            .cf_handle(family.name())
            .ok_or(StoreError::MissingFamily(family.name()))
    }
}

impl Store for RocksStore {
    fn dir(&self) -> Option<&Path> {
        (!self.secondary).then_some(self.path.as_path())
    }

    fn get_many(&self, family: Column, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
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

    fn get(&self, family: Column, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.db.get_cf(self.cf(family)?, key)?)
    }

    fn scan(
        &self,
        family: Column,
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
        // a scan reads each block once (a rebuild, a recount, a sweep): the blocks it reads
        // do not push the ones point reads use out of the cache
        ro.fill_cache(false);
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
        let mut cfs: [Option<&ColumnFamily>; Column::ALL.len()] = [None; Column::ALL.len()];
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
        for f in Column::ALL {
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

    fn checkpoint_to(&self, dst: &Path) -> Result<(), StoreError> {
        if self.secondary {
            return Err(StoreError::Corrupt(format!(
                "a read-only follower writes no copy to {}",
                dst.display()
            )));
        }
        rocksdb::checkpoint::Checkpoint::new(&self.db)?.create_checkpoint(dst)?;
        Ok(())
    }

    fn compact(&self) -> Result<(), StoreError> {
        for f in Column::ALL {
            self.db
                .compact_range_cf(self.cf(f)?, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }

    fn family_stats(&self, family: Column) -> Result<FamilyStats, StoreError> {
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
