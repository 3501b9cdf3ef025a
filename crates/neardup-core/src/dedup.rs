//! The Deduplicator: page in, decision out. Every front end (file mode, the streaming stage,
//! eval, benchmarks) drives this one entry point.
//!
//! Signing ([`Signer::sign`]) is pure and `Sync`: callers run it on as many threads as they
//! like. Deciding ([`Deduplicator::decide`]) takes `&mut self`, so decisions for one index are
//! made one at a time, in the caller's order, and two near-duplicates can never both be
//! judged unique.
//!
//! The rule (docs/dev/architecture.md §3): a document id that is already in the index gets its stored decision
//! (idempotent replays); fewer than `min_signatures` distinct signatures → `skipped`;
//! otherwise the candidates of the index are verified (length bound, then the similarity
//! with early exit) and the best one reaching τ makes the page a `duplicate` of it; if none
//! does the page is `unique` and is indexed. Matching uses the page's informative
//! signatures only (with document frequencies on: not outside the IDF band, not template
//! text of its host, [`crate::index::freq`]), on both sides; a page with fewer than
//! `min_signatures` of them is `unique` without a match (it has text, but too little of its
//! own to match on). With text rules 6 and later, the signatures of a page's software text
//! (short blocks that are template text of several hosts, [`crate::index::software`]) are
//! left out of matching too, fixed when the page is decided. A short page (one with a template sample: signed by its word shingles,
//! or whole) is not matched with a page of its own template; with text rules 3 and later,
//! a pair of which either page is short is not matched within one host either, in
//! whichever order the two came: a short page's few signatures, or a whole page's, hold the
//! text its site prints on every page and in every template (a consent panel, a notice,
//! the footer's prose), so another page of the site shares it whatever it is about.

use std::sync::Arc;

use crate::index::freq::host_hash;
use crate::index::{
    Candidate, Decision, DecisionKind, DocRecord, Index, IndexError, Method, SigDelta,
};
use crate::signature::{
    length_bound, mass, similarity, similarity_at_least, template, Measure, Signatures, Signed,
    Signer,
};

/// Most decisions whose log the streaming stage writes out together, holding them until it
/// has ([`crate::index::Index::flush_wal`]; `bench index` does the same every 16
/// decisions, as under full load): a batch costs one system call instead of one a decision
/// (~4 µs). Only records already signed join a batch; one still being signed, or a
/// retention sweep, sends the batch first. So a decided record waits only for the
/// decisions after it in its batch (~0.1 ms each at the decider's rate, 1.6 ms at most)
/// and their log, and a lone record is not held at all.
pub const WAL_BATCH: usize = 16;

/// A decision and whether it was stored before (a repeated id).
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The decision.
    pub decision: Decision,
    /// The id was decided before; this is the stored decision.
    pub repeated: bool,
}

/// The page fields the decision needs.
#[derive(Clone, Copy, Debug)]
pub struct PageRef<'a> {
    /// Document id.
    pub id: &'a str,
    /// URL.
    pub url: &'a str,
    /// First-seen time, Unix seconds (the caller's clock or the fetch time).
    pub first_seen: i64,
}

/// Decides pages against one index.
pub struct Deduplicator {
    signer: Arc<Signer>,
    index: Index,
    candidates: Vec<Candidate>,
}

impl Deduplicator {
    /// A deduplicator over `index`, signing with the index's own signature settings.
    pub fn new(index: Index) -> Result<Deduplicator, IndexError> {
        let signer = Signer::new(&index.params().signature)
            .map_err(|e| crate::index::IndexParamError(e.to_string()))?;
        Ok(Deduplicator {
            signer: Arc::new(signer),
            index,
            candidates: Vec::new(),
        })
    }

    /// The signer (shareable with worker threads).
    pub fn signer(&self) -> Arc<Signer> {
        Arc::clone(&self.signer)
    }

    /// The index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The index, mutably (retention sweeps, flushes).
    pub fn index_mut(&mut self) -> &mut Index {
        &mut self.index
    }

    /// Signs and decides one page.
    pub fn process(&mut self, page: PageRef<'_>, html: &str) -> Result<Outcome, IndexError> {
        let signed = self.signer.sign(html);
        self.decide(page, &signed)
    }

