//! A decider split by owned pages (`docs/scale-out.md`, "Past one decider"): S shards and
//! one aggregator that decide as one [`Deduplicator`](super::Deduplicator) does over the
//! same order of pages.
//!
//! Near-duplicates cannot be partitioned by key, so the pages are: every shard reads every
//! signed page in stream order and holds the pages whose id hashes to it ([`owner`]). For
//! each page a shard
//! 1. judges it ([`Judged`]) and sends its *votes*: every page it holds that the page is
//!    matched with by the one decider's rules, not only its best ([`Vote`]);
//! 2. stores it if it owns it, before anyone decided it (as unique, *tentatively*: a shard
//!    never waits for the aggregator), and otherwise counts its software text only.
//!
//! The aggregator ([`Aggregator`]) takes every shard's votes for a page, keeps those for
//! pages it decided unique, and decides with the one decider's rule (the highest
//! similarity, then the earliest page; for a page with too little text of its own, the
//! earliest page it is one page with, by the first probe that finds one). The owner of a
//! page decided a duplicate takes it out of its lists when the decision reaches it
//! ([`Shard::decided`]; the Kafka shard reads the duplicate topic for them); until then it
//! is one more vote the aggregator drops.
//!
//! **Why the decisions are the one decider's.** A page's judgement and the set it is
//! matched on depend on the page and on the software-text counts; every shard counts every
//! page in the one order, so every shard's counts are the one decider's. A vote is cast by
//! the rule that decides a pair ([`super::PairRule`], [`super::Keys::one_page`]), which
//! reads the two pages only; the exact lists find every indexed page at or above τ, in a
//! shard's lists as in one index, and no rule takes a page they might miss
//! ([`super::found_at_any_prefix`]: a page's prefix is chosen by the lengths of the lists
//! it was listed in, which differ between a shard and one index). So the union of the
//! votes for pages decided unique is the set of matches the one decider chooses from, and
//! the aggregator chooses as it does.
//!
//! **What it holds for.**
//! - The exact lists (SpotSigs or sentences) with the jaccard measure, without document
//!   frequencies, whose informative signatures depend on the decisions of pages a shard
//!   does not hold: [`Shard::new`] refuses the others (the weighted measure's candidates
//!   are not exact: they depend on the pages an index holds).
//! - No retention: its removals make an index count its software text again from the pages
//!   it holds, and a shard holds a part of them. (Retention is the driver's schedule, not an
//!   index setting: a driver of shards must not sweep them.)
//! - Shards that start empty and read the whole stream, or take up the state a clean stop
//!   wrote: a shard's counts are of every page read, which its index does not hold, so an
//!   index reopened alone would count differently. [`Shard::new`] refuses an index that
//!   holds pages; [`Shard::resume`] takes one only with its state file
//!   ([`super::shard_state`]), at the stamp it was written with.
//! - A repeated id is counted and stored by no shard: one decider answers it with the
//!   stored decision and stores and counts nothing. Every shard keeps a 128-bit hash of
//!   every id it read, on disk in its index with 32-bit fingerprints in memory
//!   ([`super::seen`]), and judges a repeat [`Judged::Repeated`]; the aggregator answers
//!   it with the decision it keeps ([`Aggregator::repeated`]).
//!
//! **Copies are stored as duplicates at once.** A page a shard owns that equals an earlier
//! page it owns in everything the rules read of a page (its [`CopyKey`]) is stored as a
//! duplicate, out of the lists, before the aggregator decides it: one decider never decides
//! such a page unique (the proof is at [`CopyKey`]). So a flood of copies of one page (a
//! login wall, a soft error page served under thousands of URLs) keeps one page of it in
//! a shard's lists, and each copy votes for that one, where the copies stored tentatively
//! would vote for every copy read before the aggregator's decisions reach the shard: about
//! n²/(2S) votes on a shard for n copies, past the broker's record limit at a few thousand.

use std::path::Path;

use rustc_hash::FxHashSet;

use super::decided::{random_u64, Decided, Kept};
use super::seen::SeenIds;
use super::shard_state::{
    save_aggregator, save_shard, AggregatorParts, AggregatorState, Position, ShardParts,
    ShardState, STATE_FILE,
};
use super::{found_at_any_prefix, Keys, PageRef, PairRule};
use crate::index::{
    Candidate, Decision, DecisionKind, DocRecord, Found, Index, IndexError, IndexParamError,
};
use crate::signature::{similarity, Signatures, Signed};

/// The shard that owns page `id` of `shards`: CRC-32 of the id modulo the shard count.
pub fn owner(id: &str, shards: usize) -> usize {
    (crc32fast::hash(id.as_bytes()) as usize) % shards.max(1)
}

/// How a page is judged: the same on every shard, and the one decider's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judged {
    /// Fewer signatures than `min-signatures`: skipped.
    Skipped,
    /// Enough signatures, but too few of its own (without software text) to be matched on:
    /// it matches only a page it is one page with ([`super::Keys::one_page`]).
    OwnTextTooShort,
    /// Matched on its own signatures, at τ.
    Matched,
    /// An id read before: nothing counted, stored or voted; the earlier decision stands.
    Repeated,
}

impl Judged {
    /// The judgement's name in a votes record.
    pub fn as_str(self) -> &'static str {
        match self {
            Judged::Skipped => "skipped",
            Judged::OwnTextTooShort => "own_text_too_short",
            Judged::Matched => "matched",
            Judged::Repeated => "repeated",
        }
    }

    /// The judgement of a name ([`Judged::as_str`]).
    pub fn parse(s: &str) -> Option<Judged> {
        Some(match s {
            "skipped" => Judged::Skipped,
            "own_text_too_short" => Judged::OwnTextTooShort,
            "matched" => Judged::Matched,
            "repeated" => Judged::Repeated,
            _ => return None,
        })
    }
}

/// A page a shard holds that the page being decided is matched with (an item of the votes
/// record, `schemas/votes.v1.schema.json`: its field names are that record's).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vote {
    /// Its stream position (the number it is stored under).
    pub pos: u64,
    /// Its id.
    pub id: String,
    /// Its URL.
    pub url: String,
    /// When it was first seen (Unix seconds).
    pub first_seen: i64,
    /// The similarity of the two pages (JSON keeps every bit of it).
    pub similarity: f64,
    /// The index that found it.
    pub found: Found,
    /// 0: matched at τ by the pair rule ([`Judged::Matched`]); k ≥ 1: one page with the
    /// page, found by its k-th probe ([`Judged::OwnTextTooShort`]).
    pub probe: u8,
}

