//! The process's threads at the kernel's batch scheduling policy (`SCHED_BATCH`), for the
//! Kafka stage (`run`, `replay`).
//!
//! A decider hands each record along a chain of threads: the Kafka client's, the consume
//! and produce tasks', the decoding pool's, the deciding thread. Where they share a core
//! (a pod of one CPU, the benchmark's pinned decider), each hand-off woke a thread that
//! took the core from the deciding thread at once, the scheduler's preemption at wakeup:
//! 8,750 context switches a second at about 7,000 records/s, a thread switched in for almost
//! every record, and the Kafka client's thread spent a tenth of the process's time waking
//! others. A thread of the batch policy that is woken does not preempt the running one: it
//! runs when that thread blocks or its time slice ends, and finds a batch of work waiting.
//! Weights, nice values and shares of the CPU are the normal policy's; only the preemption
//! at wakeup goes, and a thread may wait for the core up to a time slice (a few
//! milliseconds) where it waited for none. With the decider on one core the switches fell
//! to a quarter; its rate was ahead in three pairs of five (docs/benchmarks/
//! 2026-12-02-batch-scheduling.md), not told apart from the machine's drift that day.
//!
//! `dedup` hands pages on in batches already (about 600 switches in a run over the dev
//! pages; not told apart with the batch policy in four pairs) and `serve` answers requests:
//! both keep the normal policy. Lowering a thread's policy to batch needs no privilege;
//! where the kernel refuses it (another system, a sandbox) the process goes on at the
//! policy it has.

/// Sets the batch policy on every thread of the process (those that exist now; the
/// threads they start later take it from them). Returns how many threads took it.
#[cfg(target_os = "linux")]
pub fn batch() -> usize {
    let threads: Vec<libc::pid_t> = match std::fs::read_dir("/proc/self/task") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        // the calling thread alone
        Err(_) => vec![0],
    };
    let param = libc::sched_param { sched_priority: 0 };
    threads
        .into_iter()
        // SAFETY: `param` is a valid sched_param; a thread id that ended meanwhile only
        // makes the call fail
        .filter(|&tid| unsafe { libc::sched_setscheduler(tid, libc::SCHED_BATCH, &param) } == 0)
        .count()
}

/// Elsewhere the policy is left as it is.
#[cfg(not(target_os = "linux"))]
pub fn batch() -> usize {
    0
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn policy() -> libc::c_int {
        // SAFETY: asks for the calling thread's policy; no pointer
        unsafe { libc::sched_getscheduler(0) }
    }

    /// Runs in a process of its own (this test binary started again on this test alone), so
    /// that the other tests of the binary keep the normal policy.
    #[test]
    fn every_thread_takes_the_batch_policy_and_the_threads_started_later_inherit_it() {
        const CHILD: &str = "NEARDUP_SCHEDULING_TEST_CHILD";
        if std::env::var_os(CHILD).is_none() {
            let name = "scheduling::tests::every_thread_takes_the_batch_policy_and_the_threads_started_later_inherit_it";
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--test-threads", "1"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                text.contains("1 passed"),
                "the test ran in no child: {text}"
            );
            assert_eq!(
                policy(),
                libc::SCHED_OTHER,
                "the test's own process kept its policy"
            );
            return;
        }
        // a thread that exists before the call, waiting for it
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let before = std::thread::spawn(move || {
            wait.recv().unwrap();
            policy()
        });
        assert!(batch() >= 2, "the test thread and the one waiting take it");
        assert_eq!(policy(), libc::SCHED_BATCH);
        go.send(()).unwrap();
        assert_eq!(before.join().unwrap(), libc::SCHED_BATCH);
        let after = std::thread::spawn(policy).join().unwrap();
        assert_eq!(
            after,
            libc::SCHED_BATCH,
            "a thread started later inherits it"
        );
    }
}