    /// Decides one signed page and stores the decision.
    pub fn decide(&mut self, page: PageRef<'_>, signed: &Signed) -> Result<Outcome, IndexError> {
        self.decide_marked(page, signed, None)
    }

    /// [`Deduplicator::decide`] for a driver that marks its decisions with its input's
    /// `position` ([`Index::mark_pending`]): the mark is written with the decision's
    /// document, in one write ([`Index::put_marked`]); a repeated id stores nothing and
    /// leaves no mark.
    pub fn decide_marked(
        &mut self,
        page: PageRef<'_>,
        signed: &Signed,
        mark: Option<&[u8]>,
    ) -> Result<Outcome, IndexError> {
        if let Some(rec) = self.index.find_id(page.id)? {
            return Ok(Outcome {
                decision: rec.decision,
                repeated: true,
            });
        }
        let min_signatures = self.index.params().min_signatures as usize;
        let mut delta = None;
        // software text (template text of several hosts) is not matched on, nor, with
        // document frequencies, boilerplate (outside the IDF band, or template text of the
        // host)
        let software = self.index.software_sigs(&signed.short, &signed.sigs)?;
        let matched = signed.sigs.without(&software);
        let matched = matched.as_ref().unwrap_or(&signed.sigs);
        let informative = self.index.informative(page.url, matched);
        let q = informative.as_ref().unwrap_or(matched);
        let skipped = signed.sigs.set_len() < min_signatures;
        let found = if skipped {
            None
        } else if q.set_len() < min_signatures {
            // text, but too little of its own to match on: judged, matches only a page it
            // is one page with
            self.identical_copy(signed, [matched, q], page.url)?
        } else {
            // with text rules 3 and later, short pages are matched across hosts only
            let url = (self.index.params().signature)
                .short_pages_across_hosts_only()
                .then_some(page.url);
            self.best_match(signed, q, url)?
        };
        let decision = match found {
            Some((canonical, sim, cand)) => {
                delta = Some(SigDelta::between(&signed.sigs, &canonical.sigs));
                duplicate_of(canonical, sim, cand)
            }
            None if skipped => Decision::plain(DecisionKind::Skipped),
            None => Decision::plain(DecisionKind::Unique),
        };
        let record = DocRecord {
            id: page.id.to_string(),
            url: page.url.to_string(),
            first_seen: page.first_seen,
            fingerprint: signed.fingerprint.clone(),
            sigs: signed.sigs.clone(),
            decision: decision.clone(),
            delta,
            template: signed.template.clone(),
            identity: signed.identity,
            title: signed.title,
            blocks: signed.short.blocks.clone(),
            software,
        };
        self.index.put_marked(&record, mark)?;
        Ok(Outcome {
            decision,
            repeated: false,
        })
    }

    /// The best match of a page whose informative signatures are `q`; `url` is its URL when
    /// short pages are matched across hosts only ([`Deduplicator::verify`]).
    fn best_match(
        &mut self,
        signed: &Signed,
        q: &Signatures,
        url: Option<&str>,
    ) -> Result<Option<(DocRecord, f64, Candidate)>, IndexError> {
        let mut cands = std::mem::take(&mut self.candidates);
        let mut best = None;
        let method = self.index.params().method;
        if matches!(method, Method::AlgG | Method::AlgH | Method::Chain) {
            self.index
                .fingerprint_candidates(&signed.fingerprint, &mut cands)?;
            best = self.verify(q, signed, url, &cands)?;
        }
        if best.is_none() && method.has_lists() {
            self.index.list_candidates(q, &mut cands)?;
            best = self.verify(q, signed, url, &cands)?;
        }
        self.candidates = cands;
        Ok(best)
    }

