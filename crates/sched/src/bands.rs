//! Kernel-level SRPT by priority bands (000 §3).
//!
//! The server cannot reorder packets inside the kernel, so it approximates SRPT
//! by putting each response's socket into one of a few strict-priority bands by
//! its remaining size, and moving it up as the response drains. 000 §3.2 uses
//! five bands with cutoffs 1 KB, 2 KB, 5 KB and 50 KB: band 0 (highest) for
//! fewer than 1 KB left, band 4 for 50 KB or more. (Band 0 of the paper, reserved
//! there for SYN/ACK control packets, is not separate here.)

use std::fmt;
use std::str::FromStr;

/// Size cutoffs in bytes, strictly increasing: `n` cutoffs make `n + 1` bands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bands {
    cutoffs: Vec<u64>,
}

/// At most eight bands: HTB has priorities 0..7 (see docs/architecture.md).
pub const MAX_BANDS: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BandsError {
    Empty,
    NotIncreasing { at: usize },
    TooMany { bands: usize },
    BadNumber(String),
}

impl fmt::Display for BandsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BandsError::Empty => write!(f, "at least one size cutoff is needed"),
            BandsError::NotIncreasing { at } => {
                write!(f, "size cutoffs must be strictly increasing (cutoff #{} is not)", at + 1)
            }
            BandsError::TooMany { bands } => {
                write!(f, "{bands} bands asked for, at most {MAX_BANDS} are possible")
            }
            BandsError::BadNumber(s) => {
                write!(f, "bad size cutoff {s:?}: expected bytes such as 1024, 1K, 50KB or 2M")
            }
        }
    }
}

impl std::error::Error for BandsError {}

impl Default for Bands {
    /// The cutoffs of 000 §3.2: 1 KB, 2 KB, 5 KB, 50 KB.
    fn default() -> Self {
        Bands { cutoffs: vec![1024, 2048, 5 * 1024, 50 * 1024] }
    }
}

impl Bands {
    pub fn new(cutoffs: Vec<u64>) -> Result<Self, BandsError> {
        if cutoffs.is_empty() {
            return Err(BandsError::Empty);
        }
        if let Some(at) = cutoffs.windows(2).position(|w| w[0] >= w[1]) {
            return Err(BandsError::NotIncreasing { at: at + 1 });
        }
        if cutoffs.len() + 1 > MAX_BANDS {
            return Err(BandsError::TooMany { bands: cutoffs.len() + 1 });
        }
        Ok(Bands { cutoffs })
    }

    pub fn cutoffs(&self) -> &[u64] {
        &self.cutoffs
    }

    pub fn count(&self) -> usize {
        self.cutoffs.len() + 1
    }

    /// The band of a response with `remaining` bytes left: 0 is the highest priority.
    pub fn band(&self, remaining: u64) -> usize {
        self.cutoffs.partition_point(|&c| c <= remaining)
    }
}

/// Parses a byte count with an optional K/M/G suffix (powers of 1024; "B" optional).
pub fn parse_bytes(s: &str) -> Result<u64, BandsError> {
    let t = s.trim();
    let upper = t.to_ascii_uppercase();
    let body = upper.strip_suffix("IB").or_else(|| upper.strip_suffix('B')).unwrap_or(&upper);
    let (digits, mult) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 1u64 << 10),
        Some('M') => (&body[..body.len() - 1], 1 << 20),
        Some('G') => (&body[..body.len() - 1], 1 << 30),
        _ => (body, 1),
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| BandsError::BadNumber(s.to_string()))
}

impl FromStr for Bands {
    type Err = BandsError;
    /// A comma-separated list such as `1K,2K,5K,50K`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let cutoffs = s.split(',').filter(|p| !p.trim().is_empty()).map(parse_bytes).collect::<Result<_, _>>()?;
        Bands::new(cutoffs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paper_cutoffs() {
        let b = Bands::default();
        assert_eq!(b.count(), 5);
        let cases = [(0, 0), (1023, 0), (1024, 1), (2047, 1), (2048, 2), (5119, 2), (5120, 3), (51199, 3), (51200, 4), (u64::MAX, 4)];
        for (remaining, band) in cases {
            assert_eq!(b.band(remaining), band, "remaining {remaining}");
        }
    }

    #[test]
    fn parse_and_errors() {
        assert_eq!("1K,2K,5K,50K".parse::<Bands>().unwrap(), Bands::default());
        assert_eq!("1KiB, 2kb,5120,50K".parse::<Bands>().unwrap(), Bands::default());
        assert_eq!("".parse::<Bands>(), Err(BandsError::Empty));
        assert_eq!("2K,1K".parse::<Bands>(), Err(BandsError::NotIncreasing { at: 1 }));
        assert!(matches!("1,2,3,4,5,6,7,8".parse::<Bands>(), Err(BandsError::TooMany { bands: 9 })));
        assert!("1X".parse::<Bands>().unwrap_err().to_string().contains("\"1X\""));
    }

    proptest! {
        /// The band of a size is the number of cutoffs at or below it, and
        /// draining a response never lowers its priority.
        #[test]
        fn band_matches_cutoffs(mut cuts in proptest::collection::btree_set(1u64..1_000_000, 1..7), r in 0u64..2_000_000, d in 0u64..2_000_000) {
            let cuts: Vec<u64> = std::mem::take(&mut cuts).into_iter().collect();
            let b = Bands::new(cuts.clone()).unwrap();
            prop_assert_eq!(b.band(r), cuts.iter().filter(|&&c| c <= r).count());
            prop_assert!(b.band(r.saturating_sub(d)) <= b.band(r));
        }
    }
}
