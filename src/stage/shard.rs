//! `--role shard`: one shard of a decider split by owned pages (docs/scale-out.md, "Past
//! one decider"). It reads every record of the signed topic in order, judges each page,
//! holds the pages whose id hashes to it ([`crate::dedup::sharded::Shard`]) and writes a
//! votes record for every signed record to its partition of the votes topic.
//!
//! Its state (the pages it holds, the software-text counts and the ids of every page) is a
//! function of the signed records read, in order. A start without a state file or a
//! checkpoint reads the signed topic from its start: up to the offset its group committed it
//! only replays the pages (no probe, no record written), then it decides from there. So it
//! needs no volume, and a restart, a kill or a lost pod leaves its state as at its last
//! commit. A clean stop writes the state beside the index ([`crate::dedup::shard_state`]),
//! and the next start takes it up and reads on from the offsets it is of. While it decides,
//! a shard writes a checkpoint of offsets its group committed ([`Shard::checkpoint`]: a copy
//! of its index and its state file, in `shard-K-of-S.checkpoint` beside its directory) on
//! the schedule of [`super::checkpoint`]; a start without a clean stop's state file makes its
//! directory a working copy of the checkpoint and replays only what came after it.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rdkafka::message::{Headers, Message, OwnedMessage};
use tracing::{info, warn};

use super::checkpoint::Checkpoints;
use super::flow::{HEADER_DECISION, HEADER_ID};
use super::lease::{Step, Turn};
use super::link::Link;
use super::settings::StageSettings;
use crate::dedup::shard_state::{names_all, offsets_of, Position, ShardState, STATE_FILE};
use crate::dedup::sharded::{Shard, Vote};
use crate::dedup::PageRef;
use crate::index::Index;
use crate::record::signed::{signature_id, SignedRecord};
use crate::record::votes::VotesRecord;
use crate::telemetry::{self as tm, Health};

/// What a shard read, for the summary.
#[derive(Default)]
pub(super) struct ShardCounts {
    pub(super) records: u64,
    pub(super) replayed: u64,
    /// Pages taken out of the lists as the aggregator decided them duplicates.
    pub(super) demoted: u64,
    /// Stopped because the lease went to the other process (a standby took over).
    pub(super) lost_lease: bool,
}