    /// The earliest unique page of the page's identity ([`crate::signature::identity`]),
    /// for a page with too few informative signatures to be matched on them: it is found
    /// among the candidates of its whole signature set (the same text has the same
    /// signatures and fingerprint, numbers aside), else of its set without software text,
    /// else of its informative set (`also`), and its similarity is that of the whole sets.
    fn identical_copy(
        &mut self,
        signed: &Signed,
        also: [&Signatures; 2],
        url: &str,
    ) -> Result<Option<(DocRecord, f64, Candidate)>, IndexError> {
        let keys = Keys::of(signed).on_host(self.host_url(url));
        if keys.identity.is_none() {
            return Ok(None);
        }
        let mut cands = std::mem::take(&mut self.candidates);
        let method = self.index.params().method;
        let m = self.index.params().measure;
        let mut best: Option<(DocRecord, f64, Candidate)> = None;
        // the lists hold a page by what it is matched on (without its software text), or by
        // its whole set when too little is left ([`DocRecord::listed_sigs`]): when the whole
        // set finds nothing, the page's set without software text, then its informative set
        // are asked (`also`)
        let mut probes = vec![&signed.sigs];
        for set in also {
            if set.set_len() > 0 && set.set_len() < probes[probes.len() - 1].set_len() {
                probes.push(set);
            }
        }
        for pass in 0..=probes.len() {
            if pass == 0 && matches!(method, Method::AlgG | Method::AlgH | Method::Chain) {
                self.index
                    .fingerprint_candidates(&signed.fingerprint, &mut cands)?;
            } else if pass > 0 && method.has_lists() {
                self.index.list_candidates(probes[pass - 1], &mut cands)?;
            } else {
                continue;
            }
            for c in &cands {
                let Some(doc) = self.index.doc(c.doc)? else {
                    continue;
                };
                if doc.decision.kind != DecisionKind::Unique || !keys.one_page(&doc) {
                    continue;
                }
                if pass > 0 && !found_at_any_prefix(&self.index, probes[pass - 1], &doc, c) {
                    continue;
                }
                if best
                    .as_ref()
                    .is_none_or(|(b, _, _)| doc.first_seen < b.first_seen)
                {
                    let sim = similarity(signed.sigs.entries(), doc.sigs.entries(), m);
                    best = Some((doc, sim, *c));
                }
            }
            if best.is_some() {
                break;
            }
        }
        self.candidates = cands;
        Ok(best)
    }

    /// `url` when pages of one host are compared on all their blocks (text rules 7 and
    /// later: [`Keys::on_host`]).
    fn host_url<'u>(&self, url: &'u str) -> Option<&'u str> {
        self.index.params().signature.host_text().then_some(url)
    }

    /// The best candidate reaching τ: highest similarity, then the earliest document. Both
    /// sides are compared on their informative signatures. Pairs [`kept_apart`] are not
    /// matched: a short page (one with a template sample) with a page of its own template,
    /// and, with `url` (the page's, text rules 3 and later), a pair of which either side is
    /// short within the page's host.
    fn verify(
        &self,
        q: &Signatures,
        signed: &Signed,
        url: Option<&str>,
        cands: &[Candidate],
    ) -> Result<Option<(DocRecord, f64, Candidate)>, IndexError> {
        let keys = Keys::of(signed).on_host(url.and_then(|u| self.host_url(u)));
        let mut rule = PairRule::new(&self.index, q, &signed.template, url).with_keys(keys);
        let mut best: Option<(DocRecord, f64, Candidate)> = None;
        for c in cands {
            let Some(doc) = self.index.doc(c.doc)? else {
                continue; // expired since it was indexed
            };
            if doc.decision.kind != DecisionKind::Unique {
                continue;
            }
            let Some(sim) = rule.similarity(&self.index, &doc) else {
                continue;
            };
            if !found_at_any_prefix(&self.index, q, &doc, c) {
                continue;
            }
            if best.as_ref().is_none_or(|(_, s, _)| sim > *s) {
                best = Some((doc, sim, *c));
            }
        }
        Ok(best)
    }
}

/// The decision that a page is a duplicate of `canonical`, found as `cand`.
fn duplicate_of(canonical: DocRecord, sim: f64, cand: Candidate) -> Decision {
    Decision {
        kind: DecisionKind::Duplicate,
        canonical_id: Some(canonical.id),
        canonical_url: Some(canonical.url),
        similarity: Some(sim),
        hamming: cand.hamming,
        found_by: Some(cand.found),
    }
}

