//! `--role aggregator`: the aggregator of a decider split by owned pages (docs/scale-out.md,
//! "Past one decider"). It reads the signed topic and every shard's partition of the votes
//! topic, joins them on the signed record's offset, decides each page in the signed topic's
//! order from every shard's votes ([`crate::dedup::sharded::Aggregator`]) and writes the
//! tagged record a decider writes for the same decision, byte for byte (a dead letter for a
//! signed record that is not one).
//!
//! Its state (every decision by id, and which pages were decided unique) is a function of
//! what it read, in order: a start without a state file reads its inputs from their start,
//! decides again without writing up to the signed offset its group committed, and writes
//! from there. The decisions are kept on disk, in a store in `aggregator/decisions/` under
//! the index directory; the rest is written to a state file in `aggregator/`
//! ([`crate::dedup::shard_state::AggregatorState`]), the store made durable first, at a clean
//! stop and, as a checkpoint, after a commit every [`super::checkpoint::CHECKPOINT_EVERY`];
//! the next start takes up the last one written with the store and reads on from the
//! offsets it is of, deciding again without writing up to the committed offset, so that a
//! killed aggregator reads back what came after its last checkpoint instead of its topics
//! from their start.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use rdkafka::message::{BorrowedMessage, Message};
use tracing::{info, warn};

use super::checkpoint::Checkpoints;
use super::decide::{max_output_bytes, tagged_headers, tagged_payload};
use super::flow::{HEADER_DECISION, HEADER_REASON, HEADER_SCHEMA};
use super::lease::{Step, Turn};
use super::link::Link;
use super::settings::StageSettings;
use crate::dedup::shard_state::{
    names_all, offsets_of, AggregatorState, Position, AGGREGATOR_DECISIONS, AGGREGATOR_STATE_FILE,
};
use crate::dedup::sharded::{Aggregator, Judged, Vote};
use crate::index::DecisionKind;
use crate::record::signed::{signature_id, SignedRecord};
use crate::record::votes::{Parts, VotesRecord};
use crate::record::{self, DeadLetter, Source};
use crate::telemetry::{self as tm, Health};

/// Bytes of signed records held before every shard's votes for them are in, at most: past
/// it the signed topic is paused until half of them are decided. (A pause drops what the
/// client had fetched of the partition, which is fetched again on resume: the bound is
/// several fetches, so that pauses stay rare.)
const HELD_SIGNED_BYTES: usize = 256 << 20;

/// Votes records of one shard held before the others catch up, at most: past it that
/// partition is paused until half of them are joined.
const HELD_VOTES: usize = 200_000;

/// What the aggregator decided, for the summary.
#[derive(Default)]
pub(super) struct AggregateCounts {
    pub(super) records: u64,
    pub(super) replayed: u64,
    pub(super) unique: u64,
    pub(super) duplicate: u64,
    pub(super) skipped: u64,
    pub(super) dead_letter: u64,
    pub(super) repeated: u64,
    /// Stopped because the lease went to the other process (a standby took over).
    pub(super) lost_lease: bool,
}

/// A signed record waiting for its votes.
struct Held {
    offset: i64,
    key: Option<Vec<u8>>,
    payload: Vec<u8>,
}

/// The inputs, as read and not yet joined.
struct Queues {
    signed: VecDeque<Held>,
    /// Bytes of the signed records held.
    signed_bytes: usize,
    votes: Vec<VecDeque<VotesRecord>>,
    /// Per votes partition, beside `votes`: the offset each record held began at (its first
    /// part's), where a state file written now must read it again from.
    votes_at: Vec<VecDeque<i64>>,
    /// Per votes partition: the parts of a record written in parts, until the last.
    parts: Vec<Parts>,
    /// Per votes partition: the offset of the first part of the record in `parts`.
    part_from: Vec<Option<i64>>,
    /// Per votes partition: the offset after the last record read.
    votes_next: Vec<i64>,
    paused: Vec<bool>,
}

