//! Giving the allocator's free pages back to the system (glibc's `malloc_trim`). glibc returns a thread
//! arena's free memory only from its top; what was freed below a block still in use stays resident. The push
//! poller parses every device's first answers at open (about 10 KiB each as JSON values, taken and given back
//! by the workers), so its arena peaks at 10 MB for 1,000 devices and kept 8 MB of it free but resident
//! (BENCHMARKS "Issue 30"). Not a setting of the host's allocator: one call that frees what is already free.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe extern "C" {
    fn malloc_trim(pad: usize) -> std::ffi::c_int;
}

/// Returns the heap's free pages to the system; true when some were. Elsewhere than glibc, nothing to do.
pub(crate) fn release_free_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes a byte count and only walks glibc's own free lists under its locks.
        unsafe { malloc_trim(0) != 0 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