/// One shard: the pages it owns, and the software-text counts and ids of every page.
pub struct Shard {
    index: Index,
    me: usize,
    shards: usize,
    cands: Vec<Candidate>,
    /// Every id read, by a 128-bit hash (two keyed hashes of it): a repeat is told apart
    /// without holding the pages of other shards.
    seen: SeenIds,
    /// Pages this shard owns that the aggregator decided duplicates before the shard read
    /// them (a shard that starts again reads the decisions and the stream side by side):
    /// each leaves the lists as soon as it is stored.
    pending: FxHashSet<u128>,
    /// The [`CopyKey`] of every page this shard owns and stored as unique (16 bytes a page
    /// it holds): a later page of the same key is a copy, never unique.
    keys: FxHashSet<u128>,
    /// Pages this shard owns that it stored as copies ([`CopyKey`]).
    copies: u64,
    copy_key: CopyKey,
}

/// What the rules read of a page, hashed to 128 bits (two keyed hashes, as an id's): its
/// identity, title, whole signature set, software text at its arrival, blocks, template
/// sample and host. Two pages of one key are one page to every rule of a pair and judged
/// alike.
///
/// **A page of the same key as an earlier page (another id, an identity known) is never
/// unique for one decider**, so a shard stores it as a duplicate without waiting for the
/// aggregator. Let A be the earlier page, B the later, both judged matched or own text too
/// short (the judgement reads the whole set and the software text only, so they are judged
/// alike; skipped pages are never candidates). Without document frequencies (a shard
/// refuses them) and without retention, a page decided unique stays unique and in the
/// lists, under the prefix and length it was listed with (chosen when it was listed), so a
/// set that found it once finds it again.
/// - A was decided unique: B has A's identity, which no rule keeps apart
///   ([`kept_apart`](super::kept_apart), [`Keys::one_page`]), and B's set without its
///   software text is A's ([`DocRecord::matched_sigs`]): similarity 1 on the pair rule, or
///   one page by probe. B is a duplicate.
/// - A was decided a duplicate of X: X is still unique and listed, B's probes are A's, and
///   the pair rule (or one page) reads of B only what the key holds, so it matches B with
///   X as it matched A. B is a duplicate.
///
/// A page matched on no signature at all (only with `min-signatures` 0) is listed nowhere
/// and is left out: two of them can both be unique.
///
/// So at most the first page of a key in the stream is unique, and a shard lists at most
/// the first page of a key it owns: a copy's votes name at most one page of its key a
/// shard. Two keys meet by chance about once in 10^21 for a billion pages, and the hash
/// keys are each shard's own, drawn at random.
pub struct CopyKey {
    /// Two seeds drawn at random for each shard, each hashed ahead of the page: the keys
    /// are only compared within the shard that made them (a shard that starts from its
    /// state file reads its seeds back; one that reads the stream again draws new ones), so
    /// no one can make two pages meet on purpose.
    seeds: [u64; 2],
}

impl CopyKey {
    /// Keys under two random seeds.
    pub fn new() -> CopyKey {
        CopyKey {
            seeds: [random_u64(), random_u64()],
        }
    }

    /// The key of a signed page at `url` whose software text at its arrival is `software`;
    /// `None` for a page without an identity (the rules of one page need it).
    pub fn of(&self, signed: &Signed, url: &str, software: &[u32]) -> Option<u128> {
        use std::hash::{Hash, Hasher};
        let identity = signed.identity?;
        let host = crate::index::freq::host_hash(url);
        let half = |seed: u64| {
            let mut h = std::hash::DefaultHasher::new();
            seed.hash(&mut h);
            identity.hash(&mut h);
            signed.title.hash(&mut h);
            signed.sigs.entries().hash(&mut h);
            software.hash(&mut h);
            signed.short.blocks.hash(&mut h);
            signed.template.hash(&mut h);
            host.hash(&mut h);
            h.finish()
        };
        Some(u128::from(half(self.seeds[0])) << 64 | u128::from(half(self.seeds[1])))
    }
}

impl Default for CopyKey {
    fn default() -> Self {
        CopyKey::new()
    }
}

/// A 128-bit hash of an id: two hashes of it under two keys (the chance that two of a
/// billion ids meet is about 10^-21). Kept in a shard's index ([`super::seen`]); its
/// state file holds the hash of a fixed id, so that a build that hashes otherwise refuses
/// it ([`Shard::resume`]).
fn id_hash(id: &str) -> u128 {
    use std::hash::{Hash, Hasher};
    let half = |key: u64| {
        let mut h = std::hash::DefaultHasher::new();
        key.hash(&mut h);
        id.hash(&mut h);
        h.finish()
    };
    u128::from(half(0x6e65_6172_6475_7030)) << 64 | u128::from(half(0x7368_6172_6469_6473))
}

/// The id hash of a fixed id and the copy key of a fixed page under `key`'s seeds: what a
/// state file is checked with, so that a build whose hashing differs (the hasher, or how a
/// page's parts are hashed) does not read another's sets.
fn probes(key: &CopyKey) -> [u128; 2] {
    let signed = Signed {
        sigs: crate::signature::Signatures::from_entries(vec![(1, 1), (5, 2), (9, 1)])
            .unwrap_or_default(),
        template: vec![3, 4],
        identity: Some(0x5eed),
        title: Some(7),
        short: crate::signature::ShortBlocks {
            blocks: vec![11, 12],
            ..Default::default()
        },
        ..Signed::default()
    };
    let copy = key
        .of(&signed, "https://probe.example/page", &[5])
        .unwrap_or_default();
    [id_hash("neardup-shard-state-probe"), copy]
}

/// What a shard's index and place must be (see the module's text).
fn check(index: &Index, me: usize, shards: usize) -> Result<(), IndexError> {
    let p = index.params();
    let refuse = |why: &str| Err(IndexParamError(format!("a shard {why}")).into());
    if !matches!(
        p.method,
        crate::index::Method::Spotsigs | crate::index::Method::Sentences
    ) {
        return refuse(&format!(
            "decides on the exact lists only (spotsigs, sentences), not {}",
            p.method
        ));
    }
    if p.measure != crate::signature::Measure::Jaccard {
        return refuse(&format!(
            "decides with the jaccard measure only, not {}: the lists' candidates of the \
             weighted measure depend on the pages each index holds",
            p.measure
        ));
    }
    if p.frequencies {
        return refuse("cannot count document frequencies: they depend on pages it does not hold");
    }
    if shards == 0 || me >= shards {
        return refuse(&format!(
            "is one of 1 or more shards (got {me} of {shards})"
        ));
    }
    Ok(())
}

impl Shard {
    /// Shard `me` of `shards` over `index`, empty.
    pub fn new(index: Index, me: usize, shards: usize) -> Result<Shard, IndexError> {
        check(&index, me, shards)?;
        let refuse = |why: &str| Err(IndexParamError(format!("a shard {why}")).into());
        if index.pages() > 0 {
            return refuse(&format!(
                "starts from an empty index ({} pages in it): its software-text counts are of \
                 every page of the stream, which its index does not hold",
                index.pages()
            ));
        }
        let seen = SeenIds::open(&index, 0)?;
        if seen.len() > 0 {
            return refuse(&format!(
                "starts from an empty index ({} ids read in it): its software-text counts are \
                 of every page of the stream, which its index does not hold",
                seen.len()
            ));
        }
        Ok(Shard {
            index,
            me,
            shards,
            cands: Vec::new(),
            seen,
            pending: FxHashSet::default(),
            keys: FxHashSet::default(),
            copies: 0,
            copy_key: CopyKey::new(),
        })
    }

