//! The session model file (003 §2): a Markov chain over URL groups ("stages", e.g. main
//! menu MM, checkout CO, search SR, browse BR, 003 Fig. 5), an exit state, think time,
//! how sessions arrive (a Poisson rate, or closed-loop users as 003 §5.1's WebStone
//! clients; or Poisson at a rate that follows a load profile's periods, as 000 Table 1's
//! transient overloads) and a per-request delay bound, one per priority class (003 §5.2:
//! gold, silver, bronze 10/15/20 s). Format in docs/formats.md ("Session model").
//! [`SessionModel::load`] validates everything before a run starts.

use crate::think::ThinkTime;
use anyhow::{bail, Context};
use rand::Rng;
use rand_distr::{Distribution, Exp1, WeightedIndex};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

/// The reserved target name that ends a session.
pub const EXIT: &str = "exit";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ModelFile {
    #[serde(default)]
    arrival_rate: Option<f64>,
    #[serde(default)]
    arrival_profile: Vec<RatePeriod>,
    #[serde(default)]
    users: Option<u32>,
    delay_bound_s: f64,
    #[serde(default)]
    classes: Vec<ClassFile>,
    #[serde(default)]
    max_requests: Option<u32>,
    #[serde(default = "no_think")]
    think_time: ThinkTime,
    #[serde(default)]
    on_failure: OnFailure,
    start: BTreeMap<String, f64>,
    states: BTreeMap<String, StateFile>,
}

fn no_think() -> ThinkTime {
    ThinkTime::None
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ClassFile {
    name: String,
    delay_bound_s: f64,
    /// Source addresses of this class's clients (the server classifies by address too).
    #[serde(default)]
    sources: Vec<IpAddr>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct StateFile {
    paths: Vec<String>,
    next: BTreeMap<String, f64>,
}

/// One period of an arrival rate that changes over time: its length and the Poisson rate
/// (sessions per second) within it.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RatePeriod {
    pub length_s: f64,
    pub rate: f64,
}

/// How sessions arrive.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrivals {
    /// Open loop: Poisson session arrivals at a rate that follows these periods in a cycle
    /// from time 0 (`arrival-profile`); a constant `arrival-rate` is one endless period.
    Poisson(Vec<RatePeriod>),
    /// Closed loop: this many users, each running one session at a time; the next
    /// session starts a think time after the last one completed or was aborted.
    Users(u32),
}

/// What a client does after a request of its session fails or misses its delay bound.
/// 003 §5 does not say what its WebStone clients did; both are measured (docs/dwfs.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// The session is aborted; a closed-loop user starts a new one at the first state.
    #[default]
    Restart,
    /// The session goes on to its next state as after a complete response (a client
    /// walking through its script whatever the server answered).
    Continue,
}

/// A priority class: its name, its delay bound and the source addresses of its clients.
#[derive(Clone, Debug, PartialEq)]
pub struct Class {
    pub name: String,
    pub delay_bound_s: f64,
    pub sources: Vec<IpAddr>,
}

/// A validated session model. States are numbered in name order; `None` as a next state is exit.
#[derive(Debug)]
pub struct SessionModel {
    pub arrivals: Arrivals,
    /// The bound of requests of clients no class lists (and of every request without classes).
    pub delay_bound_s: f64,
    pub classes: Vec<Class>,
    pub max_requests: Option<u32>,
    pub think_time: ThinkTime,
    pub on_failure: OnFailure,
    pub state_names: Vec<String>,
    pub paths: Vec<Vec<String>>,
    start: Row,
    next: Vec<Row>,
}

/// One row of the transition matrix: targets (None = exit) and their sampler.
#[derive(Debug)]
struct Row {
    targets: Vec<Option<usize>>,
    sampler: WeightedIndex<f64>,
}

