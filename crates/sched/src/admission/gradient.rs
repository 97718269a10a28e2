//! A concurrency limit moved by the gradient of latency against its minimum: Envoy's
//! adaptive concurrency filter (gradient controller), after Netflix's concurrency-limits.
//!
//! At most `limit` admitted requests are in flight; arrivals beyond it are refused. Every
//! `update_interval` the latencies of the requests completed in it are summarized by a
//! percentile (`sampleRTT`, Envoy's default p50) and, as in Envoy's documentation,
//!
//! ```text
//! gradient  = clamp((minRTT + buffer * minRTT) / sampleRTT, 0.5, 2.0)
//! limit_new = clamp(gradient * limit + sqrt(gradient * limit), min_limit, max_limit)
//! ```
//!
//! `minRTT` is measured first and then every `min_rtt_interval` (and after five windows in
//! a row at `min_limit`): the limit is pinned to `min_limit` until `min_rtt_requests` requests
//! completed, whose percentile is the new `minRTT`; the limit then returns to what it was.
//! That probe is what users of these filters see as probe-induced 503s. Envoy jitters the
//! probe's start at random; here it is not jittered, to stay deterministic. Defaults are
//! Envoy's: p50, buffer 25%, 50 requests, minimum 3, maximum 1000, and its documented
//! example's 100 ms update interval and 60 s minRTT interval. A request's latency is from
//! its arrival to its last byte written, whatever its size: the policy does not know sizes.

use std::time::Duration;

use super::{parse_count, parse_duration, parse_share, percentile, unknown_key, Admission, Reason, Verdict};
use crate::queue::JobId;

#[derive(Clone, Debug, PartialEq)]
pub struct GradientConfig {
    pub update_interval: Duration,
    /// Percentile of a window's latencies taken as its sampleRTT (and of the probe's as minRTT).
    pub percentile: f64,
    /// Latency tolerated above minRTT, as a share of it.
    pub buffer: f64,
    pub min_rtt_interval: Duration,
    pub min_rtt_requests: u32,
    pub min_limit: u32,
    pub max_limit: u32,
}

impl Default for GradientConfig {
    fn default() -> Self {
        GradientConfig {
            update_interval: Duration::from_millis(100),
            percentile: 0.5,
            buffer: 0.25,
            min_rtt_interval: Duration::from_secs(60),
            min_rtt_requests: 50,
            min_limit: 3,
            max_limit: 1000,
        }
    }
}

impl GradientConfig {
    const KEYS: [&'static str; 7] = ["update_interval", "percentile", "buffer", "min_rtt_interval", "min_rtt_requests", "min_limit", "max_limit"];

    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "update_interval" => self.update_interval = parse_duration(value)?,
            "percentile" => self.percentile = parse_share(value)?,
            "buffer" => self.buffer = parse_share(value)?,
            "min_rtt_interval" => self.min_rtt_interval = parse_duration(value)?,
            "min_rtt_requests" => self.min_rtt_requests = parse_count(value)?,
            "min_limit" => self.min_limit = parse_count(value)?,
            "max_limit" => self.max_limit = parse_count(value)?,
            _ => return Err(unknown_key(&Self::KEYS)),
        }
        Ok(())
    }
}

/// Windows in a row at `min_limit` after which minRTT is measured again (Envoy: 5).
const WINDOWS_AT_MIN_BEFORE_PROBE: u32 = 5;

#[derive(Debug)]
pub struct Gradient {
    config: GradientConfig,
    limit: f64,
    in_flight: u32,
    /// `Some(limit to return to)` while minRTT is being measured.
    probing: Option<f64>,
    min_rtt: Duration,
    next_probe: Duration,
    window_start: Duration,
    samples: Vec<Duration>,
    windows_at_min: u32,
}

impl Gradient {
    pub fn new(config: GradientConfig) -> Self {
        let min = f64::from(config.min_limit);
        Gradient {
            config,
            limit: min,
            in_flight: 0,
            probing: Some(min),
            min_rtt: Duration::ZERO,
            next_probe: Duration::ZERO,
            window_start: Duration::ZERO,
            samples: Vec::new(),
            windows_at_min: 0,
        }
    }

    /// The number of requests that may be in flight now.
    pub fn limit(&self) -> u32 {
        if self.probing.is_some() {
            self.config.min_limit
        } else {
            self.limit.round() as u32
        }
    }

    fn start_probe(&mut self, now: Duration) {
        self.probing = Some(self.limit);
        self.samples.clear();
        self.window_start = now;
    }

