//! Admission control: which requests a server under overload refuses, and when.
//!
//! The papers answer overload by scheduling (SRPT, 000 §3) and by session-aware dispatch
//! (DWFS, 003 §4); servers since answer it by refusing work early. Four such policies, one
//! file each, behind the [`Admission`] trait and chosen by name ([`AdmissionSpec`]):
//!
//! - [`gradient`]: a concurrency limit moved by the gradient of latency against its minimum
//!   (Envoy's adaptive concurrency filter, Netflix's concurrency-limits);
//! - [`codel`]: CoDel (RFC 8289) on the time a request waits before its first byte is written;
//! - [`delay`]: a queueing-delay threshold on the share of arrivals admitted (DAGOR's 20 ms,
//!   Breakwater's server-side delay signal);
//! - [`size`]: size-aware shedding: refuse the requests whose predicted completion under the
//!   server's own order (SRPT or processor sharing) exceeds a deadline, the largest first.
//!
//! The caller (the server's worker, the simulator) does the I/O and reports what happened,
//! passing the time in as a [`Duration`] since an origin of its choosing (as the scheduler
//! takes bytes, these take time: nothing here reads a clock):
//!
//! - [`Admission::arrive`]: a request whose response has `size` bytes (if known), which arrived
//!   at `arrived`, is read by the server `now`: take it or refuse it now. The two differ by
//!   the time its bytes waited in the kernel (a connection in the accept queue, 000 §2); the
//!   simulator has no such queue and passes `now` twice;
//! - [`Admission::first_write`]: an admitted response is granted its first write, `arrived`
//!   being when its request came, moved on by any time it spent in service before (a
//!   dynamic request's CPU processing), so that `now - arrived` is time spent waiting: go
//!   on, or refuse it now, before any byte (CoDel drops at dequeue, RFC 8289 §3.2, and the
//!   first write is a request's dequeue);
//! - [`Admission::left`]: an admitted response is done (`completed`) or its connection gone.
//!   Every admitted request leaves exactly once, also after a refusal at its first write.
//!
//! A refusal carries its [`Reason`]; the server answers it with a short 503 (RFC 9110
//! §15.6.4: "temporary overload") and counts it by reason. Guarantees: deterministic (the
//! same calls give the same verdicts); no I/O, no clock, no randomness.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::queue::JobId;

pub mod codel;
pub mod delay;
pub mod gradient;
pub mod size;

/// Why a request was refused: one label of the server's refusal counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The gradient policy's concurrency limit was reached.
    ConcurrencyLimit,
    /// CoDel: the wait before the first byte stayed above target for an interval.
    Codel,
    /// The windowed mean queueing delay was above its threshold.
    QueueingDelay,
    /// The predicted completion was past the deadline.
    Deadline,
}

impl Reason {
    pub const ALL: [Reason; 4] = [Reason::ConcurrencyLimit, Reason::Codel, Reason::QueueingDelay, Reason::Deadline];

    /// The label on /metrics.
    pub fn name(self) -> &'static str {
        match self {
            Reason::ConcurrencyLimit => "concurrency_limit",
            Reason::Codel => "codel",
            Reason::QueueingDelay => "queueing_delay",
            Reason::Deadline => "deadline",
        }
    }

    /// Position in [`Reason::ALL`], for counters kept in an array.
    pub fn index(self) -> usize {
        Reason::ALL.iter().position(|&r| r == self).expect("every reason is in ALL")
    }
}

/// What to do with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Admit,
    Refuse(Reason),
}

/// An admission policy (see the module notes for the order of calls).
pub trait Admission: Send + fmt::Debug {
    /// The name used on command lines and in configs.
    fn name(&self) -> &'static str;
    /// A request that arrived at `arrived`, whose response has `size` bytes (`None`: not known
    /// before it is made), is read `now`.
    fn arrive(&mut self, now: Duration, job: JobId, arrived: Duration, size: Option<u64>) -> Verdict;
    /// The admitted `job`, whose request arrived at `arrived` (moved on by the time it was in
    /// service before: see the module notes), is granted its first write.
    fn first_write(&mut self, _now: Duration, _job: JobId, _arrived: Duration) -> Verdict {
        Verdict::Admit
    }
    /// The admitted `job` (arrived at `arrived`) is done (`completed`) or was dropped.
    fn left(&mut self, _now: Duration, _job: JobId, _arrived: Duration, _completed: bool) {}
    /// The policy's current level, for a gauge: the gradient's limit, the share admitted by
    /// the delay threshold; `None` when it has none.
    fn level(&self) -> Option<f64> {
        None
    }
}

