//! Cron schedules as disruption budgets use them: five fields (minute hour day-of-month month
//! day-of-week) or one of `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly`; always evaluated in UTC.

use std::fmt;

use crate::calendar::{CivilMinute, days_in_month};
use crate::time::Timestamp;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CronError {
    pub schedule: String,
    pub reason: String,
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid cron schedule {:?}: {}",
            self.schedule, self.reason
        )
    }
}

impl std::error::Error for CronError {}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Day-of-month and day-of-week were both restricted: a day matches if either does.
    day_or: bool,
}

fn parse_field(field: &str, min: u32, max: u32, names: &[&str]) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let mut restricted = true;
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| format!("bad step {s:?}"))?;
                if step == 0 {
                    return Err("step must be positive".into());
                }
                (r, step)
            }
            None => (part, 1),
        };
        let value = |s: &str| -> Result<u32, String> {
            if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
                return Ok(i as u32 + min);
            }
            let v: u32 = s.parse().map_err(|_| format!("bad value {s:?}"))?;
            // Sunday may be written 7.
            let v = if max == 6 && v == 7 { 0 } else { v };
            if v < min || v > max {
                return Err(format!("value {v} out of range {min}-{max}"));
            }
            Ok(v)
        };
        let (lo, hi) = if range == "*" || range == "?" {
            if step == 1 && field == range {
                restricted = false;
            }
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let v = value(range)?;
            (v, if part.contains('/') { max } else { v })
        };
        if lo > hi {
            return Err(format!("range {lo}-{hi} is empty"));
        }
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, restricted))
}

impl Cron {
    pub(crate) fn parse(schedule: &str) -> Result<Cron, CronError> {
        let err = |reason: String| CronError {
            schedule: schedule.to_string(),
            reason,
        };
        let expanded = match schedule.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(err(format!("expected 5 fields, found {}", fields.len())));
        }
        const MONTHS: &[&str] = &[
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ];
        const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
        let (minutes, _) = parse_field(fields[0], 0, 59, &[]).map_err(err)?;
        let (hours, _) = parse_field(fields[1], 0, 23, &[]).map_err(err)?;
        let (days, dom_restricted) = parse_field(fields[2], 1, 31, &[]).map_err(err)?;
        let (months, _) = parse_field(fields[3], 1, 12, MONTHS).map_err(err)?;
        let (weekdays, dow_restricted) = parse_field(fields[4], 0, 6, DAYS).map_err(err)?;
        Ok(Cron {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: weekdays as u8,
            day_or: dom_restricted && dow_restricted,
        })
    }

    fn day_matches(&self, c: &CivilMinute) -> bool {
        let dom = self.days & (1 << c.day) != 0;
        let dow = self.weekdays & (1 << c.weekday) != 0;
        if self.day_or { dom || dow } else { dom && dow }
    }

    /// The first minute strictly after `t` that the schedule fires, searching up to five years.
    pub(crate) fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let mut c = CivilMinute::from_timestamp(Timestamp(t.0 + 60_000));
        let limit = c.year + 5;
        while c.year <= limit {
            if self.months & (1 << c.month) == 0 {
                c = CivilMinute {
                    day: 1,
                    hour: 0,
                    minute: 0,
                    ..c
                };
                advance_month(&mut c);
                continue;
            }
            if !self.day_matches(&c) {
                advance_day(&mut c);
                continue;
            }
            if self.hours & (1 << c.hour) == 0 {
                c.minute = 0;
                c.hour += 1;
                if c.hour == 24 {
                    advance_day(&mut c);
                }
                continue;
            }
            if self.minutes & (1 << c.minute) == 0 {
                c.minute += 1;
                if c.minute == 60 {
                    c.minute = 0;
                    c.hour += 1;
                    if c.hour == 24 {
                        advance_day(&mut c);
                    }
                }
                continue;
            }
            return Some(c.to_timestamp());
        }
        None
    }
}

fn advance_day(c: &mut CivilMinute) {
    c.hour = 0;
    c.minute = 0;
    c.weekday = (c.weekday + 1) % 7;
    c.day += 1;
    if c.day > days_in_month(c.year, c.month) {
        c.day = 1;
        c.month += 1;
        if c.month == 13 {
            c.month = 1;
            c.year += 1;
        }
    }
}

fn advance_month(c: &mut CivilMinute) {
    c.month += 1;
    if c.month == 13 {
        c.month = 1;
        c.year += 1;
    }
    let start = CivilMinute {
        day: 1,
        hour: 0,
        minute: 0,
        ..*c
    };
    *c = CivilMinute::from_timestamp(start.to_timestamp());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i64, mo: u32, d: u32, h: u32, mi: u32) -> Timestamp {
        CivilMinute {
            year: y,
            month: mo,
            day: d,
            hour: h,
            minute: mi,
            weekday: 0,
        }
        .to_timestamp()
    }

    #[test]
    fn next_fire_times() {
        let c = Cron::parse("0 9 * * 1-5").unwrap();
        // Saturday 2026-11-21 10:00 → Monday 2026-11-23 09:00.
        assert_eq!(
            c.next_after(at(2026, 11, 21, 10, 0)),
            Some(at(2026, 11, 23, 9, 0))
        );
        let c = Cron::parse("@daily").unwrap();
        assert_eq!(
            c.next_after(at(2026, 12, 31, 23, 59)),
            Some(at(2027, 1, 1, 0, 0))
        );
        let c = Cron::parse("*/15 * * * *").unwrap();
        assert_eq!(
            c.next_after(at(2026, 1, 1, 0, 0)),
            Some(at(2026, 1, 1, 0, 15))
        );
        let c = Cron::parse("0 0 29 2 *").unwrap();
        assert_eq!(
            c.next_after(at(2026, 3, 1, 0, 0)),
            Some(at(2028, 2, 29, 0, 0))
        );
        // Day-of-month OR day-of-week when both are restricted: the 1st, or any Sunday.
        let c = Cron::parse("0 0 1 * sun").unwrap();
        assert_eq!(
            c.next_after(at(2026, 11, 21, 0, 0)),
            Some(at(2026, 11, 22, 0, 0))
        );
    }

    #[test]
    fn rejects_bad_schedules() {
        for bad in [
            "",
            "* * * *",
            "60 * * * *",
            "* * 0 * *",
            "*/0 * * * *",
            "a b c d e",
            "5-1 * * * *",
        ] {
            assert!(Cron::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Cron::parse("* * * *").unwrap_err().to_string(),
            "invalid cron schedule \"* * * *\": expected 5 fields, found 4"
        );
    }
}