/// The matching rule of a page and one indexed document, the one every decision uses (the
/// deduplicator's, and the shards simulation's votes): not [`kept_apart`], and at least τ
/// similar on both sides' informative signatures ([`Index::informative`]).
pub struct PairRule<'a> {
    q: &'a [(u32, u32)],
    /// τ for two pages of one host that are not one page (text rules 10 and later).
    host_tau: Option<f64>,
    mq: u64,
    tmpl: &'a [u32],
    keys: Keys<'a>,
    url: Option<&'a str>,
    host: Option<u64>,
    measure: crate::signature::Measure,
    tau: f64,
}

impl<'a> PairRule<'a> {
    /// The rule for a page of informative signatures `q`, template sample `tmpl`, and `url`
    /// when short pages are matched across hosts only (text rules 3 and later).
    pub fn new(index: &Index, q: &'a Signatures, tmpl: &'a [u32], url: Option<&'a str>) -> Self {
        let (measure, tau) = (index.params().measure, index.params().threshold);
        let q = q.entries();
        let host_tau = (index.params().signature.host_threshold() && url.is_some())
            .then(|| host_threshold(tau))
            .filter(|&t| t > tau);
        PairRule {
            q,
            host_tau,
            mq: mass(q, measure),
            tmpl,
            keys: Keys::default(),
            url,
            host: None,
            measure,
            tau,
        }
    }

    /// The rule for a page of these keys ([`Keys`]).
    pub fn with_keys(mut self, keys: Keys<'a>) -> Self {
        self.keys = keys;
        self
    }

    /// The page's similarity to `doc` when the rule matches them, else `None`.
    pub fn similarity(&mut self, index: &Index, doc: &DocRecord) -> Option<f64> {
        // the page's host is hashed once, and only when a short pair needs it
        let (url, hashed) = (self.url, &mut self.host);
        let mut host = || url.map(|u| *hashed.get_or_insert_with(|| host_hash(u)));
        if kept_apart(self.tmpl, self.keys, doc, &mut host).is_some() {
            return None;
        }
        let tau = pair_threshold(self.tau, self.host_tau, &self.keys, doc, &mut host);
        let matched = doc.matched_sigs();
        let informative = index.informative(&doc.url, &matched);
        let d = match &informative {
            Some(kept) => kept.entries(),
            None => matched.entries(),
        };
        let m = self.measure;
        if !length_bound(self.mq, mass(d, m), tau) || !similarity_at_least(self.q, d, m, tau) {
            return None;
        }
        Some(similarity(self.q, d, m))
    }
}

/// Whether the exact lists find `doc`, a candidate `c` they gave for `probe`, whatever
/// signatures they listed it under: `probe` reaches τ with the set they hold it by
/// ([`DocRecord::listed_sigs`]), which the lists guarantee to find (their module's doc). A
/// page below that may be met or not: its prefix was chosen by the lengths of the lists when
/// it was listed, which differ in another index (a shard of a sharded decider holds part of
/// the pages) and in lists rebuilt in another order after a restart. So no decision rests
/// on such a candidate, and, with the jaccard measure and without document frequencies, a
/// decision does not depend on the lists' history.
///
/// The listed set is the set a page is compared on, but for a page with too little text of
/// its own, which is listed under its whole set: only for those, and for the probes of
/// [`Deduplicator::identical_copy`], which are not the set compared, does this rule out a
/// pair the rest of the rule takes. True for a candidate of the fingerprint tables (exact
/// within their Hamming radius, with no prefix), and with the weighted measure, whose
/// candidates are not exact in this sense (the lists' module doc).
pub fn found_at_any_prefix(
    index: &Index,
    probe: &Signatures,
    doc: &DocRecord,
    c: &Candidate,
) -> bool {
    let p = index.params();
    !matches!(
        c.found,
        crate::index::Found::Spotsigs | crate::index::Found::Sentences
    ) || p.measure != Measure::Jaccard
        || similarity_at_least(
            probe.entries(),
            doc.listed_sigs(p.min_signatures as usize).entries(),
            Measure::Jaccard,
            p.threshold,
        )
}

