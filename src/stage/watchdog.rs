//! A deadline for the transaction calls the Kafka client can wait in for ever.
//!
//! Each transaction call is given a timeout, but the client does not always keep it: adding
//! the input offsets to a transaction waits without a bound when the group's coordinator was
//! a node that left the cluster (the client keeps asking the node it had cached, and nothing
//! wakes the request again). The stage, or a role of a sharded decider, then answers
//! nothing more while every thread idles. Both make these calls through
//! [`super::commit::watched`].
//!
//! Each attempt is given [`TRANSACTION_CALL`], and the client returns by then unless it waits
//! without end: a call that has not returned after [`STALL`] (three times as long) of the
//! process's own running time is that wait. So the process exits with [`EXIT_STALLED`], and
//! the restart begins as after a SIGKILL at the same moment: it fences this process's
//! transactional id, which aborts the open transaction (the broker would abort it after the
//! transaction timeout, [`super::kafka::TRANSACTION_TIMEOUT`], in any case), and the records
//! of the aborted transaction are decided again from the committed positions. Time is counted in ticks of a thread that
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

/// How long a transaction call may take, in the process's running time: three times the
/// timeout it was given.
pub const STALL: Duration = TRANSACTION_CALL.saturating_mul(3);

/// The exit code of a process that stopped on a stalled transaction call.
pub const EXIT_STALLED: i32 = super::restart::EXIT_DECIDE_AGAIN as i32;

struct Call {
    what: String,
    transactional_id: String,
    /// The tick the call began at.
    since: u64,
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

/// Watches a call (`what`, of transactional id `transactional_id`) until the guard is
/// dropped.
pub fn watch(what: &str, transactional_id: &str) -> Watch {
    START.call_once(|| {
        std::thread::Builder::new()
            .name("neardup-watchdog".into())
            .spawn(|| loop {
                std::thread::sleep(Duration::from_secs(1));
                let now = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(c) = stalled(now, STALL.as_secs()) {
                    error!(
                        call = %c.0, transactional_id = %c.1, seconds = STALL.as_secs(),
                        "exactly-once: a transaction call has not returned in {} s of running \
                         time (the client waits for a coordinator it no longer asks): the \
                         process exits (code {EXIT_STALLED}) so that a restart decides its \
                         records again (its start fences this transactional id, which aborts \
                         the open transaction)",
                        STALL.as_secs()
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
        },
    );
    Watch(id)
}

/// The first call under watch for more than `limit` ticks at tick `now`: (what, id).
fn stalled(now: u64, limit: u64) -> Option<(String, String)> {
    let calls = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    calls
        .values()
        .find(|c| now.saturating_sub(c.since) > limit)
        .map(|c| (c.what.clone(), c.transactional_id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call is stalled only past its limit in ticks, and no longer watched once dropped.
    #[test]
    fn a_call_is_stalled_past_its_limit_in_ticks_and_not_after_it_returned() {
        let w = watch("commit the transaction", "t-1");
        let since = CALLS.lock().unwrap()[&w.0].since;
        assert_eq!(stalled(since + 60, 60), None, "at the limit");
        assert_eq!(
            stalled(since + 61, 60),
            Some(("commit the transaction".into(), "t-1".into()))
        );
        drop(w);
        assert_eq!(stalled(since + 1_000, 60), None, "returned");
    }
}
