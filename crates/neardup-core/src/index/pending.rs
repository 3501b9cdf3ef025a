//! Decisions not yet confirmed by the driver: what lets an index be brought back to the state
//! of the driver's last commit after a crash.
//!
//! A driver that publishes decisions in transactions (the stage with exactly-once) marks each
//! decision with its input's position before deciding ([`Index::mark_pending`]), and clears
//! the marks its commits covered ([`Index::clear_pending`]). After a crash, the documents
//! stored under marks that no commit covered are removed ([`Index::undo_pending`]), so the
//! index holds exactly what the committed outputs announced, and the records after the last
//! commit are decided again as they were the first time.
//!
//! A mark is a key of the `meta` family, `txn/` + the driver's position bytes (opaque here),
//! whose value is the next document number at the time of the mark (u64 BE) and the
//! document id. The number tells a document stored by the marked decision (its number is at
//! least that) from one stored before under the same id (a repeated id stores nothing and
//! must not be removed).
//!
//! A driver that also writes the index's mutations to a changelog keeps, with each clearing,
//! the changelog's position after the records its commits covered (`changelog_next`, u64
//! BE, in `meta`). An index that follows that changelog (a standby) is then the changelog
//! below that position plus the documents under marks (less what a retention sweep of an
//! aborted transaction removed): [`Index::rewind_pending`] removes the latter, and reading
//! the changelog on from the position brings the committed ones back under their numbers.

use super::changes::Undone;
use super::error::IndexError;
use super::format::META_NEXT_DOC;
use super::store::{Batch, Column};
use super::{reader, Index};

const PREFIX: &[u8] = b"txn/";
const END: &[u8] = b"txn0"; // '0' follows '/': the first key after every mark
/// The changelog's offset after the records the index holds without a mark.
const CHANGELOG_NEXT: &[u8] = b"changelog_next";

fn key(position: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(PREFIX.len() + position.len());
    k.extend_from_slice(PREFIX);
    k.extend_from_slice(position);
    k
}

impl Index {
    /// Marks the decision about to be made for document `id` with the driver's `position`.
    /// The mark is written to the log before the decision's own write.
    ///
    /// A position marked already keeps its first mark: a record decided twice before a
    /// commit covered it (redelivered after a revocation whose drain failed) stored its
    /// document the first time, under a number at least the first mark's, and the second
    /// decision (a repeated id) stored nothing; a later mark's larger number would keep the
    /// undo from removing that document.
    ///
    /// [`Index::put_marked`] writes the mark with the decision's document instead, in one
    /// write; a decision that stores nothing (a repeated id) then leaves no mark, and none is
    /// needed, since there is nothing to undo.
    pub fn mark_pending(&mut self, position: &[u8], id: &str) -> Result<(), IndexError> {
        let mut b = Batch::with_capacity(PREFIX.len() + position.len() + 8 + id.len(), 1);
        if self.stage_mark(&mut b, position, self.next_doc, id) {
            self.store.write_buffered(b)?;
            self.marked.insert(position.into());
        }
        Ok(())
    }

    /// Adds the mark of `position` (the next document number `num` and `id`) to `b`, unless
    /// the position holds a mark already; returns whether it added it (the caller records
    /// the position in `marked` once `b` is written).
    pub(super) fn stage_mark(&self, b: &mut Batch, position: &[u8], num: u64, id: &str) -> bool {
        if self.marked.contains(position) {
            return false;
        }
        let mut v = Vec::with_capacity(8 + id.len());
        v.extend_from_slice(&num.to_be_bytes());
        v.extend_from_slice(id.as_bytes());
        b.put(Column::Meta, &key(position), &v);
        true
    }

