//! `sojourn-engine load`: options, validation (before anything is sent) and the modes.
//!
//! Modes share one event loop and one record format (docs/formats.md):
//! `open` (trace replay or Poisson), `closed` (user equivalents with think time),
//! `capacity` (C back-to-back connections, swept), `sessions` (003 §2 session model).

use crate::event_loop::{EventLoop, LoopConfig, LoopTimes, Progress, RunEnd};
use crate::record::{merge_parts, write_summary, Recorder, Tally};
use crate::session::SessionModel;
use crate::think::ThinkTime;
use crate::workload::{ClosedUsers, OpenPart, Part, PoissonOpen, Sessions, TraceReplay, Workload};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde::Deserialize;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::net::{IpAddr, ToSocketAddrs};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use sojourn_sys::clock;
use sojourn_sys::signals::{self, SecondSignal};

/// Drive an HTTP/1.1 server from a trace or a load model and record every request.
///
/// Writes OUT/records.csv (one row per attempt), OUT/intervals.csv (one row per second) and
/// OUT/summary.json; see docs/formats.md and docs/load.md.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, arg_required_else_help = true)]
pub struct LoadArgs {
    /// Read the mode and its options from a TOML file instead: `mode = "open"` and every
    /// option of that mode as a key of the same name (e.g. `requests-per-conn = 5`);
    /// options after FILE override the file's (docs/load.md "Config file").
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// With --config: options that override the file's keys.
    #[arg(requires = "config", trailing_var_arg = true, allow_hyphen_values = true, value_name = "OPTIONS")]
    overrides: Vec<std::ffi::OsString>,
    #[command(subcommand)]
    mode: Option<Mode>,
}

/// A `--config` file: the mode, as the subcommand is spelled, and that mode's options.
#[derive(Debug, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
enum ModeFile {
    Open(OpenArgs),
    Closed(ClosedArgs),
    Capacity(CapacityArgs),
    Sessions(SessionsArgs),
}

impl LoadArgs {
    /// The mode to run: the subcommand given, or the config file's with the options
    /// after it in place of the file's.
    fn mode(self) -> anyhow::Result<Mode> {
        let Some(path) = self.config else {
            return self.mode.context("a mode (open, closed, capacity, sessions) or --config FILE is needed");
        };
        use sojourn_config::override_with;
        let (name, words) = (format!("sojourn-engine load --config {}", path.display()), &self.overrides);
        Ok(match sojourn_config::read::<ModeFile>("--config", &path)? {
            ModeFile::Open(args) => Mode::Open(override_with(args, &name, words)?),
            ModeFile::Closed(args) => Mode::Closed(override_with(args, &name, words)?),
            ModeFile::Capacity(args) => Mode::Capacity(override_with(args, &name, words)?),
            ModeFile::Sessions(args) => Mode::Sessions(override_with(args, &name, words)?),
        })
    }
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Open loop: replay a trace (or Poisson arrivals); requests leave on schedule whatever is outstanding (000 §2.4).
    Open(OpenArgs),
    /// Closed loop: N user equivalents, request -> response -> think time -> next (002 §3.3, 004 §4.2).
    Closed(ClosedArgs),
    /// Capacity probe: C connections issuing back-to-back requests, swept over C; capacity = max throughput (001 §2.1, 002 §4.4).
    Capacity(CapacityArgs),
    /// Sessions: Poisson session arrivals (at a constant rate or one that follows the model's
    /// arrival-profile), or closed-loop users, walking a Markov chain over URL groups (003 §2).
    Sessions(SessionsArgs),
    /// Join the output directories of one run's processes (`--process-part I/K`) into OUT:
    /// records.csv in completion order, intervals.csv summed per second, and summary.json
    /// with exact counts and percentiles (each part's tally.json), as one process would write.
    Merge(MergeArgs),
}

#[derive(Debug, Args)]
struct MergeArgs {
    /// Where the run's merged files go.
    #[arg(long, short = 'o')]
    out: PathBuf,
    /// The processes' output directories, each with records.csv, intervals.csv, summary.json and tally.json.
    #[arg(required = true, num_args = 1..)]
    parts: Vec<PathBuf>,
}

/// The options every mode has. With `--config`, each is the key of the same name
/// (kebab-case); a default is the same in the file as on the command line.
#[derive(Debug, Args, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Common {
    /// Server to load, HOST:PORT.
    #[arg(long)]
    target: String,
    /// Host header (default: the --target text).
    #[arg(long)]
    #[serde(default)]
    host: Option<String>,
    /// Output directory (created; files in it are replaced).
    #[arg(long, short = 'o')]
    out: PathBuf,
    /// Local addresses to bind, client c uses the (c mod N)-th (comma separated).
    #[arg(long, value_delimiter = ',')]
    #[serde(default)]
    source_addrs: Vec<IpAddr>,
    /// Requests per persistent connection, 0 = unlimited (000 Table 2 (E); 1 = no persistence).
    #[arg(long, default_value_t = defaults::requests_per_conn())]
    #[serde(default = "defaults::requests_per_conn")]
    requests_per_conn: u32,
    /// Most connections one client holds open at once.
    #[arg(long, default_value_t = defaults::conns_per_client())]
    #[serde(default = "defaults::conns_per_client")]
    conns_per_client: u32,
    /// User abort: seconds after which an unfinished attempt is aborted and retried on a new connection (000 Table 2 (H)).
    #[arg(long)]
    #[serde(default)]
    abort_after: Option<f64>,
    /// Retries after an abort before the request is given up (needs --abort-after).
    #[arg(long, default_value_t = 0)]
    #[serde(default)]
    retries: u32,
    /// Hard limit per attempt in seconds (outcome `timeout`).
    #[arg(long, default_value_t = defaults::timeout())]
    #[serde(default = "defaults::timeout")]
    timeout: f64,
    /// Check bodies against the deterministic docroot content rule (docs/formats.md).
    #[arg(long)]
    #[serde(default)]
    verify_content: bool,
    /// No progress line on stderr.
    #[arg(long)]
    #[serde(default)]
    quiet: bool,
    /// Event-loop threads (as wrk's -t): clients are split by client mod N, each thread owns
    /// its clients' connections; records are merged in order of completion. Not for sessions.
    #[arg(long, default_value_t = defaults::one(), value_parser = clap::value_parser!(u32).range(THREADS))]
    #[serde(default = "defaults::one")]
    threads: u32,
    /// Seed for arrivals, path choice and think times.
    #[arg(long, default_value_t = defaults::seed())]
    #[serde(default = "defaults::seed")]
    seed: u64,
    /// Run only part I of K of the clients (`I/K`: those with client mod K = I), with the
    /// run's own request and connection ids: K processes, each with an open-file limit of
    /// its own, together run the whole load (the runner's workload.load_processes; root
    /// cannot raise RLIMIT_NOFILE on every machine). Not for sessions.
    #[arg(long)]
    #[serde(default, deserialize_with = "sojourn_config::from_optional_text")]
    process_part: Option<Part>,
}

