//! A queueing-delay threshold on the share of arrivals admitted (DAGOR, Breakwater), on the
//! server's side.
//!
//! DAGOR (Zhou et al., SoCC 2018, §4.2) detects overload by the mean queueing time of the
//! requests of a window (one second or 2000 requests, whichever ends first) against a 20 ms
//! threshold, and moves its admission level down so that load falls by α = 5%, or up by
//! β = 1% when the window was not overloaded; Breakwater (OSDI 2020) likewise steers on the
//! server's queueing delay. Here the queueing time is a request's wait before its first byte
//! is written, and the level is the share `f` of arrivals admitted: `f <- f (1 - α)` after an
//! overloaded window, `f <- min(1, f + β)` after another. DAGOR chooses whom to admit by
//! business and user priority, which a static-file workload lacks, so arrivals are admitted
//! by a credit counter instead (`f` credits per arrival, one spent per admission):
//! deterministic, and exactly `f` of the arrivals in the long run.

use std::time::Duration;

use super::{parse_count, parse_duration, parse_share, unknown_key, Admission, Reason, Verdict};
use crate::queue::JobId;

#[derive(Clone, Debug, PartialEq)]
pub struct DelayConfig {
    /// Mean queueing time above which a window counts as overloaded (DAGOR: 20 ms).
    pub threshold: Duration,
    /// Longest window (DAGOR: 1 s).
    pub window: Duration,
    /// A window also ends after this many measured requests (DAGOR: 2000).
    pub window_requests: u32,
    /// Share of admissions taken away after an overloaded window (DAGOR's α: 5%).
    pub decrease: f64,
    /// Share of arrivals given back after a window that was not (DAGOR's β: 1%).
    pub increase: f64,
}

impl Default for DelayConfig {
    fn default() -> Self {
        DelayConfig { threshold: Duration::from_millis(20), window: Duration::from_secs(1), window_requests: 2000, decrease: 0.05, increase: 0.01 }
    }
}

impl DelayConfig {
    const KEYS: [&'static str; 5] = ["threshold", "window", "window_requests", "decrease", "increase"];

    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "threshold" => self.threshold = parse_duration(value)?,
            "window" => self.window = parse_duration(value)?,
            "window_requests" => self.window_requests = parse_count(value)?,
            "decrease" => self.decrease = parse_share(value)?,
            "increase" => self.increase = parse_share(value)?,
            _ => return Err(unknown_key(&Self::KEYS)),
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct Delay {
    config: DelayConfig,
    /// Share of arrivals admitted, in (0, 1].
    share: f64,
    credit: f64,
    window_start: Duration,
    waited: Duration,
    measured: u32,
}

impl Delay {
    pub fn new(config: DelayConfig) -> Self {
        Delay { config, share: 1.0, credit: 0.0, window_start: Duration::ZERO, waited: Duration::ZERO, measured: 0 }
    }

    /// Ends the window if it is over: the level moves by its mean queueing time.
    fn roll(&mut self, now: Duration) {
        if now < self.window_start + self.config.window && self.measured < self.config.window_requests {
            return;
        }
        let overloaded = self.measured > 0 && self.waited / self.measured > self.config.threshold;
        self.share = if overloaded { self.share * (1.0 - self.config.decrease) } else { (self.share + self.config.increase).min(1.0) };
        (self.window_start, self.waited, self.measured) = (now, Duration::ZERO, 0);
    }
}

impl Admission for Delay {
    fn name(&self) -> &'static str {
        "delay"
    }

    fn arrive(&mut self, now: Duration, _job: JobId, _arrived: Duration, _size: Option<u64>) -> Verdict {
        self.roll(now);
        self.credit = (self.credit + self.share).min(1.0 + self.share);
        if self.credit >= 1.0 {
            self.credit -= 1.0;
            Verdict::Admit
        } else {
            Verdict::Refuse(Reason::QueueingDelay)
        }
    }

    fn first_write(&mut self, now: Duration, _job: JobId, arrived: Duration) -> Verdict {
        self.waited += now.saturating_sub(arrived);
        self.measured += 1;
        self.roll(now);
        Verdict::Admit
    }

    fn level(&self) -> Option<f64> {
        Some(self.share)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn an_overloaded_window_cuts_admissions_by_alpha_and_calm_ones_give_back_beta() {
        let mut d = Delay::new(DelayConfig::default());
        assert_eq!(d.arrive(ms(0), 0, ms(0), None), Verdict::Admit);
        // One window of 30 ms mean wait: overloaded.
        d.first_write(ms(500), 0, ms(470));
        d.arrive(ms(1000), 0, ms(1000), None);
        assert!((d.share - 0.95).abs() < 1e-12, "{}", d.share);
        // Of the next 100 arrivals (inside one window), 95 are admitted.
        let admitted = (0..100).filter(|i| d.arrive(ms(1001 + i), 0, ms(1001 + i), None) == Verdict::Admit).count();
        assert_eq!(admitted, 95);
        // A calm window (10 ms mean) gives back 1%.
        d.first_write(ms(1500), 0, ms(1490));
        d.arrive(ms(2100), 0, ms(2100), None);
        assert!((d.share - 0.96).abs() < 1e-12, "{}", d.share);
        assert_eq!(d.level(), Some(d.share));
    }

    #[test]
    fn a_window_also_ends_after_its_request_count() {
        let mut d = Delay::new(DelayConfig { window_requests: 3, ..Default::default() });
        for _ in 0..3 {
            d.first_write(ms(10), 0, ms(0)); // 10 ms < 20 ms: not overloaded
        }
        for _ in 0..3 {
            d.first_write(ms(50), 0, ms(0));
        }
        assert!((d.share - 0.95).abs() < 1e-12, "the second window of 3 requests was overloaded: {}", d.share);
    }

    proptest! {
        /// The share stays in (0, 1]; over any run of arrivals at a fixed share, the number
        /// admitted is within one of share x arrivals.
        #[test]
        fn admits_its_share(waits in prop::collection::vec(0u64..100, 0..200), arrivals in 1usize..500) {
            let mut d = Delay::new(DelayConfig::default());
            for (i, w) in waits.iter().enumerate() {
                let now = ms(i as u64 * 300);
                d.first_write(now + ms(*w), 0, now);
            }
            let share = d.share;
            prop_assert!(share > 0.0 && share <= 1.0);
            // All arrivals inside one window, so the share does not move.
            let start = d.window_start;
            let admitted = (0..arrivals).filter(|_| d.arrive(start, 0, start, None) == Verdict::Admit).count() as f64;
            prop_assert!((admitted - share * arrivals as f64).abs() <= 1.0 + 1e-9, "{} of {} at {}", admitted, arrivals, share);
        }
    }
}