/// Runs shard `s.shard` of `s.shards` until a stop (or, with a standby, until the lease
/// goes to the other process).
pub(super) fn run(s: &StageSettings, health: &Arc<Health>) -> Result<ShardCounts> {
    let dir = shard_dir(s);
    let mut link = Link::new(s, health)?;
    link.check_topics(s)?;
    let topic = s.signed_topic.as_str();
    link.check_kept_whole(topic, 0)?;
    let mut committed = link.committed(&[(topic, 0)])?[0];
    // the aggregator's decisions, read from their start beside the signed topic: the
    // duplicates this shard owns leave its lists (they may be gone from a topic with a
    // retention window: the pages they name then stay, which costs memory, not decisions)
    let decisions = s.duplicate_topic.as_str();
    let mut parts = vec![(topic, 0)];
    parts.extend((0..link.partitions(decisions)?).map(|p| (decisions, p as i32)));
    // (once the brokers answered: a start that fails before keeps the state file)
    let (mut shard, state) = open(s, &dir, committed)?;
    // where the state file left off in each of them (0: their start)
    let mut at = offsets_of(state.as_deref().unwrap_or_default(), &parts);
    let resumed = at[0] > 0;
    link.assign_at(&parts, &at)?;
    info!(
        shard = s.shard,
        shards = s.shards,
        committed,
        from = at[0],
        resumed,
        standby = s.standby,
        "reading the signed topic from the offset the shard's state is of (its start without \
         one); replaying up to the committed offset"
    );
    // ready once the state of the last commit is back
    health.assigned.store(1, Ordering::Relaxed);
    if committed > at[0] {
        set_restoring(
            health,
            Some(format!(
                "replaying the signed topic up to offset {committed}"
            )),
        );
    } else {
        health.index_open.store(true, Ordering::Relaxed);
        health.publish();
    }

    let mut r = Reader {
        want: signature_id(&s.params.signature),
        fp_words: (s.params.signature.fingerprint_bits / 64) as usize,
        votes: Vec::new(),
        counts: ShardCounts::default(),
    };
    let mut turn = Turn::new(s);
    // following: the first signed record at or past the committed offset, held (its
    // partition paused) until the offset moves past it or this process takes over
    let mut held: Option<OwnedMessage> = None;
    let mut next = at[0];
    let mut ready = committed <= next;
    let mut checkpoints = Checkpoints::new(!ready);
    // the signed offset this process last committed (or found committed)
    let mut mine = committed;
    let started = Instant::now();
    while !s.shutdown.requested() {
        // (the consumer's position asked only while it matters: not a record at a time)
        let caught_up = held.is_some()
            || (ready && !turn.needs_catch_up())
            || link.position(topic, 0) >= committed;
        if !ready && caught_up {
            ready = true;
            set_restoring(health, None);
            health.index_open.store(true, Ordering::Relaxed);
            health.publish();
            info!(
                replayed = r.counts.replayed,
                seconds = started.elapsed().as_secs_f64(),
                pages = shard.index().pages(),
                "replayed the signed topic up to the committed offset"
            );
        }
        let step = turn.step(s, &mut link, &parts, caught_up, &mut committed, health)?;
        if step == Step::Lost {
            info!(
                "the lease went to the other process of this shard: stopping, writing and \
                committing nothing more (a restart follows it)"
            );
            r.counts.lost_lease = true;
            // what it read past its last commit was fenced: a state file of it would be
            // refused (and the checkpoint, of committed offsets, stays)
            if next <= mine.max(committed) {
                save_state(&dir, &mut shard, &parts, &at, next);
            }
            return Ok(r.counts);
        }
        // a checkpoint is of offsets the group committed: a writer's after its commit, a
        // follower's up to the committed offset
        if ready && next <= mine.max(committed) && checkpoints.due() {
            checkpoints.write((next, at.clone()), || {
                checkpoint(s, &mut shard, &parts, &at, next)
            });
        }
        if let Some(m) = held.take() {
            if step == Step::Write || m.offset() < committed {
                link.pause(topic, 0, false)?;
                next = m.offset() + 1;
                if let Some(out) = r.signed(&mut shard, &m, committed)? {
                    r.answer(s, &mut link, out, health)?;
                }
            } else {
                held = Some(m);
            }
        }
        let Some(m) = link.poll() else {
            if turn.writing() && link.due() {
                // (while replaying, the committed offset again: it never goes back)
                link.commit(&[(topic, 0, next.max(committed))])?;
                mine = next.max(committed);
            }
            continue;
        };
        if m.topic() != topic {
            if let Some(i) = parts
                .iter()
                .position(|&(t, p)| t == m.topic() && p == m.partition())
            {
                at[i] = m.offset() + 1;
            }
            if demote(&mut shard, &m)? {
                r.counts.demoted += 1;
                metrics::counter!(tm::SHARD_DEMOTED).increment(1);
            }
            continue;
        }
        if held.is_some() {
            bail!(
                "the signed topic's offset {} was read while offset {} waits, its partition \
                 paused",
                m.offset(),
                held.as_ref().map_or(0, |h| h.offset())
            );
        }
        if step == Step::Follow && m.offset() >= committed {
            held = Some(m.detach());
            link.pause(topic, 0, true)?;
            continue;
        }
        next = m.offset() + 1;
        let Some(out) = r.signed(&mut shard, &m, committed)? else {
            continue;
        };
        r.answer(s, &mut link, out, health)?;
        if link.due() {
            link.commit(&[(topic, 0, next)])?;
            mine = next;
            metrics::gauge!(tm::INDEX_PAGES).set(shard.index().pages() as f64);
        }
    }
    health.draining.store(true, Ordering::Relaxed);
    health.publish();
    // not while replaying: the group's offset would go back; and never by a follower
    if turn.writing() && next > committed {
        link.commit(&[(topic, 0, next)])?;
    }
    info!(
        demoted = r.counts.demoted,
        waiting = shard.pending(),
        copies = shard.copies(),
        "pages taken out of the lists as the aggregator decided them duplicates, and copies \
         stored as duplicates at once"
    );
    save_state(&dir, &mut shard, &parts, &at, next);
    Ok(r.counts)
}

