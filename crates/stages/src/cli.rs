//! `sojourn-engine stages`: the four-queue productivity study of 003 §4.1.
//!
//! By default runs the seven weight assignments of 003 Table 2 under weighted
//! round robin (§4.1: "we simulated a round robin scheduler ... under different
//! weight assignments"), then DWFS, FIFO and EDF on the same workload, and
//! prints one row each (or JSON lines with `--json`).

use anyhow::Context;
use serde::Deserialize;
use sojourn_sched::dispatch::{DispatchKind, StageOrder};

use crate::study::{self, StudyConfig, StudyResult};

/// Simulate dispatch among CPU-bound stage queues (003 §4.1).
#[derive(Debug, clap::Args)]
#[command(after_help = "Example: sojourn-engine stages --clients 20 --seed 1\n\
    Rows: completed requests, timed-out requests (expired, late, dropped or refused), \
    productivity = completed - timed out (003 §4.1), sessions aborted.")]
pub struct StagesArgs {
    /// Read the options from a TOML file instead, each long option a key (kebab-case:
    /// `policy = ["dwfs"]`, `service-times = [0.5, 1, 1.5, 2]`, `weights` flat as on the
    /// command line); options after FILE replace the file's.
    #[arg(long, num_args = 1.., allow_hyphen_values = true, value_names = ["FILE", "OPTIONS"], conflicts_with = "StagesOptions")]
    pub config: Vec<std::ffi::OsString>,
    #[command(flatten)]
    pub options: StagesOptions,
}

/// The options of `stages`, on the command line or as the keys of its `--config` file.
#[derive(Debug, clap::Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct StagesOptions {
    /// Dispatch policies to run: fifo, rr, edf, wfs, dwfs (repeat or comma
    /// separate). rr and wfs run once per weight assignment.
    #[arg(long, value_delimiter = ',', default_values_t = defaults::policy())]
    #[serde(default = "defaults::policy", deserialize_with = "sojourn_config::from_texts")]
    pub policy: Vec<DispatchKind>,
    /// dwfs' order within a stage: deadline (earliest first, as the server serves), class
    /// (the shortest timeout's class strictly first) or arrival (oldest first), the readings
    /// of 003 §5.2's "the shorter timeout a request is assigned, the higher is its priority".
    #[arg(long, default_value_t = StageOrder::Deadline)]
    #[serde(default, deserialize_with = "sojourn_config::from_text")]
    pub stage_order: StageOrder,
    /// Static weights per stage for rr (requests per round) and wfs (CPU time),
    /// comma separated (e.g. 5,1,1,1); repeat for several runs. Default: the
    /// seven assignments of 003 Table 2.
    #[arg(long, value_delimiter = ',', num_args = 1)]
    #[serde(default)]
    pub weights: Vec<f64>,
    /// Processing time of each stage (MM, CO, SR, BR), comma separated.
    #[arg(long, value_delimiter = ',', default_values_t = defaults::service_times())]
    #[serde(default = "defaults::service_times")]
    pub service_times: Vec<f64>,
    /// Transition matrix file: one row per stage, comma- or space-separated
    /// probabilities or percentages (rows are normalized). Default: 003 Fig. 5.
    #[arg(long)]
    #[serde(default)]
    pub transitions: Option<std::path::PathBuf>,
    /// Delay bound of each priority class, in the same unit as the service times, comma
    /// separated (003 §5.2's gold, silver, bronze: 0.1,0.15,0.2 at its 1/100 scale); client
    /// i belongs to class i mod the number of classes. One value: every request's bound.
    #[arg(long, value_delimiter = ',', default_values_t = defaults::timeout())]
    #[serde(default = "defaults::timeout")]
    pub timeout: Vec<f64>,
    /// Simulated duration.
    #[arg(long, default_value_t = defaults::duration())]
    #[serde(default = "defaults::duration")]
    pub duration: f64,
    /// Closed-loop clients, each running one session at a time (ignored with --session-rate).
    #[arg(long, default_value_t = defaults::clients())]
    #[serde(default = "defaults::clients")]
    pub clients: usize,
    /// Open loop: Poisson session arrivals per time unit instead of closed-loop clients.
    #[arg(long, default_value_t = 0.0)]
    #[serde(default)]
    pub session_rate: f64,
    /// Mean requests per session (geometric). Default: sessions end only by abort.
    #[arg(long)]
    #[serde(default)]
    pub session_length: Option<f64>,
    /// Pause between a response and the session's next request.
    #[arg(long, default_value_t = 0.0)]
    #[serde(default)]
    pub think_time: f64,
    /// Draw each think time from an exponential distribution with mean --think-time (as the
    /// testbed's session clients do) instead of pausing exactly --think-time.
    #[arg(long)]
    #[serde(default)]
    pub exponential_think: bool,
    /// Use each stage's processing time exactly instead of exponential with that mean.
    #[arg(long)]
    #[serde(default)]
    pub deterministic_service: bool,
    /// Dispatched requests served at once, sharing the CPU equally (processor sharing), as
    /// that many stage workers on one CPU do. 1: one at a time, as one worker serves.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    #[serde(default = "defaults::threads")]
    pub threads: u64,
    /// Refill the --threads only when all are done, as 003 §5.1's Apache ran DWFS "when the
    /// ready queue is empty" and its worker threads served the queue; without it each thread
    /// takes the next request as soon as it is free.
    #[arg(long)]
    #[serde(default)]
    pub ready_queue: bool,
    /// A request finished past its class's --timeout still counts as timed out, but its
    /// session goes on unless the response took longer than this, as the testbed's clients
    /// take a late response and give up only past their delay bound. Default: a late request
    /// ends its session.
    #[arg(long)]
    #[serde(default)]
    pub session_bound: Option<f64>,
    /// Random seed (same seed, same result).
    #[arg(long, default_value_t = defaults::seed())]
    #[serde(default = "defaults::seed")]
    pub seed: u64,
    /// Print one JSON object per run instead of a table.
    #[arg(long)]
    #[serde(default)]
    pub json: bool,
}