/// What the index keeps, the same schedule for every driver: every [`Retention::EVERY`]
/// decided pages a sweep removes the documents first seen longer than the window before the
/// newest page decided so far ([`Index::expire`](crate::index::Index::expire)), and, past a
/// cap on the pages held, the oldest pages ([`Index::trim_oldest`](crate::index::Index::trim_oldest)).
///
/// The cap bounds the memory an index needs whatever the crawl sends it. The costs paid per
/// sweep that removes anything (the counts of software text made again from the pages that
/// stay, a pass over every list entry when the pages removed are many, the lists' snapshot
/// no longer of use) grow with the pages held, not with the pages removed, so both remove a
/// twentieth at a time: a sweep that finds the index over its cap trims it to
/// [`Retention::TRIM_TO`] of the cap, and the window's cutoff is moved on once it has
/// advanced by a twentieth of the window ([`Retention::STEP`]) since it last was. A page
/// then stays at most a twentieth of the window longer than the window (as a capped index
/// holds up to a twentieth more than 95 % of its cap).
#[derive(Debug, Clone)]
pub struct Retention {
    window: Option<i64>,
    max_pages: Option<u64>,
    newest: i64,
    since: u64,
    /// The cutoff of the last removal by the window (none yet: `i64::MIN`).
    cutoff: i64,
}

impl Retention {
    /// Decided pages between two sweeps.
    pub const EVERY: u64 = 10_000;

    /// The share of the cap a trimmed index keeps (95 %).
    pub const TRIM_TO: f64 = 0.95;

    /// The share of the window the cutoff advances by before the window removes again.
    pub const STEP: f64 = 1.0 - Self::TRIM_TO;

    /// A schedule for a window of `window` and a cap of `max_pages`; none when neither is
    /// set.
    pub fn new(window: Option<std::time::Duration>, max_pages: Option<u64>) -> Option<Retention> {
        (window.is_some() || max_pages.is_some()).then(|| Retention {
            window: window.map(|w| i64::try_from(w.as_secs()).unwrap_or(i64::MAX)),
            max_pages,
            newest: i64::MIN,
            since: 0,
            cutoff: i64::MIN,
        })
    }

    /// A page first seen at `first_seen` (Unix seconds) was decided.
    pub fn decided(&mut self, first_seen: i64) {
        self.newest = self.newest.max(first_seen);
        self.since += 1;
    }

    /// A sweep is due.
    pub fn due(&self) -> bool {
        self.since >= Self::EVERY
    }

    /// The sweep at the end of a run: as [`Retention::sweep`], the window removing all it
    /// leaves out however little its cutoff advanced, so that the index a run leaves holds
    /// nothing first seen longer than the window before its newest page.
    pub fn finish(&mut self, index: &mut crate::index::Index) -> Result<u64, IndexError> {
        self.cutoff = i64::MIN;
        self.sweep(index)
    }

    /// Removes what the window leaves out once its cutoff has advanced by
    /// [`Retention::STEP`] of it (at the first sweep after any page was decided, whatever
    /// it advanced), then, if the index holds more pages than the cap, its oldest pages
    /// down to [`Retention::TRIM_TO`] of the cap; returns how many documents went.
    pub fn sweep(&mut self, index: &mut crate::index::Index) -> Result<u64, IndexError> {
        self.since = 0;
        let mut removed = 0;
        if let (Some(window), true) = (self.window, self.newest != i64::MIN) {
            let cutoff = self.newest.saturating_sub(window);
            let step = (window as f64 * Self::STEP) as i64;
            if self.cutoff == i64::MIN || cutoff >= self.cutoff.saturating_add(step.max(1)) {
                removed += index.expire(cutoff)?;
                self.cutoff = cutoff;
            }
        }
        if let Some(max) = self.max_pages.filter(|&m| index.pages() > m) {
            removed += index.trim_oldest((max as f64 * Self::TRIM_TO) as u64)?;
        }
        Ok(removed)
    }
}

/// Why two pages are not matched whatever their similarity ([`kept_apart`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeptApart {
    /// The later page is short (it has a template sample) and laid out in the earlier
    /// one's template.
    SameTemplate,
    /// One of them is short and both are of one host (text rules 3 and later).
    SameHost,
    /// Both are of one host and show less than half of the same blocks (text rules 7 and
    /// later).
    OtherText,
}