/// How the scheduler orders responses, which is what the size-aware policy predicts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Fewest bytes left first: SRPT in the application or the kernel's bands (000 §3).
    ShortestFirst,
    /// Equal shares: FAIR's round robin (processor sharing), also used for LAS.
    Shared,
}

/// A policy and its parameters, as written on the command line: `NAME[:KEY=VALUE,...]`,
/// e.g. `codel`, `codel:target=10ms,interval=200ms`, `size:deadline=10s,rate=10mbit`.
#[derive(Clone, Debug, PartialEq)]
pub enum AdmissionSpec {
    Gradient(gradient::GradientConfig),
    Codel(codel::CodelConfig),
    Delay(delay::DelayConfig),
    Size(size::SizeConfig),
}

/// The names accepted, in the order they are listed.
pub const NAMES: [&str; 4] = ["gradient", "codel", "delay", "size"];

/// A bad `--admission` value; the message names the part at fault and what is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionError(pub String);

impl fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AdmissionError {}

impl AdmissionSpec {
    pub fn name(&self) -> &'static str {
        match self {
            AdmissionSpec::Gradient(_) => "gradient",
            AdmissionSpec::Codel(_) => "codel",
            AdmissionSpec::Delay(_) => "delay",
            AdmissionSpec::Size(_) => "size",
        }
    }

    /// A fresh policy of this spec; `order` is the scheduler's, for the size-aware policy.
    pub fn build(&self, order: Order) -> Box<dyn Admission> {
        match self {
            AdmissionSpec::Gradient(c) => Box::new(gradient::Gradient::new(c.clone())),
            AdmissionSpec::Codel(c) => Box::new(codel::Codel::new(c.clone())),
            AdmissionSpec::Delay(c) => Box::new(delay::Delay::new(c.clone())),
            AdmissionSpec::Size(c) => Box::new(size::Size::new(c.clone(), order)),
        }
    }

    /// Checks what only the whole spec can tell (e.g. the size policy needs a rate).
    fn validated(self) -> Result<Self, AdmissionError> {
        match &self {
            AdmissionSpec::Size(c) if c.rate_bytes_per_s.is_none() => Err(AdmissionError(
                "admission size needs rate=RATE, the bottleneck's rate (e.g. size:rate=10mbit): the server cannot see it".into(),
            )),
            AdmissionSpec::Gradient(c) if c.min_limit > c.max_limit => {
                Err(AdmissionError(format!("admission gradient: min_limit {} above max_limit {}", c.min_limit, c.max_limit)))
            }
            _ => Ok(self),
        }
    }
}

impl FromStr for AdmissionSpec {
    type Err = AdmissionError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (name, params) = text.split_once(':').unwrap_or((text, ""));
        let mut spec = match name.trim().to_ascii_lowercase().as_str() {
            "gradient" => AdmissionSpec::Gradient(Default::default()),
            "codel" => AdmissionSpec::Codel(Default::default()),
            "delay" => AdmissionSpec::Delay(Default::default()),
            "size" => AdmissionSpec::Size(Default::default()),
            other => return Err(AdmissionError(format!("unknown admission policy {other:?}: expected one of {}", NAMES.join(", ")))),
        };
        for pair in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(AdmissionError(format!("admission {name}: {pair:?} is not KEY=VALUE")));
            };
            let (key, value) = (key.trim(), value.trim());
            let set = match &mut spec {
                AdmissionSpec::Gradient(c) => c.set(key, value),
                AdmissionSpec::Codel(c) => c.set(key, value),
                AdmissionSpec::Delay(c) => c.set(key, value),
                AdmissionSpec::Size(c) => c.set(key, value),
            };
            set.map_err(|why| AdmissionError(format!("admission {name}: {key}={value:?}: {why}")))?;
        }
        spec.validated()
    }
}

