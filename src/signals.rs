//! Stop signals (SIGTERM, SIGINT) from the first instruction of the process on.
//!
//! The binary calls [`install_early`] from its start-up code, before `main`, so that a stop
//! signal that arrives while the process is still starting (parsing its configuration,
//! opening the index, joining the consumer group) is caught and turned into a clean stop
//! instead of the default action (death by the signal, exit status 143). The handler only
//! sets a flag; [`stop_requested`] reads it, [`wait`] awaits it in async code, and commands
//! that have no stop logic of their own get the default action back with
//! [`restore_default`].

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static CAUGHT: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    // async-signal-safe: two atomic stores
    CAUGHT.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Catches SIGTERM and SIGINT into the stop flag. Safe to call before `main` (it only calls
/// `sigaction`) and more than once.
pub extern "C" fn install_early() {
    #[cfg(unix)]
    // SAFETY: sigaction with a handler that only stores atomics; the struct is zeroed and
    // its mask emptied before use.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

/// A stop signal has arrived since the process started.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// The stop flag, for code that polls it (opening the index).
pub fn stop_flag() -> &'static AtomicBool {
    &STOP
}

/// Gives SIGTERM and SIGINT their default action back (commands without a stop path of
/// their own); a signal caught before this call is raised again, so it acts as it would have.
pub fn restore_default() {
    #[cfg(unix)]
    // SAFETY: resetting a disposition to SIG_DFL and raising a signal are always allowed.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        let sig = CAUGHT.load(Ordering::SeqCst);
        if sig != 0 {
            libc::raise(sig);
        }
    }
}

/// Waits for a stop signal: returns at once if one arrived already (even before the async
/// runtime started).
pub async fn wait() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        // register the streams first, then look at the flag: a signal after the look is
        // delivered to the streams, one before it set the flag
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            // no streams: poll the flag (the early handler still sets it)
            while !stop_requested() {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            return;
        };
        if stop_requested() {
            return;
        }
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
        STOP.store(true, Ordering::SeqCst);
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        STOP.store(true, Ordering::SeqCst);
    }
}