/// Defaults of options, one value for the command line and the `--config` file (003 §4.1's study).
mod defaults {
    use sojourn_sched::dispatch::DispatchKind;

    pub fn policy() -> Vec<DispatchKind> {
        vec![DispatchKind::RoundRobin, DispatchKind::Dwfs, DispatchKind::Fifo, DispatchKind::Edf]
    }
    /// MM, CO, SR, BR (003 §4.1).
    pub fn service_times() -> Vec<f64> {
        vec![0.5, 1.0, 1.5, 2.0]
    }
    pub fn timeout() -> Vec<f64> {
        vec![20.0]
    }
    pub fn duration() -> f64 {
        10_000.0
    }
    pub fn clients() -> usize {
        20
    }
    pub fn seed() -> u64 {
        1
    }
    pub fn threads() -> u64 {
        1
    }
}

impl StagesArgs {
    /// The options: the command line's, or the `--config` file's with the options after it.
    pub fn options(self) -> anyhow::Result<StagesOptions> {
        if self.config.is_empty() {
            return Ok(self.options);
        }
        sojourn_config::file_then_options(&self.config, "sojourn-engine stages")
    }
}

pub fn run(args: StagesArgs) -> anyhow::Result<()> {
    let args = args.options()?;
    let transitions = match &args.transitions {
        Some(path) => read_transitions(path)?,
        None => study::fig5_transitions(),
    };
    let base = StudyConfig {
        policy: DispatchKind::RoundRobin,
        stage_order: args.stage_order,
        weights: vec![1.0; args.service_times.len()],
        service_times: args.service_times.clone(),
        transitions,
        timeouts: args.timeout.clone(),
        duration: args.duration,
        clients: args.clients,
        session_rate: args.session_rate,
        mean_session_length: args.session_length,
        think_time: args.think_time,
        exponential_think: args.exponential_think,
        exponential_service: !args.deterministic_service,
        threads: args.threads as usize,
        ready_queue: args.ready_queue,
        session_bound: args.session_bound,
        seed: args.seed,
    };
    let weight_sets: Vec<Vec<f64>> = if args.weights.is_empty() {
        study::table2_weights().to_vec()
    } else {
        split_weight_sets(&args.weights, args.service_times.len())?
    };
    let mut runs: Vec<StudyConfig> = Vec::new();
    for &policy in &args.policy {
        if matches!(policy, DispatchKind::RoundRobin | DispatchKind::Wfs) {
            runs.extend(weight_sets.iter().map(|w| StudyConfig { policy, weights: w.clone(), ..base.clone() }));
        } else {
            runs.push(StudyConfig { policy, ..base.clone() });
        }
    }

    if !args.json {
        println!("{:<6} {:<16} {:>10} {:>10} {:>13} {:>9} {:>8}", "policy", "weights", "completed", "timed_out", "productivity", "aborted", "util");
    }
    for config in &runs {
        let result = study::simulate(config)?;
        print_row(config, &result, args.json)?;
    }
    Ok(())
}