/// What a shard keeps between signed records.
struct Reader {
    want: String,
    fp_words: usize,
    votes: Vec<Vote>,
    counts: ShardCounts,
}

/// A signed record to answer with a votes record: its offset, id and judgement.
struct Answer {
    offset: i64,
    id: String,
    judged: Option<crate::dedup::sharded::Judged>,
}

impl Reader {
    /// Reads a signed record: replayed (below the committed offset, `None`) or judged, its
    /// votes in `self.votes`.
    fn signed(
        &mut self,
        shard: &mut Shard,
        m: &impl Message,
        committed: i64,
    ) -> Result<Option<Answer>> {
        let offset = m.offset();
        let replay = offset < committed;
        let payload = m.payload().unwrap_or_default();
        self.votes.clear();
        let (judged, id) = match SignedRecord::decode(payload, &self.want, self.fp_words) {
            // the aggregator reads the same record and writes its dead letter
            Err(_) => (None, String::new()),
            Ok((page, signed, _, _)) => {
                let first_seen = page
                    .fetched_at
                    .or(m.timestamp().to_millis().map(|ms| ms.div_euclid(1000)))
                    .unwrap_or(0);
                let p = PageRef {
                    id: &page.doc_id,
                    url: &page.page.url,
                    first_seen,
                };
                let pos = offset as u64;
                let copies = shard.copies();
                let judged = if replay {
                    shard.replay(pos, p, &signed)?
                } else {
                    shard.read(pos, p, &signed, &mut self.votes)?
                };
                if shard.copies() > copies {
                    metrics::counter!(tm::SHARD_COPIES).increment(1);
                }
                (Some(judged), page.doc_id)
            }
        };
        if replay {
            self.counts.replayed += 1;
            return Ok(None);
        }
        Ok(Some(Answer { offset, id, judged }))
    }

    /// Writes the votes record of a signed record judged by [`Reader::signed`] to this
    /// shard's partition, and counts it.
    fn answer(
        &mut self,
        s: &StageSettings,
        link: &mut Link,
        a: Answer,
        health: &Health,
    ) -> Result<()> {
        let rec = VotesRecord::new(s.shard, s.shards, a.offset, &a.id, a.judged, &self.votes);
        // in parts past the broker's record limit (each under it, in order, in this
        // record's transaction)
        let parts = rec.encode(crate::record::votes::PART_BYTES)?;
        if parts.len() > 1 {
            metrics::counter!(tm::VOTES_PARTS).increment(parts.len() as u64);
        }
        for part in &parts {
            link.send(
                &s.votes_topic,
                Some(s.shard as i32),
                Some(a.id.as_bytes()),
                part,
                &[(
                    super::flow::HEADER_SCHEMA,
                    crate::record::votes::VOTES_SCHEMA.into(),
                )],
            )?;
        }
        self.counts.records += 1;
        metrics::counter!(tm::RECORDS_IN, "topic" => s.signed_topic.clone()).increment(1);
        health.progressed();
        Ok(())
    }
}

/// A record of the duplicate topic (which may be the unique topic too): a page this shard
/// owns that the aggregator decided a duplicate leaves its lists. Whether one left them now.
fn demote(shard: &mut Shard, m: &impl Message) -> Result<bool> {
    let header = |name: &str| {
        let h = m.headers()?;
        (0..h.count())
            .map(|i| h.get(i))
            .find(|h| h.key == name)
            .and_then(|h| std::str::from_utf8(h.value?).ok())
    };
    if header(HEADER_DECISION) != Some("duplicate") {
        return Ok(false);
    }
    // a record of an earlier build carries no id: left where it is
    let Some(id) = header(HEADER_ID) else {
        return Ok(false);
    };
    let decision = crate::index::Decision::plain(crate::index::DecisionKind::Duplicate);
    Ok(shard.decided(id, &decision)?)
}