impl SessionModel {
    /// The model in `path` (`load sessions --model`), read as every engine document is
    /// (sojourn_config::read), then checked.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let file: ModelFile = sojourn_config::read("--model", path)?;
        Self::from_file(file).with_context(|| format!("session model {}", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        Self::from_file(toml::from_str(text)?)
    }

    fn from_file(file: ModelFile) -> anyhow::Result<Self> {
        let profile = (!file.arrival_profile.is_empty()).then_some(file.arrival_profile);
        let arrivals = match (file.arrival_rate, profile, file.users) {
            (Some(rate), None, None) if rate.is_finite() && rate > 0.0 => {
                Arrivals::Poisson(vec![RatePeriod { length_s: f64::INFINITY, rate }])
            }
            (Some(rate), None, None) => bail!("arrival-rate = {rate} must be a positive number of sessions per second"),
            (None, Some(periods), None) => {
                for (index, period) in periods.iter().enumerate() {
                    if !(period.length_s.is_finite() && period.length_s > 0.0) {
                        bail!("arrival-profile[{index}]: length-s = {} must be positive seconds", period.length_s);
                    }
                    if !(period.rate.is_finite() && period.rate > 0.0) {
                        bail!("arrival-profile[{index}]: rate = {} must be a positive number of sessions per second", period.rate);
                    }
                }
                Arrivals::Poisson(periods)
            }
            (None, None, Some(0)) => bail!("users = 0: closed-loop sessions need at least one user"),
            (None, None, Some(users)) => Arrivals::Users(users),
            (None, None, None) => {
                bail!("give arrival-rate or arrival-profile (open loop, sessions per second) or users (closed loop)")
            }
            _ => bail!("arrival-rate, arrival-profile and users contradict: give one (a constant or changing open loop, or a closed loop)"),
        };
        if !(file.delay_bound_s.is_finite() && file.delay_bound_s > 0.0) {
            bail!("delay-bound-s = {} must be positive seconds", file.delay_bound_s);
        }
        for (index, class) in file.classes.iter().enumerate() {
            if !(class.delay_bound_s.is_finite() && class.delay_bound_s > 0.0) {
                bail!("classes[{index}] ({}): delay-bound-s = {} must be positive seconds", class.name, class.delay_bound_s);
            }
            if file.classes[..index].iter().any(|c| c.name == class.name) {
                bail!("classes[{index}]: class name {:?} given twice", class.name);
            }
        }
        if file.classes.len() > usize::from(u8::MAX) + 1 {
            bail!("{} classes; at most 256 are recorded", file.classes.len());
        }
        if file.max_requests == Some(0) {
            bail!("max-requests = 0: a session needs at least one request (omit it for no limit)");
        }
        file.think_time.validate().map_err(anyhow::Error::msg)?;
        if file.states.contains_key(EXIT) {
            bail!("state name {EXIT:?} is reserved for leaving the session");
        }
        if file.states.is_empty() {
            bail!("no [states.NAME] tables: give at least one URL group");
        }
        let state_names: Vec<String> = file.states.keys().cloned().collect();
        let row = |label: &str, weights: &BTreeMap<String, f64>, allow_exit: bool| -> anyhow::Result<Row> {
            let mut targets = Vec::new();
            let mut probabilities = Vec::new();
            for (target, &p) in weights {
                let index = if target == EXIT && allow_exit {
                    None
                } else {
                    Some(state_names.iter().position(|name| name == target).with_context(|| {
                        format!("{label}: unknown target {target:?} (states: {}{})", state_names.join(", "), if allow_exit { ", exit" } else { "" })
                    })?)
                };
                if !(p.is_finite() && (0.0..=1.0).contains(&p)) {
                    bail!("{label}: probability {p} for {target:?} is not in [0, 1]");
                }
                targets.push(index);
                probabilities.push(p);
            }
            let sum: f64 = probabilities.iter().sum();
            if (sum - 1.0).abs() > 1e-6 {
                bail!("{label}: probabilities sum to {sum}, not 1");
            }
            let sampler = WeightedIndex::new(&probabilities).with_context(|| format!("{label}: no positive probability"))?;
            Ok(Row { targets, sampler })
        };
        let start = row("start", &file.start, false)?;
        let mut next = Vec::new();
        let mut paths = Vec::new();
        for (name, state) in &file.states {
            if state.paths.is_empty() || state.paths.iter().any(|p| !p.starts_with('/')) {
                bail!("states.{name}.paths must be a non-empty list of paths starting with '/'");
            }
            next.push(row(&format!("states.{name}.next"), &state.next, true)?);
            paths.push(state.paths.clone());
        }
        let classes = file
            .classes
            .into_iter()
            .map(|c| Class { name: c.name, delay_bound_s: c.delay_bound_s, sources: c.sources })
            .collect();
        Ok(SessionModel {
            arrivals,
            delay_bound_s: file.delay_bound_s,
            classes,
            max_requests: file.max_requests,
            think_time: file.think_time,
            on_failure: file.on_failure,
            state_names,
            paths,
            start,
            next,
        })
    }

    /// The class index and delay bound (s) of a client bound to `source`: the first class
    /// listing the address, else the last class, as the server's stage pool classifies
    /// (`sojourn_stages`); class 0 with `delay_bound_s` when the model has no classes.
    pub fn class_of(&self, source: Option<IpAddr>) -> (u8, f64) {
        if self.classes.is_empty() {
            return (0, self.delay_bound_s);
        }
        let index = source
            .and_then(|addr| self.classes.iter().position(|c| c.sources.contains(&addr)))
            .unwrap_or(self.classes.len() - 1);
        (index as u8, self.classes[index].delay_bound_s)
    }

    /// The longest delay bound of any class (every bound must stay below the hard timeout).
    pub fn longest_bound_s(&self) -> f64 {
        self.classes.iter().map(|c| c.delay_bound_s).fold(self.delay_bound_s, f64::max)
    }

    pub fn first_state(&self, rng: &mut impl Rng) -> usize {
        self.start.targets[self.start.sampler.sample(rng)].expect("start rows have no exit")
    }

    /// The state after `state`, `None` when the session leaves.
    pub fn next_state(&self, state: usize, rng: &mut impl Rng) -> Option<usize> {
        let row = &self.next[state];
        row.targets[row.sampler.sample(rng)]
    }

    pub fn pick_path(&self, state: usize, rng: &mut impl Rng) -> &str {
        let group = &self.paths[state];
        &group[rng.gen_range(0..group.len())]
    }
}

/// The arrival times of a Poisson process whose rate is constant within each period and
/// cycles through `periods` from time 0, in nanoseconds. At a period's end the gap drawn
/// is dropped and a new one drawn at the next period's rate: a Poisson process has no
/// memory, so this is exact for a piecewise-constant rate (the simulator's
/// `workload::generate` steps through 000 Table 1's periods the same way).
#[derive(Debug)]
pub struct PoissonArrivals {
    /// (length ns, rate per ns) of each period.
    periods: Vec<(f64, f64)>,
    period: usize,
    period_end: f64,
}

impl PoissonArrivals {
    pub fn new(periods: &[RatePeriod]) -> Self {
        assert!(!periods.is_empty() && periods.iter().all(|p| p.rate > 0.0 && p.length_s > 0.0), "validated by SessionModel");
        let periods: Vec<(f64, f64)> = periods.iter().map(|p| (p.length_s * 1e9, p.rate * 1e-9)).collect();
        PoissonArrivals { period_end: periods[0].0, periods, period: 0 }
    }

