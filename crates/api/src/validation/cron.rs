//! Cron schedules as disruption budgets accept them: five fields (minute hour day-of-month
//! month day-of-week) or an `@` descriptor. Evaluated in UTC; time zones are not allowed.

const DESCRIPTORS: &[&str] = &[
    "@annually",
    "@yearly",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];
const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// Why `schedule` is not a valid cron schedule, or `None`.
pub fn schedule_error(schedule: &str) -> Option<String> {
    let s = schedule.trim();
    if s.starts_with('@') {
        return (!DESCRIPTORS.contains(&s)).then(|| format!("unknown descriptor {s:?}"));
    }
    if s.starts_with("TZ=") || s.starts_with("CRON_TZ=") {
        return Some("time zones are not supported".to_string());
    }
    let fields: Vec<&str> = s.split_whitespace().collect();
    if fields.len() != 5 {
        return Some(format!("expected 5 fields, got {}", fields.len()));
    }
    let specs: [(&str, u32, u32, &[&str]); 5] = [
        ("minute", 0, 59, &[]),
        ("hour", 0, 23, &[]),
        ("day of month", 1, 31, &[]),
        ("month", 1, 12, MONTHS),
        ("day of week", 0, 6, DAYS),
    ];
    for (field, (name, lo, hi, names)) in fields.iter().zip(specs) {
        if let Err(e) = check_field(field, lo, hi, names) {
            return Some(format!("{name} field {field:?}: {e}"));
        }
    }
    None
}

fn value(s: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u32, String> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + lo);
    }
    let v: u32 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v < lo || v > hi {
        return Err(format!("{v} is out of range {lo}-{hi}"));
    }
    Ok(v)
}

fn check_field(field: &str, lo: u32, hi: u32, names: &[&str]) -> Result<(), String> {
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (part, None),
        };
        if let Some(step) = step {
            match step.parse::<u32>() {
                Ok(n) if n > 0 => {}
                _ => return Err(format!("invalid step {step:?}")),
            }
        }
        if range == "*" || range == "?" {
            continue;
        }
        match range.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (value(a, lo, hi, names)?, value(b, lo, hi, names)?);
                if a > b {
                    return Err(format!("range start {a} is after its end {b}"));
                }
            }
            None => {
                value(range, lo, hi, names)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules() {
        for ok in [
            "@daily",
            "0 9 * * mon-fri",
            "*/15 0-6 1,15 jan-jun *",
            "0 0 * * 0",
        ] {
            assert_eq!(schedule_error(ok), None, "{ok}");
        }
        assert!(schedule_error("@sometimes").is_some());
        assert!(
            schedule_error("61 * * * *")
                .unwrap()
                .starts_with("minute field")
        );
        assert!(schedule_error("* * * *").is_some());
        assert!(schedule_error("* * * * * *").is_some());
        assert!(schedule_error("*/0 * * * *").is_some());
    }
}