/// What says that a page and an earlier one are one page, whatever rule would keep them
/// apart ([`crate::signature::identity`]): the same whole visible text (numbers aside,
/// blocks in any order), or the same title and the same signature set; and, with text rules
/// 7, what says that two pages of one host are not ([`Keys::other_text`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Keys<'a> {
    /// The page's identity.
    pub identity: Option<u64>,
    /// The hash of its title.
    pub title: Option<u64>,
    /// Its whole signature set.
    pub sigs: Option<&'a Signatures>,
    /// Its blocks ([`crate::signature::ShortBlocks::blocks`]).
    pub blocks: &'a [u32],
    /// Its host's hash, when pages of one host are compared on all their blocks (text
    /// rules 7 and later).
    pub host: Option<u64>,
}

/// The similarity two pages of one host (lowercased, without `www.` and port) must reach to
/// be matched, unless they are one page ([`Keys::one_page`]) or τ is higher (text rules 10
/// and later; [`host_threshold`]).
///
/// **Principle.** A host publishes a document once. A second page of one host with a
/// document's text is that document again: a re-fetch, another URL of it (a session or
/// tracking parameter), a print or AMP view, an aggregator's whole copy. It shows the text
/// whole, so the two agree as a text agrees with itself, up to what a rendering changes
/// (a headline, a dropped paragraph, an editor's note). Two documents of one host that share
/// half their text are two stories on one subject (a wire story and the host's rewrite, an
/// update, a follow-up, a variant of a product), and they share the host's template besides,
/// which any text the extraction keeps of it makes more alike. Across hosts the other way
/// round: an outlet republishing a story edits it (cuts, its own headline and residue), and
/// half the text shared is a copy, which is what τ = 0.5 says. On the three labelled
/// corpora, 1,082 of the 1,087 gold pairs of one host signed in one family have signature
/// sets at 0.7 or more (the other five: 0.60–0.68, edited copies).
pub const HOST_THRESHOLD: f64 = 0.7;

/// The similarity two pages of one host that are not one page must reach at index
/// threshold `tau`: [`HOST_THRESHOLD`], or `tau` when higher.
pub fn host_threshold(tau: f64) -> f64 {
    tau.max(HOST_THRESHOLD)
}

/// The similarity a page of `keys` must reach to be matched with `doc`: `host_tau` (the
/// index's [`host_threshold`] at text rules 10 and later, `None` before) when it is above
/// `tau`, the two pages are of one host (`host` gives the page's host hash) and they are not
/// one page ([`Keys::one_page`]); `tau` otherwise. The rule of every decision
/// ([`PairRule`]) and of `explain`.
pub fn pair_threshold(
    tau: f64,
    host_tau: Option<f64>,
    keys: &Keys,
    doc: &DocRecord,
    host: impl FnOnce() -> Option<u64>,
) -> f64 {
    match host_tau {
        Some(t) if t > tau && host() == Some(host_hash(&doc.url)) && !keys.one_page(doc) => t,
        _ => tau,
    }
}

/// The share of the smaller page's blocks that two pages of one host signed on the same
/// text must both show to be matched (text rules 7 and later, [`Keys::other_text`]).
pub const HOST_BLOCKS_SHARED: f64 = 0.5;