fn print_row(config: &StudyConfig, result: &StudyResult, json: bool) -> anyhow::Result<()> {
    let weights = if matches!(config.policy, DispatchKind::RoundRobin | DispatchKind::Wfs) {
        config.weights.iter().map(|w| format!("{w}")).collect::<Vec<_>>().join(",")
    } else {
        "-".to_string()
    };
    if json {
        let mut value = serde_json::to_value(result)?;
        value["policy"] = config.policy.name().into();
        value["weights"] = weights.into();
        value["stage_order"] = config.stage_order.name().into();
        value["threads"] = config.threads.into();
        value["ready_queue"] = config.ready_queue.into();
        value["session_bound"] = config.session_bound.into();
        value["clients"] = config.clients.into();
        value["seed"] = config.seed.into();
        println!("{value}");
    } else {
        println!(
            "{:<6} {:<16} {:>10} {:>10} {:>13} {:>9} {:>8.3}",
            config.policy.name(),
            weights,
            result.completed,
            result.timed_out,
            result.productivity,
            result.sessions_aborted,
            result.utilization
        );
    }
    Ok(())
}

/// `--weights 5,1,1,1 --weights 1,5,1,1` arrives flattened: split per stage count.
fn split_weight_sets(flat: &[f64], stages: usize) -> anyhow::Result<Vec<Vec<f64>>> {
    anyhow::ensure!(
        stages > 0 && flat.len().is_multiple_of(stages),
        "--weights has {} numbers; expected a multiple of the number of stages ({stages})",
        flat.len()
    );
    Ok(flat.chunks(stages).map(<[f64]>::to_vec).collect())
}

/// Reads a transition matrix: one row per line, numbers separated by commas or
/// whitespace, `#` comments; each row is normalized to sum to one.
pub fn read_transitions(path: &std::path::Path) -> anyhow::Result<Vec<Vec<f64>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading transition matrix {}", path.display()))?;
    let mut rows = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let row = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|field| !field.is_empty())
            .map(|field| {
                field.parse::<f64>().with_context(|| {
                    format!("{}:{}: {field:?} is not a number; expected probabilities or percentages", path.display(), number + 1)
                })
            })
            .collect::<anyhow::Result<Vec<f64>>>()?;
        let total: f64 = row.iter().sum();
        anyhow::ensure!(
            total > 0.0 && row.iter().all(|p| p.is_finite() && *p >= 0.0),
            "{}:{}: a row needs non-negative numbers with a positive sum",
            path.display(),
            number + 1
        );
        rows.push(study::normalize_row(&row));
    }
    Ok(rows)
}
