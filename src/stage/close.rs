//! Closing what the stage holds, within bounds: the Kafka consumer (leaving the group), its
//! final commit, and the index (flushed, with its lists snapshot). A leaf: the start-up, the
//! take-over and the end of the stage close through it.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::kafka::StageConsumer;
use crate::dedup::Deduplicator;

/// How long the final commit and closing the Kafka consumer may take each.
pub(super) const CLIENT_CLOSE_WAIT: Duration = Duration::from_secs(10);

/// Runs `f` on a thread of its own and waits for it at most `wait`; `None` if it did not
/// finish in time (the thread is left behind and ends with the process). The final commit
/// and closing the consumer (leaving the group) wait without end for a group coordinator
/// that is gone; by then the outputs are acknowledged, so the process may go on and exit.
pub(super) fn bounded<T: Send + 'static>(
    what: &str,
    wait: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("neardup-{what}"))
        .spawn(move || {
            let _ = tx.send(f());
        })
        .ok()?;
    rx.recv_timeout(wait).ok()
}

/// Leaves the group and closes the consumer, waiting at most [`CLIENT_CLOSE_WAIT`].
pub(super) fn close_consumer(consumer: Arc<StageConsumer>) {
    if bounded("close", CLIENT_CLOSE_WAIT, move || drop(consumer)).is_none() {
        warn!(
            wait_s = CLIENT_CLOSE_WAIT.as_secs_f64(),
            "the Kafka consumer did not close in time (brokers unreachable?); not waiting for it"
        );
    }
}

/// Writes the index out and its lists snapshot (a stop before consuming anything).
pub(super) fn close_index(d: &mut Deduplicator) {
    if let Err(e) = d.index().flush() {
        warn!(error = %e, "cannot flush the index");
        return;
    }
    if let Err(e) = d.index_mut().save_lists() {
        warn!(error = %e, "cannot write the lists snapshot; the next start rebuilds the lists")
    }
}