/// The shard's directory: `shard-K-of-S` under the index directory.
fn shard_dir(s: &StageSettings) -> PathBuf {
    s.index.join(format!("shard-{}-of-{}", s.shard, s.shards))
}

/// The shard as its last clean stop left it, with the positions its state is of, when its
/// directory holds a state file this build can take up ([`Shard::resume`]); else as its last
/// checkpoint left it ([`take_checkpoint`]); else empty, its directory made again. The state
/// file is removed before the index changes: a shard killed later takes up its checkpoint,
/// or starts empty without one.
fn open(s: &StageSettings, dir: &Path, committed: i64) -> Result<(Shard, Option<Vec<Position>>)> {
    let path = dir.join(STATE_FILE);
    if path.exists() {
        let loaded = ShardState::load(&path);
        std::fs::remove_file(&path)
            .with_context(|| format!("cannot remove the shard's state file {}", path.display()))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync the shard's directory {}", dir.display()))?;
        let started = Instant::now();
        let resumed = loaded
            .map_err(anyhow::Error::from)
            .and_then(|state| resume(s, dir, state, committed, None).map_err(|n| n.error));
        match resumed {
            Ok((shard, positions)) => {
                info!(
                    pages = shard.index().pages(),
                    ids = shard.ids(),
                    seconds = started.elapsed().as_secs_f64(),
                    "took the shard up from its state file (written at its last clean stop)"
                );
                return Ok((shard, Some(positions)));
            }
            Err(e) => warn!(
                error = format!("{e:#}"),
                "the shard's state file cannot be taken up: taking up its checkpoint, if any, \
                 else starting empty and reading the signed topic from its start"
            ),
        }
    }
    if let Some((shard, positions)) = take_checkpoint(s, dir, committed) {
        return Ok((shard, Some(positions)));
    }
    Ok((Shard::new(open_scratch(dir, s)?, s.shard, s.shards)?, None))
}

/// The directory of the shard's checkpoint: `shard-K-of-S.checkpoint` beside the shard's
/// own (a start without a state file empties the shard's directory, never this one).
fn checkpoint_dir(s: &StageSettings) -> PathBuf {
    s.index
        .join(format!("shard-{}-of-{}.checkpoint", s.shard, s.shards))
}

/// `dir` with `.tmp` (a checkpoint being written) or `.old` (the one it replaces) after it.
fn beside(dir: &Path, what: &str) -> PathBuf {
    let mut p = dir.as_os_str().to_owned();
    p.push(what);
    PathBuf::from(p)
}

/// The shard as its last checkpoint left it, with the positions its state is of: its
/// directory made a working copy of the checkpoint ([`Index::copy_checkpoint`]), which
/// stays as it is, so that a shard killed again before the next one takes it up again.
/// `None` without one, or when it cannot be taken up (said; the shard then starts empty):
/// one refused for what it is (another stream, past the committed offset, another build's,
/// damaged) is removed, one that the disk failed to copy or open is kept for the next start
/// (until a new checkpoint replaces it).
fn take_checkpoint(
    s: &StageSettings,
    dir: &Path,
    committed: i64,
) -> Option<(Shard, Vec<Position>)> {
    let ck = checkpoint_dir(s);
    let old = beside(&ck, ".old");
    // killed between setting the last one aside and putting the next in its place
    if !ck.exists() && old.join(STATE_FILE).exists() {
        if let Err(e) = std::fs::rename(&old, &ck) {
            warn!(error = %e, "cannot put the shard's last checkpoint back in its place");
        }
    }
    if !ck.join(STATE_FILE).exists() {
        return None;
    }
    let started = Instant::now();
    let taken = ShardState::load(&ck.join(STATE_FILE))
        .map_err(|e| NotTaken {
            refused: e.kind() == std::io::ErrorKind::InvalidData,
            error: e.into(),
        })
        .and_then(|state| resume(s, dir, state, committed, Some(&ck)));
    match taken {
        Ok((shard, positions)) => {
            info!(
                pages = shard.index().pages(),
                ids = shard.ids(),
                at = positions.first().map_or(0, |p| p.next),
                seconds = started.elapsed().as_secs_f64(),
                "took the shard up from its checkpoint"
            );
            Some((shard, positions))
        }
        Err(NotTaken { error, refused }) => {
            warn!(
                error = format!("{error:#}"),
                refused,
                "the shard's checkpoint cannot be taken up: starting empty and reading the \
                 signed topic from its start (a checkpoint refused is removed, one the disk \
                 failed is kept)"
            );
            if refused {
                remove_checkpoint(s);
            }
            None
        }
    }
}

