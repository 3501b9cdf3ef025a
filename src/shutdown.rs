//! When to stop: the handle the stage, the HTTP server and the index's opening poll or
//! await, as mini-redis's `run(listener, shutdown)` takes its shutdown future.
//!
//! `main` makes the one that stop signals trigger ([`Shutdown::on_signals`]); nothing else
//! reads signals. A test or a benchmark makes its own ([`Shutdown::new`]) and calls
//! [`Shutdown::stop`] when it wants the stage to drain and return.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A stop request, shared by every part that must stop (cheap to clone).
#[derive(Clone, Debug)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Set once a stop is asked for; the signal handler's own flag when signals stop it.
    flag: Flag,
    notify: Notify,
}

#[derive(Debug)]
enum Flag {
    /// The process's stop flag, set by the SIGTERM / SIGINT handler ([`crate::signals`]).
    Signals(&'static AtomicBool),
    /// A flag of this handle only.
    Own(AtomicBool),
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

impl Shutdown {
    /// A handle that only [`Shutdown::stop`] triggers.
    pub fn new() -> Shutdown {
        Shutdown {
            inner: Arc::new(Inner {
                flag: Flag::Own(AtomicBool::new(false)),
                notify: Notify::new(),
            }),
        }
    }

    /// The handle of the process: SIGTERM and SIGINT trigger it (caught from before `main`,
    /// so one that arrived before this call counts), and so does [`Shutdown::stop`].
    pub fn on_signals() -> Shutdown {
        Shutdown {
            inner: Arc::new(Inner {
                flag: Flag::Signals(crate::signals::stop_flag()),
                notify: Notify::new(),
            }),
        }
    }

    /// The flag, for code that polls it (the index's opening, a restore loop).
    pub fn flag(&self) -> &AtomicBool {
        match &self.inner.flag {
            Flag::Signals(f) => f,
            Flag::Own(f) => f,
        }
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.flag().load(Ordering::SeqCst)
    }

    /// Asks every holder of the handle to stop.
    pub fn stop(&self) {
        self.flag().store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// Completes once a stop is asked for (at once if it was already).
    pub async fn wait(&self) {
        loop {
            let notified = self.inner.notify.notified();
            if self.requested() {
                return;
            }
            match self.inner.flag {
                Flag::Signals(_) => {
                    tokio::select! {
                        _ = crate::signals::wait() => return,
                        _ = notified => {}
                    }
                }
                Flag::Own(_) => notified.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn stop_wakes_every_waiter_and_is_seen_by_pollers() {
        let s = Shutdown::new();
        assert!(!s.requested());
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let s = s.clone();
                tokio::spawn(async move { s.wait().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(waiters.iter().all(|w| !w.is_finished()));
        s.stop();
        for w in waiters {
            tokio::time::timeout(Duration::from_secs(5), w)
                .await
                .expect("woken")
                .unwrap();
        }
        assert!(s.requested() && s.flag().load(Ordering::SeqCst));
        // a wait after the stop returns at once
        tokio::time::timeout(Duration::from_secs(1), s.wait())
            .await
            .expect("at once");
        // handles are independent
        assert!(!Shutdown::new().requested());
    }
}
