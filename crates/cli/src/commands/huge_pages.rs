//! Transparent huge pages off for the processes that run for days (`controller`,
//! `node-agent`, and `bench controller`, which measures the first).
//!
//! mimalloc reserves its arena with `MADV_HUGEPAGE`, so on a kernel whose THP mode is
//! `madvise` (the default of most distributions) or `always`, each 2 MiB of the heap that is
//! touched at all becomes resident whole. A controller's heap is mostly small objects that
//! come and go with each pass, scattered thinly over the arena, so whole huge pages hold much
//! that is free: with them off, `bench controller --pods 5000` ends its scale-up at 134 to
//! 142 MiB instead of 155 to 167 (`docs/reliability-log.md`, "Huge pages off"). The simulator
//! keeps them: it is short-lived, and its speed is what matters there.

/// Turns transparent huge pages off for this process and those it starts. Pages already huge
/// stay so, which is why the commands call this first. A kernel that refuses (a seccomp
/// profile without `prctl`) costs memory, not correctness: it is logged and the run goes on.
pub fn turn_off() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_thp_disable(true) {
        tracing::warn!(error = %e, "could not turn transparent huge pages off; memory may be higher");
    }
}
