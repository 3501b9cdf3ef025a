//! Huge pages for the process's heap, and large blocks kept in it, without an environment
//! variable from the operator.
//!
//! The exact-Jaccard lists are gigabytes of small arrays read at random: on 4 KiB pages
//! nearly every cache miss on them is also a TLB miss, and deciding at 10M indexed pages was
//! measured 25 % faster on transparent huge pages (1M: 16–26 %). The C library's allocator
//! asks the kernel for them (`madvise(MADV_HUGEPAGE)` on its heaps) only when the
//! `glibc.malloc.hugetlb=1` tunable is in `GLIBC_TUNABLES`, which it reads once, when the
//! process starts. The tunable covers the allocator's main heap and the blocks it maps by
//! themselves, not the heaps of other threads: `neardup dedup` and `neardup-lab index`
//! decide on the main thread and keep their lists on huge pages, while the deciding thread
//! of `neardup run` keeps most of its lists on 4 KiB pages, unless [`one_heap`] (below)
//! gives the process one heap. (A first trial of one heap, on a day the broker itself ran
//! three times slower, was not told apart: docs/benchmarks/2026-12-01-decider-machine-state.md;
//! on 2026-12-03 it was ahead exactly-once in every run.)
//! So [`use_huge_pages`], first thing in `main`, starts the binary again in
//! the same process (`execve` of `/proc/self/exe`: same pid, arguments, descriptors and
//! environment) with the tunable added, unless `GLIBC_TUNABLES` is already set: an operator
//! who sets it (even to `glibc.malloc.hugetlb=0`) decides. Stop signals that arrive while
//! the new image loads are held pending (blocked across the exec) and caught by its early
//! handler ([`crate::signals::install_early`]), so a SIGTERM at start still stops cleanly.
//! The new image keeps the process's name (the kernel would name it `exe`). Where the exec
//! cannot or should not happen (no `/proc`; a set-id binary or one with file capabilities,
//! whose loader drops `GLIBC_TUNABLES`; a binary started through the dynamic loader by
//! name), the process goes on as it was, on the allocator's defaults.
//!
//! Only for Linux with the GNU C library; elsewhere it does nothing. The kernel's own
//! setting still rules: with `transparent_hugepage/enabled` at `never` the tunable changes
//! nothing, at `always` it is not needed.
//!
//! The same start sets two more tunables. A page's HTML is decoded into a buffer of its
//! own size (150 KB on average, up to tens of MB), made and freed for every page. Above
//! the allocator's threshold for mapping a block by itself (128 KiB at first, then as large
//! as the largest block freed so far) each such buffer was a new mapping of the kernel's
//! zeroed pages, huge ones among them, unmapped again when the page was written out: a
//! tenth of a signing core went to zeroing memory. `mmap_threshold` at 32 MiB keeps the
//! blocks of every page below it in the heap, where a freed buffer is reused for the next
//! page, and `trim_threshold` at 128 MiB returns the top of the heap only when that much
//! is free. Measured with `neardup dedup --jobs 1` on one pinned core over the dev pages,
//! three runs each: 224.8–240.6 MB/s before, 237.5–265.4 MB/s after, the same peak RSS
//! (333–345 MB); the decisions at 1M pages no slower: docs/benchmarks/2026-11-28-per-core.md.
//!
//! A process whose work is one deciding thread ([`one_heap`]: `neardup run` as a decider, a
//! shard or an aggregator, exactly-once) starts itself once more, with one heap for all its
//! threads ([`ONE_HEAP_TUNABLES`]). The C library gives each thread that allocates its own
//! heap, and only the main one is put on huge pages: the deciding thread's lists and
//! RocksDB's in-memory tables were on 4 KiB pages, every cache miss on them a TLB miss too.
//! With one heap, the main one, they are on huge pages (at 1M pages indexed, 616–720 MiB of
//! the decider's 657–761 MiB), and the decider through Kafka decided 13,682–16,010 records a
//! second exactly-once in six runs against 10,434–15,517 in ten with a heap a thread, each
//! one-heap run ahead of the next with a heap a thread (0.061–0.073 ms of CPU a record
//! against 0.063–0.095): docs/benchmarks/2026-12-03-one-heap.md. At-least-once the two were
//! not told apart (four runs each, 13,080–17,566 against 13,476–19,325), and a decider
//! at-least-once keeps a heap a thread. The threads of one heap share its lock; processes
//! that sign on several threads (the single-process stage, a signer, `neardup dedup --jobs
//! N`) keep a heap a thread: signing the dev pages on two threads with one heap was 5 %
//! slower.

/// The environment variable the C library reads its tunables from.
pub const TUNABLES: &str = "GLIBC_TUNABLES";
/// The project's default tunables, as a literal both constants below are made of.
macro_rules! default_tunables {
    () => {
        "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728"
    };
}

/// What [`use_huge_pages`] sets it to: huge pages, and large blocks kept in the heap.
pub const DEFAULT_TUNABLES: &str = default_tunables!();

/// What [`one_heap`] sets it to: [`DEFAULT_TUNABLES`] and one heap (arena) for every thread.
/// The arena setting comes first: the C library may leave only the first tunable in the
/// environment the kernel shows (`/proc/PID/environ`), where an operator can then read it.
pub const ONE_HEAP_TUNABLES: &str = concat!("glibc.malloc.arena_max=1:", default_tunables!());

