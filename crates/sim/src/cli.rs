//! `sojourn-engine sim`: simulate a trace or a synthetic M/G/1 workload on one
//! bottleneck link and write records.csv and summary.json (docs/simulator.md).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::ValueEnum;
use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use sojourn_config::{from_optional_text, from_text};
use sojourn_sched::{AdmissionSpec, Bands, Order, PolicyKind, Scheduler};
use sojourn_sys::clock::thread_cpu_time;

use crate::fluid::{simulate, FluidPolicy, Job, Served};
use crate::output::{outcomes, write_records, Outcomes};
use crate::quantum::{Quantum, QuantumConfig, SlotTimes};
use crate::trace::{load_trace, TraceRow};
use crate::workload::{generate, Extent, LoadProfile, SizeModel};

/// What `sim --policy` simulates: one of the server's scheduling policies
/// (`sojourn_sched::PolicyKind`, by the names serve takes; `ps` is `fair`), or a fluid
/// model the server does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimPolicy {
    Server(PolicyKind),
    /// First come, first served.
    Fcfs,
    /// Strict priority among size bands by remaining bytes, PS inside a band (000 §3).
    Bands,
}

impl FromStr for SimPolicy {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "fcfs" => Ok(SimPolicy::Fcfs),
            "bands" => Ok(SimPolicy::Bands),
            "ps" => Ok(SimPolicy::Server(PolicyKind::Fair)),
            other => other.parse().map(SimPolicy::Server).map_err(|err| format!("{err}, ps (= fair), fcfs or bands")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
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
    /// Read the options from a TOML file instead, each long option a key (kebab-case:
    /// `link = "10Mbit"`, `write-concurrency = 1`); options after FILE replace the file's.
    #[arg(long, num_args = 1.., allow_hyphen_values = true, value_names = ["FILE", "OPTIONS"], conflicts_with = "SimOptions")]
    pub config: Vec<std::ffi::OsString>,
    /// None only with --config (the two conflict): `link` is required, so the command
    /// line's options cannot be built from the file's words.
    #[command(flatten)]
    pub options: Option<SimOptions>,
}

/// The options of `sim`, on the command line or as the keys of its `--config` file.
#[derive(Debug, clap::Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SimOptions {
    /// Bottleneck rate in bits per second: NUMBER[k|m|g][bit], e.g. 10Mbit, 10M, 1.5gbit, 8 (k, m, g are powers of 1000; docs/formats.md "Rates").
    // Not `required_unless_present = "config"`: clap's derive makes a field without a
    // default required, which that contradicts (its debug assertion); --config conflicts
    // with these options instead, and a command line without --link is refused for it.
    #[arg(long, value_parser = parse_rate, required = false)]
    #[serde(deserialize_with = "rate")]
    pub link: f64,
    /// Scheduling policy: a server policy (fair, srpt, las; ps is fair), or the fluid
    /// models fcfs and bands.
    #[arg(long, default_value = "ps")]
    #[serde(default = "processor_sharing", deserialize_with = "from_text")]
    pub policy: SimPolicy,
    /// Size cutoffs of the bands policy, as for `serve --kernel-bands` (000 §3.2).
    #[arg(long, default_value = "1K,2K,5K,50K")]
    #[serde(default, deserialize_with = "from_text")]
    pub bands: Bands,
    /// Simulate the server's scheduler with this write quantum in bytes (e.g. 32K)
    /// instead of the fluid policy; --policy must then be ps/fair, srpt or las.
    #[arg(long, value_parser = sojourn_sched::bands::parse_bytes)]
    #[serde(default, deserialize_with = "bytes")]
    pub quantum: Option<u64>,
    /// Responses that may be blocked with data in the kernel at once (004 §3.3), as
    /// `serve --write-concurrency`; default unlimited.
    #[arg(long, requires = "quantum")]
    #[serde(default)]
    pub write_concurrency: Option<usize>,
    /// Only responses with at least this many bytes left need a slot, as
    /// `serve --write-concurrency-from` (e.g. 50K); needs --policy srpt.
    #[arg(long, requires = "write_concurrency", value_parser = sojourn_sched::bands::parse_bytes)]
    #[serde(default, deserialize_with = "bytes")]
    pub write_concurrency_from: Option<u64>,
    /// Unsent bytes up to which a socket takes a write, as `serve --notsent-lowat`
    /// (TCP_NOTSENT_LOWAT: a write is taken in part up to the mark, and a socket at the
    /// mark turns writable below half of it); default (and 0, as in Linux) unlimited.
    #[arg(long, requires = "quantum", value_parser = sojourn_sched::bands::parse_bytes)]
    #[serde(default, deserialize_with = "bytes")]
    pub kernel_buffer: Option<u64>,
    /// Bytes a write may take past --kernel-buffer, as Linux does: `tcp_sendmsg` checks the
    /// mark only before it starts a new segment buffer, which it then fills (at least two
    /// segments at a shared bottleneck's per-flow rates, e.g. 2896 for 1448-byte segments);
    /// default 0, the model stops at the mark (docs/simulator.md).
    #[arg(long, requires = "kernel_buffer", value_parser = sojourn_sched::bands::parse_bytes)]
    #[serde(default, deserialize_with = "bytes")]
    pub kernel_overshoot: Option<u64>,
    /// Refuse requests as `serve --admission` does, NAME[:KEY=VALUE,...] (docs/server.md);
    /// refused jobs are records of outcome `refused`. The size policy predicts in the
    /// scheduler's order and needs `rate=` (e.g. the --link rate).
    #[arg(long, requires = "quantum", value_parser = parse_admission)]
    #[serde(default, deserialize_with = "from_optional_text")]
    pub admission: Option<AdmissionSpec>,
    /// Trace to replay (arrival_s, client, path, size).
    #[arg(long, conflicts_with_all = ["sizes", "rho", "profile"])]
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Synthetic size distribution.
    #[arg(long, value_enum, required_unless_present_any = ["trace", "config"])]
    #[serde(default)]
    pub sizes: Option<SizesArg>,
    /// Mean size in bytes (exp; bpareto when --k is not given).
    #[arg(long)]
    #[serde(default)]
    pub mean: Option<f64>,
    /// Bounded Pareto lower bound in bytes.
    #[arg(long)]
    #[serde(default)]
    pub k: Option<f64>,
    /// Bounded Pareto upper bound in bytes.
    #[arg(long, default_value_t = defaults::p())]
    #[serde(default = "defaults::p")]
    pub p: f64,
    /// Bounded Pareto tail index.
    #[arg(long, default_value_t = defaults::alpha())]
    #[serde(default = "defaults::alpha")]
    pub alpha: f64,
    /// Constant offered load (offered bytes/s over link bytes/s).
    #[arg(long, conflicts_with = "profile")]
    #[serde(default)]
    pub rho: Option<f64>,
    /// Transient overload workload of 000 Table 1, W1..W10.
    #[arg(long)]
    #[serde(default)]
    pub profile: Option<String>,
    /// Multiplies the periods of --profile (0.1 makes W1 2.5 s low, 2.5 s high).
    #[arg(long, default_value_t = defaults::time_scale())]
    #[serde(default = "defaults::time_scale")]
    pub time_scale: f64,
    /// Number of synthetic jobs.
    #[arg(long, conflicts_with = "duration")]
    #[serde(default)]
    pub jobs: Option<usize>,
    /// Seconds of synthetic arrivals.
    #[arg(long)]
    #[serde(default)]
    pub duration: Option<f64>,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = defaults::seed())]
    #[serde(default = "defaults::seed")]
    pub seed: u64,
    /// Directory for records.csv and summary.json (created if missing).
    #[arg(long)]
    #[serde(default)]
    pub out: Option<PathBuf>,
    /// Write only summary.json.
    #[arg(long)]
    #[serde(default)]
    pub no_records: bool,
    /// Equal-count size bins in the summary's by_size table.
    #[arg(long, default_value_t = defaults::size_bins())]
    #[serde(default = "defaults::size_bins")]
    pub size_bins: usize,
    /// Print the simulation's speed (jobs per second, excluding input and output) to standard error.
    #[arg(long)]
    #[serde(default)]
    pub timing: bool,
}

