//! A process's memory and CPU time as Linux's `/proc` reports them, for the benchmarks that
//! measure the controller: their own process (`"self"`) or a child they started.

use std::time::Duration;

/// `VmRSS` and `VmHWM` (the peak) of process `pid` (a number or `"self"`), in bytes; zeros
/// once it is gone.
pub fn memory(pid: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Sets this process's peak (`VmHWM`) back to what is resident now, so a benchmark can leave
/// a probe of its own out of the peak it reports. False when the kernel refuses (before Linux
/// 4.0, or `/proc` read-only); the peak then still holds the probe.
fn reset_own_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// [`reset_own_peak`] once this process's resident memory is back within 4 MiB of `rss`
/// (what it was before a probe), or after `wait` at most: the allocator hands a probe's freed
/// pages back only after a delay of its own (mimalloc holds them a second), and a reset
/// before then keeps them in the new peak.
pub fn reset_own_peak_after(rss: u64, wait: Duration) -> bool {
    let start = std::time::Instant::now();
    let mut now = memory("self").0;
    while now > rss + (4 << 20) && start.elapsed() < wait {
        std::thread::sleep(Duration::from_millis(50));
        // mimalloc looks for expired pages to hand back when it frees one of its own pages;
        // a large block, never touched, is such a page. Idle, it would hold them on.
        drop(std::hint::black_box(Vec::<u8>::with_capacity(8 << 20)));
        now = memory("self").0;
    }
    reset_own_peak()
}

/// Whether the kernel may back process `pid`'s memory with transparent huge pages
/// (`THP_enabled` of its status, Linux 5.0 on); `None` when it does not say.
pub fn huge_pages(pid: &str) -> Option<bool> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("THP_enabled:"))?;
    Some(line.split_whitespace().nth(1)? != "0")
}

/// User plus system CPU time of process `pid` (every thread).
pub fn cpu_time(pid: &str) -> Duration {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = text.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name. The kernel
    // counts in clock ticks, 100 a second on every Linux this runs on.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    Duration::from_millis(ticks * 10)
}

pub fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_a_gone_one_has_none() {
        let (rss, hwm) = memory("self");
        assert!(rss > 0 && hwm >= rss, "rss {rss}, peak {hwm}");
        assert_eq!(memory("999999999"), (0, 0));
        assert_eq!(cpu_time("999999999"), Duration::ZERO);
    }

    /// The two tests' spikes would show in each other's figures.
    static SPIKES: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A thread that has touched 48 MiB of its stack and ended, returned once the memory is
    /// resident. A stack larger than the C library's stack cache (40 MiB) is unmapped when the
    /// thread is joined, so the join hands the spike back and leaves the peak where it was.
    /// Room for two copies of the array, as an unoptimised build may make.
    fn spike() -> std::thread::JoinHandle<()> {
        const SPIKE: usize = 48 << 20;
        let (made, spiked) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .stack_size(2 * SPIKE + (32 << 20))
            .spawn(move || {
                let spike = [1u8; SPIKE];
                std::hint::black_box(&spike);
                made.send(()).unwrap();
            })
            .unwrap();
        spiked.recv().unwrap();
        thread
    }

    #[test]
    fn a_reset_peak_forgets_memory_given_back() {
        let _one_spike_at_a_time = SPIKES.lock().unwrap_or_else(|e| e.into_inner());
        spike().join().unwrap();
        let (rss, peak) = memory("self");
        assert!(
            peak > rss + (32 << 20),
            "no spike to forget: rss {rss}, peak {peak}"
        );
        assert!(reset_own_peak());
        let (rss, peak) = memory("self");
        assert!(
            peak < rss + (16 << 20),
            "rss {rss}, peak {peak} after the reset"
        );
    }

    #[test]
    fn a_reset_after_a_probe_waits_for_its_memory_to_go() {
        let _one_spike_at_a_time = SPIKES.lock().unwrap_or_else(|e| e.into_inner());
        // The spike handed back 300 ms after it is made (the thread is joined late), as an
        // allocator hands back a probe's pages after a delay of its own.
        let before = memory("self").0;
        let thread = spike();
        let joiner = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            thread.join().unwrap();
        });
        assert!(reset_own_peak_after(before, Duration::from_secs(10)));
        let (rss, peak) = memory("self");
        joiner.join().unwrap();
        // Other tests allocate beside this one, so the bounds leave them room.
        assert!(
            rss < before + (24 << 20),
            "the reset came before the spike went: before {before}, rss {rss}"
        );
        assert!(
            peak < rss + (16 << 20),
            "rss {rss}, peak {peak} after the reset"
        );
    }
}