    /// Shard `me` of `shards` over `index` as a shard left it at a clean stop, with `state`
    /// ([`Shard::state`]) written then: refused, with the reason, unless the index is at the
    /// stamp the state was written at, its software-text counts are those of its snapshot,
    /// it holds as many ids read as the state counts, and this build hashes ids and pages
    /// as the one that wrote it did. (A refused state
    /// leaves the caller to start empty and read the stream again.)
    pub fn resume(
        index: Index,
        me: usize,
        shards: usize,
        state: ShardState,
    ) -> Result<Shard, IndexError> {
        let refuse =
            |why: String| Err(IndexParamError(format!("the shard's state file {why}")).into());
        if (state.me as usize, state.shards as usize) != (me, shards) {
            return refuse(format!(
                "is of shard {} of {}, not {me} of {shards}",
                state.me, state.shards
            ));
        }
        if index.stamp() != (state.epoch, state.next_doc) {
            return refuse(format!(
                "was written at index stamp {:?}, and the index is at {:?}",
                (state.epoch, state.next_doc),
                index.stamp()
            ));
        }
        if !index.software_as_saved() {
            return refuse(
                "was written with software-text counts the index did not read back".into(),
            );
        }
        let copy_key = CopyKey { seeds: state.seeds };
        if state.probes != probes(&copy_key) {
            return refuse("was written by a build that hashes ids or pages otherwise".into());
        }
        check(&index, me, shards)?;
        let seen = SeenIds::open(&index, state.ids)?;
        if seen.len() != state.ids {
            return refuse(format!(
                "counts {} ids read, and the index holds {}",
                state.ids,
                seen.len()
            ));
        }
        Ok(Shard {
            index,
            me,
            shards,
            cands: Vec::new(),
            seen,
            pending: state.pending,
            keys: state.keys,
            copies: state.copies,
            copy_key,
        })
    }

    /// Writes what this shard holds besides its index, as of the stream `positions`, to the
    /// state file `path` for [`Shard::resume`] (a clean stop), after the index's snapshots
    /// ([`Index::save_lists`]), so that the next open reads its lists and software-text
    /// counts back as they are. Written from the sets themselves, a buffer at a time: no
    /// more memory than the shard holds. Returns how many ids the state holds.
    pub fn save(&mut self, path: &Path, positions: &[Position]) -> Result<usize, IndexError> {
        self.seen.write(&self.index)?;
        self.index.save_lists()?;
        self.save_parts(path, positions)
    }

    /// Writes a copy of this shard as it is now, as of the stream `positions`, to the new
    /// directory `dst` while it goes on (a checkpoint): its index's copy
    /// ([`Index::checkpoint_to`]) and, last, its state file ([`STATE_FILE`]). A working copy
    /// of `dst` ([`Index::copy_checkpoint`], the state file left out) opens as an index that
    /// [`Shard::resume`] takes up with that state file, however far this shard went on
    /// after it. Returns how many ids the state holds.
    pub fn checkpoint(&mut self, dst: &Path, positions: &[Position]) -> Result<usize, IndexError> {
        self.seen.write(&self.index)?;
        self.index.checkpoint_to(dst)?;
        self.save_parts(&dst.join(STATE_FILE), positions)
    }

    fn save_parts(&self, path: &Path, positions: &[Position]) -> Result<usize, IndexError> {
        let (epoch, next_doc) = self.index.stamp();
        let parts = ShardParts {
            me: self.me as u32,
            shards: self.shards as u32,
            epoch,
            next_doc,
            positions,
            probes: probes(&self.copy_key),
            seeds: self.copy_key.seeds,
            copies: self.copies,
            ids: self.seen.len(),
            pending: &self.pending,
            keys: &self.keys,
        };
        save_shard(path, parts)
            .map_err(|e| IndexError::Corrupt(format!("writing {}: {e}", path.display())))?;
        Ok(self.seen.len() as usize)
    }

    /// How many ids this shard has read.
    pub fn ids(&self) -> usize {
        self.seen.len() as usize
    }

    /// The shard's index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// How many pages this shard owns that it stored as copies of an earlier page
    /// ([`CopyKey`]), not as unique.
    pub fn copies(&self) -> u64 {
        self.copies
    }

    /// Whether this shard owns page `id`.
    pub fn owns(&self, id: &str) -> bool {
        owner(id, self.shards) == self.me
    }

    /// Reads the page at stream position `pos`: its judgement, and in `votes` the pages this
    /// shard holds that it is matched with; then stores it if this shard owns it (a page
    /// judged [`Judged::Skipped`] as skipped, any other as unique until the aggregator says
    /// otherwise), and counts its software text if not.
    pub fn read(
        &mut self,
        pos: u64,
        page: PageRef<'_>,
        signed: &Signed,
        votes: &mut Vec<Vote>,
    ) -> Result<Judged, IndexError> {
        votes.clear();
        self.take(pos, page, signed, Some(votes))
    }

    /// [`Shard::read`] without the votes: the page is judged, stored or counted as `read`
    /// does, and nothing is probed. A shard that starts again reads the stream up to where
    /// its votes were committed this way, to the state it had there.
    pub fn replay(
        &mut self,
        pos: u64,
        page: PageRef<'_>,
        signed: &Signed,
    ) -> Result<Judged, IndexError> {
        self.take(pos, page, signed, None)
    }