/// Defaults of options, one value for the command line and the `--config` file.
mod defaults {
    /// Bounded Pareto's upper bound, 10 GB.
    pub fn p() -> f64 {
        1e10
    }
    pub fn alpha() -> f64 {
        1.1
    }
    pub fn time_scale() -> f64 {
        1.0
    }
    pub fn seed() -> u64 {
        1
    }
    pub fn size_bins() -> usize {
        20
    }
}

fn processor_sharing() -> SimPolicy {
    SimPolicy::Server(PolicyKind::Fair)
}

/// A `link` key: a rate as the command line writes it, or a number of bits per second.
fn rate<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    parse_rate(&sojourn_config::text(deserializer)?).map_err(D::Error::custom)
}

/// A byte count key (`quantum = "32K"` or `32768`).
fn bytes<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let text = sojourn_config::text(deserializer)?;
    sojourn_sched::bands::parse_bytes(&text).map(Some).map_err(|err| D::Error::custom(format!("{text:?}: {err}")))
}

impl SimArgs {
    /// The options: the command line's, or the `--config` file's with the options after it.
    pub fn options(self) -> anyhow::Result<SimOptions> {
        if let Some(options) = self.options {
            return Ok(options);
        }
        let options: SimOptions = sojourn_config::file_then_options(&self.config, "sojourn-engine sim")?;
        options.check_combinations()?;
        Ok(options)
    }
}

