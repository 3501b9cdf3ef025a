//! When a role of a sharded decider writes its state while it works (a checkpoint): the
//! aggregator its state file, a shard a copy of its index with its state file. A kill then
//! costs the next start the records of one interval read back instead of its topics from
//! their start. The role stops while it writes, so the schedule bounds the share of its time
//! that checkpoints take, however large its state grows.

use std::time::{Duration, Instant};

/// How often a role writes a checkpoint while it works (after a commit), at the least: at
/// the 30,000 records a second an aggregator reads back, 10 minutes of a stream of 1,000
/// pages a second take 20 s to read back, against 445 s for 10M signed records from the
/// start.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_secs(600);

/// The interval is also at least this many times the last checkpoint's time, so that
/// checkpoints take at most a fiftieth of a role's time.
pub(super) const CHECKPOINT_SHARE: u32 = 50;

/// When a role next writes a checkpoint, and the position (`P`: the offsets it is of) of the
/// last one written, so that a role with nothing read since writes none again.
pub(super) struct Checkpoints<P> {
    /// When the last one was written (or this process started).
    since: Instant,
    /// How long the last one took.
    took: Duration,
    /// At the first commit once caught up: this start read records back (a restart after a
    /// kill, or past its state), which a second kill would make it read again.
    soon: bool,
    /// The position of the last checkpoint this process wrote.
    written: Option<P>,
}

impl<P: PartialEq> Checkpoints<P> {
    /// The schedule of a process that started now; `read_back`: it reads records back
    /// before it writes (its first checkpoint then comes at its first commit once caught up).
    pub(super) fn new(read_back: bool) -> Checkpoints<P> {
        Checkpoints {
            since: Instant::now(),
            took: Duration::ZERO,
            soon: read_back,
            written: None,
        }
    }

    /// Whether a checkpoint is due.
    pub(super) fn due(&self) -> bool {
        self.soon || self.since.elapsed() >= CHECKPOINT_EVERY.max(self.took * CHECKPOINT_SHARE)
    }

    /// Writes the checkpoint of `position` with `write` (true once it is written) and times
    /// it for the next, unless the last one written is of `position` too: then the next is
    /// due an interval later.
    pub(super) fn write(&mut self, position: P, write: impl FnOnce() -> bool) {
        if self.written.as_ref() == Some(&position) {
            self.since = Instant::now();
            self.soon = false;
            return;
        }
        let started = Instant::now();
        let written = write();
        self.took = started.elapsed();
        self.since = Instant::now();
        self.soon = false;
        if written {
            self.written = Some(position);
        }
    }
}
