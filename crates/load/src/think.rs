//! Think-time (user off-time) distributions for closed users and sessions (002 §3.3, 004 §4.2:
//! SURGE's Pareto off-times; 003 §2: think time between requests of a session).

use rand::Rng;
use rand_distr::{Distribution, Exp, Pareto};
use serde::Deserialize;
use std::str::FromStr;

/// A think-time distribution, in seconds. On the command line: `0`, `const:S`, `exp:MEAN`
/// or `pareto:ALPHA:MIN`; in TOML a table `{ distribution = "exponential", mean-s = 1.0 }`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(tag = "distribution", rename_all = "lowercase", rename_all_fields = "kebab-case", deny_unknown_fields)]
pub enum ThinkTime {
    None,
    Constant { s: f64 },
    Exponential { mean_s: f64 },
    Pareto { alpha: f64, min_s: f64 },
}

impl ThinkTime {
    /// Rejects parameters that make no distribution.
    pub fn validate(&self) -> Result<(), String> {
        let ok = match *self {
            ThinkTime::None => true,
            ThinkTime::Constant { s } => s.is_finite() && s >= 0.0,
            ThinkTime::Exponential { mean_s } => mean_s.is_finite() && mean_s > 0.0,
            ThinkTime::Pareto { alpha, min_s } => alpha.is_finite() && alpha > 0.0 && min_s.is_finite() && min_s > 0.0,
        };
        if ok { Ok(()) } else { Err(format!("think time {self:?}: parameters must be finite and positive (constant may be 0)")) }
    }

    /// One draw, in nanoseconds.
    pub fn sample_ns(&self, rng: &mut impl Rng) -> u64 {
        let seconds = match *self {
            ThinkTime::None => 0.0,
            ThinkTime::Constant { s } => s,
            ThinkTime::Exponential { mean_s } => Exp::new(1.0 / mean_s).expect("validated").sample(rng),
            ThinkTime::Pareto { alpha, min_s } => Pareto::new(min_s, alpha).expect("validated").sample(rng),
        };
        // Heavy tails can draw absurd values; a day is beyond any run.
        (seconds.min(86_400.0) * 1e9) as u64
    }
}

impl FromStr for ThinkTime {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let accepted = "accepted: 0, const:S, exp:MEAN_S, pareto:ALPHA:MIN_S";
        let fields: Vec<&str> = text.split(':').collect();
        let number = |field: &str| field.parse::<f64>().map_err(|_| format!("think time {text:?}: {field:?} is not a number ({accepted})"));
        let think = match fields.as_slice() {
            ["0"] | ["none"] => ThinkTime::None,
            ["const", s] => ThinkTime::Constant { s: number(s)? },
            ["exp", mean] => ThinkTime::Exponential { mean_s: number(mean)? },
            ["pareto", alpha, min] => ThinkTime::Pareto { alpha: number(alpha)?, min_s: number(min)? },
            _ => return Err(format!("think time {text:?} not understood ({accepted})")),
        };
        think.validate()?;
        Ok(think)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("0".parse(), Ok(ThinkTime::None));
        assert_eq!("exp:2".parse(), Ok(ThinkTime::Exponential { mean_s: 2.0 }));
        assert_eq!("pareto:1.5:1".parse(), Ok(ThinkTime::Pareto { alpha: 1.5, min_s: 1.0 }));
        for bad in ["exp", "exp:-1", "pareto:1.5", "const:x", "gauss:1"] {
            assert!(bad.parse::<ThinkTime>().is_err(), "{bad}");
        }
    }

    #[test]
    fn exponential_mean_is_close() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let think = ThinkTime::Exponential { mean_s: 0.5 };
        let mean = (0..20_000).map(|_| think.sample_ns(&mut rng) as f64 / 1e9).sum::<f64>() / 20_000.0;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
    }
}