/// Runs the aggregator until a stop.
pub(super) fn run(s: &StageSettings, health: &Arc<Health>) -> Result<AggregateCounts> {
    let dir = s.index.join("aggregator");
    let mut link = Link::new(s, health)?;
    link.check_topics(s)?;
    let signed_t = s.signed_topic.as_str();
    let votes_t = s.votes_topic.as_str();
    let mut parts: Vec<(&str, i32)> = vec![(signed_t, 0)];
    parts.extend((0..s.shards).map(|k| (votes_t, k as i32)));
    for (t, p) in &parts {
        link.check_kept_whole(t, *p)?;
    }
    let mut committed = link.committed(&parts[..1])?[0];
    // (once the brokers answered: a start that fails before keeps the state file)
    let state = take_state(&dir, s.shards, &parts);
    // where the state file left off in each input (0: their start); a state past the
    // group's committed offset is not of this group's stream (a topic or the group made
    // again): the aggregator starts empty
    let (resumed, at) = match state {
        Some((aggregator, positions)) => {
            let at = offsets_of(&positions, &parts);
            if at[0] > committed {
                warn!(
                    state_at = at[0],
                    committed,
                    "the aggregator's state file is past its group's committed offset: \
                     starting empty and reading the topics from their start"
                );
                (None, vec![0; parts.len()])
            } else {
                (Some(aggregator), at)
            }
        }
        None => (None, vec![0; parts.len()]),
    };
    let aggregator = match resumed {
        Some(a) => a,
        None => {
            let store = dir.join(AGGREGATOR_DECISIONS);
            Aggregator::create(&store).map_err(|e| {
                anyhow::anyhow!(
                    "cannot make the aggregator's store of decisions at {}: {e} (the \
                     aggregator keeps every decision on disk, under --index: give it a \
                     directory of its own that it can write)",
                    store.display()
                )
            })?
        }
    };
    link.assign_at(&parts, &at)?;
    info!(
        shards = s.shards,
        committed,
        from = at[0],
        standby = s.standby,
        "reading the signed topic and the votes from the offsets the aggregator's state is of \
         (their start without one); deciding again without writing up to the committed offset"
    );
    health.assigned.store(parts.len(), Ordering::Relaxed);
    if committed > at[0] {
        *health.restoring.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
            "deciding the signed topic again up to offset {committed}"
        ));
    }
    health
        .index_open
        .store(committed <= at[0], Ordering::Relaxed);
    health.publish();

    let mut a = Agg {
        s,
        want: signature_id(&s.params.signature),
        fp_words: (s.params.signature.fingerprint_bits / 64) as usize,
        params_id: record::params_id(&s.params),
        max_out: max_output_bytes(s),
        aggregator,
        votes: Vec::new(),
        counts: AggregateCounts::default(),
    };
    let mut q = Queues {
        signed: VecDeque::new(),
        signed_bytes: 0,
        votes: vec![VecDeque::new(); s.shards],
        votes_at: vec![VecDeque::new(); s.shards],
        parts: (0..s.shards).map(|_| Parts::default()).collect(),
        part_from: vec![None; s.shards],
        votes_next: at[1..].to_vec(),
        paused: vec![false; s.shards + 1],
    };
    let mut next = at[0];
    let mut ready = committed <= next;
    let mut checkpoints = Checkpoints::new(!ready);
    let mut turn = Turn::new(s);
    // the signed offset this process last committed (or found committed)
    let mut mine = committed;
    let started = Instant::now();
    while !s.shutdown.requested() {
        // read up to the committed offset: decided again to it, or the next signed record
        // held is past it
        let caught_up = next >= committed
            || q.signed.front().is_some_and(|h| h.offset >= committed)
            || (q.signed.is_empty() && link.position(signed_t, 0) >= committed);
        let step = turn.step(s, &mut link, &parts, caught_up, &mut committed, health)?;
        if step == Step::Lost {
            info!(
                "the lease went to the other aggregator: stopping, writing and committing \
                nothing more (a restart follows it)"
            );
            a.counts.lost_lease = true;
            // what it decided past its last commit was fenced: a state file of it would be
            // refused, and the last checkpoint, of committed offsets, stays
            if next <= mine.max(committed) {
                save_state(&dir, &mut a.aggregator, s, &q, next);
            }
            return Ok(a.counts);
        }
        // a follower decides again up to the committed offset only
        let limit = if step == Step::Write {
            i64::MAX
        } else {
            committed
        };
        if let Some(m) = link.poll() {
            q.take(&m, s)?;
        }
        // every signed record whose votes are all in, in order
        while let Some(joined) = q.join(limit)? {
            let (held, votes) = joined;
            let offset = held.offset;
            let write = offset >= committed;
            a.decide(&mut link, held, &votes, write)?;
            next = offset + 1;
            if !write {
                a.counts.replayed += 1;
                continue;
            }
            a.counts.records += 1;
            health.progressed();
        }
        // (past the last record before the committed offset may come only the markers of
        // transactions: read past them with nothing held is read up to it)
        if !ready
            && (next >= committed
                || (q.signed.is_empty() && link.position(signed_t, 0) >= committed))
        {
            ready = true;
            *health.restoring.lock().unwrap_or_else(|p| p.into_inner()) = None;
            health.index_open.store(true, Ordering::Relaxed);
            health.publish();
            info!(
                replayed = a.counts.replayed,
                seconds = started.elapsed().as_secs_f64(),
                "decided the signed topic again up to the committed offset: writing"
            );
        }
        q.flow(&link, s)?;
        if turn.writing() && link.due() {
            // (while deciding again, the committed offset again: it never goes back)
            link.commit(&q.offsets(signed_t, votes_t, next.max(committed)))?;
            mine = next.max(committed);
            // a checkpoint is of offsets the group committed: `next` now is
            if ready && checkpoints.due() {
                checkpoints.write(next, || save_state(&dir, &mut a.aggregator, s, &q, next));
            }
        } else if !turn.writing() && ready && next <= committed && checkpoints.due() {
            // a follower decides up to the committed offset: where it is was committed
            checkpoints.write(next, || save_state(&dir, &mut a.aggregator, s, &q, next));
        }
    }
    health.draining.store(true, Ordering::Relaxed);
    health.publish();
    // never by a follower
    if turn.writing() && next > committed {
        link.commit(&q.offsets(signed_t, votes_t, next))?;
    }
    save_state(&dir, &mut a.aggregator, s, &q, next);
    Ok(a.counts)
}

