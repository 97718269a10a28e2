//! The DWFS productivity function and its solver (003 §4.2, eqs. 5-6, Algorithm 1).
//!
//! A queue `j` is *productive* when its backlog can be served within the
//! timeout at the CPU share it is given: `L_j * T_j / w_j <= timeout`. Every
//! output of a productive queue earns the credit `Q_j = sum_i P_{i,j}` (the
//! column sum of the transition matrix, eq. 6). The smallest share that keeps
//! queue `j` productive is its *demand* `T_j * L_j / timeout` (Algorithm 1's
//! `min_w`), so maximizing the productivity over normalized weights is a 0/1
//! knapsack: choose the queues whose demands fit in the total weight 1 and
//! whose credits sum highest.
//!
//! Guarantees:
//! - [`solve`] returns the maximum of eq. 6 over all weight vectors summing to
//!   the capacity, and a choice of queues reaching it (checked against brute
//!   force in the tests below);
//! - pure and deterministic: ties prefer making the earlier queue productive.
//!
//! Two readings of the paper are fixed here: Algorithm 1 keeps a queue whose
//! demand equals the remaining weight (`min_w > w` rejects), so the indicator of
//! eq. 6 is taken as `<=` (the printed `<` would make that choice worth
//! nothing); and the recursion as printed visits up to `2^n` branches (the paper
//! states `O(n^2)`), which is why [`MAX_QUEUES`] bounds `n`.

use std::fmt;

/// The largest number of queues [`solve`] accepts: the recursion of Algorithm 1
/// is exponential in the number of queues, and 003 has four.
pub const MAX_QUEUES: usize = 20;

/// Why the solver or the productivity function refused its input.
#[derive(Clone, Debug, PartialEq)]
pub enum DwfsError {
    /// The vectors describing the queues have different lengths.
    LengthMismatch { what: &'static str, expected: usize, got: usize },
    /// More queues than [`MAX_QUEUES`].
    TooManyQueues(usize),
    /// A value that must be finite and not negative was not (named, with its index).
    NotNonNegative { what: &'static str, index: usize, value: f64 },
    /// The timeout must be a finite positive number.
    BadTimeout(f64),
}

impl fmt::Display for DwfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DwfsError::LengthMismatch { what, expected, got } => {
                write!(f, "{what} has {got} entries, expected one per queue ({expected})")
            }
            DwfsError::TooManyQueues(n) => write!(f, "{n} queues; at most {MAX_QUEUES} are accepted"),
            DwfsError::NotNonNegative { what, index, value } => {
                write!(f, "{what}[{index}] = {value}; expected a finite number >= 0")
            }
            DwfsError::BadTimeout(t) => write!(f, "timeout {t}; expected a finite number > 0"),
        }
    }
}

impl std::error::Error for DwfsError {}

/// The credit `Q_j = sum_i P_{i,j}` of each queue: the column sums of the
/// transition matrix (003 eq. 6). `transitions[i][j]` is the probability of
/// moving from stage `i` to stage `j`.
pub fn credits(transitions: &[Vec<f64>]) -> Vec<f64> {
    let n = transitions.len();
    (0..n).map(|j| transitions.iter().map(|row| row.get(j).copied().unwrap_or(0.0)).sum()).collect()
}

/// The share of the CPU queue `j` needs to serve its `queue_length` requests of
/// `service_time` each within `timeout` (Algorithm 1's `min_w`).
pub fn demand(queue_length: f64, service_time: f64, timeout: f64) -> f64 {
    service_time * queue_length / timeout
}

/// Eq. 6: the sum of the credits of the queues that are productive under
/// `weights` (a queue is productive when its demand fits in its weight).
pub fn productivity(demands: &[f64], credits: &[f64], weights: &[f64]) -> Result<f64, DwfsError> {
    check_values("demands", demands, demands.len())?;
    check_values("credits", credits, demands.len())?;
    check_values("weights", weights, demands.len())?;
    Ok(demands.iter().zip(credits).zip(weights).filter(|((d, _), w)| *d <= *w).map(|((_, q), _)| q).sum())
}

/// The queues Algorithm 1 makes productive and what that is worth.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// `productive[j]`: queue `j` gets at least its demand.
    pub productive: Vec<bool>,
    /// The maximum of eq. 6.
    pub productivity: f64,
}