/// Defaults of options, one value for the command line and the `--config` file.
mod defaults {
    pub fn one() -> u32 {
        1
    }
    pub fn seed() -> u64 {
        1
    }
    /// 1 = no persistence (000 Table 2 (E)).
    pub fn requests_per_conn() -> u32 {
        1
    }
    pub fn conns_per_client() -> u32 {
        2
    }
    pub fn timeout() -> f64 {
        60.0
    }
}

/// Event-loop threads a run may have (`--threads`).
const THREADS: std::ops::RangeInclusive<i64> = 1..=256;

#[derive(Debug, Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct OpenArgs {
    #[command(flatten)]
    #[serde(flatten)]
    common: Common,
    /// Trace to replay (docs/formats.md `trace.csv`).
    #[arg(long)]
    #[serde(default)]
    trace: Option<PathBuf>,
    /// Trace time-scale factor: 2 replays twice as fast.
    #[arg(long)]
    #[serde(default)]
    time_scale: Option<f64>,
    /// Instead of a trace: Poisson arrivals at this many requests per second.
    #[arg(long)]
    #[serde(default)]
    rate: Option<f64>,
    /// Seconds of arrivals (Poisson: required; trace: replay only this much of the scaled trace).
    #[arg(long)]
    #[serde(default)]
    duration: Option<f64>,
    /// Paths for Poisson arrivals (repeatable, chosen uniformly).
    #[arg(long = "path")]
    #[serde(default, rename = "path")]
    paths: Vec<String>,
    /// After the last scheduled request, wait at most this many seconds for answers: then
    /// whatever is outstanding is `interrupted` and the run ends, as a closed run's does (000 §4
    /// counts only requests that finished before the final one arrived: 0). Without it the
    /// run ends when every request has its outcome (at most --timeout after the last).
    #[arg(long)]
    #[serde(default)]
    drain: Option<f64>,
    /// Poisson arrivals are spread round robin over this many clients.
    #[arg(long, default_value_t = defaults::one())]
    #[serde(default = "defaults::one")]
    clients: u32,
}

#[derive(Debug, Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ClosedArgs {
    #[command(flatten)]
    #[serde(flatten)]
    common: Common,
    /// Number of user equivalents (each is one client).
    #[arg(long)]
    users: u32,
    /// Think time after each response: 0, const:S, exp:MEAN_S or pareto:ALPHA:MIN_S.
    #[arg(long, default_value = "0")]
    #[serde(default = "no_think_time", deserialize_with = "sojourn_config::from_text")]
    think_time: ThinkTime,
    /// Seconds to run; outstanding requests at the end are `interrupted`.
    #[arg(long)]
    duration: f64,
    #[command(flatten)]
    #[serde(flatten)]
    start: StartSpread,
    #[command(flatten)]
    #[serde(flatten)]
    paths: PathChoice,
}

fn no_think_time() -> ThinkTime {
    ThinkTime::None
}

/// The paths requested in closed and capacity modes, each draw uniform over the list.
#[derive(Debug, Args, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct PathChoice {
    /// Paths to request (repeatable, chosen uniformly).
    #[arg(long = "path", required_unless_present = "paths_file")]
    #[serde(default, rename = "path")]
    paths: Vec<String>,
    /// A file of paths, one per line, added to --path; a path listed k times is drawn k
    /// times as often, so a trace's path column gives its popularity (002 §3.3, 004 Table 1).
    #[arg(long)]
    #[serde(default)]
    paths_file: Option<PathBuf>,
}

impl PathChoice {
    fn load(&self) -> anyhow::Result<Vec<String>> {
        let mut paths = self.paths.clone();
        if let Some(file) = &self.paths_file {
            let text = std::fs::read_to_string(file).with_context(|| format!("--paths-file {}", file.display()))?;
            paths.extend(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from));
            if paths.is_empty() {
                bail!("--paths-file {}: no paths in it (one per line)", file.display());
            }
        }
        if paths.is_empty() {
            bail!("no paths to request: give --path or --paths-file");
        }
        check_paths(&paths)?;
        Ok(paths)
    }
}

#[derive(Debug, Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct CapacityArgs {
    #[command(flatten)]
    #[serde(flatten)]
    common: Common,
    /// Connection counts to sweep: a comma-separated list whose items are counts or A..B
    /// ranges of powers of two, e.g. 8,16,24 or 8..4096 (8, 16, ..., 4096).
    #[arg(long, value_parser = parse_levels)]
    #[serde(deserialize_with = "sojourn_config::from_text")]
    connections: Levels,
    /// Seconds per level.
    #[arg(long)]
    duration: f64,
    #[command(flatten)]
    #[serde(flatten)]
    start: StartSpread,
    #[command(flatten)]
    #[serde(flatten)]
    paths: PathChoice,
}

