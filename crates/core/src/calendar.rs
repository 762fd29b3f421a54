//! UTC calendar arithmetic on [`Timestamp`]s (proleptic Gregorian), for cron schedules.

use crate::time::Timestamp;

/// A UTC civil date and time, to the minute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CivilMinute {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    /// 1..=31
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    /// 0 = Sunday .. 6 = Saturday
    pub weekday: u32,
}

/// Days since 1970-01-01 of a civil date.
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

impl CivilMinute {
    /// The minute containing `t`.
    pub(crate) fn from_timestamp(t: Timestamp) -> CivilMinute {
        let secs = t.unix_seconds();
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        CivilMinute {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: ((rem % 3600) / 60) as u32,
            weekday: (days + 4).rem_euclid(7) as u32,
        }
    }

    /// The instant this minute starts.
    pub(crate) fn to_timestamp(self) -> Timestamp {
        let days = days_from_civil(self.year, self.month, self.day);
        Timestamp((days * 86_400 + self.hour as i64 * 3600 + self.minute as i64 * 60) * 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_known_dates() {
        // 2024-02-29T13:45:00Z is a Thursday.
        let t = Timestamp(1_709_214_300_000);
        let c = CivilMinute::from_timestamp(t);
        assert_eq!(
            (c.year, c.month, c.day, c.hour, c.minute, c.weekday),
            (2024, 2, 29, 13, 45, 4)
        );
        assert_eq!(c.to_timestamp(), t);
        assert_eq!(CivilMinute::from_timestamp(Timestamp(0)).weekday, 4);
        assert_eq!(days_in_month(2100, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
        for d in [-800_000, -1, 0, 1, 59, 365, 20_000, 3_000_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
