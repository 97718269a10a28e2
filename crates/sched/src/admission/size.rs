//! Size-aware shedding (new here): refuse the requests that the server's own order would
//! make late anyway, the largest first.
//!
//! None of the adaptive policies knows a response's size; this one does (the server knows
//! it when the request arrives, 000 §3). It keeps a fluid model of the bottleneck: every
//! admitted response's bytes left, drained at `rate` in the scheduler's order (fewest bytes
//! left first under SRPT or the kernel's bands, equal shares under FAIR). A new response of
//! `s` bytes, with no later arrival, would complete after
//!
//! ```text
//! SRPT:  (s + sum of r_i over the responses with r_i <= s) / rate
//! FAIR:  (s + sum of min(r_i, s) over all responses) / rate
//! ```
//!
//! (`r_i` the bytes left of those in the model), a bound later arrivals can only push back.
//! When that, added to the time the request already waited before the server read it (in the
//! accept queue while the server is at its connection limit, 000 §2), exceeds `deadline`,
//! the request is refused at once. Both predictions grow with
//! `s`, so under overload the largest requests are refused first: under SRPT those are the
//! ones it starves anyway (000 §4: SRPT's backlog under persistent overload is of large
//! requests). The default deadline is 10 s, when 000 Table 2 (H)'s users abort and reload.
//!
//! A response admitted in time can still be pushed back by smaller ones arriving after it
//! (SRPT's starvation of the large). When it is at last granted its first write, it is refused
//! (no byte of it sent) if even alone on the link it would end past the deadline: `waited +
//! s / rate > deadline`, a lower bound on its completion. The rate must be given: the server
//! cannot see its bottleneck.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{parse_duration, unknown_key, Admission, Order, Reason, Verdict};
use crate::queue::JobId;
use crate::rate::parse_rate;

#[derive(Clone, Debug, PartialEq)]
pub struct SizeConfig {
    /// Refuse when the predicted completion is later than this after arrival.
    pub deadline: Duration,
    /// The bottleneck's rate in bytes per second (given as bits per second, e.g. `10mbit`).
    pub rate_bytes_per_s: Option<f64>,
}

impl Default for SizeConfig {
    fn default() -> Self {
        // 000 Table 2 (H): "User aborts after 10 sec".
        SizeConfig { deadline: Duration::from_secs(10), rate_bytes_per_s: None }
    }
}

