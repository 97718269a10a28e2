//! Configuration of the stage pool: stages and their processing times,
//! priority classes by client address with their timeouts, dispatch policy.
//!
//! Deserializes from TOML (the file given to `serve --stages`, kebab-case keys at top level);
//! [`StagesConfig::validate`] turns it into a [`PoolSpec`] or an error naming
//! the key and what is accepted. Defaults are 003's: the four stages MM, CO, SR,
//! BR with the §4.1 processing times 0.5, 1, 1.5, 2 scaled to 5, 10, 15, 20 ms,
//! the Fig. 5 transitions, and the three classes of §5.2 with timeouts 10, 15,
//! 20 s scaled by 1/100 to 100, 150, 200 ms.

use std::net::IpAddr;
use std::time::Duration;

use serde::Deserialize;
use sojourn_sched::dispatch::{DispatchKind, StageOrder};

use crate::study::{fig5_transitions, normalize_row, stage_names, study_service_times};
use sojourn_papers::papers;

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct StagesConfig {
    /// fifo, rr, edf, wfs or dwfs.
    pub policy: String,
    /// DWFS's order within a stage's queue: deadline (the default), class or arrival
    /// (003 §5.2 says only that a shorter timeout has the higher priority).
    pub stage_order: String,
    /// Worker threads doing the CPU work.
    pub workers: usize,
    pub stage: Vec<StageConfig>,
    /// Classes in priority order; a client belongs to the first class with a
    /// network containing its address, else to the last class.
    pub class: Vec<ClassConfig>,
    /// Row-stochastic (or percentages) transition matrix among the stages; default
    /// 003 Fig. 5 for the four default stages, uniform otherwise.
    pub transitions: Option<Vec<Vec<f64>>>,
    /// Static weights for rr and wfs; default equal.
    pub weights: Vec<f64>,
    /// CSV file to which the pool appends its per-stage counters every
    /// `series_interval_ms` (queue lengths over time, 003 Figs. 11-12).
    pub series_csv: Option<std::path::PathBuf>,
    pub series_interval_ms: f64,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct StageConfig {
    pub name: String,
    /// CPU time each request of this stage costs.
    pub processing_ms: f64,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ClassConfig {
    pub name: String,
    /// Delay bound of the class's requests (003 §5.2).
    pub timeout_ms: f64,
    /// Client networks of the class, `address/prefix` or a bare address.
    #[serde(default)]
    pub networks: Vec<String>,
}

impl Default for StagesConfig {
    fn default() -> Self {
        StagesConfig {
            policy: "dwfs".into(),
            stage_order: StageOrder::default().name().into(),
            workers: 1,
            // 003 §4.1's processing times as tens of milliseconds of CPU.
            stage: stage_names()
                .iter()
                .zip(study_service_times())
                .map(|(name, t)| StageConfig { name: name.clone(), processing_ms: t * 10.0 })
                .collect(),
            // 003 §5.2's class timeouts scaled by 1/100 (10 s -> 100 ms).
            class: papers()
                .sessions
                .class_names
                .iter()
                .zip(&papers().sessions.class_timeouts_s)
                .map(|(name, s)| ClassConfig { name: name.clone(), timeout_ms: s * 10.0, networks: vec![] })
                .collect(),
            transitions: None,
            weights: vec![],
            series_csv: None,
            series_interval_ms: 1000.0,
        }
    }
}

/// A network: an address and a prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    pub address: IpAddr,
    pub prefix: u8,
}

impl Network {
    /// Parses `address/prefix` or a bare address (a full-length prefix).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (address, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let address: IpAddr =
            address.parse().map_err(|_| format!("{text:?} is not an address; expected e.g. 10.1.0.0/16 or ::1"))?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?} has prefix {p:?}; expected 0..={max}"))?,
        };
        Ok(Network { address, prefix })
    }

    pub fn contains(&self, address: IpAddr) -> bool {
        let address = match (self.address, address) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
            _ => address,
        };
        match (self.address, address) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSpec {
    pub policy: DispatchKind,
    pub stage_order: StageOrder,
    pub workers: usize,
    pub stage_names: Vec<String>,
    pub processing: Vec<Duration>,
    pub class_names: Vec<String>,
    pub class_timeouts: Vec<Duration>,
    pub class_networks: Vec<Vec<Network>>,
    pub transitions: Vec<Vec<f64>>,
    pub weights: Vec<f64>,
    pub series_csv: Option<std::path::PathBuf>,
    pub series_interval: Duration,
}

impl PoolSpec {
    /// The class of a client: the first whose networks contain its address,
    /// else the last (lowest priority).
    pub fn class_of(&self, address: IpAddr) -> usize {
        self.class_networks
            .iter()
            .position(|nets| nets.iter().any(|n| n.contains(address)))
            .unwrap_or(self.class_names.len() - 1)
    }

    pub fn stage_index(&self, name: &str) -> Option<usize> {
        self.stage_names.iter().position(|s| s == name)
    }
}

fn positive_ms(value: f64, key: &str) -> Result<Duration, String> {
    if value.is_finite() && value > 0.0 && value < 1e9 {
        Ok(Duration::from_secs_f64(value / 1000.0))
    } else {
        Err(format!("stages: {key} = {value}; expected milliseconds > 0"))
    }
}