    /// Clears the marks at these positions (their decisions were committed), and records
    /// `changelog_next`, the changelog offset after the records those commits covered, in
    /// the same write.
    pub fn clear_pending<'a>(
        &mut self,
        positions: impl IntoIterator<Item = &'a [u8]>,
        changelog_next: Option<u64>,
    ) -> Result<(), IndexError> {
        let mut b = Batch::default();
        let mut any = false;
        for p in positions {
            // a decision that stored nothing left no mark
            if self.marked.remove(p) {
                b.delete(Column::Meta, &key(p));
                any = true;
            }
        }
        if let Some(n) = changelog_next {
            b.put(Column::Meta, CHANGELOG_NEXT, &n.to_be_bytes());
            any = true;
        }
        if any {
            self.store.write_buffered(b)?;
        }
        Ok(())
    }

    /// The changelog offset after the records this index holds without a mark (`None`:
    /// never recorded).
    pub fn changelog_next(&self) -> Result<Option<u64>, IndexError> {
        match self.store.get(Column::Meta, CHANGELOG_NEXT)? {
            None => Ok(None),
            Some(v) => {
                Ok(Some(u64::from_be_bytes(v.as_slice().try_into().map_err(
                    |_| IndexError::Corrupt("changelog_next".into()),
                )?)))
            }
        }
    }

    /// Records the changelog offset after the records applied to this index (a follower of
    /// the changelog, or a restore from it).
    pub fn set_changelog_next(&mut self, next: u64) -> Result<(), IndexError> {
        let mut b = Batch::with_capacity(CHANGELOG_NEXT.len() + 8, 1);
        b.put(Column::Meta, CHANGELOG_NEXT, &next.to_be_bytes());
        self.store.write_buffered(b)?;
        Ok(())
    }

    /// Removes every document a marked decision stored, committed or not, and numbers the
    /// next document as the first of them would have been: the index is then the changelog
    /// below [`Index::changelog_next`], and the committed ones come back from the changelog
    /// under the numbers they had. Every document a marked decision stored has a number at
    /// least its mark's (a repeated id stores nothing, a sweep only removes), so none from
    /// before the marks is touched.
    pub fn rewind_pending(&mut self) -> Result<Undone, IndexError> {
        let first = self.pending()?.iter().map(|(_, num, _)| *num).min();
        let done = self.undo_pending(&mut |_| false)?;
        if let Some(num) = first {
            if num < self.next_doc {
                let mut b = Batch::with_capacity(META_NEXT_DOC.len() + 8, 1);
                b.put(Column::Meta, META_NEXT_DOC, &num.to_be_bytes());
                self.store.write(b)?;
                self.next_doc = num;
            }
        }
        Ok(done)
    }

    /// The marks, in position order: (position, next document number at the mark, id).
    pub fn pending(&self) -> Result<Vec<(Vec<u8>, u64, String)>, IndexError> {
        let mut out = Vec::new();
        let mut bad = false;
        self.store.scan(Column::Meta, PREFIX, END, &mut |k, v| {
            if v.len() < 8 {
                bad = true;
                return false;
            }
            let num = u64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
            out.push((
                k[PREFIX.len()..].to_vec(),
                num,
                String::from_utf8_lossy(&v[8..]).into_owned(),
            ));
            true
        })?;
        if bad {
            return Err(IndexError::Corrupt("a pending decision's mark".into()));
        }
        Ok(out)
    }

    /// Brings the index back to the driver's last commit: for every mark that `committed`
    /// says no commit covered, the document the marked decision stored is removed (with its
    /// index entries); then every mark is cleared. Written to the log's file on return.
    pub fn undo_pending(
        &mut self,
        committed: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Undone, IndexError> {
        let marks = self.pending()?;
        let mut done = Undone::default();
        // the latest decisions first, so that each removal undoes the last change
        for (position, num, id) in marks.iter().rev() {
            if committed(position) {
                done.committed += 1;
                continue;
            }
            done.uncommitted += 1;
            if let Some((stored, _)) = reader::find_id(self.store.as_ref(), id)? {
                if stored >= *num && self.remove_id(id)? {
                    done.removed += 1;
                }
            }
        }
        let mut b = Batch::default();
        for (position, _, _) in &marks {
            b.delete(Column::Meta, &key(position));
        }
        self.store.write(b)?;
        self.marked.clear();
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Decision, DecisionKind, DocRecord, IndexParams};
    use crate::signature::Signatures;

    fn doc(id: &str, first: u32) -> DocRecord {
        DocRecord {
            id: id.into(),
            url: format!("https://example.org/{id}"),
            first_seen: 1,
            fingerprint: vec![first as u64],
            sigs: Signatures::from_entries((first..first + 40).map(|h| (h, 1)).collect()).unwrap(),
            decision: Decision::plain(DecisionKind::Unique),
            delta: None,
            template: Vec::new(),
            identity: None,
            title: None,
            blocks: Vec::new(),
            software: Vec::new(),
        }
    }

    #[test]
    fn uncommitted_decisions_are_undone_and_committed_or_repeated_ones_stay() {
        let mut ix = Index::memory(IndexParams::default()).unwrap();
        // committed before: a
        ix.mark_pending(b"p0", "a").unwrap();
        ix.put(&doc("a", 1000)).unwrap();
        ix.clear_pending([&b"p0"[..]], Some(7)).unwrap();
        assert_eq!(ix.changelog_next().unwrap(), Some(7));
        // marked, then the process died: b stored, a seen again (repeated: nothing stored),
        // c marked but never stored
        ix.mark_pending(b"p1", "b").unwrap();
        ix.put(&doc("b", 2000)).unwrap();
        ix.mark_pending(b"p2", "a").unwrap();
        ix.mark_pending(b"p3", "c").unwrap();
        // d stored under a mark a commit covered, its mark not yet cleared
        ix.mark_pending(b"o1", "d").unwrap();
        ix.put(&doc("d", 3000)).unwrap();
        assert_eq!(ix.pending().unwrap().len(), 4);
        let done = ix.undo_pending(&mut |p| p.starts_with(b"o")).unwrap();
        assert_eq!(
            done,
            Undone {
                uncommitted: 3,
                removed: 1,
                committed: 1
            }
        );
        assert!(ix.find_id("a").unwrap().is_some(), "a repeated id stays");
        assert!(
            ix.find_id("b").unwrap().is_none(),
            "an uncommitted decision goes"
        );
        assert!(
            ix.find_id("d").unwrap().is_some(),
            "a committed decision stays"
        );
        assert!(ix.pending().unwrap().is_empty());
        // b decided again is found as a candidate as before
        ix.put(&doc("b", 2000)).unwrap();
        assert!(ix.find_id("b").unwrap().is_some());
    }

    #[test]
    fn a_record_decided_twice_before_a_commit_is_undone_from_its_first_decision() {
        let mut ix = Index::memory(IndexParams::default()).unwrap();
        ix.put(&doc("a", 1000)).unwrap();
        // b decided (stored as document 1), then redelivered in the same process after
        // other decisions and decided again: a repeated id, nothing stored
        ix.mark_pending(b"p1", "b").unwrap();
        ix.put(&doc("b", 2000)).unwrap();
        ix.mark_pending(b"p2", "c").unwrap();
        ix.put(&doc("c", 3000)).unwrap();
        ix.mark_pending(b"p1", "b").unwrap();
        assert_eq!(
            ix.pending().unwrap()[0],
            (b"p1".to_vec(), 1, "b".to_string())
        );
        // no commit covered either: both documents go
        let done = ix.undo_pending(&mut |_| false).unwrap();
        assert_eq!((done.uncommitted, done.removed), (2, 2));
        assert!(
            ix.find_id("b").unwrap().is_none(),
            "the first decision is undone"
        );
        assert!(ix.find_id("c").unwrap().is_none());
        assert!(ix.find_id("a").unwrap().is_some());
    }

    #[test]
    fn a_rewind_removes_every_marked_document_and_numbers_from_the_first() {
        let mut ix = Index::memory(IndexParams::default()).unwrap();
        assert_eq!(ix.changelog_next().unwrap(), None);
        ix.put(&doc("a", 1000)).unwrap();
        ix.set_changelog_next(1).unwrap();
        ix.mark_pending(b"p1", "b").unwrap();
        ix.put(&doc("b", 2000)).unwrap();
        ix.mark_pending(b"p2", "a").unwrap();
        ix.mark_pending(b"p3", "c").unwrap();
        ix.put(&doc("c", 3000)).unwrap();
        assert_eq!(ix.next_doc(), 3);
        let done = ix.rewind_pending().unwrap();
        assert_eq!((done.uncommitted, done.removed), (3, 2));
        assert!(ix.find_id("a").unwrap().is_some(), "unmarked: stays");
        assert!(ix.find_id("b").unwrap().is_none() && ix.find_id("c").unwrap().is_none());
        assert_eq!(ix.next_doc(), 1, "the next document takes b's number");
        assert_eq!(ix.changelog_next().unwrap(), Some(1));
        // b, committed, comes back from the changelog under its number
        assert!(ix.restore_put(1, &doc("b", 2000)).unwrap());
        assert_eq!(
            reader::find_id(ix.store.as_ref(), "b")
                .unwrap()
                .map(|(n, _)| n),
            Some(1)
        );
        assert!(ix.rewind_pending().unwrap() == Undone::default());
    }

    #[test]
    fn a_mark_written_with_its_decision_is_read_back_and_undone_alike() {
        let dir = tempfile::tempdir().unwrap();
        let params = IndexParams::default();
        {
            let mut ix = Index::open_dir(dir.path(), params.clone()).unwrap();
            ix.put(&doc("a", 1000)).unwrap();
            // b stored with its mark in one write; the mark names b's number
            assert_eq!(ix.put_marked(&doc("b", 2000), Some(b"p1")).unwrap(), 1);
            assert_eq!(ix.pending().unwrap(), vec![(b"p1".to_vec(), 1, "b".into())]);
            // a position marked already keeps its first mark (b redelivered: repeated)
            ix.mark_pending(b"p1", "b").unwrap();
            assert_eq!(ix.pending().unwrap(), vec![(b"p1".to_vec(), 1, "b".into())]);
            ix.put_marked(&doc("d", 4000), Some(b"p2")).unwrap();
            ix.put_marked(&doc("e", 5000), Some(b"p3")).unwrap();
            // clearing a position that holds no mark (a repeated id's) writes nothing
            ix.clear_pending([&b"p3"[..], &b"p9"[..]], None).unwrap();
            assert_eq!(ix.pending().unwrap().len(), 2);
            ix.flush_wal().unwrap();
        }
        // the process died: the marks are read back at open, and known there
        let mut ix = Index::open_dir(dir.path(), params).unwrap();
        ix.mark_pending(b"p2", "x").unwrap();
        assert_eq!(ix.pending().unwrap()[1], (b"p2".to_vec(), 2, "d".into()));
        let done = ix.undo_pending(&mut |_| false).unwrap();
        assert_eq!((done.uncommitted, done.removed), (2, 2));
        assert!(ix.find_id("b").unwrap().is_none() && ix.find_id("d").unwrap().is_none());
        assert!(ix.find_id("a").unwrap().is_some() && ix.find_id("e").unwrap().is_some());
        // a position cleared by the undo can be marked again
        ix.put_marked(&doc("f", 6000), Some(b"p1")).unwrap();
        assert_eq!(ix.pending().unwrap().len(), 1);
    }
}
