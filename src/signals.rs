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

/// The signals a parent left ignored (bit `1 << signo`): they stay ignored (a job started in
/// the background by a non-interactive shell ignores SIGINT, and keeps doing so).
static INHERITED_IGNORED: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
pub(crate) const STOP_SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

/// Set by [`crate::allocator`] for the image it starts, as `BITS NAME`: the stop signals
/// (bit `1 << signo`) it blocked across the exec, which [`install_early`] unblocks once their
/// handler is in place (a signal that arrived meanwhile is then caught; a value it cannot
/// read unblocks both), and the process's name. `main` removes it
/// ([`crate::allocator::after_exec`]), so that nothing the process starts inherits it.
pub const UNBLOCK_AFTER_EXEC: &str = "NEARDUP_UNBLOCK_AFTER_EXEC";

/// Catches SIGTERM and SIGINT into the stop flag, except one the parent left ignored. Safe to
/// call before `main` (it only calls `sigaction`) and more than once.
pub extern "C" fn install_early() {
    #[cfg(unix)]
    // SAFETY: sigaction with a handler that only stores atomics; the structs are zeroed and
    // the mask emptied before use.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in STOP_SIGNALS {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old);
            if old.sa_sigaction == libc::SIG_IGN {
                INHERITED_IGNORED.fetch_or(1 << sig, Ordering::SeqCst);
                continue;
            }
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        unblock_after_exec();
    }
}

/// Unblocks the stop signals named by [`UNBLOCK_AFTER_EXEC`], if it is set.
#[cfg(unix)]
fn unblock_after_exec() {
    let name = c"NEARDUP_UNBLOCK_AFTER_EXEC";
    debug_assert_eq!(name.to_bytes(), UNBLOCK_AFTER_EXEC.as_bytes());
    // SAFETY: getenv before any thread exists (start-up code or the start of main) and a
    // read of the NUL-terminated string it returns; sigprocmask on a set built here.
    unsafe {
        let v = libc::getenv(name.as_ptr());
        if v.is_null() {
            return;
        }
        let bits: i32 = std::ffi::CStr::from_ptr(v)
            .to_str()
            .ok()
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or(-1);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in STOP_SIGNALS {
            if bits & (1 << sig) != 0 {
                libc::sigaddset(&mut set, sig);
            }
        }
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
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

/// Gives SIGTERM and SIGINT the action they had when the process started (the default, or
/// ignored when the parent ignored them), for commands without a stop path of their own; a
/// signal caught before this call is raised again, so it acts as it would have.
pub fn restore_default() {
    #[cfg(unix)]
    // SAFETY: resetting a disposition to SIG_DFL and raising a signal are always allowed.
    unsafe {
        let ignored = INHERITED_IGNORED.load(Ordering::SeqCst);
        for sig in STOP_SIGNALS {
            if ignored & (1 << sig) == 0 {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
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