impl StagesConfig {
    pub fn validate(&self) -> Result<PoolSpec, String> {
        let policy: DispatchKind = self.policy.parse().map_err(|e| format!("stages: policy: {e}"))?;
        let stage_order: StageOrder = self.stage_order.parse().map_err(|e| format!("stages: stage-order: {e}"))?;
        if self.workers == 0 || self.workers > 1024 {
            return Err(format!("stages: workers = {}; expected 1..=1024", self.workers));
        }
        if self.stage.is_empty() {
            return Err("stages: no [[stages.stage]]; expected at least one stage with name and processing-ms".into());
        }
        if self.class.is_empty() {
            return Err("stages: no [[stages.class]]; expected at least one class with name and timeout-ms".into());
        }
        let mut stage_names = Vec::new();
        let mut processing = Vec::new();
        for (i, stage) in self.stage.iter().enumerate() {
            let valid = !stage.name.is_empty() && stage.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid || stage_names.contains(&stage.name) {
                return Err(format!(
                    "stages: stage[{i}].name = {:?}; expected a distinct name of letters, digits, '_' or '-' (it appears in URLs)",
                    stage.name
                ));
            }
            stage_names.push(stage.name.clone());
            processing.push(positive_ms(stage.processing_ms, &format!("stage[{i}].processing-ms"))?);
        }
        let mut class_names = Vec::new();
        let mut class_timeouts = Vec::new();
        let mut class_networks = Vec::new();
        for (i, class) in self.class.iter().enumerate() {
            class_names.push(class.name.clone());
            class_timeouts.push(positive_ms(class.timeout_ms, &format!("class[{i}].timeout-ms"))?);
            let nets = class
                .networks
                .iter()
                .map(|n| Network::parse(n).map_err(|e| format!("stages: class[{i}].networks: {e}")))
                .collect::<Result<Vec<_>, _>>()?;
            class_networks.push(nets);
        }
        let n = stage_names.len();
        let transitions = match &self.transitions {
            Some(rows) => {
                if rows.len() != n || rows.iter().any(|r| r.len() != n) {
                    return Err(format!("stages: transitions must be {n} rows of {n} numbers (one per stage)"));
                }
                let mut normalized = Vec::new();
                for (i, row) in rows.iter().enumerate() {
                    if row.iter().any(|p| !p.is_finite() || *p < 0.0) || row.iter().sum::<f64>() <= 0.0 {
                        return Err(format!("stages: transitions[{i}]: expected numbers >= 0 with a positive sum"));
                    }
                    normalized.push(normalize_row(row));
                }
                normalized
            }
            None if stage_names == self::stage_names() => fig5_transitions(),
            None => vec![vec![1.0 / n as f64; n]; n],
        };
        Ok(PoolSpec {
            policy,
            stage_order,
            workers: self.workers,
            stage_names,
            processing,
            class_names,
            class_timeouts,
            class_networks,
            transitions,
            weights: self.weights.clone(),
            series_csv: self.series_csv.clone(),
            series_interval: positive_ms(self.series_interval_ms, "series-interval-ms")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_003() {
        let spec = StagesConfig::default().validate().unwrap();
        assert_eq!(spec.stage_names, ["MM", "CO", "SR", "BR"]);
        assert_eq!(spec.processing[3], Duration::from_millis(20));
        assert_eq!(spec.class_timeouts, [100, 150, 200].map(Duration::from_millis));
        assert!((spec.transitions[1][2] - 0.402).abs() < 1e-9);
        assert_eq!(spec.policy, DispatchKind::Dwfs);
        assert_eq!(spec.stage_order, StageOrder::Deadline);
    }

    #[test]
    fn the_stage_order_is_read_by_name_and_a_bad_one_lists_the_names() {
        let config: StagesConfig = toml::from_str("stage-order = \"arrival\"").unwrap();
        assert_eq!(config.validate().unwrap().stage_order, StageOrder::Arrival);
        let bad = StagesConfig { stage_order: "fifo".into(), ..StagesConfig::default() }.validate().unwrap_err();
        assert!(bad.contains("stage-order") && bad.contains("deadline, class, arrival"), "{bad}");
    }

    #[test]
    fn classes_come_from_client_networks() {
        let config: StagesConfig = toml::from_str(
            r#"
            policy = "fifo"
            [[stage]]
            name = "a"
            processing-ms = 1
            [[class]]
            name = "gold"
            timeout-ms = 100
            networks = ["10.1.0.0/16", "::1"]
            [[class]]
            name = "rest"
            timeout-ms = 300
            "#,
        )
        .unwrap();
        let spec = config.validate().unwrap();
        assert_eq!(spec.class_of("10.1.200.3".parse().unwrap()), 0);
        assert_eq!(spec.class_of("::ffff:10.1.0.9".parse().unwrap()), 0);
        assert_eq!(spec.class_of("::1".parse().unwrap()), 0);
        assert_eq!(spec.class_of("10.2.0.1".parse().unwrap()), 1);
        assert_eq!(spec.transitions, vec![vec![1.0]]);
    }

    #[test]
    fn errors_name_the_key() {
        let bad = |f: &dyn Fn(&mut StagesConfig)| {
            let mut c = StagesConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(&|c| c.policy = "lifo".into()).contains("fifo, rr, edf, wfs, dwfs"));
        assert!(bad(&|c| c.stage[1].processing_ms = -1.0).contains("stage[1].processing-ms = -1"));
        assert!(bad(&|c| c.stage[1].name = "a/b".into()).contains("stage[1].name"));
        assert!(bad(&|c| c.class[0].networks = vec!["10.0.0.0/40".into()]).contains("expected 0..=32"));
        assert!(bad(&|c| c.class[0].networks = vec!["ten".into()]).contains("not an address"));
        assert!(bad(&|c| c.transitions = Some(vec![vec![1.0]])).contains("4 rows of 4"));
        assert!(toml::from_str::<StagesConfig>("colour = 1").unwrap_err().to_string().contains("colour"));
        assert!(Network::parse("0.0.0.0/0").unwrap().contains("1.2.3.4".parse().unwrap()));
    }
}
