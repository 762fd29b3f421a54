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
pub fn reset_own_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
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

    #[test]
    fn a_reset_peak_forgets_memory_given_back() {
        // A thread's stack larger than the C library's stack cache (40 MiB) is unmapped when
        // the thread is joined, so touching 48 MiB of it raises the peak by at least that
        // much and leaves the resident set where it was. Room for two copies of the array,
        // as an unoptimised build may make.
        const SPIKE: usize = 48 << 20;
        std::thread::Builder::new()
            .stack_size(2 * SPIKE + (32 << 20))
            .spawn(|| {
                let spike = [1u8; SPIKE];
                std::hint::black_box(&spike);
            })
            .unwrap()
            .join()
            .unwrap();
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
}
