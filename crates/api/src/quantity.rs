//! Kubernetes resource quantities (`"500m"`, `"1.5"`, `"2Gi"`, `"1e3"`, `4`) parsed into the
//! integer units `core` uses: millicores for `cpu`, whole units (bytes, counts) for the rest.

use thiserror::Error;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("invalid quantity {input:?}: {reason}")]
pub struct QuantityError {
    pub input: String,
    pub reason: &'static str,
}

/// A parsed quantity as an exact rational `mantissa * 10^exp10 * 2^exp2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Parsed {
    negative: bool,
    digits: u128,
    /// Power of ten applied to `digits` (negative for fractions).
    exp10: i32,
    exp2: u32,
}

fn parse(input: &str) -> Result<Parsed, QuantityError> {
    let err = |reason| QuantityError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    let (negative, s) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(num_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(err("expected a number"));
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let mut digits: u128 = 0;
    for c in int_part.chars().chain(frac_part.chars()) {
        digits = digits
            .checked_mul(10)
            .and_then(|d| d.checked_add(c.to_digit(10).unwrap_or(0) as u128))
            .ok_or_else(|| err("too large"))?;
    }
    let mut exp10 = -(frac_part.len() as i32);
    let mut exp2 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        other => {
            let rest = other.strip_prefix('e').or_else(|| other.strip_prefix('E'));
            match rest.and_then(|r| r.parse::<i32>().ok()) {
                Some(e) if (-30..=30).contains(&e) => exp10 += e,
                _ => return Err(err("unknown suffix")),
            }
        }
    }
    Ok(Parsed {
        negative,
        digits,
        exp10,
        exp2,
    })
}

/// `value * 10^scale`, rounded up (as Kubernetes does for sub-unit precision).
fn scaled(p: Parsed, scale: i32, input: &str) -> Result<i64, QuantityError> {
    let err = |reason| QuantityError {
        input: input.to_string(),
        reason,
    };
    let mut n = p
        .digits
        .checked_shl(p.exp2)
        .ok_or_else(|| err("too large"))?;
    if p.exp2 > 0 && n >> p.exp2 != p.digits {
        return Err(err("too large"));
    }
    let e = p.exp10 + scale;
    if e >= 0 {
        for _ in 0..e {
            n = n.checked_mul(10).ok_or_else(|| err("too large"))?;
        }
    } else {
        let div = 10u128
            .checked_pow((-e) as u32)
            .ok_or_else(|| err("too small"))?;
        n = n.div_ceil(div);
    }
    let v = i64::try_from(n).map_err(|_| err("too large"))?;
    Ok(if p.negative { -v } else { v })
}

/// Whole units (bytes, counts), rounded up.
pub fn parse_units(input: &str) -> Result<i64, QuantityError> {
    scaled(parse(input)?, 0, input)
}

/// Thousandths of a unit (millicores for cpu), rounded up.
pub fn parse_milli(input: &str) -> Result<i64, QuantityError> {
    scaled(parse(input)?, 3, input)
}

/// A quantity for resource `name` in `core`'s unit: millicores for `cpu`, whole units otherwise.
pub fn parse_resource(name: &str, input: &str) -> Result<i64, QuantityError> {
    if name == nodewright_core::resources::CPU {
        parse_milli(input)
    } else {
        parse_units(input)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_memory_forms() {
        assert_eq!(parse_milli("500m").unwrap(), 500);
        assert_eq!(parse_milli("1").unwrap(), 1000);
        assert_eq!(parse_milli("1.5").unwrap(), 1500);
        assert_eq!(parse_milli("0.1").unwrap(), 100);
        assert_eq!(parse_milli("100u").unwrap(), 1);
        assert_eq!(parse_units("2Gi").unwrap(), 2 << 30);
        assert_eq!(parse_units("1.5Gi").unwrap(), 3 << 29);
        assert_eq!(parse_units("1G").unwrap(), 1_000_000_000);
        assert_eq!(parse_units("1e3").unwrap(), 1000);
        assert_eq!(parse_units("128974848").unwrap(), 128974848);
        assert_eq!(parse_units("129e6").unwrap(), 129_000_000);
        assert_eq!(parse_units("123Mi").unwrap(), 123 << 20);
        assert_eq!(parse_resource("cpu", "2").unwrap(), 2000);
        assert_eq!(parse_resource("memory", "1Ki").unwrap(), 1024);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "abc", "1.2.3", "5Xi", "--1", "."] {
            assert!(parse_units(bad).is_err(), "{bad}");
        }
    }
}
