//! The in-memory [`Store`] (tests, small runs).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::api::*;

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
    fn get(&self, family: Column, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.read()[family.index()].get(key).cloned())
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

    fn family_stats(&self, family: Column) -> Result<FamilyStats, StoreError> {
        let tables = self.read();
        let table = &tables[family.index()];
        let bytes = table.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
        Ok(FamilyStats {
            keys: table.len() as u64,
            bytes,
        })
    }
}
