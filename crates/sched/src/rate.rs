//! Link rates as people and tc write them: the one grammar of every `--link`/`rate`
//! option of the server, the simulator and the Python testbed (docs/formats.md "Rates").
//!
//! `NUMBER [PREFIX] [bit | bit/s]`, case-insensitive, no space needed: NUMBER is a
//! decimal (`10`, `1.5`, `2e3`), PREFIX `k`, `m` or `g` (powers of 1000, as tc's),
//! and no unit means bits per second. So `10mbit`, `10Mbit`, `1.5gbit`, `10M`,
//! `800kbit/s` and `2000000` are accepted; tc's `kbit`/`mbit`/`gbit`/`bit` are a
//! subset. `bps` is refused: tc reads `mbps` as megabytes per second, others as
//! megabits, so it is ambiguous.

use std::fmt;

/// A rate that does not follow the grammar above; the message names it and the forms accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateError(String);

impl fmt::Display for RateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad rate {:?}: expected bits per second as NUMBER[k|m|g][bit], e.g. 10mbit, 10M, 1.5gbit, 800kbit or 2000000{}",
            self.0,
            if self.0.to_ascii_lowercase().ends_with("bps") { " ('bps' is ambiguous: tc reads it as bytes/s)" } else { "" }
        )
    }
}

impl std::error::Error for RateError {}

/// Parses a positive, finite rate in bits per second.
pub fn parse_rate(text: &str) -> Result<f64, RateError> {
    let lower = text.trim().to_ascii_lowercase();
    let without_unit = ["bit/s", "bit"].iter().find_map(|unit| lower.strip_suffix(unit)).unwrap_or(&lower);
    let (number, scale) = match without_unit.char_indices().last() {
        Some((at, 'k')) => (&without_unit[..at], 1e3),
        Some((at, 'm')) => (&without_unit[..at], 1e6),
        Some((at, 'g')) => (&without_unit[..at], 1e9),
        _ => (without_unit, 1.0),
    };
    match number.parse::<f64>() {
        Ok(value) if value.is_finite() && value > 0.0 && (value * scale).is_finite() => Ok(value * scale),
        _ => Err(RateError(text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_forms() {
        let cases = [("10mbit", 1e7), ("10Mbit", 1e7), ("1.5gbit", 1.5e9), ("10M", 1e7), ("800kbit/s", 8e5),
                     ("1Gbit/s", 1e9), ("2000000", 2e6), ("2e3", 2e3), ("8bit", 8.0), (" 10mbit ", 1e7), ("0.5", 0.5)];
        for (text, bps) in cases {
            assert_eq!(parse_rate(text), Ok(bps), "{text}");
        }
    }

    #[test]
    fn refuses_others_naming_them() {
        for bad in ["", "fast", "-1mbit", "0", "10mbps", "10 m bit", "mbit", "inf", "nan", "1e400", "10x"] {
            let err = parse_rate(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")) && err.contains("10mbit"), "{err}");
        }
        assert!(parse_rate("10mbps").unwrap_err().to_string().contains("bytes/s"));
    }
}