/// Starts the process again with [`DEFAULT_TUNABLES`] in [`TUNABLES`], unless the variable is
/// set. Returns when it was set, when this image is the one started again (the marker
/// [`crate::signals::UNBLOCK_AFTER_EXEC`] is in its environment: never a second time, even
/// where the loader strips `GLIBC_TUNABLES`, as it does for set-id binaries or ones with
/// file capabilities), when the process is privileged that way or was started through the
/// dynamic loader by name (then `/proc/self/exe` is the loader), when a stop signal has
/// already been caught, or when the exec failed.
pub fn use_huge_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os(TUNABLES).is_none()
        && std::env::var_os(crate::signals::UNBLOCK_AFTER_EXEC).is_none()
        && can_start_again()
    {
        exec_self(&[(TUNABLES, DEFAULT_TUNABLES)]);
    }
}

/// Whether the process may start itself again with tunables of its own: not a privileged
/// process (set-id, file capabilities: its loader drops `GLIBC_TUNABLES`), nor one started
/// through the dynamic loader by name (then `/proc/self/exe` is the loader).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn can_start_again() -> bool {
    // SAFETY: getauxval only reads the auxiliary vector.
    let (secure, interpreter) = unsafe {
        (
            libc::getauxval(libc::AT_SECURE),
            libc::getauxval(libc::AT_BASE),
        )
    };
    // AT_BASE is where the kernel loaded the program's interpreter: 0 when the loader
    // itself is the program that was executed (or the binary is static)
    secure == 0 && interpreter != 0
}

/// For a process whose work is one deciding thread: starts it again with
/// [`ONE_HEAP_TUNABLES`], once, before it starts any thread (the same pid, arguments and
/// descriptors, stop signals held across the exec as in [`use_huge_pages`]). Only when
/// `GLIBC_TUNABLES` is [`DEFAULT_TUNABLES`], the value [`use_huge_pages`] and the project's
/// image set: any other value is an operator's and kept as it is. Returns when it does
/// nothing or the exec failed.
///
/// The new image reads its configuration again: `settings` (a digest of what the first one
/// resolved) goes with it in [`SETTINGS_READ_BEFORE`], for [`check_settings_read_again`].
pub fn one_heap(settings: &str) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var(TUNABLES).is_ok_and(|t| t == DEFAULT_TUNABLES) && can_start_again() {
        exec_self(&[
            (TUNABLES, ONE_HEAP_TUNABLES),
            (SETTINGS_READ_BEFORE, settings),
        ]);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = settings;
}

/// The variable that carries the digest of the settings [`one_heap`]'s first image resolved
/// into the image it starts.
pub const SETTINGS_READ_BEFORE: &str = "NEARDUP_SETTINGS_READ_BEFORE";

/// In an image [`one_heap`] started, whose configuration was read a second time: an error
/// when `settings` (the digest of what this image resolved) differs from the first image's,
/// so that a configuration that could not be read the same way twice (a file changed
/// between the two starts) never runs with other settings than those the first start was
/// given. Removes the variable, so that nothing this process starts inherits it.
pub fn check_settings_read_again(settings: &str) -> anyhow::Result<()> {
    let Some(before) = std::env::var_os(SETTINGS_READ_BEFORE) else {
        return Ok(());
    };
    std::env::remove_var(SETTINGS_READ_BEFORE);
    if before != settings {
        anyhow::bail!(
            "the settings read again when the process started itself once more (one heap, \
             for a deciding role exactly-once) differ from what it read the first time: a \
             file the settings are read from (configuration, stopwords, Kafka properties) \
             changed in between; start it again"
        );
    }
    Ok(())
}

/// Those of `paths` (the files the settings were read from) that a second read would not
/// find as the first did: not regular files (a pipe, which a second read finds empty, or a
/// terminal). A path that is not there is left to the reading's own error.
pub fn not_regular_files<'a>(paths: &[&'a std::path::Path]) -> Vec<&'a std::path::Path> {
    paths
        .iter()
        .copied()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| !m.is_file()))
        .collect()
}

/// In the image [`use_huge_pages`] started: gives the process back the name its first image
/// had (the kernel names a process after the file it executes, here `exe`), and removes the
/// marker from the environment so that nothing this process starts inherits it.
pub fn after_exec() {
    let Some(marker) = std::env::var_os(crate::signals::UNBLOCK_AFTER_EXEC) else {
        return;
    };
    #[cfg(target_os = "linux")]
    if let Some(name) = marker
        .to_str()
        .and_then(|m| m.split_once(' '))
        .map(|(_, name)| name)
        .filter(|n| !n.is_empty())
        .and_then(|n| std::ffi::CString::new(n).ok())
    {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string (the kernel keeps 15 bytes).
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = marker;
    std::env::remove_var(crate::signals::UNBLOCK_AFTER_EXEC);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn exec_self(vars: &[(&str, &str)]) {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let cstr = |b: &[u8]| CString::new(b).ok();
    let Some(argv) = std::env::args_os()
        .map(|a| cstr(a.as_bytes()))
        .collect::<Option<Vec<CString>>>()
    else {
        return;
    };
    let marker = crate::signals::UNBLOCK_AFTER_EXEC;
    let mut env: Vec<Vec<u8>> = std::env::vars_os()
        .filter(|(k, _)| {
            k.as_bytes() != marker.as_bytes()
                && vars.iter().all(|(name, _)| k.as_bytes() != name.as_bytes())
        })
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .collect();
    // the process's name, which the exec of /proc/self/exe would change to `exe`
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    env.extend(
        vars.iter()
            .map(|(name, value)| format!("{name}={value}").into_bytes()),
    );
    // SAFETY: sigset operations on a zeroed set, and sigprocmask, which only changes this
    // thread's mask (no other thread exists yet: the callers run before any thread starts,
    // `use_huge_pages` first thing in main, `one_heap` before the stage starts its own).
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
    env.push(format!("{marker}={blocked} {}", comm.trim_end_matches('\n')).into_bytes());
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
