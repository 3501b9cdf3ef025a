//! A deadline for the transaction calls the Kafka client can wait in for ever.
//!
//! Each transaction call is given a timeout, but the client does not always keep it: adding
//! the input offsets to a transaction waits without a bound when the group's coordinator was
//! a node that left the cluster (the client keeps asking the node it had cached, and nothing
//! wakes the request again). The stage, or a role of a sharded decider, then answers
//! nothing more while every thread idles. Both make these calls through
//! [`super::commit::watched`].
//!
//! Each attempt is given a timeout ([`TRANSACTION_CALL`] for the calls within a transaction,
//! longer to start the transactions), and the client returns by then unless it waits
//! without end: a call that has not returned after [`STALL_FACTOR`] times its timeout (30 s
//! for the calls within a transaction) of the process's own running time is that wait. So
//! the process exits with [`EXIT_STALLED`], and the restart begins as after a SIGKILL at the
//! same moment: a process with a stable transactional id (the stage, a shard, the
//! aggregator) fences it as it starts, which aborts the open transaction at once; a signer's
//! restart takes a new id, and the broker aborts the open transaction after the transaction
//! timeout ([`super::kafka::TRANSACTION_TIMEOUT`]). The records of the aborted transaction
//! are decided again from the committed positions. Time is counted in ticks of a thread that
//! sleeps one second at a time, so the time a process spends paused (SIGSTOP, a frozen
//! container) is not counted: a paused process that comes back is fenced by its successor,
//! as before, rather than ended by its own clock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use tracing::error;

/// How long one attempt at a transaction call is given (a retriable failure is tried again);
/// the stage and the roles of a sharded decider give it to each call they watch.
pub const TRANSACTION_CALL: Duration = Duration::from_secs(10);

/// How long the stage's start of its transactions is given (which waits for the coordinator
/// to end what an earlier process of its transactional id left open), and the commit of the
/// changelog records republished at its start.
pub const START_TRANSACTIONS: Duration = Duration::from_secs(30);

/// How long a transaction call may take, in the process's running time, in times the
/// timeout it was given: a client that keeps its timeouts returns well before.
pub const STALL_FACTOR: u32 = 3;

/// How long a call given `timeout` may take before the watchdog ends the process.
pub fn stall(timeout: Duration) -> Duration {
    timeout.saturating_mul(STALL_FACTOR)
}

/// The exit code of a process that stopped on a stalled transaction call.
pub const EXIT_STALLED: i32 = super::restart::EXIT_DECIDE_AGAIN as i32;

struct Call {
    what: String,
    transactional_id: String,
    /// The tick the call began at.
    since: u64,
    /// The ticks it may take.
    limit: u64,
}

static TICKS: AtomicU64 = AtomicU64::new(0);
static NEXT: AtomicU64 = AtomicU64::new(0);
static CALLS: Mutex<BTreeMap<u64, Call>> = Mutex::new(BTreeMap::new());
static START: Once = Once::new();

/// A transaction call under watch, until it is dropped.
pub struct Watch(u64);

impl Drop for Watch {
    fn drop(&mut self) {
        CALLS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

/// Watches a call (`what`, of transactional id `transactional_id`, given `timeout`) until
/// the guard is dropped: past [`stall`] of it the process exits.
pub fn watch(what: &str, transactional_id: &str, timeout: Duration) -> Watch {
    START.call_once(|| {
        std::thread::Builder::new()
            .name("neardup-watchdog".into())
            .spawn(|| loop {
                std::thread::sleep(Duration::from_secs(1));
                let now = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some((call, transactional_id, limit)) = stalled(now) {
                    error!(
                        call = %call, transactional_id = %transactional_id, seconds = limit,
                        "exactly-once: a transaction call has not returned in {limit} s of \
                         running time ({STALL_FACTOR} times its timeout: the client waits for \
                         a coordinator it no longer asks): the process exits (code \
                         {EXIT_STALLED}) so that a restart decides its records again (the \
                         open transaction is aborted)"
                    );
                    std::process::exit(EXIT_STALLED);
                }
            })
            .expect("a thread for the transaction watchdog");
    });
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    CALLS.lock().unwrap_or_else(|e| e.into_inner()).insert(
        id,
        Call {
            what: what.to_string(),
            transactional_id: transactional_id.to_string(),
            since: TICKS.load(Ordering::Relaxed),
            limit: stall(timeout).as_secs().max(1),
        },
    );
    Watch(id)
}

/// The first call under watch for more than its limit in ticks at tick `now`: (what, id,
/// limit).
fn stalled(now: u64) -> Option<(String, String, u64)> {
    let calls = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    calls
        .values()
        .find(|c| now.saturating_sub(c.since) > c.limit)
        .map(|c| (c.what.clone(), c.transactional_id.clone(), c.limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call is stalled only past three times its timeout in ticks, each call by its own,
    /// and no longer watched once dropped.
    #[test]
    fn a_call_is_stalled_past_three_times_its_timeout_and_not_after_it_returned() {
        let start = watch("initialise transactions", "t-1", Duration::from_secs(30));
        let commit = watch("commit the transaction", "t-1", TRANSACTION_CALL);
        let since = CALLS.lock().unwrap()[&commit.0].since;
        let since_start = CALLS.lock().unwrap()[&start.0].since;
        assert!(since_start <= since);
        assert_eq!(stalled(since + 30), None, "at the limit");
        assert_eq!(
            stalled(since + 31),
            Some(("commit the transaction".into(), "t-1".into(), 30))
        );
        drop(commit);
        assert_eq!(
            stalled(since_start + 90),
            None,
            "the longer call at its limit"
        );
        assert_eq!(
            stalled(since_start + 91),
            Some(("initialise transactions".into(), "t-1".into(), 90))
        );
        drop(start);
        assert_eq!(stalled(since + 1_000), None, "returned");
    }
}