impl SizeConfig {
    const KEYS: [&'static str; 2] = ["deadline", "rate"];

    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "deadline" => self.deadline = parse_duration(value)?,
            "rate" => self.rate_bytes_per_s = Some(parse_rate(value).map_err(|e| e.to_string())? / 8.0),
            _ => return Err(unknown_key(&Self::KEYS)),
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct Size {
    deadline: f64,
    rate: f64,
    order: Order,
    /// When the model was last drained to.
    at: Duration,
    /// Bytes left of each admitted response still in the server, as the model drains them.
    left: BTreeMap<JobId, f64>,
    /// The size of each admitted response still in the server.
    sizes: BTreeMap<JobId, u64>,
}

impl Size {
    /// # Panics
    /// Without a rate: [`super::AdmissionSpec`] refuses such a config.
    pub fn new(config: SizeConfig, order: Order) -> Self {
        let rate = config.rate_bytes_per_s.expect("the size policy's rate is checked when it is parsed");
        Size { deadline: config.deadline.as_secs_f64(), rate, order, at: Duration::ZERO, left: BTreeMap::new(), sizes: BTreeMap::new() }
    }

    /// The model's responses with bytes left, fewest first (ties by job: deterministic).
    fn backlog(&self) -> Vec<(f64, JobId)> {
        let mut backlog: Vec<(f64, JobId)> = self.left.iter().filter(|(_, &r)| r > 0.0).map(|(&j, &r)| (r, j)).collect();
        backlog.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        backlog
    }

    /// Drains the model up to `now`: `rate` bytes per second in the scheduler's order.
    fn drain(&mut self, now: Duration) {
        let mut work = now.saturating_sub(self.at).as_secs_f64() * self.rate;
        self.at = self.at.max(now);
        let backlog = self.backlog();
        match self.order {
            Order::ShortestFirst => {
                for (r, job) in backlog {
                    if work <= 0.0 {
                        break;
                    }
                    let taken = r.min(work);
                    self.left.insert(job, r - taken);
                    work -= taken;
                }
            }
            Order::Shared => {
                // Equal shares: every response loses the same `level` bytes (or all it had).
                let (mut level, n) = (0.0, backlog.len());
                for (i, &(r, _)) in backlog.iter().enumerate() {
                    let need = (r - level) * (n - i) as f64;
                    if need > work {
                        level += work / (n - i) as f64;
                        break;
                    }
                    work -= need;
                    level = r;
                }
                for (r, job) in backlog {
                    self.left.insert(job, (r - level).max(0.0));
                }
            }
        }
    }

    /// Seconds until a new response of `size` bytes would complete, with no later arrival.
    pub fn predict(&self, size: u64) -> f64 {
        let s = size as f64;
        let ahead: f64 = match self.order {
            Order::ShortestFirst => self.backlog().iter().map(|&(r, _)| r).take_while(|&r| r <= s).sum(),
            Order::Shared => self.backlog().iter().map(|&(r, _)| r.min(s)).sum(),
        };
        (s + ahead) / self.rate
    }
}

impl Admission for Size {
    fn name(&self) -> &'static str {
        "size"
    }

    fn arrive(&mut self, now: Duration, job: JobId, arrived: Duration, size: Option<u64>) -> Verdict {
        self.drain(now);
        // A response whose size is not known yet (a /stage/ reply) cannot be judged.
        let Some(size) = size else { return Verdict::Admit };
        // The deadline runs from the request's arrival, also while it waited unread.
        if now.saturating_sub(arrived).as_secs_f64() + self.predict(size) > self.deadline {
            return Verdict::Refuse(Reason::Deadline);
        }
        self.left.insert(job, size as f64);
        self.sizes.insert(job, size);
        Verdict::Admit
    }

    fn first_write(&mut self, now: Duration, job: JobId, arrived: Duration) -> Verdict {
        let Some(&size) = self.sizes.get(&job) else { return Verdict::Admit };
        if now.saturating_sub(arrived).as_secs_f64() + size as f64 / self.rate > self.deadline {
            Verdict::Refuse(Reason::Deadline)
        } else {
            Verdict::Admit
        }
    }

    fn left(&mut self, now: Duration, job: JobId, _arrived: Duration, _completed: bool) {
        self.drain(now);
        self.left.remove(&job);
        self.sizes.remove(&job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 1000 bytes/s, deadline 10 s: 10,000 bytes of backlog fit.
    fn size(order: Order) -> Size {
        Size::new(SizeConfig { deadline: Duration::from_secs(10), rate_bytes_per_s: Some(1000.0) }, order)
    }

    fn s(n: f64) -> Duration {
        Duration::from_secs_f64(n)
    }

    #[test]
    fn srpt_refuses_the_large_and_keeps_the_small() {
        let mut m = size(Order::ShortestFirst);
        assert_eq!(m.arrive(s(0.0), 1, s(0.0), Some(6000)), Verdict::Admit);
        assert_eq!(m.arrive(s(0.0), 2, s(0.0), Some(3000)), Verdict::Admit);
        // 5000 bytes: 3000 ahead of it (6000 is larger, so behind): 8 s.
        assert!((m.predict(5000) - 8.0).abs() < 1e-9);
        // 7000: 9000 ahead: 16 s > 10 s: refused, while 100 bytes go through.
        assert_eq!(m.arrive(s(0.0), 3, s(0.0), Some(7000)), Verdict::Refuse(Reason::Deadline));
        assert_eq!(m.arrive(s(0.0), 4, s(0.0), Some(100)), Verdict::Admit);
        // 3.1 s later the model served 100 then 3000 bytes: only job 1's 6000 remain.
        m.drain(s(3.1));
        assert_eq!(m.backlog(), vec![(6000.0, 1)]);
        assert_eq!(m.arrive(s(3.1), 3, s(3.1), Some(7000)), Verdict::Refuse(Reason::Deadline), "13 s");
        m.left(s(4.0), 1, s(0.0), true);
        assert_eq!(m.arrive(s(4.0), 3, s(4.0), Some(7000)), Verdict::Admit, "alone: 7 s");
    }

    #[test]
    fn fair_shares_the_link_in_its_prediction_and_drain() {
        let mut m = size(Order::Shared);
        assert_eq!(m.arrive(s(0.0), 1, s(0.0), Some(6000)), Verdict::Admit);
        assert_eq!(m.arrive(s(0.0), 2, s(0.0), Some(2000)), Verdict::Admit);
        // 3000 bytes under sharing: 3000 + min(6000, 3000) + 2000 = 8000: 8 s.
        assert!((m.predict(3000) - 8.0).abs() < 1e-9);
        // 5 s: both drain at 500 B/s until job 2 is done at 4 s, then job 1 alone: 6000 - 3000.
        m.drain(s(5.0));
        assert_eq!(m.backlog(), vec![(3000.0, 1)]);
        assert_eq!(m.arrive(s(5.0), 3, s(5.0), Some(1)), Verdict::Admit);
        assert_eq!(m.arrive(s(5.0), 4, s(5.0), None), Verdict::Admit, "an unknown size is not judged");
    }

    #[test]
    fn the_deadline_counts_the_wait_before_the_request_was_read() {
        let mut m = size(Order::Shared);
        // 4000 bytes alone: 4 s, within 10 s when read at once, past it after 7 s unread.
        assert_eq!(m.arrive(s(7.0), 1, s(7.0), Some(4000)), Verdict::Admit);
        m.left(s(7.0), 1, s(7.0), false);
        assert_eq!(m.arrive(s(7.0), 2, s(0.0), Some(4000)), Verdict::Refuse(Reason::Deadline));
        assert_eq!(m.arrive(s(7.0), 3, s(0.0), Some(2000)), Verdict::Admit, "7 + 2 s: in time");
    }

    #[test]
    fn a_response_pushed_back_past_its_deadline_is_refused_at_its_first_write() {
        let mut m = size(Order::ShortestFirst);
        assert_eq!(m.arrive(s(0.0), 1, s(0.0), Some(5000)), Verdict::Admit, "5 s alone");
        // Granted at 4 s: 4 + 5 = 9 s <= 10 s; at 6 s: 11 s, it would miss the deadline anyway.
        assert_eq!(m.first_write(s(4.0), 1, s(0.0)), Verdict::Admit);
        assert_eq!(m.first_write(s(6.0), 1, s(0.0)), Verdict::Refuse(Reason::Deadline));
        assert_eq!(m.first_write(s(60.0), 2, s(0.0)), Verdict::Admit, "a size never known is not judged");
        m.left(s(6.0), 1, s(0.0), false);
        assert!(m.sizes.is_empty() && m.left.is_empty());
    }

    fn arb_order() -> impl Strategy<Value = Order> {
        prop_oneof![Just(Order::ShortestFirst), Just(Order::Shared)]
    }

    proptest! {
        /// Whatever was admitted before: if a size is refused, every larger one is too (the
        /// largest go first), and an admitted response's prediction was within the deadline.
        #[test]
        fn refuses_the_largest_first(order in arb_order(), arrivals in prop::collection::vec((0u64..3000, 1u64..20_000), 1..60),
                                     probe in prop::collection::vec(1u64..40_000, 2..20)) {
            let mut m = size(order);
            let mut now = Duration::ZERO;
            for (job, (gap_ms, bytes)) in arrivals.into_iter().enumerate() {
                now += Duration::from_millis(gap_ms);
                m.drain(now);
                let predicted = m.predict(bytes);
                let verdict = m.arrive(now, job as JobId, now, Some(bytes));
                prop_assert_eq!(verdict == Verdict::Admit, predicted <= 10.0);
            }
            let mut sizes = probe;
            sizes.sort_unstable();
            let refused: Vec<bool> = sizes.iter().map(|&b| m.predict(b) > 10.0).collect();
            prop_assert!(refused.windows(2).all(|w| w[0] <= w[1]), "a smaller size refused before a larger: {:?} {:?}", sizes, refused);
        }

        /// The model is work-conserving: draining for t seconds removes min(t x rate, backlog) bytes.
        #[test]
        fn the_model_conserves_work(order in arb_order(), sizes in prop::collection::vec(1u64..5000, 1..30), t in 0.0f64..30.0) {
            let mut m = Size::new(SizeConfig { deadline: Duration::from_secs(1_000_000), rate_bytes_per_s: Some(1000.0) }, order);
            for (job, bytes) in sizes.iter().enumerate() {
                m.arrive(Duration::ZERO, job as JobId, Duration::ZERO, Some(*bytes));
            }
            let before: f64 = m.left.values().sum();
            m.drain(Duration::from_secs_f64(t));
            let after: f64 = m.left.values().sum();
            prop_assert!(((before - after) - (t * 1000.0).min(before)).abs() < 1e-6, "{} -> {} in {} s", before, after, t);
            prop_assert!(m.left.values().all(|&r| r >= 0.0));
        }
    }
}