impl<'a> Keys<'a> {
    /// The keys of a signed page.
    pub fn of(signed: &'a Signed) -> Keys<'a> {
        Keys {
            identity: signed.identity,
            title: signed.title,
            sigs: Some(&signed.sigs),
            blocks: &signed.short.blocks,
            host: None,
        }
    }

    /// The keys with the page's host taken from `url`, when pages of one host are compared
    /// on all their blocks (`url` given: text rules 7 and later) and the page lists some.
    pub fn on_host(mut self, url: Option<&str>) -> Self {
        self.host = url.filter(|_| !self.blocks.is_empty()).map(host_hash);
        self
    }

    /// Whether the page and the earlier page `doc` are two pages of one host, signed on the
    /// same text word for word (one signature set), that show different text: less than
    /// [`HOST_BLOCKS_SHARED`] of the smaller one's blocks are shown by both
    /// ([`crate::signature::software::containment`]).
    ///
    /// **Principle.** A host prints its template (an author box, a newsletter header, an
    /// events panel) on every page, around text of each page's own. Text a host repeats on
    /// pages whose other text differs is that host's template (site-level template
    /// detection: Bar-Yossef & Rajagopalan, 2002): two of its pages signed on the same text
    /// word for word that do not show most of the same blocks were signed on the template
    /// (the extraction missed each page's own text), whatever their titles say (a blog's
    /// title is often its name). A copy of a page on its own host (a re-fetch, a second
    /// URL, a print view) shows most of the same blocks, whichever of the two holds more:
    /// the share is of the smaller page's blocks. Pages whose signed texts differ at all
    /// are left to the similarity: an article laid out twice on one host, each time among
    /// other teasers, can show less than half of the same blocks (measured on the dev
    /// pages: a pair at 0.48, similarity 0.94), and an edit is evidence of an article, not
    /// of a template, which is the same on every page.
    pub fn other_text(&self, doc: &DocRecord) -> bool {
        let Some(host) = self.host else {
            return false;
        };
        self.same_sigs(doc)
            && crate::signature::software::containment(self.blocks, &doc.blocks)
                .is_some_and(|shared| shared < HOST_BLOCKS_SHARED)
            && host_hash(&doc.url) == host
    }

    /// Whether the page and `doc` are one page: one identity, or one title and one
    /// (non-empty) signature set unless they are pages of one host showing different text
    /// ([`Keys::other_text`]: the title and the signed text are then the host's template).
    pub fn one_page(&self, doc: &DocRecord) -> bool {
        self.same_identity(doc) || (!self.other_text(doc) && self.same_title_and_sigs(doc))
    }

    /// One identity: the same whole visible text.
    fn same_identity(&self, doc: &DocRecord) -> bool {
        self.identity.is_some() && self.identity == doc.identity
    }

    /// One (non-empty) signature set.
    fn same_sigs(&self, doc: &DocRecord) -> bool {
        (self.sigs).is_some_and(|s| s.set_len() > 0 && s.entries() == doc.sigs.entries())
    }

    /// One title and one (non-empty) signature set.
    fn same_title_and_sigs(&self, doc: &DocRecord) -> bool {
        self.title.is_some() && self.title == doc.title && self.same_sigs(doc)
    }
}

/// Whether a page with template sample `tmpl` (empty unless it is short) and keys `keys` is
/// kept apart from the earlier page `doc` whatever their similarity: two pages of one host
/// that show different text are not matched (text rules 7 and later, [`Keys::other_text`]);
/// a short page is not matched with a page of its own template
/// ([`crate::signature::template`]), and, where `host` gives the page's host hash (text
/// rules 3 and later: [`host_hash`] of its URL; asked only when one side is short), a pair
/// of which either side is short is not matched within a host. These rules exist because
/// a page's signatures can be its site's own text; two pages that are one page
/// ([`Keys::one_page`]: the same whole visible text, or the same title and signed text on
/// pages that do not show different text) are a page and its copy, and nothing keeps them
/// apart.
pub fn kept_apart(
    tmpl: &[u32],
    keys: Keys<'_>,
    doc: &DocRecord,
    host: &mut dyn FnMut() -> Option<u64>,
) -> Option<KeptApart> {
    if keys.same_identity(doc) {
        return None;
    }
    if keys.other_text(doc) {
        return Some(KeptApart::OtherText);
    }
    if keys.same_title_and_sigs(doc) {
        return None;
    }
    if !tmpl.is_empty() && template::same(tmpl, &doc.template) {
        return Some(KeptApart::SameTemplate);
    }
    if tmpl.is_empty() && doc.template.is_empty() {
        return None;
    }
    host()
        .filter(|&h| host_hash(&doc.url) == h)
        .map(|_| KeptApart::SameHost)
}

mod decided;
mod seen;
pub mod shard_state;
pub mod sharded;

#[cfg(test)]
mod tests;