    fn take(
        &mut self,
        pos: u64,
        page: PageRef<'_>,
        signed: &Signed,
        votes: Option<&mut Vec<Vote>>,
    ) -> Result<Judged, IndexError> {
        if !self.seen.insert(&self.index, id_hash(page.id))? {
            return Ok(Judged::Repeated);
        }
        let params = self.index.params();
        let min = params.min_signatures as usize;
        let hosts = params.signature.short_pages_across_hosts_only();
        let host_text = params.signature.host_text();
        let software = self.index.software_sigs(&signed.short, &signed.sigs)?;
        let without = signed.sigs.without(&software);
        let matched = without.as_ref().unwrap_or(&signed.sigs);
        let informative = self.index.informative(page.url, matched);
        let q = informative.as_ref().unwrap_or(matched);
        let judged = if signed.sigs.set_len() < min {
            Judged::Skipped
        } else if q.set_len() < min {
            Judged::OwnTextTooShort
        } else {
            Judged::Matched
        };
        match (judged, votes) {
            (_, None) | (Judged::Skipped | Judged::Repeated, _) => {}
            (Judged::OwnTextTooShort, Some(votes)) => {
                let keys = Keys::of(signed).on_host(host_text.then_some(page.url));
                self.one_page_votes(signed, keys, [matched, q], votes)?;
            }
            (Judged::Matched, Some(votes)) => {
                let url = hosts.then_some(page.url);
                let keys = Keys::of(signed).on_host(url.filter(|_| host_text));
                self.similar_votes(signed, keys, q, url, votes)?;
            }
        }
        if self.owns(page.id) {
            let kind = match judged {
                Judged::Skipped => DecisionKind::Skipped,
                Judged::Matched if q.set_len() == 0 => DecisionKind::Unique,
                _ => match self.copy_key.of(signed, page.url, &software) {
                    Some(key) if !self.keys.insert(key) => {
                        self.copies += 1;
                        DecisionKind::Duplicate
                    }
                    _ => DecisionKind::Unique,
                },
            };
            self.index.restore_put(
                pos,
                &DocRecord {
                    id: page.id.to_string(),
                    url: page.url.to_string(),
                    first_seen: page.first_seen,
                    fingerprint: signed.fingerprint.clone(),
                    sigs: signed.sigs.clone(),
                    decision: Decision::plain(kind),
                    delta: None,
                    template: signed.template.clone(),
                    identity: signed.identity,
                    title: signed.title,
                    blocks: signed.short.blocks.clone(),
                    software,
                },
            )?;
            if self.pending.remove(&id_hash(page.id)) {
                self.index
                    .demote(page.id, Decision::plain(DecisionKind::Duplicate))?;
            }
        } else {
            self.index.count_page_software(
                page.url,
                signed.fingerprint.first().copied().unwrap_or(0),
                &signed.short.blocks,
            )?;
        }
        Ok(judged)
    }

    /// The aggregator's decision of page `id`: a page this shard owns that was decided a
    /// duplicate leaves its lists (its record stays, with the decision), now if the shard
    /// holds it, else as soon as it stores it. Returns whether it left them now. A
    /// duplicate is never a candidate of the one decider, so the decisions stay the one
    /// decider's whenever this comes; what it saves is the shard's memory, its probes and
    /// the votes the aggregator would drop.
    pub fn decided(&mut self, id: &str, decision: &Decision) -> Result<bool, IndexError> {
        if decision.kind != DecisionKind::Duplicate || !self.owns(id) {
            return Ok(false);
        }
        if self.index.demote(id, decision.clone())? {
            return Ok(true);
        }
        if !self.seen.contains(&self.index, id_hash(id))? {
            self.pending.insert(id_hash(id));
        }
        Ok(false)
    }

    /// How many decided duplicates this shard owns and has not read yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Every page held that reaches τ with the page by the pair rule (the one decider's
    /// verification of its best match, of every candidate).
    fn similar_votes(
        &mut self,
        signed: &Signed,
        keys: Keys<'_>,
        q: &Signatures,
        url: Option<&str>,
        votes: &mut Vec<Vote>,
    ) -> Result<(), IndexError> {
        self.index.list_candidates(q, &mut self.cands)?;
        let mut rule = PairRule::new(&self.index, q, &signed.template, url).with_keys(keys);
        for c in &self.cands {
            let Some(doc) = self.index.doc(c.doc)? else {
                continue;
            };
            if doc.decision.kind != DecisionKind::Unique {
                continue;
            }
            if let Some(sim) = rule.similarity(&self.index, &doc) {
                if found_at_any_prefix(&self.index, q, &doc, c) {
                    votes.push(vote(doc, c, sim, 0));
                }
            }
        }
        Ok(())
    }

    /// Every page held that is one page with the page, by each of its probes in turn: its
    /// whole set, then its set without software text, then its informative set (each only
    /// when smaller than the one before), as the one decider probes them.
    fn one_page_votes(
        &mut self,
        signed: &Signed,
        keys: Keys<'_>,
        also: [&Signatures; 2],
        votes: &mut Vec<Vote>,
    ) -> Result<(), IndexError> {
        if keys.identity.is_none() {
            return Ok(());
        }
        let m = self.index.params().measure;
        let mut probes = vec![&signed.sigs];
        for set in also {
            if set.set_len() > 0 && set.set_len() < probes[probes.len() - 1].set_len() {
                probes.push(set);
            }
        }
        for (k, probe) in probes.into_iter().enumerate() {
            self.index.list_candidates(probe, &mut self.cands)?;
            for c in &self.cands {
                let Some(doc) = self.index.doc(c.doc)? else {
                    continue;
                };
                if doc.decision.kind != DecisionKind::Unique
                    || !keys.one_page(&doc)
                    || !found_at_any_prefix(&self.index, probe, &doc, c)
                {
                    continue;
                }
                let sim = similarity(signed.sigs.entries(), doc.sigs.entries(), m);
                votes.push(vote(doc, c, sim, k as u8 + 1));
            }
        }
        Ok(())
    }
}

fn vote(doc: DocRecord, c: &Candidate, similarity: f64, probe: u8) -> Vote {
    Vote {
        pos: c.doc,
        id: doc.id,
        url: doc.url,
        first_seen: doc.first_seen,
        similarity,
        found: c.found,
        probe,
    }
}

/// The id whose hash an aggregator's state file is checked with.
const AGGREGATOR_PROBE: &str = "neardup-aggregator-state-probe";

/// The aggregator: decides each page from every shard's votes, in stream order, and keeps
/// every decision by id.
///
/// Memory: a bit a stream position (which pages were decided unique). The decisions are on
/// disk, by the 128-bit hash of their ids ([`super::decided`]): only a repeated id reads one
/// back.
pub struct Aggregator {
    /// Bit `pos` set: the page at stream position `pos` was decided unique.
    unique: Vec<u64>,
    /// Every decision, by id hash.
    decided: Decided,
}

impl Default for Aggregator {
    fn default() -> Self {
        Aggregator::new()
    }
}

impl Aggregator {
    /// An aggregator that has decided nothing yet, its decisions kept in memory (a
    /// simulation's, a test's).
    pub fn new() -> Aggregator {
        Aggregator {
            unique: Vec::new(),
            decided: Decided::memory(),
        }
    }

    /// An aggregator that has decided nothing yet, its decisions kept in a new store at
    /// `dir`, in place of whatever the directory held.
    pub fn create(dir: &Path) -> Result<Aggregator, IndexError> {
        Ok(Aggregator {
            unique: Vec::new(),
            decided: Decided::create(dir)?,
        })
    }

    /// The decision of an id decided before: a repeated id gets it again.
    pub fn repeated(&self, id: &str) -> Result<Option<Decision>, IndexError> {
        Ok(self.decided.get(id_hash(id))?)
    }

