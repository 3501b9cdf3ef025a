//! Bringing the in-memory structures up and writing them down: the exact-Jaccard lists and
//! the document frequencies, from their snapshots beside the database when those are
//! usable, and from the `docs` family (their durable copy) for the rest; alg.G's and
//! alg.H's tables from the `fingerprints` family.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{
    freq, lists, software, Batch, Column, DecisionKind, DocRecord, Index, IndexError, ListsRestore,
    LISTS_SNAPSHOT,
};

impl Index {
    /// Path of the lists snapshot, for an index on disk with lists.
    pub(super) fn snapshot_path(&self) -> Option<PathBuf> {
        self.lists.as_ref()?;
        Some(self.store.dir()?.join(LISTS_SNAPSHOT))
    }

    /// Path of the frequencies snapshot, for an index on disk that counts them.
    pub(super) fn freq_snapshot_path(&self) -> Option<PathBuf> {
        self.freq.as_ref()?;
        Some(self.store.dir()?.join(freq::SNAPSHOT))
    }

    /// Path of the software-text snapshot, for an index on disk that keeps the counts.
    pub(super) fn software_snapshot_path(&self) -> Option<PathBuf> {
        self.software.as_ref()?;
        Some(self.store.dir()?.join(software::SNAPSHOT))
    }

    /// Brings up the software-text counts ([`software`]): from the snapshot when there is a
    /// usable one, then every document numbered from the snapshot's `next_doc` on (all of
    /// them without one), in document order, as they were counted when decided.
    pub(super) fn restore_software(&mut self, stop: &AtomicBool) -> Result<(), IndexError> {
        if self.software.is_none() {
            return Ok(());
        }
        let mut from = 0;
        if let Some(path) = self.software_snapshot_path().filter(|p| p.exists()) {
            // a snapshot not usable is counted again from the documents, as without one
            let growing = self.params.signature.host_text();
            if let Ok((loaded, stamp)) = software::load(&path, growing) {
                if stamp.epoch == self.epoch && stamp.next_doc <= self.next_doc {
                    self.software = Some(loaded);
                    self.software_saved = Some(stamp);
                    from = stamp.next_doc;
                }
            }
        }
        self.count_software(from, stop)
    }

    /// Counts every stored document numbered `from` or higher in the software-text counts,
    /// in document order.
    fn count_software(&mut self, from: u64, stop: &AtomicBool) -> Result<(), IndexError> {
        let tagged = self.params.signature.host_text();
        let Some(counts) = self.software.as_mut() else {
            return Ok(());
        };
        let (mut err, mut seen) = (None, 0u32);
        let mut blocks = Vec::new();
        self.store.scan(
            Column::Docs,
            &from.to_be_bytes(),
            &[0xff; 9],
            &mut |_, v| {
                seen = seen.wrapping_add(1);
                if seen % 4096 == 0 && stop.load(Ordering::Relaxed) {
                    err = Some(IndexError::Interrupted);
                    return false;
                }
                match DocRecord::decode_counted(v, &mut blocks) {
                    Ok((url, fp64)) => {
                        let counted = crate::signature::software::counted(&blocks, tagged);
                        counts.observe(freq::host_hash(url), fp64, counted);
                        true
                    }
                    Err(e) => {
                        err = Some(e);
                        false
                    }
                }
            },
        )?;
        err.map_or(Ok(()), Err)
    }

    /// Counts the software text again over the documents in `docs`, in document order
    /// (after some were removed: the counts must be what a rebuild after a restart gives).
    pub(super) fn recount_software(&mut self) -> Result<(), IndexError> {
        if self.software.is_none() {
            return Ok(());
        }
        self.software = Some(software::SoftwareText::for_rules(
            self.params.signature.host_text(),
        ));
        // every document below the lowest number stored is gone (a cap's trims)
        self.count_software(self.earliest.low(), &AtomicBool::new(false))
    }