/// The aggregator as its last state file left it (a clean stop's or a checkpoint's), with
/// the positions its state is of, when `dir` holds one this build can take up
/// ([`Aggregator::resume`]). The file stays: it is of offsets the group committed, which
/// only move forward, so an aggregator killed before its next checkpoint takes it up again
/// and decides again, without writing, what came after it.
fn take_state(
    dir: &Path,
    shards: usize,
    parts: &[(&str, i32)],
) -> Option<(Aggregator, Vec<Position>)> {
    let path = dir.join(AGGREGATOR_STATE_FILE);
    if !path.exists() {
        return None;
    }
    let started = Instant::now();
    let resumed = AggregatorState::load(&path)
        .map_err(anyhow::Error::from)
        .and_then(|state| {
            // of another signed or votes topic, it is of another stream
            if !names_all(&state.positions, parts) {
                bail!(
                    "it is not of the topics read ({parts:?}): it names {:?}",
                    state
                        .positions
                        .iter()
                        .map(|p| (&p.stream, p.partition))
                        .collect::<Vec<_>>()
                );
            }
            let positions = state.positions.clone();
            let store = dir.join(AGGREGATOR_DECISIONS);
            Ok((Aggregator::resume(shards, state, &store)?, positions))
        });
    match resumed {
        Ok((aggregator, positions)) => {
            info!(
                decided = aggregator.decided(),
                seconds = started.elapsed().as_secs_f64(),
                "took the aggregator up from its state file (written at its last clean stop or \
                 checkpoint)"
            );
            Some((aggregator, positions))
        }
        Err(e) => {
            warn!(
                error = format!("{e:#}"),
                "the aggregator's state file cannot be taken up: reading the topics from their \
                 start"
            );
            None
        }
    }
}

/// Writes the aggregator's state file as of `next` in the signed topic and, in each votes
/// partition, the first record not joined yet, so that the next start takes up from there.
/// A state file it cannot write is said and left: the next start takes up the one before.
fn save_state(
    dir: &Path,
    aggregator: &mut Aggregator,
    s: &StageSettings,
    q: &Queues,
    next: i64,
) -> bool {
    let started = Instant::now();
    let mut positions = vec![Position {
        stream: s.signed_topic.clone(),
        partition: 0,
        next,
    }];
    for k in 0..s.shards {
        positions.push(Position {
            stream: s.votes_topic.clone(),
            partition: k as i32,
            next: q.votes_at[k]
                .front()
                .copied()
                .or(q.part_from[k])
                .unwrap_or(q.votes_next[k]),
        });
    }
    let path: PathBuf = dir.join(AGGREGATOR_STATE_FILE);
    match std::fs::create_dir_all(dir).and_then(|()| aggregator.save(s.shards, &positions, &path)) {
        Ok(()) => {
            info!(
                at = next,
                decided = aggregator.decided(),
                seconds = started.elapsed().as_secs_f64(),
                "wrote the aggregator's state file: the next start takes up from here"
            );
            true
        }
        Err(e) => {
            warn!(
                error = %e,
                path = %path.display(),
                "cannot write the aggregator's state file: the next start takes up the one \
                 before it, if any, or reads the topics from their start"
            );
            false
        }
    }
}

