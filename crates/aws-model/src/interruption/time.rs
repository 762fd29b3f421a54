//! RFC 3339 instants as EventBridge writes them (`2024-06-01T12:00:00Z`, optionally with
//! fractional seconds or a numeric offset), to milliseconds since the epoch.

use nodewright_core::time::Timestamp;

/// `None` for anything that is not a valid RFC 3339 date-time.
pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let year = digits(&s[0..4])?;
    let month = digits(&s[5..7])?;
    let day = digits(&s[8..10])?;
    let hour = digits(&s[11..13])?;
    let minute = digits(&s[14..16])?;
    let second = digits(&s[17..19])?;
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &s[19..];
    let mut millis = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let first3: String = frac[..n].chars().chain("000".chars()).take(3).collect();
        millis = digits(&first3)?;
        rest = &frac[n..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ => {
            let rb = rest.as_bytes();
            if rb.len() != 6 || !matches!(rb[0], b'+' | b'-') || rb[3] != b':' {
                return None;
            }
            let h = digits(&rest[1..3])?;
            let m = digits(&rest[4..6])?;
            if h > 23 || m > 59 {
                return None;
            }
            let total = h * 60 + m;
            if rb[0] == b'-' { -total } else { total }
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    Some(Timestamp(seconds * 1_000 + millis))
}

fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's civil algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_instants() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(Timestamp(0)));
        assert_eq!(
            parse_rfc3339("2024-06-01T00:00:00Z"),
            Some(Timestamp(1_717_200_000_000))
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T23:59:59Z"),
            Some(Timestamp(951_868_799_000))
        );
    }

    #[test]
    fn fractions_and_offsets() {
        assert_eq!(
            parse_rfc3339("2024-06-01T00:00:00.5Z"),
            Some(Timestamp(1_717_200_000_500))
        );
        assert_eq!(
            parse_rfc3339("2024-06-01T00:00:00.123456789Z"),
            Some(Timestamp(1_717_200_000_123))
        );
        assert_eq!(
            parse_rfc3339("2024-06-01T02:00:00+02:00"),
            Some(Timestamp(1_717_200_000_000))
        );
        assert_eq!(
            parse_rfc3339("2024-05-31T22:30:00-01:30"),
            Some(Timestamp(1_717_200_000_000))
        );
    }

    #[test]
    fn rejects_what_is_not_a_date_time() {
        for bad in [
            "",
            "2024-06-01",
            "2024-06-01T00:00:00",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-06-01T24:00:00Z",
            "2024-06-01T00:00:00.Z",
            "2024-06-01T00:00:00+0200",
            "Wed, 31 Jul 2019 10:30:00 GMT",
            "2024-06-01T00:00:00Zjunk",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
