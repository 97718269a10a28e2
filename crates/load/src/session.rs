//! The session model file (003 §2): a Markov chain over URL groups ("stages", e.g. main
//! menu MM, checkout CO, search SR, browse BR, 003 Fig. 5), an exit state, think time,
//! session arrival rate and a per-request delay bound. Format in docs/formats.md
//! ("Session model"). [`SessionModel::load`] validates everything before a run starts.

use crate::think::ThinkTime;
use anyhow::{bail, Context};
use rand::Rng;
use rand_distr::{Distribution, WeightedIndex};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The reserved target name that ends a session.
pub const EXIT: &str = "exit";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    arrival_rate: f64,
    delay_bound_s: f64,
    #[serde(default)]
    max_requests: Option<u32>,
    #[serde(default = "no_think")]
    think_time: ThinkTime,
    start: BTreeMap<String, f64>,
    states: BTreeMap<String, StateFile>,
}

fn no_think() -> ThinkTime {
    ThinkTime::None
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    paths: Vec<String>,
    next: BTreeMap<String, f64>,
}

/// A validated session model. States are numbered in name order; `None` as a next state is exit.
#[derive(Debug)]
pub struct SessionModel {
    pub arrival_rate: f64,
    pub delay_bound_s: f64,
    pub max_requests: Option<u32>,
    pub think_time: ThinkTime,
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
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading session model {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("session model {}", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let file: ModelFile = toml::from_str(text)?;
        if !(file.arrival_rate.is_finite() && file.arrival_rate > 0.0) {
            bail!("arrival_rate = {} must be a positive number of sessions per second", file.arrival_rate);
        }
        if !(file.delay_bound_s.is_finite() && file.delay_bound_s > 0.0) {
            bail!("delay_bound_s = {} must be positive seconds", file.delay_bound_s);
        }
        if file.max_requests == Some(0) {
            bail!("max_requests = 0: a session needs at least one request (omit it for no limit)");
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
        Ok(SessionModel {
            arrival_rate: file.arrival_rate,
            delay_bound_s: file.delay_bound_s,
            max_requests: file.max_requests,
            think_time: file.think_time,
            state_names,
            paths,
            start,
            next,
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    pub const EXAMPLE: &str = r#"
arrival_rate = 4.0
delay_bound_s = 2.0
think_time = { distribution = "exponential", mean_s = 0.1 }
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
            (EXAMPLE.replace("arrival_rate = 4.0", "arrival_rate = 0"), "arrival_rate = 0"),
            (EXAMPLE.replace("\"/stage/SR/0\"", "\"stage\""), "states.SR.paths"),
        ];
        for (text, expected) in cases {
            let err = format!("{:#}", SessionModel::parse(&text).unwrap_err());
            assert!(err.contains(expected), "{err:?} should contain {expected:?}");
        }
    }
}