/// Why one `KEY=VALUE` was refused: an unknown key lists the known ones.
pub(crate) fn unknown_key(keys: &[&str]) -> String {
    format!("unknown key; expected one of {}", keys.join(", "))
}

/// A positive duration: `5ms`, `0.1s`, `10` (seconds), `2us`.
pub(crate) fn parse_duration(value: &str) -> Result<Duration, String> {
    let lower = value.to_ascii_lowercase();
    let (number, scale) = [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .iter()
        .find_map(|(unit, scale)| lower.strip_suffix(unit).map(|n| (n, *scale)))
        .unwrap_or((&lower, 1.0));
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * scale < 1e6 => Ok(Duration::from_secs_f64(v * scale)),
        _ => Err("expected a positive duration such as 5ms, 0.1s or 10 (seconds)".into()),
    }
}

/// A share in (0, 1]: `0.25` or `25%`.
pub(crate) fn parse_share(value: &str) -> Result<f64, String> {
    let (number, scale) = value.strip_suffix('%').map_or((value, 1.0), |n| (n, 0.01));
    match number.trim().parse::<f64>().map(|v| v * scale) {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err("expected a share in (0, 1] such as 0.25 or 25%".into()),
    }
}

/// A count of at least 1.
pub(crate) fn parse_count(value: &str) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number of at least 1".into()),
    }
}

/// The `p`-th percentile (0 < p <= 1) of `samples` by the nearest-rank rule; sorts them.
pub(crate) fn percentile(samples: &mut [Duration], p: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let rank = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    Some(samples[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_their_defaults_and_keys() {
        let codel: AdmissionSpec = "codel".parse().unwrap();
        assert_eq!(codel, AdmissionSpec::Codel(codel::CodelConfig::default()));
        let codel: AdmissionSpec = "CoDel:target=10ms, interval=0.2s".parse().unwrap();
        let AdmissionSpec::Codel(c) = codel else { panic!() };
        assert_eq!((c.target, c.interval), (Duration::from_millis(10), Duration::from_millis(200)));
        let size: AdmissionSpec = "size:rate=10mbit,deadline=7".parse().unwrap();
        let AdmissionSpec::Size(c) = size else { panic!() };
        assert_eq!((c.rate_bytes_per_s, c.deadline), (Some(1.25e6), Duration::from_secs(7)));
        for name in NAMES {
            let text = if name == "size" { "size:rate=1mbit" } else { name };
            assert_eq!(text.parse::<AdmissionSpec>().unwrap().name(), name);
        }
    }

    #[test]
    fn errors_name_the_bad_part() {
        let err = |text: &str| text.parse::<AdmissionSpec>().unwrap_err().to_string();
        assert!(err("lifo").contains("\"lifo\"") && err("lifo").contains("gradient, codel, delay, size"));
        assert!(err("codel:targt=5ms").contains("targt") && err("codel:targt=5ms").contains("target, interval"));
        assert!(err("codel:target=-1").contains("target=\"-1\""));
        assert!(err("codel:target").contains("not KEY=VALUE"));
        assert!(err("size").contains("rate=RATE"));
        assert!(err("size:rate=10mbps").contains("bytes/s"));
        assert!(err("gradient:min_limit=50,max_limit=10").contains("above max_limit"));
    }

    #[test]
    fn parsers_and_percentile() {
        assert_eq!(parse_duration("5ms"), Ok(Duration::from_millis(5)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("0").is_err() && parse_duration("soon").is_err());
        assert_eq!(parse_share("25%"), Ok(0.25));
        assert!(parse_share("1.5").is_err());
        let mut samples: Vec<Duration> = [5, 1, 4, 2, 3].iter().map(|&ms| Duration::from_millis(ms)).collect();
        assert_eq!(percentile(&mut samples, 0.5), Some(Duration::from_millis(3)));
        assert_eq!(percentile(&mut samples, 1.0), Some(Duration::from_millis(5)));
        assert_eq!(percentile(&mut [], 0.5), None);
    }
}