impl Choice {
    /// Normalized weights realizing this choice: each productive queue gets its
    /// demand, and what is left of `capacity` is shared equally among the
    /// productive queues that have demand (so their backlog drains sooner);
    /// unproductive queues get 0 (003 §4.2: "its weight is transferred to handle
    /// other queues"). If no productive queue has demand, the rest is shared
    /// equally among all productive queues.
    pub fn weights(&self, demands: &[f64], capacity: f64) -> Vec<f64> {
        let used: f64 = demands.iter().zip(&self.productive).filter(|(_, p)| **p).map(|(d, _)| d).sum();
        let spare = (capacity - used).max(0.0);
        let busy = demands.iter().zip(&self.productive).filter(|(d, p)| **p && **d > 0.0).count();
        let all = self.productive.iter().filter(|p| **p).count();
        demands
            .iter()
            .zip(&self.productive)
            .map(|(d, p)| match (*p, busy, *d > 0.0) {
                (false, _, _) => 0.0,
                (true, 0, _) => spare / all as f64,
                (true, _, true) => d + spare / busy as f64,
                (true, _, false) => 0.0,
            })
            .collect()
    }
}

/// Algorithm 1 (003 §4.2): the choice of productive queues maximizing eq. 6
/// when the weights may sum to at most `capacity` (1 for normalized weights).
pub fn solve(demands: &[f64], credits: &[f64], capacity: f64) -> Result<Choice, DwfsError> {
    let n = demands.len();
    if n > MAX_QUEUES {
        return Err(DwfsError::TooManyQueues(n));
    }
    check_values("demands", demands, n)?;
    check_values("credits", credits, n)?;
    if !capacity.is_finite() || capacity < 0.0 {
        return Err(DwfsError::NotNonNegative { what: "capacity", index: 0, value: capacity });
    }
    let mut productive = vec![false; n];
    let productivity = max_fn(demands, credits, capacity, 0, &mut productive);
    Ok(Choice { productive, productivity })
}

/// `max_fn(w, j)` of Algorithm 1, also recording in `chosen[j..]` the queues
/// of the best choice.
fn max_fn(demands: &[f64], credits: &[f64], remaining: f64, j: usize, chosen: &mut [bool]) -> f64 {
    if j >= demands.len() {
        return 0.0;
    }
    let min_w = demands[j];
    if min_w > remaining {
        chosen[j] = false;
        return max_fn(demands, credits, remaining, j + 1, chosen);
    }
    let mut with = chosen.to_vec();
    let f1 = max_fn(demands, credits, remaining - min_w, j + 1, &mut with) + credits[j];
    let f2 = max_fn(demands, credits, remaining, j + 1, chosen);
    if f1 >= f2 {
        chosen[j + 1..].copy_from_slice(&with[j + 1..]);
        chosen[j] = true;
        f1
    } else {
        chosen[j] = false;
        f2
    }
}

fn check_values(what: &'static str, values: &[f64], expected: usize) -> Result<(), DwfsError> {
    if values.len() != expected {
        return Err(DwfsError::LengthMismatch { what, expected, got: values.len() });
    }
    match values.iter().position(|v| !v.is_finite() || *v < 0.0) {
        Some(index) => Err(DwfsError::NotNonNegative { what, index, value: values[index] }),
        None => Ok(()),
    }
}

