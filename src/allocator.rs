//! Huge pages for the process's heap, without an environment variable from the operator.
//!
//! The exact-Jaccard lists are gigabytes of small arrays read at random: on 4 KiB pages
//! nearly every cache miss on them is also a TLB miss, and deciding at 10M indexed pages was
//! measured 25 % faster on transparent huge pages (1M: 16–26 %). The C library's allocator
//! asks the kernel for them (`madvise(MADV_HUGEPAGE)` on its heaps) only when the
//! `glibc.malloc.hugetlb=1` tunable is in `GLIBC_TUNABLES`, which it reads once, when the
//! process starts. So [`use_huge_pages`], first thing in `main`, starts the binary again in
//! the same process (`execve` of `/proc/self/exe`: same pid, arguments, descriptors and
//! environment) with the tunable added, unless `GLIBC_TUNABLES` is already set: an operator
//! who sets it (even to `glibc.malloc.hugetlb=0`) decides. Stop signals that arrive while
//! the new image loads are held pending (blocked across the exec) and caught by its early
//! handler ([`crate::signals::install_early`]), so a SIGTERM at start still stops cleanly.
//! Where the exec cannot happen (no `/proc`), the process goes on as it was.
//!
//! Only for Linux with the GNU C library; elsewhere it does nothing. The kernel's own
//! setting still rules: with `transparent_hugepage/enabled` at `never` the tunable changes
//! nothing, at `always` it is not needed.

/// The environment variable the C library reads its tunables from.
pub const TUNABLES: &str = "GLIBC_TUNABLES";
/// What [`use_huge_pages`] sets it to.
pub const HUGE_PAGES: &str = "glibc.malloc.hugetlb=1";

/// Starts the process again with [`HUGE_PAGES`] in [`TUNABLES`], unless the variable is
/// set. Returns only when it was set or the exec failed.
pub fn use_huge_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os(TUNABLES).is_none() {
        exec_self(TUNABLES, HUGE_PAGES);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn exec_self(name: &str, value: &str) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let cstr = |b: &[u8]| CString::new(b).ok();
    let Some(argv) = std::env::args_os()
        .map(|a| cstr(a.as_bytes()))
        .collect::<Option<Vec<CString>>>()
    else {
        return;
    };
    let mut env: Vec<Vec<u8>> = std::env::vars_os()
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .collect();
    env.push(format!("{name}={value}").into_bytes());
    // SAFETY: sigset operations on a zeroed set, and sigprocmask, which only changes this
    // thread's mask (no other thread exists this early in main).
    let (old, blocked) = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in crate::signals::STOP_SIGNALS {
            libc::sigaddset(&mut set, sig);
        }
        if libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old) != 0 {
            return;
        }
        // a stop signal caught before the block would be lost with this image: stay
        if crate::signals::stop_requested() {
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            return;
        }
        // the signals blocked here and not before: the new image unblocks just these
        let mut blocked = 0;
        for sig in crate::signals::STOP_SIGNALS {
            if libc::sigismember(&old, sig) == 0 {
                blocked |= 1 << sig;
            }
        }
        (old, blocked)
    };
    env.push(format!("{}={blocked}", crate::signals::UNBLOCK_AFTER_EXEC).into_bytes());
    let Some(envp) = env
        .iter()
        .map(|e| cstr(e))
        .collect::<Option<Vec<CString>>>()
    else {
        // SAFETY: restores the mask read above.
        unsafe { libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        return;
    };
    let mut argp: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argp.push(std::ptr::null());
    let mut envpp: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
    envpp.push(std::ptr::null());
    // SAFETY: execve with NUL-terminated strings and NULL-terminated arrays that outlive the
    // call; it returns only on failure, and then the mask read above is restored.
    unsafe {
        libc::execve(c"/proc/self/exe".as_ptr(), argp.as_ptr(), envpp.as_ptr());
        libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}