impl SimOptions {
    /// What the command line's `requires` and `conflicts_with` say, for options from a file.
    fn check_combinations(&self) -> anyhow::Result<()> {
        let needs_quantum = [
            ("write-concurrency", self.write_concurrency.is_some()),
            ("kernel-buffer", self.kernel_buffer.is_some()),
            ("admission", self.admission.is_some()),
        ];
        if let Some((name, _)) = needs_quantum.iter().find(|(_, given)| *given && self.quantum.is_none()) {
            bail!("{name} needs quantum");
        }
        if self.write_concurrency_from.is_some() && self.write_concurrency.is_none() {
            bail!("write-concurrency-from needs write-concurrency");
        }
        if self.kernel_overshoot.is_some() && self.kernel_buffer.is_none() {
            bail!("kernel-overshoot needs kernel-buffer");
        }
        let contradictions = [
            ("trace", "sizes", self.trace.is_some() && self.sizes.is_some()),
            ("trace", "rho", self.trace.is_some() && self.rho.is_some()),
            ("trace", "profile", self.trace.is_some() && self.profile.is_some()),
            ("rho", "profile", self.rho.is_some() && self.profile.is_some()),
            ("jobs", "duration", self.jobs.is_some() && self.duration.is_some()),
        ];
        if let Some((one, other, _)) = contradictions.iter().find(|(_, _, both)| *both) {
            bail!("{one} and {other} contradict: give one");
        }
        Ok(())
    }
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
    kernel_overshoot: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    admission: Option<&'static str>,
    bands: Option<Vec<u64>>,
    link_bps: f64,
    source: String,
    /// The synthetic load over time (absent for a trace).
    profile: Option<LoadProfile>,
    seed: Option<u64>,
    quanta: Option<u64>,
    /// The write slots' measures per second of simulated time (quantum mode with
    /// --write-concurrency; the server's `sojourn_write_slots_full_seconds_total` and
    /// `sojourn_write_blocked_seconds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    slots_per_second: Option<SlotTimes>,
}

#[derive(Serialize)]
struct Summary {
    #[serde(flatten)]
    run: RunInfo,
    #[serde(flatten)]
    outcomes: Outcomes,
}