    /// Writes every decision to its store, then what this aggregator holds beside them, as
    /// of the stream `positions`, to the state file `path` ([`Aggregator::resume`] takes it
    /// up with the store), and goes on deciding.
    pub fn save(
        &mut self,
        shards: usize,
        positions: &[Position],
        path: &std::path::Path,
    ) -> std::io::Result<()> {
        self.decided.sync().map_err(std::io::Error::other)?;
        save_aggregator(
            path,
            AggregatorParts {
                shards: shards as u32,
                positions,
                probe: id_hash(AGGREGATOR_PROBE),
                unique: &self.unique,
                stamp: self.decided.stamp(),
                written: self.decided.len(),
            },
        )
    }

    /// The aggregator of `shards` shards as its state file left it (a clean stop's or a
    /// checkpoint's), from `state` ([`Aggregator::save`]) and the store of decisions at
    /// `dir`: refused, with the reason, when the state is of another shard count, of a build
    /// that hashes ids otherwise, or of another store than `dir`'s (or one holding fewer
    /// decisions than it counts).
    pub fn resume(
        shards: usize,
        state: AggregatorState,
        dir: &Path,
    ) -> Result<Aggregator, IndexError> {
        let refuse =
            |why: String| Err(IndexParamError(format!("the aggregator's state file {why}")).into());
        if state.shards as usize != shards {
            return refuse(format!("is of {} shards, not {shards}", state.shards));
        }
        if state.probe != id_hash(AGGREGATOR_PROBE) {
            return refuse("was written by a build that hashes ids otherwise".into());
        }
        let decided = Decided::open(dir)?;
        if let Some(why) = decided.refuses(state.stamp, state.written) {
            return refuse(why);
        }
        Ok(Aggregator {
            unique: state.unique,
            decided,
        })
    }

    /// Decisions made so far (one made again after a restart counts again).
    pub fn decided(&self) -> u64 {
        self.decided.len()
    }

    fn is_unique(&self, pos: u64) -> bool {
        usize::try_from(pos / 64)
            .ok()
            .and_then(|w| self.unique.get(w))
            .is_some_and(|w| w >> (pos % 64) & 1 == 1)
    }

    fn set_unique(&mut self, pos: u64) {
        let w = usize::try_from(pos / 64).expect("a stream position within memory");
        if self.unique.len() <= w {
            self.unique.resize(w + 1, 0);
        }
        self.unique[w] |= 1 << (pos % 64);
    }

