//! CoDel (RFC 8289) on the time a request waits before its first byte is written.
//!
//! A request's *sojourn time* is from its arrival to its first write (the "dequeue"): the
//! time it sat in the server before being served at all. As RFC 8289 §3 for packets: when
//! that time has stayed above `target` for at least `interval`, the controller enters the
//! dropping state and refuses the request being dequeued, then one more each time the
//! control law's next drop time passes (`interval / sqrt(count)`, §3.2); a sojourn under
//! target ends the dropping state. Each first write is one dequeue, so at most one request
//! is refused per call (the RFC's loop over packets becomes the next calls). Requests are
//! never refused at arrival. Defaults are the RFC's (§4.2-4.3: target 5 ms, interval
//! 100 ms), which Facebook's request queues kept too ("Fail at Scale", ACM Queue 2015).

use std::time::Duration;

use super::{parse_duration, unknown_key, Admission, Reason, Verdict};
use crate::queue::JobId;

/// CoDel's two parameters (RFC 8289 §4.2, §4.3).
#[derive(Clone, Debug, PartialEq)]
pub struct CodelConfig {
    /// Acceptable standing queueing delay.
    pub target: Duration,
    /// How long the delay must stay above target before refusing; also the control law's scale.
    pub interval: Duration,
}

impl Default for CodelConfig {
    fn default() -> Self {
        CodelConfig { target: Duration::from_millis(5), interval: Duration::from_millis(100) }
    }
}

impl CodelConfig {
    const KEYS: [&'static str; 2] = ["target", "interval"];

    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "target" => self.target = parse_duration(value)?,
            "interval" => self.interval = parse_duration(value)?,
            _ => return Err(unknown_key(&Self::KEYS)),
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct Codel {
    config: CodelConfig,
    /// When the sojourn time will have been above target for an interval (`None`: below target).
    first_above: Option<Duration>,
    dropping: bool,
    drop_next: Duration,
    count: u32,
    last_count: u32,
}

impl Codel {
    pub fn new(config: CodelConfig) -> Self {
        Codel { config, first_above: None, dropping: false, drop_next: Duration::ZERO, count: 0, last_count: 0 }
    }

    /// RFC 8289 §5.5 `control_law`: the next drop `interval / sqrt(count)` after `t`.
    fn control_law(&self, t: Duration, count: u32) -> Duration {
        t + self.config.interval.div_f64(f64::from(count.max(1)).sqrt())
    }

    /// RFC 8289 §5.4 `dodequeue`: whether the sojourn time has been above target for an interval.
    fn ok_to_drop(&mut self, now: Duration, sojourn: Duration) -> bool {
        if sojourn < self.config.target {
            self.first_above = None;
            return false;
        }
        match self.first_above {
            None => {
                self.first_above = Some(now + self.config.interval);
                false
            }
            Some(at) => now >= at,
        }
    }
}

impl Admission for Codel {
    fn name(&self) -> &'static str {
        "codel"
    }

    fn arrive(&mut self, _now: Duration, _job: JobId, _arrived: Duration, _size: Option<u64>) -> Verdict {
        Verdict::Admit
    }

    /// RFC 8289 §5.6 `dequeue`, one request at a time.
    fn first_write(&mut self, now: Duration, _job: JobId, arrived: Duration) -> Verdict {
        let ok_to_drop = self.ok_to_drop(now, now.saturating_sub(arrived));
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
            } else if now >= self.drop_next {
                self.count += 1;
                self.drop_next = self.control_law(self.drop_next, self.count);
                return Verdict::Refuse(Reason::Codel);
            }
        } else if ok_to_drop {
            self.dropping = true;
            // Start near the last drop rate if dropping ended only recently (§5.6).
            let delta = self.count.saturating_sub(self.last_count);
            let recent = now.saturating_sub(self.drop_next) < self.config.interval * 16;
            self.count = if delta > 1 && recent { delta } else { 1 };
            self.drop_next = self.control_law(now, self.count);
            self.last_count = self.count;
            return Verdict::Refuse(Reason::Codel);
        }
        Verdict::Admit
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
    fn refuses_only_after_an_interval_above_target() {
        let mut c = Codel::new(CodelConfig::default());
        // Sojourn 20 ms from t = 0: above target, but not yet for an interval.
        for t in (0..100).step_by(10) {
            assert_eq!(c.first_write(ms(t + 20), 0, ms(t)), Verdict::Admit, "t={t}");
        }
        // At t + 20 = 120 ms the delay has been above target since 20 ms: first refusal.
        assert_eq!(c.first_write(ms(120), 0, ms(100)), Verdict::Refuse(Reason::Codel));
        // The next is due interval / sqrt(1) = 100 ms later.
        assert_eq!(c.first_write(ms(150), 0, ms(130)), Verdict::Admit);
        assert_eq!(c.first_write(ms(220), 0, ms(200)), Verdict::Refuse(Reason::Codel));
        // Then 100 / sqrt(2) = 70.7 ms after that drop time.
        assert_eq!(c.first_write(ms(290), 0, ms(270)), Verdict::Admit);
        assert_eq!(c.first_write(ms(291), 0, ms(271)), Verdict::Refuse(Reason::Codel));
        // A sojourn under target leaves the dropping state.
        assert_eq!(c.first_write(ms(300), 0, ms(299)), Verdict::Admit);
        assert_eq!(c.first_write(ms(400), 0, ms(350)), Verdict::Admit, "above target again, but not for an interval");
    }

    #[test]
    fn never_refuses_at_arrival() {
        let mut c = Codel::new(CodelConfig::default());
        assert_eq!(c.arrive(ms(0), 1, ms(0), Some(1 << 30)), Verdict::Admit);
    }

    proptest! {
        /// Whatever the sojourn times: no refusal of a request under target, nor before the
        /// sojourn time has stayed above target for an interval (RFC 8289 §3.2).
        #[test]
        fn no_refusal_without_a_standing_delay(gaps in prop::collection::vec((0u64..50, 0u64..30), 1..300)) {
            let mut c = Codel::new(CodelConfig::default());
            let mut now = Duration::ZERO;
            let mut above_since: Option<Duration> = None;
            for (gap, sojourn) in gaps {
                now += ms(gap);
                let sojourn = ms(sojourn);
                let verdict = c.first_write(now, 0, now.saturating_sub(sojourn));
                if sojourn < ms(5) {
                    above_since = None;
                    prop_assert_eq!(verdict, Verdict::Admit);
                } else {
                    let since = *above_since.get_or_insert(now);
                    if now < since + ms(100) {
                        prop_assert_eq!(verdict, Verdict::Admit, "refused before an interval above target");
                    }
                }
            }
        }
    }
}