impl Queues {
    /// Holds a record read.
    fn take(&mut self, m: &BorrowedMessage<'_>, s: &StageSettings) -> Result<()> {
        let payload = m.payload().unwrap_or_default();
        if m.topic() == s.signed_topic {
            self.signed_bytes += payload.len();
            self.signed.push_back(Held {
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                payload: payload.to_vec(),
            });
            return Ok(());
        }
        let k = m.partition() as usize;
        let v = VotesRecord::decode(payload, s.shards).map_err(|e| {
            anyhow::anyhow!(
                "votes record at {}:{}:{}: {e}",
                m.topic(),
                m.partition(),
                m.offset()
            )
        })?;
        if v.shard != k {
            bail!(
                "votes record at {}:{}:{} was written by shard {}: each shard writes its own \
                 partition",
                m.topic(),
                k,
                m.offset(),
                v.shard
            );
        }
        let offset = m.offset();
        self.votes_next[k] = offset + 1;
        // a record begins at a whole record or a first part
        if v.part.unwrap_or(0) == 0 {
            self.part_from[k] = Some(offset);
        }
        let from = self.part_from[k].unwrap_or(offset);
        if let Some(v) = self.parts[k].join(v) {
            self.votes[k].push_back(v);
            self.votes_at[k].push_back(from);
            self.part_from[k] = None;
        }
        Ok(())
    }

    /// The first signed record and every shard's votes for it, once all are in and its
    /// offset is below `limit`. A votes record for an offset already joined (written again
    /// by a shard that restarted under at-least-once) is dropped.
    fn join(&mut self, limit: i64) -> Result<Option<(Held, Vec<VotesRecord>)>> {
        let Some(front) = self.signed.front().filter(|f| f.offset < limit) else {
            return Ok(None);
        };
        let offset = front.offset;
        for (k, q) in self.votes.iter_mut().enumerate() {
            while q.front().is_some_and(|v| v.offset < offset) {
                q.pop_front();
                self.votes_at[k].pop_front();
            }
            match q.front() {
                None => return Ok(None),
                Some(v) if v.offset > offset => bail!(
                    "shard {k} wrote no votes for the signed record at offset {offset} (its \
                     next votes are for offset {}): the shards and the aggregator must read \
                     the same signed topic",
                    v.offset
                ),
                Some(_) => {}
            }
        }
        let held = self.signed.pop_front().expect("front");
        self.signed_bytes -= held.payload.len();
        let votes = self
            .votes
            .iter_mut()
            .map(|q| q.pop_front().expect("joined"))
            .collect();
        for at in &mut self.votes_at {
            at.pop_front();
        }
        Ok(Some((held, votes)))
    }

    /// Pauses an input that is far ahead, resumes one the others caught up with.
    fn flow(&mut self, link: &Link, s: &StageSettings) -> Result<()> {
        let held = std::iter::once((self.signed_bytes, HELD_SIGNED_BYTES))
            .chain(self.votes.iter().map(|q| (q.len(), HELD_VOTES)));
        for (i, (len, most)) in held.enumerate().collect::<Vec<_>>() {
            let pause = len >= most;
            if pause != self.paused[i] && (pause || len < most / 2) {
                let (t, p) = match i {
                    0 => (s.signed_topic.as_str(), 0),
                    k => (s.votes_topic.as_str(), k as i32 - 1),
                };
                link.pause(t, p, pause)?;
                self.paused[i] = pause;
            }
        }
        Ok(())
    }