    /// Ends the probe or the window if due.
    fn update(&mut self, now: Duration) {
        let c = &self.config;
        if let Some(back_to) = self.probing {
            if self.samples.len() >= c.min_rtt_requests as usize {
                self.min_rtt = percentile(&mut self.samples, c.percentile).expect("a full probe has samples");
                self.samples.clear();
                (self.probing, self.limit, self.window_start, self.windows_at_min) = (None, back_to, now, 0);
                self.next_probe = now + c.min_rtt_interval;
            }
            return;
        }
        if now < self.window_start + c.update_interval {
            return;
        }
        if let Some(sample) = percentile(&mut self.samples, c.percentile) {
            let allowed = self.min_rtt.as_secs_f64() * (1.0 + c.buffer);
            let gradient = (allowed / sample.as_secs_f64().max(1e-9)).clamp(0.5, 2.0);
            let scaled = gradient * self.limit;
            self.limit = (scaled + scaled.sqrt()).clamp(f64::from(c.min_limit), f64::from(c.max_limit));
        }
        self.samples.clear();
        self.window_start = now;
        self.windows_at_min = if self.limit() <= c.min_limit { self.windows_at_min + 1 } else { 0 };
        if now >= self.next_probe || self.windows_at_min >= WINDOWS_AT_MIN_BEFORE_PROBE {
            self.start_probe(now);
        }
    }
}

impl Admission for Gradient {
    fn name(&self) -> &'static str {
        "gradient"
    }

    fn arrive(&mut self, now: Duration, _job: JobId, _arrived: Duration, _size: Option<u64>) -> Verdict {
        self.update(now);
        if self.in_flight >= self.limit() {
            return Verdict::Refuse(Reason::ConcurrencyLimit);
        }
        self.in_flight += 1;
        Verdict::Admit
    }

    fn left(&mut self, now: Duration, _job: JobId, arrived: Duration, completed: bool) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if completed {
            self.samples.push(now.saturating_sub(arrived));
        }
        self.update(now);
    }

    fn level(&self) -> Option<f64> {
        Some(f64::from(self.limit()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A window whose `n` completed requests took `latency`, closed at `end`.
    fn window(g: &mut Gradient, end: Duration, n: u32, latency: Duration) {
        g.samples.extend((0..n).map(|_| latency));
        g.update(end);
    }

    #[test]
    fn probes_min_rtt_then_follows_the_gradient() {
        let mut g = Gradient::new(GradientConfig::default());
        assert_eq!(g.limit(), 3, "the first probe pins the limit to min_limit");
        for _ in 0..3 {
            assert_eq!(g.arrive(ms(0), 0, ms(0), None), Verdict::Admit);
        }
        assert_eq!(g.arrive(ms(0), 0, ms(0), None), Verdict::Refuse(Reason::ConcurrencyLimit));
        g.left(ms(10), 0, ms(0), true);
        assert_eq!(g.arrive(ms(10), 0, ms(10), None), Verdict::Admit, "a request left: room for one");
        window(&mut g, ms(10), 49, ms(10));
        assert_eq!(g.min_rtt, ms(10));
        assert_eq!(g.limit(), 3, "back to the limit held before the probe");
        // Latency at minRTT: gradient 12.5/10 = 1.25: 3.75 + sqrt(3.75) = 5.69.
        window(&mut g, ms(110), 10, ms(10));
        assert_eq!(g.limit(), 6);
        // Latency 50 ms: gradient 0.25, clamped to 0.5: 2.84 + sqrt(2.84) = 4.53.
        window(&mut g, ms(210), 10, ms(50));
        assert_eq!(g.limit(), 5);
        assert_eq!(g.level(), Some(5.0));
    }

    #[test]
    fn probes_again_after_the_interval_and_after_five_windows_at_the_minimum() {
        let mut g = Gradient::new(GradientConfig::default());
        window(&mut g, ms(0), 50, ms(10));
        assert!(g.probing.is_none());
        window(&mut g, ms(60_000), 1, ms(10));
        assert!(g.probing.is_some(), "60 s after the last probe");
        let mut g = Gradient::new(GradientConfig::default());
        window(&mut g, ms(0), 50, ms(10));
        for w in 1..=4 {
            window(&mut g, ms(100 * w), 1, ms(1000));
            assert!(g.probing.is_none());
        }
        window(&mut g, ms(500), 1, ms(1000));
        assert!(g.probing.is_some(), "five windows at min_limit");
    }

    proptest! {
        /// Whatever the latencies and arrivals: the limit stays within [min_limit, max_limit]
        /// and no more than the limit in force are ever admitted at once.
        #[test]
        fn limit_is_bounded_and_enforced(events in prop::collection::vec((0u64..30, 1u64..500, any::<bool>()), 1..400),
                                         min in 1u32..10, span in 0u32..100) {
            let config = GradientConfig { min_limit: min, max_limit: min + span, ..Default::default() };
            let mut g = Gradient::new(config);
            let mut now = Duration::ZERO;
            let mut in_flight: Vec<Duration> = Vec::new();
            for (gap, latency, arrive) in events {
                now += ms(gap);
                if arrive || in_flight.is_empty() {
                    if g.arrive(now, 0, now, None) == Verdict::Admit {
                        in_flight.push(now);
                        prop_assert!(in_flight.len() as u32 <= g.limit(), "admitted beyond the limit");
                    }
                } else {
                    let arrived = in_flight.remove(0);
                    g.left(now.max(arrived + ms(latency)), 0, arrived, true);
                    now = now.max(arrived + ms(latency));
                }
                prop_assert!(g.limit() >= min && g.limit() <= min + span);
                prop_assert_eq!(g.in_flight as usize, in_flight.len());
            }
        }
    }
}
