//! `sojourn-engine sim`: simulate a trace or a synthetic M/G/1 workload on one
//! bottleneck link and write records.csv and summary.json (docs/simulator.md).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::ValueEnum;
use serde::Serialize;
use sojourn_sched::{AdmissionSpec, Bands, Order, PolicyKind, Scheduler};
use sojourn_sys::clock::thread_cpu_time;

use crate::fluid::{simulate, FluidPolicy, Job, Served};
use crate::output::{outcomes, write_records, Outcomes};
use crate::quantum::{Quantum, QuantumConfig};
use crate::trace::{load_trace, TraceRow};
use crate::workload::{generate, Extent, LoadProfile, SizeModel};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// First come, first served.
    Fcfs,
    /// Processor sharing (FAIR); `fair` is the same.
    #[value(alias = "fair")]
    Ps,
    /// Preemptive shortest remaining processing time.
    Srpt,
    /// Least attained service.
    Las,
    /// Strict priority among size bands by remaining bytes, PS inside a band (000 §3).
    Bands,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SizesArg {
    /// Exponential with --mean.
    Exp,
    /// Bounded Pareto with --alpha, --p and either --k or --mean.
    Bpareto,
    /// The SURGE empirical model of 004 Table 1.
    Surge,
}

/// Simulate a bottleneck link under a scheduling policy.
///
/// Input is a trace (--trace, docs/formats.md) or a synthetic M/G/1 workload
/// (--sizes with --rho or --profile, and --jobs or --duration). Output is
/// records.csv (the load generator's columns that apply) and summary.json in
/// --out, or the summary on standard output without --out.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Bottleneck rate in bits per second: NUMBER[k|m|g][bit], e.g. 10Mbit, 10M, 1.5gbit, 8 (k, m, g are powers of 1000; docs/formats.md "Rates").
    #[arg(long, value_parser = parse_rate)]
    pub link: f64,
    /// Scheduling policy.
    #[arg(long, value_enum, default_value = "ps")]
    pub policy: PolicyArg,
    /// Size cutoffs of the bands policy, as for `serve --kernel-bands` (000 §3.2).
    #[arg(long, default_value = "1K,2K,5K,50K")]
    pub bands: Bands,
    /// Simulate the server's scheduler with this write quantum in bytes (e.g. 32K)
    /// instead of the fluid policy; --policy must then be ps/fair, srpt or las.
    #[arg(long, value_parser = sojourn_sched::bands::parse_bytes)]
    pub quantum: Option<u64>,
    /// Responses that may be blocked with data in the kernel at once (004 §3.3), as
    /// `serve --write-concurrency`; default unlimited.
    #[arg(long, requires = "quantum")]
    pub write_concurrency: Option<usize>,
    /// Only responses with at least this many bytes left need a slot, as
    /// `serve --write-concurrency-from` (e.g. 50K); needs --policy srpt.
    #[arg(long, requires = "write_concurrency", value_parser = sojourn_sched::bands::parse_bytes)]
    pub write_concurrency_from: Option<u64>,
    /// Unsent bytes a socket may hold before a write blocks, as `serve --notsent-lowat`
    /// (TCP_NOTSENT_LOWAT); default unlimited (every write is accepted).
    #[arg(long, requires = "quantum", value_parser = sojourn_sched::bands::parse_bytes)]
    pub kernel_buffer: Option<u64>,
    /// Refuse requests as `serve --admission` does, NAME[:KEY=VALUE,...] (docs/server.md);
    /// refused jobs are records of outcome `refused`. The size policy predicts in the
    /// scheduler's order and needs `rate=` (e.g. the --link rate).
    #[arg(long, requires = "quantum", value_parser = parse_admission)]
    pub admission: Option<AdmissionSpec>,
    /// Trace to replay (arrival_s, client, path, size).
    #[arg(long, conflicts_with_all = ["sizes", "rho", "profile"])]
    pub trace: Option<PathBuf>,
    /// Synthetic size distribution.
    #[arg(long, value_enum, required_unless_present = "trace")]
    pub sizes: Option<SizesArg>,
    /// Mean size in bytes (exp; bpareto when --k is not given).
    #[arg(long)]
    pub mean: Option<f64>,
    /// Bounded Pareto lower bound in bytes.
    #[arg(long)]
    pub k: Option<f64>,
    /// Bounded Pareto upper bound in bytes.
    #[arg(long, default_value_t = 1e10)]
    pub p: f64,
    /// Bounded Pareto tail index.
    #[arg(long, default_value_t = 1.1)]
    pub alpha: f64,
    /// Constant offered load (offered bytes/s over link bytes/s).
    #[arg(long, conflicts_with = "profile")]
    pub rho: Option<f64>,
    /// Transient overload workload of 000 Table 1, W1..W10.
    #[arg(long)]
    pub profile: Option<String>,
    /// Multiplies the periods of --profile (0.1 makes W1 2.5 s low, 2.5 s high).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Number of synthetic jobs.
    #[arg(long, conflicts_with = "duration")]
    pub jobs: Option<usize>,
    /// Seconds of synthetic arrivals.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory for records.csv and summary.json (created if missing).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write only summary.json.
    #[arg(long)]
    pub no_records: bool,
    /// Equal-count size bins in the summary's by_size table.
    #[arg(long, default_value_t = 20)]
    pub size_bins: usize,
    /// Print the simulation's speed (jobs per second, excluding input and output) to standard error.
    #[arg(long)]
    pub timing: bool,
}