#[derive(Debug, Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct SessionsArgs {
    #[command(flatten)]
    #[serde(flatten)]
    common: Common,
    /// Session model (TOML, docs/formats.md "Session model").
    #[arg(long)]
    model: PathBuf,
    /// Seconds of session arrivals; started sessions run to their end.
    #[arg(long)]
    duration: f64,
}

/// Connection counts of a capacity sweep, in the order given.
#[derive(Debug, Clone, PartialEq)]
struct Levels(Vec<u32>);

impl std::str::FromStr for Levels {
    type Err = String;
    fn from_str(text: &str) -> Result<Levels, String> {
        parse_levels(text)
    }
}

fn parse_levels(text: &str) -> Result<Levels, String> {
    let count = |item: &str| -> Result<u32, String> {
        match item.trim().parse::<u32>() {
            Ok(0) | Err(_) => Err(format!("--connections {item}: each level must be a positive whole number (e.g. 8,16 or 8..4096)")),
            Ok(n) => Ok(n),
        }
    };
    let mut levels = Vec::new();
    for item in text.split(',') {
        match item.split_once("..") {
            Some((low, high)) => {
                let (mut level, high) = (count(low)?, count(high)?);
                if level > high {
                    return Err(format!("--connections {item}: the range runs from low to high"));
                }
                while level <= high {
                    levels.push(level);
                    level = level.saturating_mul(2);
                    if level == u32::MAX {
                        break;
                    }
                }
            }
            None => levels.push(count(item)?),
        }
    }
    Ok(Levels(levels))
}

fn positive(name: &str, value: f64) -> anyhow::Result<u64> {
    if !(value.is_finite() && value > 0.0) {
        bail!("{name} {value}: must be a positive number of seconds");
    }
    Ok((value * 1e9).round() as u64)
}

/// When closed users (each capacity level's) issue their first requests.
#[derive(Debug, Args, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct StartSpread {
    /// Seconds over which the users start, one after another at equal intervals (0: all at
    /// once). Users started together with no think time move in step, a wave per round trip,
    /// when the round trip dominates their cycle (docs/load.md).
    #[arg(long, default_value_t = 0.0)]
    #[serde(default)]
    start_spread: f64,
}

impl StartSpread {
    /// The spread in ns: at least 0 and below `duration` (ns), so every user starts.
    fn ns(&self, duration: u64) -> anyhow::Result<u64> {
        let value = self.start_spread;
        if !(value.is_finite() && value >= 0.0 && value * 1e9 < duration as f64) {
            bail!("--start-spread {value}: must be at least 0 and below --duration ({} s)", duration as f64 / 1e9);
        }
        Ok((value * 1e9).round() as u64)
    }
}

fn check_paths(paths: &[String]) -> anyhow::Result<()> {
    if let Some(bad) = paths.iter().find(|p| !p.starts_with('/') || p.contains(char::is_whitespace)) {
        bail!("--path {bad:?}: must start with '/' and contain no whitespace (percent-encode it)");
    }
    Ok(())
}

impl Common {
    /// The event loop configuration, or an error naming the contradictory or impossible options.
    fn loop_config(&self, stop_at: Option<u64>) -> anyhow::Result<LoopConfig> {
        let target = self
            .target
            .to_socket_addrs()
            .with_context(|| format!("--target {:?}: expected HOST:PORT", self.target))?
            .next()
            .with_context(|| format!("--target {:?} resolves to no address", self.target))?;
        if let Some(mismatch) = self.source_addrs.iter().find(|a| a.is_ipv4() != target.is_ipv4()) {
            bail!("--source-addrs {mismatch} is not of the same address family as --target {target}");
        }
        if !THREADS.contains(&i64::from(self.threads)) {
            bail!("--threads {}: expected {}..={}", self.threads, THREADS.start(), THREADS.end());
        }
        if self.conns_per_client == 0 {
            bail!("--conns-per-client 0: a client needs at least one connection");
        }
        let timeout = positive("--timeout", self.timeout)?;
        let abort_after = self.abort_after.map(|s| positive("--abort-after", s)).transpose()?;
        if self.retries > 0 && abort_after.is_none() {
            bail!("--retries {} needs --abort-after (retries follow a user abort)", self.retries);
        }
        if abort_after.is_some_and(|abort| abort >= timeout) {
            bail!("--abort-after {} must be below --timeout {} (else it never fires)", self.abort_after.unwrap_or(0.0), self.timeout);
        }
        Ok(LoopConfig {
            target,
            host_header: self.host.clone().unwrap_or_else(|| self.target.clone()),
            source_addrs: self.source_addrs.clone(),
            max_requests_per_conn: (self.requests_per_conn > 0).then_some(self.requests_per_conn),
            max_conns_per_client: self.conns_per_client,
            abort_after,
            retries: self.retries,
            timeout,
            verify_content: self.verify_content,
            stop_at,
            part: Part::WHOLE,
        })
    }

    fn rng(&self) -> SmallRng {
        SmallRng::seed_from_u64(self.seed)
    }

    /// The random source of one loop's own draws (closed-loop paths and think times); loop 0
    /// draws what a one-loop run draws.
    /// How many processes share the run (`--process-part I/K`: K), for the open files one needs.
    fn processes(&self) -> u64 {
        u64::from(self.process_part.map_or(1, |part| part.count))
    }

    fn rng_of(&self, part: Part) -> SmallRng {
        SmallRng::seed_from_u64(self.seed.wrapping_add(u64::from(part.index)))
    }
}

/// Raise the soft RLIMIT_NOFILE to the hard limit; returns the limit and, if `needed`
/// exceeds it, a warning naming the shortfall.
fn raise_fd_limit(needed: Option<u64>) -> (u64, Option<String>) {
    let available = sojourn_sys::raise_nofile_limit().unwrap_or(0);
    let warning = needed.filter(|&n| n + 32 > available).map(|n| {
        format!("file descriptor limit {available} is below the {n} connections this run may open (+32 spare): expect connect_error EMFILE")
    });
    if let Some(warning) = &warning {
        eprintln!("load: warning: {warning}");
    }
    (available, warning)
}

