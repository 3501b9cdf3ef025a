//! What the parts of the lists share about their layout in memory: the bits of a signature
//! that pick its shard, and the processor hint their lookups use. A leaf: the shards, the
//! presence map and the recent map take these from here, not from their parent, which
//! holds them all.

/// Bits of the signature that pick its shard; the other 16 are stored with each entry.
pub(super) const SHARD_BITS: u32 = 16;

/// Asks the processor to bring the cache line holding `at` closer without waiting for it
/// (a software prefetch: unlike a load it retires at once, so the misses of many lookups
/// overlap and none holds up the instructions behind it). A hint only, for any address:
/// nothing is read that the program sees. On other processors than x86_64 and aarch64 it
/// does nothing.
#[inline(always)]
pub(super) fn prefetch<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of every x86_64 target, and a prefetch of any address is a
        // hint that never faults or reads anything the program sees.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>()) };
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: PRFM is a hint: it never faults, whatever the address, and writes no register,
    // flag or memory.
    unsafe {
        std::arch::asm!(
            "prfm pldl1keep, [{0}]",
            in(reg) at,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = at;
}