    /// Decides the page at stream position `pos`, judged `judged`, from the votes of every
    /// shard: a repeated id gets its earlier decision (unique, when none is kept: a shard
    /// judges a repeat only after the aggregator decided its first record); otherwise a
    /// duplicate of the best page decided unique among them (the highest
    /// similarity, then the earliest position; for [`Judged::OwnTextTooShort`], the first
    /// probe that found one, then the earliest first seen, then the earliest position),
    /// else unique (or skipped).
    pub fn decide<'v>(
        &mut self,
        pos: u64,
        id: &str,
        judged: Judged,
        votes: impl IntoIterator<Item = &'v Vote>,
    ) -> Result<Decision, IndexError> {
        if judged == Judged::Repeated {
            if let Some(d) = self.repeated(id)? {
                return Ok(d);
            }
        }
        let d = self.choose(pos, judged, votes);
        self.decided.insert(id_hash(id), Kept::of(d.clone()))?;
        Ok(d)
    }

    fn choose<'v>(
        &mut self,
        pos: u64,
        judged: Judged,
        votes: impl IntoIterator<Item = &'v Vote>,
    ) -> Decision {
        let live = votes.into_iter().filter(|v| self.is_unique(v.pos));
        let best = match judged {
            Judged::Skipped | Judged::Repeated => None,
            Judged::Matched => live
                .filter(|v| v.probe == 0)
                .fold(None, |b: Option<&Vote>, v| match b {
                    Some(b)
                        if b.similarity > v.similarity
                            || (b.similarity == v.similarity && b.pos < v.pos) =>
                    {
                        Some(b)
                    }
                    _ => Some(v),
                }),
            Judged::OwnTextTooShort => live
                .filter(|v| v.probe > 0)
                .min_by_key(|v| (v.probe, v.first_seen, v.pos)),
        };
        match best {
            Some(v) => Decision {
                kind: DecisionKind::Duplicate,
                canonical_id: Some(v.id.clone()),
                canonical_url: Some(v.url.clone()),
                similarity: Some(v.similarity),
                hamming: None,
                found_by: Some(v.found),
            },
            None if judged == Judged::Skipped => Decision::plain(DecisionKind::Skipped),
            None => {
                self.set_unique(pos);
                Decision::plain(DecisionKind::Unique)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{IndexParams, Method};

    fn v(pos: u64, similarity: f64, first_seen: i64, probe: u8) -> Vote {
        Vote {
            pos,
            id: format!("p{pos}"),
            url: format!("https://h{pos}.test/"),
            first_seen,
            similarity,
            found: Found::Spotsigs,
            probe,
        }
    }

    #[test]
    fn a_shard_refuses_what_it_cannot_decide_alike() {
        let mut p = IndexParams {
            method: Method::AlgG,
            ..IndexParams::default()
        };
        assert!(Shard::new(Index::memory(p.clone()).unwrap(), 0, 2).is_err());
        p.method = Method::Spotsigs;
        p.frequencies = true;
        assert!(Shard::new(Index::memory(p.clone()).unwrap(), 0, 2).is_err());
        p.frequencies = false;
        p.measure = crate::signature::Measure::Weighted;
        assert!(Shard::new(Index::memory(p.clone()).unwrap(), 0, 2).is_err());
        p.measure = crate::signature::Measure::Jaccard;
        assert!(Shard::new(Index::memory(p.clone()).unwrap(), 2, 2).is_err());
        let mut full = Shard::new(Index::memory(p.clone()).unwrap(), 0, 1).unwrap();
        let signed = crate::signature::Signer::new(&p.signature)
            .unwrap()
            .sign("<p>one two three four five six seven eight nine ten eleven twelve</p>");
        let page = PageRef {
            id: "a",
            url: "https://a.test/",
            first_seen: 0,
        };
        full.read(0, page, &signed, &mut Vec::new()).unwrap();
        assert_eq!(full.index().pages(), 1);
        assert!(
            Shard::new(full.index, 0, 2).is_err(),
            "a shard starts empty"
        );
        assert!(Shard::new(Index::memory(p).unwrap(), 1, 2).is_ok());
    }

    #[test]
    fn the_aggregator_chooses_as_one_decider() {
        let mut a = Aggregator::new();
        for pos in 0..4 {
            assert_eq!(
                a.decide(pos, &format!("p{pos}"), Judged::Matched, &[])
                    .unwrap()
                    .kind,
                DecisionKind::Unique
            );
        }
        // a page not decided unique is no canonical page
        let d = a
            .decide(4, "p4", Judged::Matched, &[v(9, 0.99, 0, 0)])
            .unwrap();
        assert_eq!(d.kind, DecisionKind::Unique);
        // the highest similarity, then the earliest position
        let votes = [v(3, 0.8, 0, 0), v(1, 0.9, 5, 0), v(2, 0.9, 1, 0)];
        let d = a.decide(5, "p5", Judged::Matched, &votes).unwrap();
        assert_eq!(d.canonical_id.as_deref(), Some("p1"));
        assert_eq!(d.similarity, Some(0.9));
        // too little text of its own: the first probe that found one, then the earliest
        // first seen, then the earliest position
        let votes = [
            v(3, 1.0, 0, 2),
            v(2, 0.7, 4, 1),
            v(1, 0.7, 4, 1),
            v(0, 0.7, 9, 1),
        ];
        let d = a.decide(6, "p6", Judged::OwnTextTooShort, &votes).unwrap();
        assert_eq!(d.canonical_id.as_deref(), Some("p1"));
        // skipped whatever the votes
        let d = a.decide(7, "p7", Judged::Skipped, &votes).unwrap();
        assert_eq!(d.kind, DecisionKind::Skipped);
        // a repeated id gets its decision again
        let again = a.repeated("p5").unwrap().and_then(|d| d.canonical_id);
        assert_eq!(again.as_deref(), Some("p1"));
        assert_eq!(
            a.repeated("p0").unwrap(),
            Some(Decision::plain(DecisionKind::Unique))
        );
        assert_eq!(
            a.repeated("p7").unwrap(),
            Some(Decision::plain(DecisionKind::Skipped))
        );
        // a repeat judged so by the shards gets it whatever the votes
        let d = a
            .decide(9, "p5", Judged::Repeated, &[v(0, 1.0, 0, 0)])
            .unwrap();
        assert_eq!(d.canonical_id.as_deref(), Some("p1"));
        assert_eq!(a.decided(), 8);
        assert_eq!(a.repeated("p8").unwrap(), None);
    }

    /// An aggregator written to its state file and taken up from it decides on as the one
    /// that never stopped: the same repeats, and the same pages count as decided unique.
    #[test]
    fn a_resumed_aggregator_decides_on_as_one_that_never_stopped() {
        let fill = |a: &mut Aggregator| {
            for pos in 0..70 {
                let votes: Vec<Vote> = match pos % 3 {
                    0 => vec![],
                    1 => vec![v(pos - 1, 0.8, 0, 0)],
                    _ => vec![v(pos - 2, 0.6, 0, 1)],
                };
                let judged = if pos % 3 == 2 {
                    Judged::OwnTextTooShort
                } else if pos == 66 {
                    Judged::Skipped
                } else {
                    Judged::Matched
                };
                a.decide(pos, &format!("p{pos}"), judged, &votes).unwrap();
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("decisions");
        let (mut a, mut stopped) = (Aggregator::new(), Aggregator::create(&store).unwrap());
        fill(&mut a);
        fill(&mut stopped);
        let at = vec![Position {
            stream: "signed".into(),
            partition: 0,
            next: 70,
        }];
        let path = dir
            .path()
            .join(super::super::shard_state::AGGREGATOR_STATE_FILE);
        stopped.save(2, &at, &path).unwrap();
        assert_eq!(
            stopped.decided(),
            a.decided(),
            "a checkpoint keeps the aggregator's decisions"
        );
        // it decides on past its state file and is killed after its store wrote them: the
        // store is ahead of the state, and the pages past it are decided again alike
        let on: Vec<Vote> = (0..70).map(|p| v(p, 0.7, 0, 0)).collect();
        stopped.decide(70, "p70", Judged::Matched, &on).unwrap();
        stopped.decide(71, "p71", Judged::Matched, &[]).unwrap();
        stopped.decided.sync().unwrap();
        drop(stopped);
        let state = AggregatorState::load(&path).unwrap();
        assert_eq!(state.positions, at);
        // the state read back writes the same state again
        let again = dir.path().join("again");
        state.save(&again).unwrap();
        assert_eq!(AggregatorState::load(&again).unwrap(), state);
        assert!(
            Aggregator::resume(3, state.clone(), &store).is_err(),
            "another shard count"
        );
        let other = dir.path().join("other");
        drop(Aggregator::create(&other).unwrap());
        let e = Aggregator::resume(2, state.clone(), &other).err().unwrap();
        assert!(e.to_string().contains("another store"), "{e}");
        assert!(
            Aggregator::resume(2, state.clone(), &dir.path().join("none")).is_err(),
            "no store"
        );
        let mut b = Aggregator::resume(2, state, &store).unwrap();
        assert_eq!(b.decided(), a.decided() + 2);
        for (pos, id, votes) in [(70, "p70", &on[..]), (71, "p71", &[][..])] {
            assert_eq!(
                b.decide(pos, id, Judged::Matched, votes).unwrap(),
                a.decide(pos, id, Judged::Matched, votes).unwrap(),
                "{id}"
            );
        }
        for pos in 0..70 {
            let id = format!("p{pos}");
            assert_eq!(b.repeated(&id).unwrap(), a.repeated(&id).unwrap(), "{id}");
        }
        assert!(a
            .repeated("p1")
            .unwrap()
            .is_some_and(|d| d.kind == DecisionKind::Duplicate));
        assert_eq!(
            a.repeated("p66").unwrap().map(|d| d.kind),
            Some(DecisionKind::Skipped)
        );
        // votes for every earlier page (those decided again past the state among them):
        // only those decided unique can be chosen; repeats of pages decided before the state
        // and past it get their decisions
        let votes: Vec<Vote> = (0..72).map(|p| v(p, 0.9, 0, 0)).collect();
        for (pos, id) in [(72, "p72"), (73, "p5"), (74, "p70"), (75, "p71")] {
            let judged = if pos > 72 {
                Judged::Repeated
            } else {
                Judged::Matched
            };
            assert_eq!(
                b.decide(pos, id, judged, &votes).unwrap(),
                a.decide(pos, id, judged, &votes).unwrap()
            );
        }
        // the pages decided again past the state are marked as they were: p70 a duplicate,
        // p71 unique
        let late = [v(70, 0.95, 0, 0), v(71, 0.9, 0, 0)];
        let d = b.decide(76, "p76", Judged::Matched, &late).unwrap();
        assert_eq!(d.canonical_id.as_deref(), Some("p71"));
        assert_eq!(d, a.decide(76, "p76", Judged::Matched, &late).unwrap());
    }

    /// A page of 60 sentences, signed with `p`'s settings.
    fn story(p: &IndexParams) -> Signed {
        let signer = crate::signature::Signer::new(&p.signature).unwrap();
        let text: String = (0..60)
            .map(|i| format!("the word{i} of a story "))
            .collect();
        signer.sign(&format!("<p>{text}</p>"))
    }

    /// A page decided a duplicate after its shard stored it leaves the lists and keeps its
    /// record with the decision and its signatures; a follower of the journal does the same.
    #[test]
    fn a_demoted_page_leaves_the_lists_here_and_in_a_follower() {
        let p = IndexParams::default();
        let signed = story(&p);
        let mut shard = Shard::new(Index::memory(p.clone()).unwrap(), 0, 1).unwrap();
        shard.index.set_journal(true);
        let page = PageRef {
            id: "a",
            url: "https://a.test/",
            first_seen: 0,
        };
        let mut votes = Vec::new();
        assert_eq!(
            shard.read(0, page, &signed, &mut votes).unwrap(),
            Judged::Matched
        );
        let mut cands = Vec::new();
        shard
            .index
            .list_candidates(&signed.sigs, &mut cands)
            .unwrap();
        assert_eq!(cands.len(), 1, "stored as unique, tentatively");
        let dup = Decision {
            kind: DecisionKind::Duplicate,
            canonical_id: Some("z".into()),
            canonical_url: Some("https://z.test/".into()),
            similarity: Some(0.9),
            hamming: None,
            found_by: Some(Found::Spotsigs),
        };
        shard.decided("a", &dup).unwrap();
        shard
            .index
            .list_candidates(&signed.sigs, &mut cands)
            .unwrap();
        assert!(cands.is_empty(), "out of the lists");
        let rec = shard.index.find_id("a").unwrap().unwrap();
        assert_eq!(rec.decision, dup);
        let own = shard.index.reader().signatures(&rec).unwrap();
        assert!(matches!(own, crate::index::StoredSigs::Own(s) if s == signed.sigs));
        // a follower applying the journal in order ends the same
        let mut follower = Index::memory(p).unwrap();
        for m in shard.index.take_journal() {
            let crate::index::Mutation::Put { num, record, .. } = m else {
                panic!("a put");
            };
            follower
                .restore_put(num, &DocRecord::decode(&record).unwrap())
                .unwrap();
        }
        assert_eq!(follower.find_id("a").unwrap().unwrap().decision, dup);
        follower.list_candidates(&signed.sigs, &mut cands).unwrap();
        assert!(cands.is_empty(), "out of the follower's lists");
    }

    /// A decision that reaches the shard before the page it decides (a shard starting again
    /// reads the decisions and the stream side by side) takes the page out of the lists as
    /// soon as it is stored; a decision of a page another shard owns, or of a unique page,
    /// changes nothing.
    #[test]
    fn a_decision_read_before_its_page_applies_when_the_page_comes() {
        let p = IndexParams::default();
        let signed = story(&p);
        let mut shard = Shard::new(Index::memory(p).unwrap(), 0, 2).unwrap();
        let mine = (0..)
            .map(|i| format!("p{i}"))
            .find(|id| shard.owns(id))
            .unwrap();
        let other = (0..)
            .map(|i| format!("p{i}"))
            .find(|id| !shard.owns(id))
            .unwrap();
        let dup = Decision::plain(DecisionKind::Duplicate);
        assert!(!shard.decided(&mine, &dup).unwrap(), "not stored yet");
        assert!(!shard.decided(&other, &dup).unwrap());
        assert!(!shard
            .decided(&mine, &Decision::plain(DecisionKind::Unique))
            .unwrap());
        assert_eq!(shard.pending(), 1, "only the page it owns waits");
        let mut votes = Vec::new();
        let page = PageRef {
            id: &mine,
            url: "https://a.test/",
            first_seen: 0,
        };
        shard.read(0, page, &signed, &mut votes).unwrap();
        assert_eq!(shard.pending(), 0);
        let mut cands = Vec::new();
        shard
            .index
            .list_candidates(&signed.sigs, &mut cands)
            .unwrap();
        assert!(cands.is_empty(), "out of the lists once stored");
        assert_eq!(
            shard.index.find_id(&mine).unwrap().unwrap().decision.kind,
            DecisionKind::Duplicate
        );
        // the next copy gets no vote for it
        let page = PageRef {
            id: "copy",
            url: "https://b.test/",
            first_seen: 0,
        };
        shard.read(1, page, &signed, &mut votes).unwrap();
        assert!(votes.is_empty(), "{votes:?}");
        // a decision read again (at-least-once) changes nothing more
        assert!(!shard.decided(&mine, &dup).unwrap());
        assert_eq!(shard.pending(), 0);
    }

    /// A page of story `story` on host `host`, edited by `edit`: the host's template block,
    /// a notice every host prints, and the story's sentences.
    fn page(p: &IndexParams, host: usize, story: usize, edit: usize) -> Signed {
        let signer = crate::signature::Signer::new(&p.signature).unwrap();
        let text: String = (0..40)
            .map(|i| {
                let w = if i == edit % 40 { edit } else { i };
                format!("the word{w} of story{story} is told ")
            })
            .collect();
        signer.sign(&format!(
            "<div>About host{host}: the desk of the host{host} paper writes every day of \
             the week about the town</div><p>{text}</p><div>This site uses cookies to \
             measure how the site is used and to show you what you read</div>"
        ))
    }

    type Read = Vec<(Judged, Vec<(u64, String)>)>;

    /// 150 pages of five hosts: every tenth a repeated id, every seventh a copy of a page of
    /// its host.
    fn stream_pages(p: &IndexParams) -> Vec<(String, String, Signed)> {
        let mut pages: Vec<(String, String, Signed)> = Vec::new();
        for i in 0..150 {
            let (host, story) = (i % 5, i / 4);
            let id = if i % 10 == 9 {
                format!("p{}", i - 5)
            } else {
                format!("p{i}")
            };
            let signed = if i % 7 == 6 {
                pages[i - 5].2.clone()
            } else {
                page(p, host, story, i)
            };
            pages.push((id, format!("https://host{host}.test/{i}"), signed));
        }
        pages
    }

    /// Reads `pages[range]` into `shard`, the aggregator's decisions reaching it now and
    /// then (some ahead of the page): each page's judgement and votes.
    fn read_range(
        shard: &mut Shard,
        pages: &[(String, String, Signed)],
        range: std::ops::Range<usize>,
    ) -> Read {
        let dup = Decision::plain(DecisionKind::Duplicate);
        let mut out = Vec::new();
        for i in range {
            let (id, url, signed) = &pages[i];
            if i % 6 == 0 {
                shard.decided(&format!("p{}", i + 3), &dup).unwrap();
                shard
                    .decided(&format!("p{}", i.saturating_sub(8)), &dup)
                    .unwrap();
            }
            let page = PageRef {
                id,
                url,
                first_seen: i as i64,
            };
            let mut votes = Vec::new();
            let judged = shard.read(i as u64, page, signed, &mut votes).unwrap();
            let votes: Vec<(u64, String)> = votes
                .iter()
                .map(|v| (v.pos, format!("{:.6}", v.similarity)))
                .collect();
            out.push((judged, votes));
        }
        out
    }

    /// A shard stopped cleanly, its state file and snapshots written, then resumed from them
    /// on the reopened index, reads the rest of the stream as the shard that never stopped:
    /// the same judgements and votes, the same copies, waiting decisions and repeats.
    #[test]
    fn a_resumed_shard_reads_on_as_one_that_never_stopped() {
        let p = IndexParams::default();
        let pages = stream_pages(&p);
        let run = |shard: &mut Shard, range| read_range(shard, &pages, range);
        let mut whole = Shard::new(Index::memory(p.clone()).unwrap(), 0, 2).unwrap();
        let all = run(&mut whole, 0..150);
        let dir = tempfile::tempdir().unwrap();
        let mut first = Shard::new(Index::open_dir(dir.path(), p.clone()).unwrap(), 0, 2).unwrap();
        let head = run(&mut first, 0..80);
        let at = vec![Position {
            stream: "signed".into(),
            partition: 0,
            next: 80,
        }];
        let (copies, pending, ids) = (first.copies(), first.pending(), first.ids());
        let path = dir.path().join(super::super::shard_state::STATE_FILE);
        assert_eq!(first.save(&path, &at).unwrap(), ids);
        drop(first);
        let state = ShardState::load(&path).unwrap();
        assert_eq!(state.positions, at);
        let index = Index::open_dir(dir.path(), p.clone()).unwrap();
        assert!(
            index.lists_restore().is_some_and(|r| r.from_snapshot),
            "{:?}",
            index.lists_restore()
        );
        let mut resumed = Shard::resume(index, 0, 2, state.clone()).unwrap();
        assert_eq!(
            (resumed.copies(), resumed.pending(), resumed.ids()),
            (copies, pending, ids)
        );
        let tail = run(&mut resumed, 80..150);
        assert_eq!([head, tail].concat(), all);
        assert!(
            all.iter().any(|(_, v)| !v.is_empty()),
            "some pages voted for"
        );
        assert!(all.iter().any(|(j, _)| *j == Judged::Repeated));
        assert!(whole.copies() > 0 && whole.copies() == resumed.copies());
        // the state is refused by another shard, and once the index moved on
        let index = resumed.index;
        assert!(Shard::resume(index, 1, 2, state.clone()).is_err());
        let mut other = state.clone();
        other.seeds[0] ^= 1;
        let dir2 = tempfile::tempdir().unwrap();
        let fresh = Index::open_dir(dir2.path(), p).unwrap();
        let e = Shard::resume(fresh, 0, 2, other).err().unwrap().to_string();
        assert!(e.contains("index stamp"), "{e}");
    }

    #[test]
    fn a_checkpoint_copied_after_the_shard_went_on_resumes_as_the_shard_was() {
        let p = IndexParams::default();
        let pages = stream_pages(&p);
        let read_range = |shard: &mut Shard, range| read_range(shard, &pages, range);
        let dir = tempfile::tempdir().unwrap();
        let mut whole = Shard::new(Index::memory(p.clone()).unwrap(), 1, 2).unwrap();
        let all = read_range(&mut whole, 0..150);
        let work = dir.path().join("work");
        let mut first = Shard::new(Index::open_dir(&work, p.clone()).unwrap(), 1, 2).unwrap();
        let head = read_range(&mut first, 0..70);
        let at = vec![Position {
            stream: "signed".into(),
            partition: 0,
            next: 70,
        }];
        let ck = dir.path().join("checkpoint");
        let ids = first.checkpoint(&ck, &at).unwrap();
        assert_eq!(ids, first.ids());
        let (copies, pending) = (first.copies(), first.pending());
        // the shard goes on past its checkpoint (pages stored, some demoted), then dies
        read_range(&mut first, 70..130);
        drop(first);
        // twice: a copy leaves the checkpoint as it was
        for n in 0..2 {
            let copy = dir.path().join(format!("copy-{n}"));
            Index::copy_checkpoint(&ck, &copy, &[STATE_FILE]).unwrap();
            assert!(!copy.join(STATE_FILE).exists());
            let state = ShardState::load(&ck.join(STATE_FILE)).unwrap();
            assert_eq!(state.positions, at);
            let index = Index::open_dir(&copy, p.clone()).unwrap();
            assert!(
                index.lists_restore().is_some_and(|r| r.from_snapshot),
                "{:?}",
                index.lists_restore()
            );
            // a state that counts other ids read than the index holds is refused
            let mut miscounted = state.clone();
            miscounted.ids += 1;
            let e = Shard::resume(index, 1, 2, miscounted)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("ids read"), "{e}");
            let index = Index::open_dir(&copy, p.clone()).unwrap();
            let mut resumed = Shard::resume(index, 1, 2, state).unwrap();
            assert_eq!(
                (resumed.copies(), resumed.pending(), resumed.ids()),
                (copies, pending, ids)
            );
            // the copy holds the ids read before the checkpoint, not those the shard read
            // after it
            let (index, seen) = (&resumed.index, &resumed.seen);
            assert!(seen.contains(index, id_hash("p3")).unwrap());
            assert!(!seen.contains(index, id_hash("p100")).unwrap());
            let tail = read_range(&mut resumed, 70..150);
            assert_eq!([head.clone(), tail].concat(), all);
            // an id read before the checkpoint, by this shard or not, is a repeat; one read
            // only after it is not
            let mut votes = Vec::new();
            for (id, repeat) in [("p3", true), ("p4", true), ("p900", false)] {
                let page = PageRef {
                    id,
                    url: "https://host9.test/",
                    first_seen: 0,
                };
                let judged = resumed.read(150, page, &pages[0].2, &mut votes).unwrap();
                assert_eq!(judged == Judged::Repeated, repeat, "{id}: {judged:?}");
            }
        }
        // a shard's index that holds ids read, and no page (all of them another shard's),
        // does not start a new shard: its counts are of the pages read
        let lone = dir.path().join("lone");
        let mut reader = Shard::new(Index::open_dir(&lone, p.clone()).unwrap(), 1, 2).unwrap();
        let other = (0..)
            .map(|i| format!("q{i}"))
            .find(|id| !reader.owns(id))
            .unwrap();
        let page = PageRef {
            id: &other,
            url: "https://host9.test/q",
            first_seen: 0,
        };
        reader.replay(0, page, &pages[0].2).unwrap();
        assert_eq!((reader.ids(), reader.index().pages()), (1, 0));
        reader.save(&lone.join(STATE_FILE), &at).unwrap();
        drop(reader);
        let e = Shard::new(Index::open_dir(&lone, p.clone()).unwrap(), 1, 2)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("1 ids read"), "{e}");
        assert!(
            all.iter().any(|(_, v)| !v.is_empty()),
            "some pages voted for"
        );
        // a checkpoint of a store not on disk: refused with the reason
        let mut mem = Shard::new(Index::memory(p).unwrap(), 1, 2).unwrap();
        let e = mem.checkpoint(&dir.path().join("mem"), &at).unwrap_err();
        assert!(e.to_string().contains("not on disk"), "{e}");
    }
}