/// Why a state was not taken up, and whether it was refused for what it is (rather than
/// for an error of the disk, which may not come again).
struct NotTaken {
    error: anyhow::Error,
    refused: bool,
}

/// The shard in `dir` taken up with `state` ([`Shard::resume`]): a clean stop's, or a
/// checkpoint's, whose directory `copy_of` is first made the shard's working copy. Refused,
/// with the reason, when the state is of another signed topic, or past the group's
/// committed offset in it (then it is not of this group's stream, the topic or the group
/// made again, or of what a process read past its last commit), or not of the index opened.
fn resume(
    s: &StageSettings,
    dir: &Path,
    state: ShardState,
    committed: i64,
    copy_of: Option<&Path>,
) -> std::result::Result<(Shard, Vec<Position>), NotTaken> {
    let refuse = |error| NotTaken {
        error,
        refused: true,
    };
    let fail = |error| NotTaken {
        error,
        refused: false,
    };
    let signed = [(s.signed_topic.as_str(), 0)];
    if !names_all(&state.positions, &signed) {
        return Err(refuse(anyhow::anyhow!(
            "it is not of the signed topic {}: it names {:?}",
            s.signed_topic,
            state.positions.first().map(|p| &p.stream)
        )));
    }
    let at = offsets_of(&state.positions, &signed)[0];
    if at > committed {
        return Err(refuse(anyhow::anyhow!(
            "it is of signed offset {at}, past its group's committed offset {committed} (the \
             topic or the group made again)"
        )));
    }
    if let Some(ck) = copy_of {
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot empty the shard's directory {}", dir.display()))
                .map_err(fail)?;
        }
        Index::copy_checkpoint(ck, dir, &[STATE_FILE]).map_err(|e| fail(e.into()))?;
    }
    let positions = state.positions.clone();
    let index = Index::open_dir(dir, s.params.clone()).map_err(|e| fail(e.into()))?;
    // refused for what it is (another shard's, another stamp, other ids): a parameter
    // error; any other is the disk's (the ids read back), and the checkpoint is kept
    let shard = Shard::resume(index, s.shard, s.shards, state).map_err(|e| match e {
        crate::index::IndexError::Param(_) => refuse(e.into()),
        e => fail(e.into()),
    })?;
    Ok((shard, positions))
}

/// Removes the shard's checkpoint (one of another stream, or one refused): its state file
/// first, so that a kill while the rest is removed leaves none to take up.
fn remove_checkpoint(s: &StageSettings) {
    let ck = checkpoint_dir(s);
    for d in [beside(&ck, ".old"), ck] {
        if d.exists() {
            let state = d.join(STATE_FILE);
            let removed = match state.exists() {
                true => std::fs::remove_file(&state),
                false => Ok(()),
            };
            if let Err(e) = removed.and_then(|()| std::fs::remove_dir_all(&d)) {
                warn!(error = %e, path = %d.display(), "cannot remove the shard's checkpoint");
            }
        }
    }
}