    /// The first arrival after `now`; calls must come in time order (`now` never below
    /// the last arrival returned).
    pub fn next_after(&mut self, now: f64, rng: &mut impl Rng) -> f64 {
        let mut from = now;
        loop {
            let (_, rate) = self.periods[self.period];
            let at = from + rng.sample::<f64, _>(Exp1) / rate;
            if at <= self.period_end {
                return at;
            }
            from = self.period_end;
            self.period = (self.period + 1) % self.periods.len();
            self.period_end = from + self.periods[self.period].0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    pub const EXAMPLE: &str = r#"
arrival-rate = 4.0
delay-bound-s = 2.0
think-time = { distribution = "exponential", mean-s = 0.1 }
start = { MM = 1.0 }
[states.MM]
paths = ["/stage/MM/0"]
next = { CO = 0.5, SR = 0.3, exit = 0.2 }
[states.CO]
paths = ["/stage/CO/0", "/stage/CO/1"]
next = { MM = 1.0 }
[states.SR]
paths = ["/stage/SR/0"]
next = { exit = 1.0 }
"#;

    #[test]
    fn transitions_follow_the_matrix() {
        let model = SessionModel::parse(EXAMPLE).unwrap();
        let mm = model.state_names.iter().position(|n| n == "MM").unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let mut counts = [0usize; 4];
        for _ in 0..10_000 {
            match model.next_state(mm, &mut rng) {
                Some(s) => counts[s] += 1,
                None => counts[3] += 1,
            }
        }
        let co = model.state_names.iter().position(|n| n == "CO").unwrap();
        let sr = model.state_names.iter().position(|n| n == "SR").unwrap();
        assert!((counts[co] as f64 / 1e4 - 0.5).abs() < 0.02);
        assert!((counts[sr] as f64 / 1e4 - 0.3).abs() < 0.02);
        assert!((counts[3] as f64 / 1e4 - 0.2).abs() < 0.02);
        assert_eq!(counts[mm], 0);
    }

    #[test]
    fn rejects_with_named_faults() {
        let cases = [
            (EXAMPLE.replace("CO = 0.5", "CO = 0.6"), "states.MM.next: probabilities sum to"),
            (EXAMPLE.replace("next = { MM = 1.0 }", "next = { XX = 1.0 }"), "unknown target \"XX\""),
            (EXAMPLE.replace("start = { MM = 1.0 }", "start = { exit = 1.0 }"), "start: unknown target \"exit\""),
            (EXAMPLE.replace("arrival-rate = 4.0", "arrival-rate = 0"), "arrival-rate = 0"),
            (EXAMPLE.replace("arrival-rate = 4.0", "users = 0"), "users = 0"),
            (EXAMPLE.replace("arrival-rate = 4.0", "users = 3\narrival-rate = 1.0"), "contradict"),
            (EXAMPLE.replace("arrival-rate = 4.0\n", ""), "give arrival-rate"),
            (EXAMPLE.replace("arrival-rate = 4.0", "arrival-profile = [{ length-s = 25.0, rate = 4.0 }]\narrival-rate = 1.0"), "contradict"),
            (EXAMPLE.replace("arrival-rate = 4.0", "arrival-profile = [{ length-s = 0.0, rate = 4.0 }]"), "arrival-profile[0]: length-s = 0"),
            (EXAMPLE.replace("arrival-rate = 4.0", "arrival-profile = [{ length-s = 6.0, rate = 5.0 }, { length-s = 63.0, rate = 0.0 }]"),
             "arrival-profile[1]: rate = 0"),
            (EXAMPLE.replace("arrival-rate = 4.0", "arrival-profile = [{ length-s = 6.0, sessions = 5.0 }]"), "unknown field `sessions`"),
            (format!("{EXAMPLE}[[classes]]\nname = \"g\"\ndelay-bound-s = -1\n"), "classes[0] (g): delay-bound-s = -1"),
            (EXAMPLE.replace("\"/stage/SR/0\"", "\"stage\""), "states.SR.paths"),
        ];
        for (text, expected) in cases {
            let err = format!("{:#}", SessionModel::parse(&text).unwrap_err());
            assert!(err.contains(expected), "{err:?} should contain {expected:?}");
        }
    }

    #[test]
    fn classes_are_chosen_by_source_address_else_the_last() {
        let text = EXAMPLE.replace("arrival-rate = 4.0", "users = 6")
            + "[[classes]]\nname = \"gold\"\ndelay-bound-s = 0.1\nsources = [\"10.0.0.1\"]\n"
            + "[[classes]]\nname = \"bronze\"\ndelay-bound-s = 0.2\n";
        let model = SessionModel::parse(&text).unwrap();
        assert_eq!(model.arrivals, Arrivals::Users(6));
        assert_eq!(model.class_of(Some("10.0.0.1".parse().unwrap())), (0, 0.1));
        assert_eq!(model.class_of(Some("10.0.0.2".parse().unwrap())), (1, 0.2));
        assert_eq!(model.class_of(None), (1, 0.2));
        assert_eq!(model.longest_bound_s(), 2.0);
        assert_eq!(SessionModel::parse(EXAMPLE).unwrap().class_of(None), (0, 2.0));
    }

    /// 000 Table 1's W4 (25 s at rho 0.4, 25 s at 1.4) applied to sessions: every period
    /// receives its rate times its length, the low and high ones alike, and the cycle repeats.
    #[test]
    fn a_profiles_arrivals_follow_each_periods_rate() {
        let model = SessionModel::parse(&EXAMPLE.replace(
            "arrival-rate = 4.0",
            "arrival-profile = [{ length-s = 25.0, rate = 4.0 }, { length-s = 25.0, rate = 14.0 }]",
        ))
        .unwrap();
        let Arrivals::Poisson(periods) = &model.arrivals else { panic!("open loop expected") };
        let mut arrivals = PoissonArrivals::new(periods);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let cycles = 40;
        let mut counts = [0u32; 2];
        let mut at = 0.0;
        loop {
            at = arrivals.next_after(at, &mut rng);
            if at >= cycles as f64 * 50e9 {
                break;
            }
            counts[usize::from(at % 50e9 >= 25e9)] += 1;
        }
        // Poisson counts: 4000 and 14000 expected, standard deviations 63 and 118.
        let expected = [4.0 * 25.0 * cycles as f64, 14.0 * 25.0 * cycles as f64];
        for (count, expected) in counts.iter().zip(expected) {
            assert!((f64::from(*count) - expected).abs() < 4.0 * expected.sqrt(), "{counts:?} against {expected}");
        }
    }

    #[test]
    fn a_constant_rate_is_one_endless_period() {
        let model = SessionModel::parse(EXAMPLE).unwrap();
        assert_eq!(model.arrivals, Arrivals::Poisson(vec![RatePeriod { length_s: f64::INFINITY, rate: 4.0 }]));
        let Arrivals::Poisson(periods) = &model.arrivals else { unreachable!() };
        let mut arrivals = PoissonArrivals::new(periods);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let mut at = 0.0;
        for _ in 0..20_000 {
            at = arrivals.next_after(at, &mut rng);
        }
        let mean_gap_s = at / 20_000.0 / 1e9;
        assert!((mean_gap_s - 0.25).abs() < 0.25 * 4.0 / 20_000f64.sqrt(), "mean gap {mean_gap_s} s");
    }
}