pub fn run(args: LoadArgs) -> anyhow::Result<()> {
    let mode = args.mode()?;
    // Every request outstanding at the signal gets its final record, every file is written.
    signals::stop_on_sigint_sigterm(SecondSignal::KeepsStopping).context("installing the SIGINT/SIGTERM handlers")?;
    match mode {
        Mode::Open(open) => run_open(open),
        Mode::Closed(closed) => run_closed(closed),
        Mode::Capacity(capacity) => run_capacity(capacity),
        Mode::Sessions(sessions) => run_sessions(sessions),
        Mode::Merge(merge) => run_merge(merge),
    }
}

/// Written beside a process part's summary.json: its [`Tally`], for `load merge`.
const TALLY_FILE: &str = "tally.json";

/// `load merge`: the parts' records and intervals joined (their copies then removed), and
/// one summary.json: the merged tally's statistics, the parts' sums and extremes of the rest,
/// and each part's own summary under `processes`.
fn run_merge(args: MergeArgs) -> anyhow::Result<()> {
    let mut tally = Tally::default();
    let (mut parts, mut unfinished) = (Vec::new(), Vec::new());
    // A process that failed before its first record (bad options) has nothing to join.
    let (recorded, unstarted): (Vec<PathBuf>, Vec<PathBuf>) = args.parts.iter().cloned().partition(|part| part.join("records.csv").is_file());
    if recorded.is_empty() {
        bail!("none of {} has a records.csv", args.parts.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    unfinished.extend(unstarted.iter().map(|part| format!("{} wrote no records (it did not start)", part.display())));
    for part in &recorded {
        // A process that did not finish (killed) left records but no summary: its records
        // are kept, its figures are missing from the summary, which says so.
        let (Ok(summary), Ok(own)) = (std::fs::read_to_string(part.join("summary.json")), std::fs::read_to_string(part.join(TALLY_FILE))) else {
            unfinished.push(format!("{} wrote no summary (it did not finish): its requests are in records.csv, not in these figures", part.display()));
            continue;
        };
        let summary: serde_json::Value = serde_json::from_str(&summary).with_context(|| format!("{}/summary.json", part.display()))?;
        let own: Tally = serde_json::from_str(&own).with_context(|| format!("{}/{TALLY_FILE}", part.display()))?;
        tally.merge(&own);
        parts.push(summary);
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    merge_parts(&args.out, &recorded)?;
    if !parts.is_empty() {
        let mut summary = merged_summary(&tally, parts);
        let warnings = summary["warnings"].as_array_mut().expect("merged_summary lists warnings");
        warnings.extend(unfinished.into_iter().map(serde_json::Value::from));
        write_summary(&args.out, &summary)?;
    }
    for part in &recorded {
        for name in ["records.csv", "intervals.csv"] {
            std::fs::remove_file(part.join(name)).with_context(|| format!("removing {}/{name}, now in {}", part.display(), args.out.display()))?;
        }
    }
    Ok(())
}

/// One run's summary.json from its processes': the first part's keys (mode, target, config,
/// workload), the merged tally's statistics over them, and the loop figures summed (counts,
/// waits) or at their largest (fractions, longest pass); `process_part` becomes `processes`.
fn merged_summary(tally: &Tally, parts: Vec<serde_json::Value>) -> serde_json::Value {
    let numbers = |key: &str| -> Vec<f64> { parts.iter().filter_map(|part| part[key].as_f64()).collect() };
    let mut summary = parts.first().cloned().unwrap_or_else(|| serde_json::json!({}));
    let fields = summary.as_object_mut().expect("a summary is an object");
    fields.remove("process_part");
    fields.extend(tally.summary().as_object().expect("a summary is an object").clone());
    for key in ["connections_opened", "threads", "loop_involuntary_switches"] {
        if parts.iter().all(|part| part[key].is_u64()) {
            fields.insert(key.into(), parts.iter().filter_map(|part| part[key].as_u64()).sum::<u64>().into());
        }
    }
    if parts.iter().all(|part| part["loop_runqueue_wait_s"].is_number()) {
        fields.insert("loop_runqueue_wait_s".into(), numbers("loop_runqueue_wait_s").iter().sum::<f64>().into());
    }
    for key in ["loop_busy_fraction", "loop_longest_pass_s", "loop_worst_second_runqueue_wait_s"] {
        if parts.iter().all(|part| part[key].is_number()) {
            fields.insert(key.into(), serde_json::json!(numbers(key).into_iter().fold(0.0, f64::max)));
        }
    }
    let per_thread: Vec<serde_json::Value> = parts.iter().flat_map(|part| part["loop_busy_fraction_per_thread"].as_array().cloned().unwrap_or_default()).collect();
    fields.insert("loop_busy_fraction_per_thread".into(), per_thread.into());
    fields.insert("interrupted_by_signal".into(), parts.iter().any(|part| part["interrupted_by_signal"] == true).into());
    let mut warnings: Vec<serde_json::Value> = Vec::new();
    for warning in parts.iter().flat_map(|part| part["warnings"].as_array().cloned().unwrap_or_default()) {
        if !warnings.contains(&warning) {
            warnings.push(warning);
        }
    }
    fields.insert("warnings".into(), warnings.into());
    fields.insert("processes".into(), parts.into());
    summary
}

fn run_open(args: OpenArgs) -> anyhow::Result<()> {
    let duration = args.duration.map(|d| positive("--duration", d)).transpose()?;
    let drain = match args.drain {
        Some(seconds) if !(seconds.is_finite() && seconds >= 0.0) => bail!("--drain {seconds}: must be a number of seconds >= 0"),
        drain => drain.map(|seconds| (seconds * 1e9).round() as u64),
    };
    let (clients, last_scheduled);
    // Each loop draws the whole sequence and keeps its clients' requests (workload::OpenPart).
    let workload: Box<dyn Fn(Part) -> anyhow::Result<Box<dyn Workload>> + Sync> = match (&args.trace, args.rate) {
        (Some(_), Some(_)) => bail!("--trace and --rate contradict: replay a trace or generate Poisson arrivals, not both"),
        (None, None) => bail!("open mode needs --trace FILE or --rate R (with --duration and --path)"),
        (Some(trace), None) => {
            if !args.paths.is_empty() {
                bail!("--path contradicts --trace: the trace names the paths");
            }
            let scale = args.time_scale.unwrap_or(1.0);
            if !(scale.is_finite() && scale > 0.0) {
                bail!("--time-scale {scale}: must be a positive factor");
            }
            let open = move || -> anyhow::Result<std::io::BufReader<std::fs::File>> {
                Ok(std::io::BufReader::new(std::fs::File::open(trace).with_context(|| format!("--trace {}", trace.display()))?))
            };
            let shape = TraceReplay::check(open()?, scale, duration).with_context(|| format!("--trace {}", trace.display()))?;
            if shape.requests == 0 {
                bail!("--trace {}: no requests to replay{}", trace.display(), if duration.is_some() { " within --duration" } else { "" });
            }
            (clients, last_scheduled) = (shape.clients as u64, shape.last_scheduled);
            Box::new(move |part| {
                let replay = TraceReplay::new(open()?, scale, duration).with_context(|| format!("--trace {}", trace.display()))?;
                Ok(if part == Part::WHOLE { Box::new(replay) } else { Box::new(OpenPart::new(replay, part)?) })
            })
        }
        (None, Some(rate)) => {
            if args.time_scale.is_some() {
                bail!("--time-scale applies to --trace, not to --rate");
            }
            if !(rate.is_finite() && rate > 0.0) {
                bail!("--rate {rate}: must be a positive number of requests per second");
            }
            let Some(duration) = duration else { bail!("--rate needs --duration SECONDS") };
            if args.paths.is_empty() {
                bail!("--rate needs at least one --path");
            }
            check_paths(&args.paths)?;
            if args.clients == 0 {
                bail!("--clients 0: Poisson arrivals need at least one client");
            }
            (clients, last_scheduled) = (u64::from(args.clients), duration);
            let (paths, client_count, seed) = (&args.paths, args.clients, args.common.seed);
            Box::new(move |part| {
                let poisson = PoissonOpen::new(rate, duration, paths.clone(), client_count, SmallRng::seed_from_u64(seed));
                Ok(if part == Part::WHOLE { Box::new(poisson) } else { Box::new(OpenPart::new(poisson, part)?) })
            })
        }
    };
    let config = args.common.loop_config(drain.map(|drain| last_scheduled + drain))?;
    let needed = Some(clients * u64::from(config.max_conns_per_client) / args.common.processes());
    let (fd_limit, fd_warning) = raise_fd_limit(needed);
    run_one("open", &args.common, config, &*workload, &args.common.out, fd_limit, fd_warning).map(|_| ())
}

fn run_closed(args: ClosedArgs) -> anyhow::Result<()> {
    let duration = positive("--duration", args.duration)?;
    let config = args.common.loop_config(Some(duration))?;
    if args.users == 0 {
        bail!("--users 0: closed mode needs at least one user");
    }
    let spread = args.start.ns(duration)?;
    let paths = args.paths.load()?;
    let (fd_limit, fd_warning) = raise_fd_limit(Some(u64::from(args.users) / args.common.processes()));
    let workload = |part| -> anyhow::Result<Box<dyn Workload>> {
        Ok(Box::new(ClosedUsers::new(args.users, args.think_time, spread, duration, paths.clone(), args.common.rng_of(part), part)))
    };
    run_one("closed", &args.common, config, &workload, &args.common.out, fd_limit, fd_warning).map(|_| ())
}

fn run_capacity(args: CapacityArgs) -> anyhow::Result<()> {
    let duration = positive("--duration", args.duration)?;
    let config = args.common.loop_config(Some(duration))?;
    let spread = args.start.ns(duration)?;
    let paths = args.paths.load()?;
    let most = args.connections.0.iter().copied().max().unwrap_or(1);
    let (fd_limit, fd_warning) = raise_fd_limit(Some(u64::from(most) / args.common.processes()));
    let mut levels = Vec::new();
    for &connections in &args.connections.0 {
        let dir = args.common.out.join(format!("c{connections}"));
        let workload = |part| -> anyhow::Result<Box<dyn Workload>> {
            Ok(Box::new(ClosedUsers::new(connections, ThinkTime::None, spread, duration, paths.clone(), args.common.rng_of(part), part)))
        };
        let summary = run_one("capacity", &args.common, config.clone(), &workload, &dir, fd_limit, fd_warning.clone())?;
        levels.push(serde_json::json!({
            "connections": connections,
            "throughput_rps": summary["throughput_rps"],
            "response_time_mean_s": summary["response_time_s"]["mean"],
            "response_time_p99_s": summary["response_time_s"]["p99"],
            "errors": summary["requests"].as_u64().unwrap_or(0) - summary["outcomes"]["ok"].as_u64().unwrap_or(0),
            "dir": dir.file_name().map(|n| n.to_string_lossy().into_owned()),
        }));
    }
    let best = levels
        .iter()
        .max_by(|a, b| a["throughput_rps"].as_f64().unwrap_or(0.0).total_cmp(&b["throughput_rps"].as_f64().unwrap_or(0.0)))
        .cloned()
        .expect("at least one level");
    let result = serde_json::json!({
        "capacity_rps": best["throughput_rps"],
        "at_connections": best["connections"],
        "levels": levels,
    });
    let path = args.common.out.join("capacity.json");
    std::fs::write(&path, serde_json::to_string_pretty(&result)? + "\n").with_context(|| format!("writing {}", path.display()))?;
    println!("capacity {:.0} requests/s at {} connections ({})", best["throughput_rps"].as_f64().unwrap_or(0.0), best["connections"], path.display());
    Ok(())
}

fn run_sessions(args: SessionsArgs) -> anyhow::Result<()> {
    let model = SessionModel::load(&args.model)?;
    if args.common.abort_after.is_some() || args.common.retries > 0 {
        bail!("--abort-after/--retries contradict session mode: the model's delay-bound-s aborts a request and its session (003 §2)");
    }
    let duration = positive("--duration", args.duration)?;
    let mut config = args.common.loop_config(None)?;
    let longest = positive("delay-bound-s", model.longest_bound_s())?;
    if longest >= config.timeout {
        bail!("delay bound {} s (the longest of the model's) must be below --timeout {}", model.longest_bound_s(), args.common.timeout);
    }
    // Each request carries its class's bound; this one covers requests without a class.
    config.abort_after = Some(positive("delay-bound-s", model.delay_bound_s)?);
    if args.common.threads > 1 {
        bail!("--threads {}: session mode runs on one thread (its users share one session counter and summary)", args.common.threads);
    }
    if let Some(part) = args.common.process_part {
        bail!("--process-part {}/{}: session mode runs in one process (its users share one session counter)", part.index, part.count);
    }
    let (fd_limit, fd_warning) = raise_fd_limit(None);
    let (model, sources) = (std::sync::Mutex::new(Some(model)), &args.common.source_addrs);
    let workload = |_part| -> anyhow::Result<Box<dyn Workload>> {
        let model = model.lock().expect("not poisoned").take().expect("one loop");
        Ok(Box::new(Sessions::new(model, duration, sources, args.common.rng())))
    };
    run_one("sessions", &args.common, config, &workload, &args.common.out, fd_limit, fd_warning).map(|_| ())
}

/// Makes the workload of one loop's part of the run.
type WorkloadOf<'a> = dyn Fn(Part) -> anyhow::Result<Box<dyn Workload>> + Sync + 'a;

/// One loop of a run: its own recorder (into `dir`), event loop and workload, times from `start`.
fn run_loop(config: LoopConfig, workload: &WorkloadOf, dir: &Path, start_line: &StartLine, progress: &Progress) -> anyhow::Result<(Tally, RunEnd, serde_json::Value)> {
    // Built before the run's clock starts: a large catalogue's copy (004's paths file) took
    // 6.4 ms, which every request due at 0 counted as lag. A loop that failed here still
    // reaches the start line, so the others are not left waiting for it.
    let prepared = workload(config.part).and_then(|workload| Ok((workload, Recorder::create(dir)?)));
    let start = start_line.wait();
    let (mut workload, mut recorder) = prepared?;
    let end = EventLoop::new(config, &mut recorder, progress)?.run(workload.as_mut(), start)?;
    Ok((recorder.finish(end.now, 0, 0)?, end, workload.summary()))
}

/// The loops' common time origin ([`clock::monotonic_ns`]), taken once every loop has built
/// its workload and files.
struct StartLine {
    ready: std::sync::Barrier,
    start: std::sync::OnceLock<u64>,
}

impl StartLine {
    fn new(loops: usize) -> Self {
        StartLine { ready: std::sync::Barrier::new(loops), start: std::sync::OnceLock::new() }
    }

    fn wait(&self) -> u64 {
        self.ready.wait();
        *self.start.get_or_init(clock::monotonic_ns)
    }
}

/// Prints the progress line once a second, summed over the loops, until `done`.
fn print_progress(progress: &[Progress], done: &std::sync::mpsc::Receiver<()>) {
    let tty = std::io::stderr().is_terminal();
    let mut second = 0;
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(std::time::Duration::from_secs(1)) {
        second += 1;
        let sum = |field: fn(&Progress) -> &std::sync::atomic::AtomicU64| -> u64 { progress.iter().map(|p| field(p).load(Ordering::Relaxed)).sum() };
        eprint!(
            "{}load: {:>5}s issued {} done {} errors {} in flight {} connections {}{}",
            if tty { "\r" } else { "" },
            second,
            sum(|p| &p.issued),
            sum(|p| &p.done),
            sum(|p| &p.errors),
            sum(|p| &p.in_flight),
            sum(|p| &p.connections),
            if tty { "   " } else { "\n" }
        );
    }
}

/// The loops' times as one: the busiest loop's share and longest pass, waits summed.
fn combine_loop_times(ends: &[RunEnd]) -> LoopTimes {
    let total = |f: fn(&LoopTimes) -> Option<f64>| ends.iter().map(|e| f(&e.loop_times)).sum::<Option<f64>>();
    LoopTimes {
        busy_fraction: ends.iter().map(|e| e.loop_times.busy_fraction).fold(0.0, f64::max),
        longest_pass_s: ends.iter().map(|e| e.loop_times.longest_pass_s).fold(0.0, f64::max),
        runqueue_wait_s: total(|t| t.runqueue_wait_s),
        worst_second_runqueue_wait_s: ends.iter().map(|e| e.loop_times.worst_second_runqueue_wait_s).try_fold(0.0, |a: f64, w| w.map(|w| a.max(w))),
        involuntary_switches: ends.iter().map(|e| e.loop_times.involuntary_switches).sum(),
    }
}

/// One run into `dir`: records, intervals, summary, with `--threads` event loops (each
/// writes its files into a part directory, merged when all have ended). Returns the summary.
fn run_one(
    mode: &str,
    common: &Common,
    config: LoopConfig,
    workload: &WorkloadOf,
    dir: &Path,
    fd_limit: u64,
    fd_warning: Option<String>,
) -> anyhow::Result<serde_json::Value> {
    let count = common.threads;
    let process = common.process_part.unwrap_or(Part::WHOLE);
    let parts: Vec<Part> = (0..count).map(|thread| process.thread(thread, count)).collect();
    let part_dir = |part: Part| if count == 1 { dir.to_path_buf() } else { dir.join(format!(".loop-{}", part.index)) };
    let progress: Vec<Progress> = parts.iter().map(|_| Progress::default()).collect();
    let start_line = &StartLine::new(parts.len());
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let results = std::thread::scope(|scope| {
        let loops: Vec<_> = parts
            .iter()
            .zip(&progress)
            .map(|(&part, progress)| {
                let config = LoopConfig { part, ..config.clone() };
                let dir = part_dir(part);
                std::thread::Builder::new()
                    .name(format!("load-loop-{}", part.index))
                    .spawn_scoped(scope, move || run_loop(config, workload, &dir, start_line, progress))
            })
            .collect();
        if !common.quiet {
            let progress = &progress;
            scope.spawn(move || print_progress(progress, &done_rx));
        }
        let results: Vec<anyhow::Result<_>> = loops
            .into_iter()
            .map(|spawned| match spawned {
                Ok(handle) => handle.join().unwrap_or_else(|_| Err(anyhow::anyhow!("an event loop thread panicked"))),
                Err(err) => Err(anyhow::Error::from(err).context("starting an event loop thread")),
            })
            .collect();
        drop(done_tx);
        results
    });
    let mut tally = Tally::default();
    let mut ends = Vec::new();
    let mut workload_summary = serde_json::Value::Null;
    for result in results {
        let (part_tally, end, summary) = result?;
        tally.merge(&part_tally);
        ends.push(end);
        workload_summary = summary;
    }
    if count > 1 {
        let part_dirs: Vec<PathBuf> = parts.iter().map(|&part| part_dir(part)).collect();
        merge_parts(dir, &part_dirs)?;
        for part in &part_dirs {
            std::fs::remove_dir_all(part).with_context(|| format!("removing {}", part.display()))?;
        }
    }
    let times = combine_loop_times(&ends);
    let end = RunEnd {
        interrupted_by_signal: ends.iter().any(|e| e.interrupted_by_signal),
        connections_opened: ends.iter().map(|e| e.connections_opened).sum(),
        now: ends.iter().map(|e| e.now).max().unwrap_or(0),
        loop_times: times,
    };
    let mut warnings: Vec<String> = fd_warning.into_iter().collect();
    let lag_p99 = tally.lag_p99_s();
    if lag_p99 > 1e-3 {
        warnings.push(format!("generator lag p99 {:.3} ms exceeds 1 ms: requests left later than scheduled", lag_p99 * 1e3));
    }
    let times = &end.loop_times;
    if times.busy_fraction > 0.9 {
        warnings.push(format!("the generator was busy {:.0}% of the time: it may be CPU-bound", times.busy_fraction * 100.0));
    }
    if let Some(wait) = times.worst_second_runqueue_wait_s.filter(|&wait| wait > 0.1) {
        warnings.push(format!(
            "the generator's loop thread waited up to {:.0} ms within one second for a CPU (other processes held it): lag from CPU contention",
            wait * 1e3
        ));
    }
    let mut summary = tally.summary();
    let fields = summary.as_object_mut().expect("summary is an object");
    fields.insert("mode".into(), mode.into());
    fields.insert("target".into(), config.target.to_string().into());
    fields.insert("connections_opened".into(), end.connections_opened.into());
    fields.insert("threads".into(), count.into());
    fields.insert("process_part".into(), format!("{}/{}", process.index, process.count).into());
    fields.insert("loop_busy_fraction".into(), times.busy_fraction.into());
    fields.insert("loop_busy_fraction_per_thread".into(), ends.iter().map(|e| e.loop_times.busy_fraction).collect::<Vec<_>>().into());
    fields.insert("loop_longest_pass_s".into(), times.longest_pass_s.into());
    fields.insert("loop_runqueue_wait_s".into(), times.runqueue_wait_s.into());
    fields.insert("loop_worst_second_runqueue_wait_s".into(), times.worst_second_runqueue_wait_s.into());
    fields.insert("loop_involuntary_switches".into(), times.involuntary_switches.into());
    fields.insert("fd_limit".into(), fd_limit.into());
    fields.insert("interrupted_by_signal".into(), end.interrupted_by_signal.into());
    fields.insert("warnings".into(), warnings.clone().into());
    fields.insert("workload".into(), workload_summary);
    fields.insert(
        "config".into(),
        serde_json::json!({
            "requests_per_conn": common.requests_per_conn,
            "conns_per_client": common.conns_per_client,
            "abort_after_s": config.abort_after.map(|ns| ns as f64 / 1e9),
            "retries": common.retries,
            "timeout_s": common.timeout,
            "verify_content": common.verify_content,
            "source_addrs": common.source_addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "seed": common.seed,
        }),
    );
    write_summary(dir, &summary)?;
    if common.process_part.is_some() {
        // What `load merge` adds up exactly across the run's processes.
        let path = dir.join(TALLY_FILE);
        std::fs::write(&path, serde_json::to_vec(&tally)?).with_context(|| format!("writing {}", path.display()))?;
    }
    if !common.quiet {
        eprintln!();
    }
    for warning in &warnings {
        eprintln!("load: warning: {warning}");
    }
    println!(
        "{mode}: {} requests, outcomes {}, {:.1} ok/s, response mean {:.3} ms p99 {:.3} ms, lag p99 {:.3} ms -> {}",
        summary["requests"],
        summary["outcomes"],
        summary["throughput_rps"].as_f64().unwrap_or(0.0),
        summary["response_time_s"]["mean"].as_f64().unwrap_or(0.0) * 1e3,
        summary["response_time_s"]["p99"].as_f64().unwrap_or(0.0) * 1e3,
        lag_p99 * 1e3,
        dir.display()
    );
    if end.interrupted_by_signal {
        bail!("interrupted by a signal (SIGINT/SIGTERM); what was recorded is in {}", dir.display());
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loops_share_an_origin_taken_after_the_last_is_built() {
        let line = StartLine::new(3);
        let built = std::sync::Mutex::new(Vec::new());
        let starts: Vec<u64> = std::thread::scope(|scope| {
            let loops: Vec<_> = (0..3u64)
                .map(|index| {
                    let (line, built) = (&line, &built);
                    scope.spawn(move || {
                        std::thread::sleep(std::time::Duration::from_millis(5 * index));
                        built.lock().unwrap().push(clock::monotonic_ns());
                        line.wait()
                    })
                })
                .collect();
            loops.into_iter().map(|handle| handle.join().unwrap()).collect()
        });
        assert!(starts.iter().all(|&start| start == starts[0]), "{starts:?}");
        let last_built = *built.lock().unwrap().iter().max().unwrap();
        assert!(starts[0] >= last_built, "the origin {} precedes the last loop built at {last_built}", starts[0]);
    }

    #[test]
    fn sweep_levels() {
        assert_eq!(parse_levels("8..64"), Ok(Levels(vec![8, 16, 32, 64])));
        assert_eq!(parse_levels("1,3,8..20"), Ok(Levels(vec![1, 3, 8, 16])));
        for bad in ["0", "4,0", "x", "64..8", "8..", ""] {
            let err = parse_levels(bad).unwrap_err();
            assert!(err.starts_with("--connections"), "{bad}: {err}");
        }
    }

    /// `load --config FILE WORDS...` as the engine parses it.
    fn from_file(toml: &str, words: &[&str]) -> anyhow::Result<Mode> {
        #[derive(clap::Parser)]
        enum Engine {
            Load(LoadArgs),
        }
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("sojourn-load-config-{}-{n}.toml", std::process::id()));
        std::fs::write(&path, toml).unwrap();
        let argv = ["sojourn-engine", "load", "--config", path.to_str().unwrap()].into_iter().chain(words.iter().copied());
        let result = <Engine as clap::Parser>::try_parse_from(argv).map_err(anyhow::Error::from).and_then(|Engine::Load(args)| args.mode());
        std::fs::remove_file(&path).unwrap();
        result
    }

    const OPEN: &str = "mode = \"open\"\ntarget = \"127.0.0.1:8080\"\nout = \"o\"\ntrace = \"t.csv\"\n\
                        source-addrs = [\"10.0.0.1\", \"10.0.0.2\"]\nrequests-per-conn = 5\ntimeout = 2\nquiet = true\n";

    #[test]
    fn a_file_is_its_modes_typed_options_with_the_command_lines_defaults() {
        let Mode::Open(open) = from_file(OPEN, &[]).unwrap() else { panic!("open mode") };
        assert_eq!(open.trace, Some(PathBuf::from("t.csv")));
        assert_eq!(open.common.source_addrs, ["10.0.0.1".parse::<IpAddr>().unwrap(), "10.0.0.2".parse().unwrap()]);
        assert_eq!((open.common.requests_per_conn, open.common.timeout, open.common.quiet), (5, 2.0, true));
        assert_eq!((open.common.conns_per_client, open.common.seed, open.common.threads, open.clients), (2, 1, 1, 1), "defaults as on the command line");
        let closed = "mode = \"closed\"\ntarget = \"h:1\"\nout = \"o\"\nusers = 3\nduration = 9\nthink-time = \"exp:2\"\npath = [\"/a\"]\n";
        let Mode::Closed(closed) = from_file(closed, &[]).unwrap() else { panic!("closed mode") };
        assert_eq!((closed.users, closed.think_time, closed.paths.paths.clone()), (3, ThinkTime::Exponential { mean_s: 2.0 }, vec!["/a".to_string()]));
        let capacity = "mode = \"capacity\"\ntarget = \"h:1\"\nout = \"o\"\nconnections = \"8..32\"\nduration = 1\npaths-file = \"p\"\n";
        let Mode::Capacity(capacity) = from_file(capacity, &[]).unwrap() else { panic!("capacity mode") };
        assert_eq!(capacity.connections, Levels(vec![8, 16, 32]));
    }

    #[test]
    fn options_after_the_file_replace_its_keys() {
        let Mode::Open(open) = from_file(OPEN, &["--seed", "2", "--out", "rerun", "--quiet", "false", "--source-addrs", "10.0.0.9"]).unwrap() else {
            panic!("open mode")
        };
        assert_eq!((open.common.seed, open.common.out, open.common.quiet), (2, PathBuf::from("rerun"), false));
        assert_eq!(open.common.source_addrs, ["10.0.0.9".parse::<IpAddr>().unwrap()], "a list given replaces the file's");
        assert_eq!(open.common.requests_per_conn, 5, "what is not given stays the file's");
        let err = format!("{:#}", from_file(OPEN, &["--threads", "0"]).unwrap_err());
        assert!(err.contains("--threads") && err.contains("0 is not in 1..=256"), "clap's check: {err}");
        let err = format!("{:#}", from_file(OPEN, &["--users", "3"]).unwrap_err());
        assert!(err.contains("unexpected argument '--users'"), "an option of another mode: {err}");
    }

    #[test]
    fn a_bad_file_is_named_with_its_key() {
        let err = format!("{:#}", from_file(&format!("{OPEN}requests_per_conn = 2\n"), &[]).unwrap_err());
        assert!(err.contains("unknown field `requests_per_conn`") && err.contains("--config"), "one key case: {err}");
        let err = format!("{:#}", from_file(&format!("{OPEN}users = 2\n"), &[]).unwrap_err());
        assert!(err.contains("unknown field `users`"), "an option of another mode: {err}");
        assert!(format!("{:#}", from_file("target = \"h:1\"\n", &[]).unwrap_err()).contains("missing field `mode`"));
        let err = format!("{:#}", from_file("mode = \"burst\"\n", &[]).unwrap_err());
        assert!(err.contains("unknown variant `burst`") && err.contains("open"), "{err}");
        let err = format!("{:#}", from_file(&OPEN.replace("timeout = 2", "timeout = \"soon\""), &[]).unwrap_err());
        assert!(err.contains("invalid type") && err.contains("soon"), "{err}");
        assert!(format!("{:#}", from_file("mode = \"open\"\ntrace = \n", &[]).unwrap_err()).contains("--config"));
    }
}