/// Writes a checkpoint of the shard as of `next` in the signed topic and `at` in the
/// decisions' partitions (offsets its group committed): the copy is written beside the last
/// one and put in its place once whole, so that a kill at any moment leaves one whole
/// checkpoint. One that cannot be written is said (false); the last one stays.
fn checkpoint(
    s: &StageSettings,
    shard: &mut Shard,
    parts: &[(&str, i32)],
    at: &[i64],
    next: i64,
) -> bool {
    let started = Instant::now();
    let ck = checkpoint_dir(s);
    let (tmp, old) = (beside(&ck, ".tmp"), beside(&ck, ".old"));
    let positions = positions(parts, at, next);
    let written = (|| -> Result<usize> {
        // the last one set aside and never put back (a rename that failed): it is the one
        // to keep until the new one is in place
        if !ck.exists() && old.join(STATE_FILE).exists() {
            std::fs::rename(&old, &ck)
                .with_context(|| format!("cannot put {} back in place", old.display()))?;
        }
        for d in [&tmp, &old] {
            if d.exists() {
                std::fs::remove_dir_all(d)
                    .with_context(|| format!("cannot remove {}", d.display()))?;
            }
        }
        let ids = shard.checkpoint(&tmp, &positions)?;
        if ck.exists() {
            std::fs::rename(&ck, &old)
                .with_context(|| format!("cannot set {} aside", ck.display()))?;
        }
        std::fs::rename(&tmp, &ck)
            .with_context(|| format!("cannot put {} in place", tmp.display()))?;
        std::fs::File::open(&s.index)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync {}", s.index.display()))?;
        if old.exists() {
            std::fs::remove_dir_all(&old)
                .with_context(|| format!("cannot remove {}", old.display()))?;
        }
        Ok(ids)
    })();
    match written {
        Ok(ids) => {
            info!(
                at = next,
                ids,
                pages = shard.index().pages(),
                seconds = started.elapsed().as_secs_f64(),
                "wrote the shard's checkpoint: a start without a state file takes up from here"
            );
            true
        }
        Err(e) => {
            warn!(
                error = format!("{e:#}"),
                path = %ck.display(),
                "cannot write the shard's checkpoint: a kill makes the next start take up the \
                 one before it, if any, or read the signed topic from its start"
            );
            false
        }
    }
}

/// Where a state is of: `next` in the signed topic (the first of `parts`), `at` in the
/// others.
fn positions(parts: &[(&str, i32)], at: &[i64], next: i64) -> Vec<Position> {
    parts
        .iter()
        .zip(at)
        .enumerate()
        .map(|(i, (&(t, p), &a))| Position {
            stream: t.to_string(),
            partition: p,
            next: if i == 0 { next } else { a },
        })
        .collect()
}

/// Writes the shard's state file and its index's snapshots, as of `next` in the signed topic
/// and `at` in the decisions' partitions (`parts` and `at` side by side; the signed topic
/// first), so that the next start takes up from there. It comes after the last commit: one
/// that cannot be written is said, and the next start reads the stream from its start.
fn save_state(dir: &Path, shard: &mut Shard, parts: &[(&str, i32)], at: &[i64], next: i64) {
    let started = Instant::now();
    let positions = positions(parts, at, next);
    let path = dir.join(STATE_FILE);
    let written = shard.save(&path, &positions);
    match written {
        Ok(ids) => info!(
            at = next,
            ids,
            seconds = started.elapsed().as_secs_f64(),
            "wrote the shard's state file: the next start takes up from here"
        ),
        Err(e) => warn!(
            error = format!("{e:#}"),
            path = %path.display(),
            "cannot write the shard's state file: the next start reads the signed topic from \
             its start"
        ),
    }
}

/// The shard's index, empty: a RocksDB directory `shard-K-of-S` under the index directory
/// (its documents on disk, its lists in memory, as a decider's), made again at every start
/// without a state file. Only that directory is removed, never the index directory itself.
fn open_scratch(dir: &Path, s: &StageSettings) -> Result<Index> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("cannot empty the shard's directory {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the shard's directory {}", dir.display()))?;
    Index::open_dir(dir, s.params.clone())
        .with_context(|| format!("cannot open the shard's index in {}", dir.display()))
}

fn set_restoring(health: &Health, what: Option<String>) {
    *health.restoring.lock().unwrap_or_else(|p| p.into_inner()) = what;
    health.publish();
}