    /// Brings up the in-memory lists: from the snapshot when there is a usable one, then
    /// the unique documents numbered from the snapshot's `next_doc` on (all of them without
    /// one), in document order.
    pub(super) fn restore_lists(&mut self, stop: &AtomicBool) -> Result<(), IndexError> {
        let Some(lists) = self.lists.as_ref() else {
            return Ok(());
        };
        let t = std::time::Instant::now();
        let (tau, filter) = (lists.tau(), lists.count_filter());
        let mut from = 0;
        let mut from_snapshot = false;
        let mut refused = None;
        if let Some(path) = self.snapshot_path().filter(|p| p.exists()) {
            match lists::Lists::load(&path, tau, filter) {
                Ok((loaded, stamp)) if stamp.epoch != self.epoch => {
                    drop(loaded);
                    refused = Some(
                        "documents were removed after it was taken (another epoch)".to_string(),
                    );
                }
                Ok((loaded, stamp)) if stamp.next_doc > self.next_doc => {
                    drop(loaded);
                    refused = Some(format!(
                        "it holds documents up to {} and the index only up to {}",
                        stamp.next_doc, self.next_doc
                    ));
                }
                Ok((loaded, stamp)) => {
                    self.lists = Some(loaded);
                    self.lists_saved = Some((stamp.epoch, stamp.next_doc));
                    from = stamp.next_doc;
                    from_snapshot = true;
                }
                Err(e) => refused = Some(format!("{}: {e}", path.display())),
            }
        }
        let (freq_from, freq_refused) = self.restore_freq();
        let replayed = self.rebuild_lists(from, freq_from, stop)?;
        self.restore = Some(ListsRestore {
            from_snapshot,
            replayed,
            replayed_from: from,
            snapshot_refused: refused,
            freq_from_snapshot: self.freq.is_some() && freq_from > 0,
            freq_snapshot_refused: freq_refused,
            seconds: t.elapsed().as_secs_f64(),
        });
        Ok(())
    }

    /// Brings up alg.G's or alg.H's tables from the `fingerprints` family. An index made
    /// before format 6 (`older`) first gets that family from its unique documents' records,
    /// and its tables on disk (`alg_g`, `alg_h`) are emptied.
    pub(super) fn fill_tables(&mut self, older: bool, stop: &AtomicBool) -> Result<(), IndexError> {
        if self.tables.is_none() {
            return Ok(());
        }
        if older {
            self.fingerprints_from_docs(stop)?;
        }
        let words = self.tables.as_ref().map_or(1, |t| t.words());
        let (mut docs, mut fps) = (Vec::new(), Vec::new());
        let (mut seen, mut interrupted, mut err) = (0u32, false, None);
        self.store
            .scan(Column::Fingerprints, &[], &[0xff; 9], &mut |k, v| {
                seen = seen.wrapping_add(1);
                if seen % 4096 == 0 && stop.load(Ordering::Relaxed) {
                    interrupted = true;
                    return false;
                }
                let (Ok(num), true) = (<[u8; 8]>::try_from(k), v.len() == 8 * words) else {
                    err = Some(IndexError::Corrupt(format!(
                        "fingerprints entry of {} key and {} value bytes, expected 8 and {}",
                        k.len(),
                        v.len(),
                        8 * words
                    )));
                    return false;
                };
                docs.push(u64::from_be_bytes(num));
                fps.extend(
                    v.chunks_exact(8)
                        .map(|c| u64::from_be_bytes(c.try_into().expect("chunks of 8 bytes"))),
                );
                true
            })?;
        if interrupted {
            return Err(IndexError::Interrupted);
        }
        if let Some(e) = err {
            return Err(e);
        }
        if let Some(t) = self.tables.as_mut() {
            t.extend(&docs, &fps)?;
        }
        Ok(())
    }