/// Parses an admission policy as `serve --admission` does.
pub fn parse_admission(s: &str) -> Result<AdmissionSpec, String> {
    s.parse().map_err(|err: sojourn_sched::admission::AdmissionError| err.to_string())
}

/// Parses a link rate in bits per second ([`sojourn_sched::rate`]'s grammar: `10Mbit`, `10M`, ...).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    sojourn_sched::rate::parse_rate(s).map_err(|err| err.to_string())
}

#[derive(Serialize)]
struct RunInfo {
    policy: &'static str,
    mode: &'static str,
    quantum_bytes: Option<u64>,
    write_concurrency: Option<usize>,
    write_concurrency_from: Option<u64>,
    kernel_buffer: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    admission: Option<&'static str>,
    bands: Option<Vec<u64>>,
    link_bps: f64,
    source: String,
    /// The synthetic load over time (absent for a trace).
    profile: Option<LoadProfile>,
    seed: Option<u64>,
    quanta: Option<u64>,
}

#[derive(Serialize)]
struct Summary {
    #[serde(flatten)]
    run: RunInfo,
    #[serde(flatten)]
    outcomes: Outcomes,
}

fn size_model(args: &SimArgs, kind: SizesArg) -> anyhow::Result<SizeModel> {
    let model = match kind {
        SizesArg::Exp => SizeModel::Exponential { mean: args.mean.context("--sizes exp needs --mean BYTES")? },
        SizesArg::Bpareto => match (args.k, args.mean) {
            (Some(k), None) => SizeModel::BoundedPareto { k, p: args.p, alpha: args.alpha },
            (None, Some(mean)) => SizeModel::bounded_pareto_with_mean(mean, args.p, args.alpha)?,
            _ => bail!("--sizes bpareto needs exactly one of --k BYTES or --mean BYTES"),
        },
        SizesArg::Surge => SizeModel::Surge,
    };
    Ok(model.validated()?)
}

fn describe(model: &SizeModel) -> String {
    match model {
        SizeModel::Exponential { mean } => format!("exp(mean={mean})"),
        SizeModel::BoundedPareto { k, p, alpha } => format!("bpareto(k={k},p={p},alpha={alpha})"),
        SizeModel::Surge => "surge".into(),
    }
}

/// What to simulate: the jobs, the trace rows they came from, a description and the load profile.
struct Input {
    jobs: Vec<Job>,
    rows: Option<Vec<TraceRow>>,
    source: String,
    profile: Option<LoadProfile>,
}

fn input(args: &SimArgs, rate: f64) -> anyhow::Result<Input> {
    if let Some(path) = &args.trace {
        let trace = load_trace(path)?;
        return Ok(Input { jobs: trace.jobs, rows: Some(trace.rows), source: format!("trace:{}", path.display()), profile: None });
    }
    let kind = args.sizes.context("give --trace FILE or --sizes exp|bpareto|surge")?;
    let model = size_model(args, kind)?;
    let profile = match (&args.profile, args.rho) {
        (Some(name), _) => LoadProfile::transient(name, args.time_scale)?,
        (None, Some(rho)) if rho > 0.0 && rho.is_finite() => LoadProfile::constant(rho),
        (None, Some(rho)) => bail!("--rho {rho} must be a positive load"),
        (None, None) => bail!("a synthetic workload needs --rho LOAD or --profile W1..W10"),
    };
    let extent = match (args.jobs, args.duration) {
        (Some(n), None) => Extent::Jobs(n),
        (None, Some(s)) if s > 0.0 && s.is_finite() => Extent::Seconds(s),
        (None, Some(s)) => bail!("--duration {s} must be a positive number of seconds"),
        _ => bail!("a synthetic workload needs --jobs N or --duration SECONDS"),
    };
    let jobs = generate(&model, &profile, rate, extent, args.seed);
    let source = format!("synthetic:{}:{}", describe(&model), profile.name);
    Ok(Input { jobs, rows: None, source, profile: Some(profile) })
}

pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let rate = args.link / 8.0;
    if args.quantum == Some(0) {
        bail!("--quantum 0: the write quantum must be at least 1 byte (e.g. 32K)");
    }
    if args.write_concurrency == Some(0) {
        bail!("--write-concurrency 0: at least one response must be allowed to write (omit it for unlimited)");
    }
    let quantum_policy = match (args.quantum, args.policy) {
        (None, _) => None,
        (Some(_), PolicyArg::Ps) => Some(PolicyKind::Fair),
        (Some(_), PolicyArg::Srpt) => Some(PolicyKind::Srpt),
        (Some(_), PolicyArg::Las) => Some(PolicyKind::Las),
        (Some(_), other) => bail!("--quantum simulates the server's scheduler: --policy must be ps (fair), srpt or las, not {other:?}"),
    };
    if let (Some(from), Some(policy)) = (args.write_concurrency_from, quantum_policy) {
        if let Err(why) = Scheduler::slots_from_allowed(policy) {
            bail!("--write-concurrency-from {from}: needs --policy srpt ({why})");
        }
    }
    let Input { jobs, rows, source, profile } = input(&args, rate)?;
    let started = (Instant::now(), thread_cpu_time());
    let mut quanta = None;
    let mut refused = None;
    let served: Vec<Served> = match (quantum_policy, args.quantum) {
        (Some(policy), Some(quantum)) => {
            let config = QuantumConfig {
                policy,
                quantum,
                write_concurrency: args.write_concurrency,
                write_concurrency_from: args.write_concurrency_from,
                kernel_buffer: args.kernel_buffer,
            };
            let mut scheduler = Quantum::new(config);
            if let Some(admission) = &args.admission {
                // As the server's Settings::order: only SRPT orders by bytes left here (no kernel bands).
                let order = if policy == PolicyKind::Srpt { Order::ShortestFirst } else { Order::Shared };
                scheduler = scheduler.with_admission(admission.build(order));
            }
            let served = simulate(&mut scheduler, &jobs, rate);
            quanta = Some(scheduler.quanta());
            refused = args.admission.is_some().then(|| scheduler.refused());
            served
        }
        _ => fluid_policy(&args).run(&jobs, rate),
    };
    if args.timing {
        let seconds = started.0.elapsed().as_secs_f64();
        // CPU time of this thread: speed on one core, whatever else the machine runs.
        let cpu = (thread_cpu_time() - started.1).as_secs_f64();
        let n = jobs.len() as f64;
        eprintln!("simulated {n} jobs in {seconds:.3} s: {:.0} jobs/s; {cpu:.3} s of CPU: {:.0} jobs per CPU second", n / seconds, n / cpu);
    }
    let summary = Summary {
        run: RunInfo {
            policy: match quantum_policy {
                Some(p) => p.name(),
                None => fluid_policy(&args).name(),
            },
            mode: if args.quantum.is_some() { "quantum" } else { "fluid" },
            quantum_bytes: args.quantum,
            write_concurrency: args.write_concurrency,
            write_concurrency_from: args.write_concurrency_from,
            kernel_buffer: args.kernel_buffer,
            admission: args.admission.as_ref().map(|a| a.name()),
            bands: (args.policy == PolicyArg::Bands).then(|| args.bands.cutoffs().to_vec()),
            link_bps: args.link,
            source,
            profile,
            seed: rows.is_none().then_some(args.seed),
            quanta,
        },
        outcomes: outcomes(&jobs, &served, refused.as_deref(), rate, args.size_bins),
    };
    let json = serde_json::to_string_pretty(&summary)?;
    let Some(dir) = &args.out else {
        println!("{json}");
        return Ok(());
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create output directory {}", dir.display()))?;
    if !args.no_records {
        let path = dir.join("records.csv");
        let file = std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
        write_records(std::io::BufWriter::new(file), &jobs, &served, refused.as_deref().unwrap_or_default(), rows.as_deref())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let path = dir.join("summary.json");
    std::fs::write(&path, json + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

fn fluid_policy(args: &SimArgs) -> FluidPolicy {
    match args.policy {
        PolicyArg::Fcfs => FluidPolicy::Fcfs,
        PolicyArg::Ps => FluidPolicy::Ps,
        PolicyArg::Srpt => FluidPolicy::Srpt,
        PolicyArg::Las => FluidPolicy::Las,
        PolicyArg::Bands => FluidPolicy::Bands(args.bands.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        let cases = [("10Mbit", 1e7), ("1.5mbit", 1.5e6), ("800kbit", 8e5), ("8", 8.0), ("1Gbit/s", 1e9), ("2e3", 2e3)];
        for (text, bps) in cases {
            assert_eq!(parse_rate(text), Ok(bps), "{text}");
        }
        for bad in ["", "fast", "-1Mbit", "0", "10Xbit", "1.5mbps"] {
            assert!(parse_rate(bad).unwrap_err().contains("10mbit"), "{bad}");
        }
    }
}
