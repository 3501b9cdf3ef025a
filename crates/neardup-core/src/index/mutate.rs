//! Removing documents (the retention window, a changelog's tombstones), the journal of
//! mutations a decider sends to its changelog, and storing a restored document under the
//! number it had.
//!
//! The journal is how the index tells its driver what changed without knowing where it
//! goes: with journaling on, every stored document ([`Mutation::Put`], the record bytes as
//! stored) and every removed one ([`Mutation::Delete`]) is appended, in order, until the
//! driver takes them ([`Index::take_journal`]).

use super::changes::Mutation;
use super::docs::{Decision, DecisionKind, DocRecord};
use super::earliest::Earliest;
use super::error::IndexError;
use super::format::{new_epoch, META_LISTS_EPOCH};
use super::store::{Batch, Column};
use super::Index;

impl Index {
    /// Turns the journal on or off (off drops what it holds).
    pub fn set_journal(&mut self, on: bool) {
        self.journal = on.then(Vec::new);
    }

    /// The mutations since the last call, in order (none while journaling is off).
    pub fn take_journal(&mut self) -> Vec<Mutation> {
        self.journal
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The next internal document number (every number below it was given out once).
    pub fn next_doc(&self) -> u64 {
        self.next_doc
    }

    /// The stored documents numbered `from` on, in number order, as [`Mutation::Put`]s
    /// (what a journal held when they were stored); `f` returns false to stop.
    pub fn stored_from(
        &self,
        from: u64,
        f: &mut dyn FnMut(Mutation) -> bool,
    ) -> Result<(), IndexError> {
        let mut err = None;
        self.store.scan(
            Column::Docs,
            &from.to_be_bytes(),
            &[0xff; 9],
            &mut |k, v| {
                let Ok(num) = <[u8; 8]>::try_from(k).map(u64::from_be_bytes) else {
                    err = Some(IndexError::Corrupt("docs key".into()));
                    return false;
                };
                match DocRecord::decode(v) {
                    Ok(rec) => f(Mutation::Put {
                        num,
                        id: rec.id,
                        record: v.to_vec(),
                    }),
                    Err(e) => {
                        err = Some(e);
                        false
                    }
                }
            },
        )?;
        err.map_or(Ok(()), Err)
    }

    /// Stores a document of a changelog under the number it had (or, when that number is
    /// taken by now, the next one). Returns false when its id is already stored under that
    /// number; stored under another, the id was removed and decided again since, and this
    /// record replaces it.
    pub fn restore_put(&mut self, num: u64, rec: &DocRecord) -> Result<bool, IndexError> {
        if let Some((stored, had)) = super::reader::find_id(self.store.as_ref(), &rec.id)? {
            if stored == num {
                // the record of a shard's page stored as unique, then decided otherwise
                // ([`Index::demote`]): the same change here
                if had.decision.kind == DecisionKind::Unique
                    && rec.decision.kind != DecisionKind::Unique
                {
                    return self.demote(&rec.id, rec.decision.clone());
                }
                return Ok(false);
            }
            // the id was removed and decided again since (a follower of a compacted
            // changelog may never see the tombstone between): the later record replaces it
            self.remove_id(&rec.id)?;
        }
        if num > self.next_doc {
            self.next_doc = num;
        }
        self.put(rec)?;
        Ok(true)
    }

    /// A document stored as unique that was decided otherwise after it was stored (a shard
    /// of a sharded decider stores the pages it owns before the aggregator decides them,
    /// [`crate::dedup::sharded`]): its index entries leave and its record is stored again
    /// with `decision` and its own signatures (its canonical page may be another shard's,
    /// so no delta from it). The software-text counts, which counted it when it was stored,
    /// stay as they are (they count every page decided). A lists snapshot taken before is
    /// of no use from now on. The journal gets the new record, which a follower's
    /// [`Index::restore_put`] applies the same way. Returns false when there is no such
    /// unique document.
    pub fn demote(&mut self, id: &str, decision: Decision) -> Result<bool, IndexError> {
        let Some((num, rec)) = super::reader::find_id(self.store.as_ref(), id)? else {
            return Ok(false);
        };
        if rec.decision.kind != DecisionKind::Unique || decision.kind == DecisionKind::Unique {
            return Ok(false);
        }
        // the lists change: a lists snapshot taken before is of no use from now on
        let mut b = Batch::default();
        self.fresh_epoch(self.snapshot_path().into_iter(), &mut b)?;
        self.index_entries(&mut b, &rec, num, false)?;
        let demoted = DocRecord {
            decision,
            ..rec.clone()
        };
        let bytes = demoted.encode_with(true);
        b.put(Column::Docs, &num.to_be_bytes(), &bytes);
        self.store.write_buffered(b)?;
        let gone = (num, rec);
        self.forget(&[&gone]);
        if let Some(j) = self.journal.as_mut() {
            j.push(Mutation::Put {
                num,
                id: gone.1.id,
                record: bytes,
            });
        }
        Ok(true)
    }

    /// Removes the document with this id, with its index entries. Returns false when there
    /// is none.
    pub fn remove_id(&mut self, id: &str) -> Result<bool, IndexError> {
        let Some((num, rec)) = super::reader::find_id(self.store.as_ref(), id)? else {
            return Ok(false);
        };
        Ok(self.remove(vec![(num, rec)])? == 1)
    }

    /// Removes every document first seen before `cutoff` (Unix seconds), with its index
    /// entries. Returns how many were removed. Reads only the stored documents whose block
    /// of numbers may hold one ([`super::earliest`]).
    pub fn expire(&mut self, cutoff: i64) -> Result<u64, IndexError> {
        let ranges = self.earliest.before(cutoff);
        let mut expired: Vec<(u64, DocRecord)> = Vec::new();
        let mut stay = Earliest::default();
        let mut err = None;
        for &(from, to) in &ranges {
            // the last range is open: every key after its start
            let end = if to == u64::MAX {
                vec![0xff; 9]
            } else {
                to.to_be_bytes().to_vec()
            };
            self.store
                .scan(Column::Docs, &from.to_be_bytes(), &end, &mut |k, v| match (
                    <[u8; 8]>::try_from(k),
                    DocRecord::decode_first_seen(v),
                ) {
                    (Ok(num), Ok(seen)) => {
                        let num = u64::from_be_bytes(num);
                        if seen < cutoff {
                            match DocRecord::decode(v) {
                                Ok(rec) => expired.push((num, rec)),
                                Err(e) => {
                                    err = Some(e);
                                    return false;
                                }
                            }
                        } else {
                            stay.stored(num, seen);
                        }
                        true
                    }
                    (_, Err(e)) => {
                        err = Some(e);
                        false
                    }
                    (Err(_), _) => {
                        err = Some(IndexError::Corrupt("docs key".into()));
                        false
                    }
                })?;
            if let Some(e) = err {
                return Err(e);
            }
        }
        let removed = self.remove(expired)?;
        // the blocks read hold only what stays (a failed removal keeps the bounds they had)
        self.earliest.read(&ranges, stay);
        Ok(removed)
    }

    /// How many pages (stored ids) the index holds.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Removes the oldest documents (the lowest numbers: the earliest decided) until the
    /// index holds at most `keep` pages. Returns how many documents were removed.
    pub fn trim_oldest(&mut self, keep: u64) -> Result<u64, IndexError> {
        if self.pages <= keep {
            return Ok(0);
        }
        let mut over = self.pages - keep;
        let mut oldest: Vec<(u64, DocRecord)> = Vec::new();
        let mut err = None;
        let store = std::sync::Arc::clone(&self.store);
        // not over the numbers removed before (a key removed is passed over until the
        // store compacts it away)
        let from = self.earliest.low();
        store.scan(
            Column::Docs,
            &from.to_be_bytes(),
            &[0xff; 9],
            &mut |k, v| {
                let (Ok(num), Ok(rec)) = (<[u8; 8]>::try_from(k), DocRecord::decode(v)) else {
                    err = Some(IndexError::Corrupt("docs key or record".into()));
                    return false;
                };
                let num = u64::from_be_bytes(num);
                // a document whose id was decided again since is not a page of its own
                match self.store.get(Column::Ids, rec.id.as_bytes()) {
                    Ok(Some(cur)) if cur == num.to_be_bytes() => over -= 1,
                    Ok(_) => {}
                    Err(e) => {
                        err = Some(e.into());
                        return false;
                    }
                }
                oldest.push((num, rec));
                over > 0
            },
        )?;
        if let Some(e) = err {
            return Err(e);
        }
        // every document up to the last one read goes
        let below = oldest.last().map(|(num, _)| num + 1);
        let removed = self.remove(oldest)?;
        if let Some(below) = below {
            self.earliest.removed_below(below);
        }
        Ok(removed)
    }

    /// Removes the snapshots at `paths` (taken of what is about to change) and gives the
    /// index a new lists epoch, written with `b`, so that no snapshot taken before is used.
    fn fresh_epoch(
        &mut self,
        paths: impl Iterator<Item = std::path::PathBuf>,
        b: &mut Batch,
    ) -> Result<(), IndexError> {
        for path in paths {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(IndexError::Corrupt(format!(
                        "removing {}: {e}",
                        path.display()
                    )))
                }
            }
        }
        self.epoch = new_epoch();
        b.put(Column::Meta, META_LISTS_EPOCH, &self.epoch.to_be_bytes());
        Ok(())
    }

    /// Removes these documents (number, record) from the store, in one write, with their
    /// stored index entries and their ids (unless decided again since).
    fn remove_stored(&mut self, chunk: &[(u64, DocRecord)]) -> Result<(), IndexError> {
        let mut b = Batch::default();
        let mut removed_ids = Vec::new();
        for (num, rec) in chunk {
            if rec.decision.kind == DecisionKind::Unique {
                self.index_entries(&mut b, rec, *num, false)?;
            }
            b.delete(Column::Docs, &num.to_be_bytes());
            // the id may since have been re-decided under a newer number
            if let Some(cur) = self.store.get(Column::Ids, rec.id.as_bytes())? {
                if cur == num.to_be_bytes() {
                    b.delete(Column::Ids, rec.id.as_bytes());
                    removed_ids.push(rec.id.clone());
                }
            }
        }
        self.store.write(b)?;
        self.pages = self.pages.saturating_sub(removed_ids.len() as u64);
        if let Some(j) = self.journal.as_mut() {
            j.extend(removed_ids.into_iter().map(|id| Mutation::Delete { id }));
        }
        Ok(())
    }

    /// Removes these documents (number, record) with their index entries.
    fn remove(&mut self, docs: Vec<(u64, DocRecord)>) -> Result<u64, IndexError> {
        let n = docs.len() as u64;
        // a page without short blocks added nothing to the software-text counts
        let counted = docs.iter().any(|(_, rec)| !rec.blocks.is_empty());
        if n > 0 {
            // a snapshot of the lists as they were is of no use from now on
            let paths = (self.snapshot_path().into_iter())
                .chain(self.freq_snapshot_path())
                .chain(self.software_snapshot_path());
            let mut b = Batch::default();
            self.fresh_epoch(paths, &mut b)?;
            self.store.write(b)?;
        }
        // the store a chunk at a time; the memory once, for the chunks the store took (many
        // documents leave the lists in one pass over them)
        let mut written = 0;
        let mut failed = None;
        for chunk in docs.chunks(256) {
            match self.remove_stored(chunk) {
                Ok(()) => written += chunk.len(),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let listed: Vec<&(u64, DocRecord)> = docs[..written]
            .iter()
            .filter(|(_, rec)| rec.decision.kind == DecisionKind::Unique)
            .collect();
        self.forget(&listed);
        if let Some(e) = failed {
            return Err(e);
        }
        if n > 0 && self.freq.is_some() {
            self.recount_freq()?;
        }
        // the fingerprints of the removed ids stay in the set until it is filled again:
        // once they are as many as the ids stored, it is filled from the ids that stay
        if n > 0 && self.ids.len() as u64 > 2 * self.pages + 65_536 {
            self.fill_ids(&std::sync::atomic::AtomicBool::new(false))?;
        }
        // counted again from the documents that stay, once, before the counts are next used
        self.software_stale |= counted && self.software.is_some();
        Ok(n)
    }
}