    /// Writes the `fingerprints` family of an index made before format 6 from its unique
    /// documents' records, and empties the `alg_g` and `alg_h` families it no longer reads.
    fn fingerprints_from_docs(&mut self, stop: &AtomicBool) -> Result<(), IndexError> {
        // written as it is read, 4,096 at a time: the migration's memory stays bounded
        let store = &self.store;
        let mut b = Batch::default();
        let (mut pending, mut err) = (0usize, None);
        store.scan(Column::Docs, &[], &[0xff; 9], &mut |k, v| {
            if stop.load(Ordering::Relaxed) {
                err = Some(IndexError::Interrupted);
                return false;
            }
            match DocRecord::decode(v) {
                Ok(rec) if rec.decision.kind == DecisionKind::Unique => {
                    b.put(
                        Column::Fingerprints,
                        k,
                        &super::fptables::encode(&rec.fingerprint),
                    );
                    pending += 1;
                    if pending == 4096 {
                        pending = 0;
                        if let Err(e) = store.write(std::mem::take(&mut b)) {
                            err = Some(e.into());
                            return false;
                        }
                    }
                    true
                }
                Ok(_) => true,
                Err(e) => {
                    err = Some(e);
                    false
                }
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        store.write(b)?;
        for family in [Column::AlgG, Column::AlgH] {
            loop {
                let mut b = Batch::default();
                let mut n = 0;
                self.store.scan(family, &[], &[0xff; 19], &mut |k, _| {
                    b.delete(family, k);
                    n += 1;
                    n < 65_536
                })?;
                if n == 0 {
                    break;
                }
                self.store.write(b)?;
            }
        }
        Ok(())
    }

    /// Reads the frequencies snapshot when there is a usable one; returns the first document
    /// it does not count (0 without one) and why a snapshot present was refused.
    fn restore_freq(&mut self) -> (u64, Option<String>) {
        let Some(path) = self.freq_snapshot_path().filter(|p| p.exists()) else {
            return (0, None);
        };
        match freq::load(&path, freq::DEFAULT_WIDTH_LOG2) {
            Ok((_, stamp)) if stamp.epoch != self.epoch => (
                0,
                Some("documents were removed after it was taken (another epoch)".into()),
            ),
            Ok((_, stamp)) if stamp.next_doc > self.next_doc => (
                0,
                Some(format!(
                    "it counts documents up to {} and the index only has them up to {}",
                    stamp.next_doc, self.next_doc
                )),
            ),
            Ok((f, stamp)) => {
                self.freq = Some(f);
                (stamp.next_doc, None)
            }
            Err(e) => (0, Some(format!("{}: {e}", path.display()))),
        }
    }

    /// How the lists were brought up when the index was opened (`None` without lists).
    pub fn lists_restore(&self) -> Option<&ListsRestore> {
        self.restore.as_ref()
    }

    /// Writes a copy of the index as it is now to the new directory `dst`, which then opens
    /// as this index at its present stamp ([`Index::stamp`]): the database's checkpoint
    /// (its table files hard links where the file system allows, so a copy costs little but
    /// the files the database later compacts away), and beside it the snapshots of the
    /// lists, the document frequencies and the software-text counts as they are in memory.
    /// The index stays open and unchanged; its own snapshots are not touched.
    pub fn checkpoint_to(&mut self, dst: &std::path::Path) -> Result<(), IndexError> {
        self.settle_software()?;
        self.store.flush()?;
        self.store.checkpoint_to(dst)?;
        let written = |what: &str, path: &std::path::Path, r: std::io::Result<()>| {
            r.map_err(|e| IndexError::Corrupt(format!("writing {what} {}: {e}", path.display())))
        };
        let (epoch, next_doc) = (self.epoch, self.next_doc);
        if let Some(l) = self.lists.as_ref() {
            let path = dst.join(LISTS_SNAPSHOT);
            let stamp = lists::snapshot::Stamp { epoch, next_doc };
            written("the lists snapshot", &path, l.save(&path, stamp))?;
        }
        let stamp = freq::Stamp { epoch, next_doc };
        if let Some(f) = self.freq.as_ref() {
            let path = dst.join(freq::SNAPSHOT);
            written(
                "the frequencies snapshot",
                &path,
                freq::save(f, &path, stamp),
            )?;
        }
        if let Some(sw) = self.software.as_ref() {
            let path = dst.join(software::SNAPSHOT);
            written(
                "the software-text snapshot",
                &path,
                software::save(sw, &path, stamp),
            )?;
        }
        Ok(())
    }

    /// Writes the lists snapshot beside the database (after flushing it), so that the next
    /// open reads the lists instead of rebuilding them; returns its path, or `None` for an
    /// index without lists or not on disk. Call it at a clean shutdown: a snapshot stays
    /// usable while documents are only added (the newer ones are entered from `docs` when
    /// it is read), and is set aside by the first removal.
    pub fn save_lists(&mut self) -> Result<Option<PathBuf>, IndexError> {
        self.settle_software()?;
        if let (Some(s), Some(spath)) = (self.software.as_ref(), self.software_snapshot_path()) {
            let stamp = freq::Stamp {
                epoch: self.epoch,
                next_doc: self.next_doc,
            };
            // the file on disk already holds these counts: nothing was counted since
            if self.software_saved != Some(stamp) || !spath.exists() {
                self.store.flush()?;
                software::save(s, &spath, stamp).map_err(|e| {
                    IndexError::Corrupt(format!("writing {}: {e}", spath.display()))
                })?;
                self.software_saved = Some(stamp);
            }
        }
        let Some(path) = self.snapshot_path() else {
            return Ok(None);
        };
        self.store.flush()?;
        let stamp = lists::snapshot::Stamp {
            epoch: self.epoch,
            next_doc: self.next_doc,
        };
        // the file on disk already holds these lists: nothing was entered since
        let unchanged = self.lists_saved == Some((stamp.epoch, stamp.next_doc)) && path.exists();
        if let (Some(l), false) = (self.lists.as_ref(), unchanged) {
            l.save(&path, stamp)
                .map_err(|e| IndexError::Corrupt(format!("writing {}: {e}", path.display())))?;
            self.lists_saved = Some((stamp.epoch, stamp.next_doc));
        }
        if let (Some(f), Some(fpath)) = (self.freq.as_ref(), self.freq_snapshot_path()) {
            let fstamp = freq::Stamp {
                epoch: self.epoch,
                next_doc: self.next_doc,
            };
            freq::save(f, &fpath, fstamp)
                .map_err(|e| IndexError::Corrupt(format!("writing {}: {e}", fpath.display())))?;
        }
        Ok(Some(path))
    }

    /// Counts the document frequencies again over the unique documents in `docs`, in
    /// document order (after retention removed some: taking a page out of aged counters
    /// would take out more than it left in them, and the counts must be what a rebuild
    /// after a restart gives).
    pub(super) fn recount_freq(&mut self) -> Result<(), IndexError> {
        self.freq = Some(freq::Freq::default());
        self.rebuild_lists(u64::MAX, 0, &AtomicBool::new(false))
            .map(|_| ())
    }

    /// Enters every stored unique document numbered `from` or higher in the in-memory
    /// lists, and counts those numbered `freq_from` or higher in the document frequencies,
    /// in document order; returns how many were entered in the lists.
    fn rebuild_lists(
        &mut self,
        from: u64,
        freq_from: u64,
        stop: &AtomicBool,
    ) -> Result<u64, IndexError> {
        let Some(lists) = self.lists.as_mut() else {
            return Ok(0);
        };
        let mut freq = self.freq.as_mut();
        let start = match freq {
            Some(_) => from.min(freq_from),
            None => from,
        };
        let min_signatures = self.params.min_signatures as usize;
        let mut err = None;
        let mut set = Vec::new();
        let mut seen = 0u32;
        let mut entered = 0u64;
        self.store.scan(
            Column::Docs,
            &start.to_be_bytes(),
            &[0xff; 9],
            &mut |k, v| {
                seen = seen.wrapping_add(1);
                if seen % 4096 == 0 && stop.load(Ordering::Relaxed) {
                    err = Some(IndexError::Interrupted);
                    return false;
                }
                let num = match <[u8; 8]>::try_from(k) {
                    Ok(n) => u64::from_be_bytes(n),
                    Err(_) => {
                        err = Some(IndexError::Corrupt("docs key".into()));
                        return false;
                    }
                };
                if let Some(f) = freq.as_deref_mut().filter(|_| num >= freq_from) {
                    match DocRecord::decode(v) {
                        Ok(rec) if rec.decision.kind == DecisionKind::Unique => {
                            f.add(freq::host_hash(&rec.url), rec.matched_sigs().hashes());
                        }
                        Ok(_) => {}
                        Err(e) => {
                            err = Some(e);
                            return false;
                        }
                    }
                }
                if num < from {
                    return true;
                }
                match DocRecord::decode_unique_sigs(v, min_signatures, &mut set) {
                    Ok(true) => {
                        if let Err(e) = lists.insert(&set, num) {
                            err = Some(IndexError::Corrupt(e.to_string()));
                            return false;
                        }
                        entered += 1;
                        true
                    }
                    Ok(false) => true,
                    Err(e) => {
                        err = Some(e);
                        false
                    }
                }
            },
        )?;
        match err {
            Some(e) => Err(e),
            None => Ok(entered),
        }
    }
}
