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

/// When a role next writes a checkpoint.
pub(super) struct Checkpoints {
    /// When the last one was written (or this process started).
    since: Instant,
    /// How long the last one took.
    took: Duration,
    /// At the first commit once caught up: this start read records back (a restart after a
    /// kill, or past its state), which a second kill would make it read again.
    soon: bool,
}

impl Checkpoints {
    /// The schedule of a process that started now; `read_back`: it reads records back
    /// before it writes (its first checkpoint then comes at its first commit once caught up).
    pub(super) fn new(read_back: bool) -> Checkpoints {
        Checkpoints {
            since: Instant::now(),
            took: Duration::ZERO,
            soon: read_back,
        }
    }

    /// Whether a checkpoint is due.
    pub(super) fn due(&self) -> bool {
        self.soon || self.since.elapsed() >= CHECKPOINT_EVERY.max(self.took * CHECKPOINT_SHARE)
    }

    /// Writes a checkpoint with `write` and times it for the next.
    pub(super) fn write<T>(&mut self, write: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let written = write();
        self.took = started.elapsed();
        self.since = Instant::now();
        self.soon = false;
        written
    }

    /// The checkpoint due is the last one written (nothing read since): the next is due an
    /// interval later.
    pub(super) fn unchanged(&mut self) {
        self.since = Instant::now();
        self.soon = false;
    }
}
