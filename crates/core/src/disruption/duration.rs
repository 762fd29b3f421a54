//! Go-style durations (`"5m"`, `"1h30m"`, `"1.5h"`, `"300ms"`), as found in annotations such
//! as `karpenter.sh/do-not-disrupt: "5m"`.

use std::time::Duration;

/// Parses a Go duration string; `None` if malformed, negative, or longer than Go's
/// `time.Duration` holds (2562047h47m16.854775807s), as `time.ParseDuration` decides.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    // Go counts in u64 nanoseconds and fails past 1<<63 at every step; the same here.
    const LIMIT: u64 = 1 << 63;
    let s = s.trim();
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let (whole, after_int) = leading_int(rest)?;
        let before = after_int.len() != rest.len();
        let (fraction, scale, after, past) = match after_int.strip_prefix('.') {
            Some(f) => {
                let (x, scale, after) = leading_fraction(f);
                (x, scale, after, after.len() != f.len())
            }
            None => (0, 1.0, after_int, false),
        };
        if !before && !past {
            return None; // no digits on either side of the point
        }
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let unit: u64 = match &after[..unit_end] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        if whole > LIMIT / unit {
            return None;
        }
        let mut v = whole * unit;
        if fraction > 0 {
            // As Go: the fraction in floating point, truncated.
            v += (fraction as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return None;
            }
        }
        total = total.checked_add(v).filter(|t| *t <= LIMIT)?;
        rest = &after[unit_end..];
    }
    (total < LIMIT).then(|| Duration::from_nanos(total))
}

/// The leading digits of `s` as a number (`None` past 1<<63) and what follows them.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut x: u64 = 0;
    for b in s[..end].bytes() {
        x = x.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
        if x > 1 << 63 {
            return None;
        }
    }
    Some((x, &s[end..]))
}

/// The digits after a decimal point as a number and its scale (`"25"` → 25, 100), keeping
/// only as many as fit, as Go does; and what follows them.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (mut x, mut scale, mut overflow) = (0u64, 1.0f64, false);
    for b in s[..end].bytes() {
        if overflow {
            continue;
        }
        if x > (1 << 63) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(b - b'0');
        if y > 1 << 63 {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(
            parse_go_duration("2562047h47m16.854775807s"),
            Some(Duration::from_nanos(i64::MAX as u64))
        );
        assert_eq!(parse_go_duration(".5s"), Some(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("1.s"), Some(Duration::from_secs(1)));
        for bad in [
            "",
            "5",
            "true",
            "-5m",
            "5x",
            "m",
            ".s",
            ".",
            "2562047h47m16.854775808s",
            "2562048h",
            "99999999999999999999s",
            "10000000000000000000ns",
        ] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }
}