/// Checks a timeout for [`demand`]: finite and positive.
pub fn check_timeout(timeout: f64) -> Result<(), DwfsError> {
    if timeout.is_finite() && timeout > 0.0 {
        Ok(())
    } else {
        Err(DwfsError::BadTimeout(timeout))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 003 Fig. 5 in fractions, as printed (the SR row sums to 1.001).
    pub(crate) fn fig5() -> Vec<Vec<f64>> {
        sojourn_papers::papers().sessions.fig5_percent.iter().map(|row| row.iter().map(|p| p / 100.0).collect()).collect()
    }

    /// Every subset whose demands fit: the best credit sum.
    fn brute_force(demands: &[f64], credits: &[f64], capacity: f64) -> f64 {
        let n = demands.len();
        (0u32..1 << n)
            .filter(|set| (0..n).filter(|j| set & (1 << j) != 0).map(|j| demands[j]).sum::<f64>() <= capacity)
            .map(|set| (0..n).filter(|j| set & (1 << j) != 0).map(|j| credits[j]).sum::<f64>())
            .fold(0.0, f64::max)
    }

    #[test]
    fn credits_are_column_sums_of_fig5() {
        let q = credits(&fig5());
        let expected = [1.201, 0.499, 1.486, 0.815];
        for (got, want) in q.iter().zip(expected) {
            assert!((got - want).abs() < 1e-9, "{q:?}");
        }
    }

    #[test]
    fn empty_queues_are_always_productive() {
        let choice = solve(&[0.0, 0.0], &[1.0, 2.0], 1.0).unwrap();
        assert_eq!(choice.productive, vec![true, true]);
        assert_eq!(choice.productivity, 3.0);
    }

    #[test]
    fn the_queue_worth_more_wins_when_only_one_fits() {
        // Processing times 0.5, 1, 1.5, 2 (003 §4.1), timeout 20.
        let t = [0.5, 1.0, 1.5, 2.0];
        let l = [10.0, 10.0, 10.0, 10.0];
        let demands: Vec<f64> = l.iter().zip(t).map(|(l, t)| demand(*l, t, 20.0)).collect();
        assert_eq!(demands, vec![0.25, 0.5, 0.75, 1.0]);
        let choice = solve(&demands, &credits(&fig5()), 1.0).unwrap();
        // MM + CO (0.75, credit 1.700) vs SR + MM (1.0, credit 2.687): SR and MM.
        assert_eq!(choice.productive, vec![true, false, true, false]);
        assert!((choice.productivity - 2.687).abs() < 1e-9);
    }

    #[test]
    fn weights_give_each_productive_queue_its_demand_and_share_the_rest() {
        let demands = [0.25, 0.5, 0.75, 1.0];
        let choice = solve(&demands, &credits(&fig5()), 1.0).unwrap();
        let w = choice.weights(&demands, 1.0);
        assert_eq!(w, vec![0.25, 0.0, 0.75, 0.0]);
        let w = Choice { productive: vec![true, false, false, false], productivity: 0.0 }.weights(&demands, 1.0);
        assert_eq!(w, vec![1.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn bad_input_is_named() {
        let err = solve(&[0.1, f64::NAN], &[1.0, 1.0], 1.0).unwrap_err();
        assert!(err.to_string().contains("demands[1]"), "{err}");
        let err = solve(&[0.1], &[1.0, 1.0], 1.0).unwrap_err();
        assert!(err.to_string().contains("credits has 2 entries"), "{err}");
        assert!(solve(&[0.0; MAX_QUEUES + 1], &[0.0; MAX_QUEUES + 1], 1.0).is_err());
        assert!(check_timeout(0.0).is_err());
    }

    proptest! {
        // Dyadic demands (multiples of 1/16) so sums are exact and the
        // boundary "demand == remaining weight" is tested, not blurred by rounding.
        #[test]
        fn algorithm1_matches_brute_force(
            cells in proptest::collection::vec((0u32..24, 0.0f64..2.0), 1..9),
        ) {
            let demands: Vec<f64> = cells.iter().map(|(d, _)| *d as f64 / 16.0).collect();
            let credits: Vec<f64> = cells.iter().map(|(_, q)| *q).collect();
            let choice = solve(&demands, &credits, 1.0).unwrap();
            let best = brute_force(&demands, &credits, 1.0);
            prop_assert!((choice.productivity - best).abs() < 1e-9, "{} vs {}", choice.productivity, best);
            // The choice is feasible and worth what it claims.
            let used: f64 = demands.iter().zip(&choice.productive).filter(|(_, p)| **p).map(|(d, _)| d).sum();
            prop_assert!(used <= 1.0);
            let weights = choice.weights(&demands, 1.0);
            prop_assert!(weights.iter().sum::<f64>() <= 1.0 + 1e-9);
            let eq6 = productivity(&demands, &credits, &weights).unwrap();
            prop_assert!((eq6 - best).abs() < 1e-9, "eq. 6 {} vs {}", eq6, best);
        }
    }
}