fn size_model(args: &SimOptions, kind: SizesArg) -> anyhow::Result<SizeModel> {
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

fn input(args: &SimOptions, rate: f64) -> anyhow::Result<Input> {
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
    let args = args.options()?;
    let rate = args.link / 8.0;
    if args.quantum == Some(0) {
        bail!("--quantum 0: the write quantum must be at least 1 byte (e.g. 32K)");
    }
    if args.write_concurrency == Some(0) {
        bail!("--write-concurrency 0: at least one response must be allowed to write (omit it for unlimited)");
    }
    let quantum_policy = match (args.quantum, args.policy) {
        (None, _) => None,
        (Some(_), SimPolicy::Server(kind)) => Some(kind),
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
    let mut slots_per_second = None;
    let mut refused = None;
    let served: Vec<Served> = match (quantum_policy, args.quantum) {
        (Some(policy), Some(quantum)) => {
            let config = QuantumConfig {
                policy,
                quantum,
                write_concurrency: args.write_concurrency,
                write_concurrency_from: args.write_concurrency_from,
                kernel_buffer: args.kernel_buffer,
                kernel_overshoot: args.kernel_overshoot.unwrap_or(0),
            };
            let mut scheduler = Quantum::new(config);
            if let Some(admission) = &args.admission {
                // As the server's Settings::order: only SRPT orders by bytes left here (no kernel bands).
                let order = if policy == PolicyKind::Srpt { Order::ShortestFirst } else { Order::Shared };
                scheduler = scheduler.with_admission(admission.build(order));
            }
            let served = simulate(&mut scheduler, &jobs, rate);
            quanta = Some(scheduler.quanta());
            if args.write_concurrency.is_some() {
                slots_per_second = Some(scheduler.slot_times().clone());
            }
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
            kernel_overshoot: args.kernel_overshoot,
            admission: args.admission.as_ref().map(|a| a.name()),
            bands: (args.policy == SimPolicy::Bands).then(|| args.bands.cutoffs().to_vec()),
            link_bps: args.link,
            source,
            profile,
            seed: rows.is_none().then_some(args.seed),
            quanta,
            slots_per_second,
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

fn fluid_policy(args: &SimOptions) -> FluidPolicy {
    match args.policy {
        SimPolicy::Server(PolicyKind::Fair) => FluidPolicy::Ps,
        SimPolicy::Server(PolicyKind::Srpt) => FluidPolicy::Srpt,
        SimPolicy::Server(PolicyKind::Las) => FluidPolicy::Las,
        SimPolicy::Fcfs => FluidPolicy::Fcfs,
        SimPolicy::Bands => FluidPolicy::Bands(args.bands.clone()),
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

    /// `sim WORDS...` as the engine parses it, with `toml` as the file `FILE` in WORDS names.
    fn sim(toml: &str, words: &[&str]) -> anyhow::Result<SimOptions> {
        #[derive(clap::Parser)]
        struct Sim {
            #[command(flatten)]
            args: SimArgs,
        }
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("sojourn-sim-config-{}-{n}.toml", std::process::id()));
        std::fs::write(&path, toml).unwrap();
        let argv = std::iter::once("sim").chain(words.iter().map(|w| if *w == "FILE" { path.to_str().unwrap() } else { w }));
        let result = <Sim as clap::Parser>::try_parse_from(argv).map_err(anyhow::Error::from).and_then(|sim| sim.args.options());
        std::fs::remove_file(&path).unwrap();
        result
    }

    const FILE: &str = "link = \"10Mbit\"\nsizes = \"surge\"\nrho = 0.9\njobs = 1000\npolicy = \"fair\"\nquantum = \"32K\"\nwrite-concurrency = 1\n";

    #[test]
    fn a_config_file_holds_the_command_lines_options() {
        let options = sim(FILE, &["--config", "FILE"]).unwrap();
        assert_eq!((options.link, options.sizes, options.policy, options.quantum), (1e7, Some(SizesArg::Surge), SimPolicy::Server(PolicyKind::Fair), Some(32_768)));
        assert_eq!((options.seed, options.size_bins, options.bands), (1, 20, Bands::default()), "the command line's defaults");
        let same = sim("link = 10000000\nsizes = \"exp\"\nmean = 5000\nrho = 0.5\nduration = 2\n", &["--config", "FILE"]).unwrap();
        assert_eq!(same.link, 1e7, "a rate may be a number of bit/s");
    }

    #[test]
    fn options_after_the_file_replace_its_keys() {
        let options = sim(FILE, &["--config", "FILE", "--seed", "7", "--policy", "srpt", "--timing"]).unwrap();
        assert_eq!((options.seed, options.policy, options.timing, options.jobs), (7, SimPolicy::Server(PolicyKind::Srpt), true, Some(1000)));
        let err = format!("{:#}", sim(FILE, &["--config", "FILE", "--quantum", "lots"]).unwrap_err());
        assert!(err.contains("--quantum") && err.contains("lots"), "clap's check of the option: {err}");
        let err = format!("{:#}", sim(FILE, &["--seed", "7", "--config", "FILE"]).unwrap_err());
        assert!(err.contains("--config"), "options go after FILE: {err}");
        assert!(sim(FILE, &["--sizes", "surge"]).is_err(), "without --config, --link is required");
    }

    #[test]
    fn a_bad_file_is_named_with_its_key() {
        let err = format!("{:#}", sim(&format!("{FILE}size_bins = 3\n"), &["--config", "FILE"]).unwrap_err());
        assert!(err.contains("unknown field `size_bins`") && err.contains("--config"), "{err}");
        let err = format!("{:#}", sim(&FILE.replace("quantum = \"32K\"\n", ""), &["--config", "FILE"]).unwrap_err());
        assert!(err.contains("write-concurrency needs quantum"), "{err}");
        let err = format!("{:#}", sim(&format!("{FILE}duration = 3\n"), &["--config", "FILE"]).unwrap_err());
        assert!(err.contains("jobs and duration contradict"), "{err}");
        let err = format!("{:#}", sim(&FILE.replace("10Mbit", "fast"), &["--config", "FILE"]).unwrap_err());
        assert!(err.contains("fast") && err.contains("10mbit"), "{err}");
    }
}