    /// The offsets to commit: the signed topic's after the last record decided, each votes
    /// partition's after the last record read (for the lag: what is held past it is read
    /// again at the next start, from the start or from where its state file says).
    fn offsets<'t>(&self, signed: &'t str, votes: &'t str, next: i64) -> Vec<(&'t str, i32, i64)> {
        let mut o = vec![(signed, 0, next)];
        for (k, n) in self.votes_next.iter().enumerate() {
            if *n > 0 {
                o.push((votes, k as i32, *n));
            }
        }
        o
    }
}

/// What deciding needs between records.
struct Agg<'a> {
    s: &'a StageSettings,
    want: String,
    fp_words: usize,
    params_id: String,
    max_out: usize,
    aggregator: Aggregator,
    votes: Vec<Vote>,
    counts: AggregateCounts,
}

impl Agg<'_> {
    /// Decides one signed record from every shard's votes and, when `write`, writes its
    /// output as a decider does.
    fn decide(
        &mut self,
        link: &mut Link,
        held: Held,
        shards: &[VotesRecord],
        write: bool,
    ) -> Result<()> {
        let judged = shards[0].judgement();
        if let Some(k) = shards.iter().position(|v| v.judgement() != judged) {
            bail!(
                "the shards judged the signed record at offset {} differently (shard 0: {}, \
                 shard {k}: {}): they must run one version with the same settings",
                held.offset,
                shards[0].judged,
                shards[k].judged
            );
        }
        let decoded = SignedRecord::decode(&held.payload, &self.want, self.fp_words);
        let (page, signed, has_text, judged) = match (decoded, judged) {
            (Err(bad), None) => {
                self.counts.dead_letter += 1;
                if write {
                    metrics::counter!(tm::DEAD_LETTERS, "reason" => bad.reason.as_str())
                        .increment(1);
                    let src = Source::Kafka {
                        topic: self.s.signed_topic.clone(),
                        partition: 0,
                        offset: held.offset,
                    };
                    let dl = DeadLetter::fitting(&bad, src, &held.payload, self.max_out);
                    link.send(
                        &self.s.dead_letter_topic,
                        None,
                        held.key.as_deref(),
                        &serde_json::to_vec(&dl)?,
                        &[
                            (HEADER_DECISION, "dead_letter".into()),
                            (HEADER_REASON, bad.reason.as_str().into()),
                            (HEADER_SCHEMA, record::DEAD_LETTER_SCHEMA.into()),
                        ],
                    )?;
                }
                return Ok(());
            }
            (Ok((page, signed, has_text, _)), Some(j)) => (page, signed, has_text, j),
            (Err(bad), Some(_)) => bail!(
                "the shards read the signed record at offset {} and this aggregator cannot \
                 ({}): they must run one version with the same signature settings",
                held.offset,
                bad.detail
            ),
            (Ok(_), None) => bail!(
                "the shards could not read the signed record at offset {} and this \
                 aggregator can: they must run one version with the same signature settings",
                held.offset
            ),
        };
        if shards.iter().any(|v| v.id != page.doc_id) {
            bail!(
                "the votes for the signed record at offset {} name another page than {}",
                held.offset,
                page.doc_id
            );
        }
        self.votes.clear();
        self.votes
            .extend(shards.iter().flat_map(|r| r.votes.iter().cloned()));
        let decision =
            self.aggregator
                .decide(held.offset as u64, &page.doc_id, judged, self.votes.iter())?;
        let repeated = judged == Judged::Repeated;
        if !write {
            return Ok(());
        }
        if repeated {
            self.counts.repeated += 1;
            metrics::counter!(tm::REPEATED_IDS).increment(1);
        }
        let (payload, label) = tagged_payload(
            self.s,
            &self.params_id,
            self.max_out,
            &page,
            &signed,
            &decision,
            repeated,
            has_text,
        )?;
        let topic = match decision.kind {
            DecisionKind::Unique => {
                self.counts.unique += 1;
                &self.s.unique_topic
            }
            DecisionKind::Skipped => {
                self.counts.skipped += 1;
                &self.s.unique_topic
            }
            DecisionKind::Duplicate => {
                self.counts.duplicate += 1;
                &self.s.duplicate_topic
            }
        };
        link.send(
            topic,
            None,
            held.key.as_deref(),
            &payload,
            &tagged_headers(&page.doc_id, &decision, label),
        )?;
        metrics::counter!(tm::RECORDS_OUT, "topic" => topic.clone(), "decision" => label)
            .increment(1);
        Ok(())
    }
}
