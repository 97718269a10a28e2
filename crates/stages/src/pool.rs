//! The stage pool: worker threads doing real CPU work for dynamic stage
//! requests, dispatched from per-stage queues by a `sojourn_sched` policy
//! (003 §5.1 Fig. 8: requests are parsed on arrival and queued per stage with
//! their arrival time; the class comes from the client's address, 003 §5.2).
//!
//! The server calls [`StagePool::submit`] with a reply callback (typically
//! sending on a channel and waking its event loop); the callback runs exactly
//! once, on a pool thread or the submitting thread, never while the pool's
//! lock is held, with [`Outcome::Completed`] or [`Outcome::Dropped`] (answer
//! 503). Processing burns the stage's processing time of *thread CPU time*
//! (`CLOCK_THREAD_CPUTIME_ID`), not wall time, so under contention a request
//! takes longer, as CPU-bound scripts do, and the CPU is the bottleneck.
//!
//! Metrics (003 §4.1, §5.2): per stage queue length, completions, late
//! completions (past the class timeout), drops by reason, total queueing and
//! processing time, and the thread CPU time the processing burned (processing
//! over CPU time is how much longer the work took than its CPU: 1 while each
//! worker has a core to itself, the measure of a disturbed run); productivity
//! `c - e` over an interval is the difference of two [`Metrics`] snapshots
//! ([`Metrics::productivity_since`]).

use std::net::IpAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use sojourn_sched::dispatch::{Admission, DispatchConfig, Dispatcher, StageRequest};
use sojourn_sys::clock::thread_cpu_time;

use crate::config::PoolSpec;

/// Why a request was not processed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// `dwfs`: the stage's waiting room was full on arrival (003 §4.2).
    WaitingRoomFull,
    /// `dwfs`: the request could no longer finish by its deadline.
    CannotMeetDeadline,
    /// The pool is shutting down.
    ShuttingDown,
}

impl DropReason {
    pub fn name(self) -> &'static str {
        match self {
            DropReason::WaitingRoomFull => "waiting_room_full",
            DropReason::CannotMeetDeadline => "cannot_meet_deadline",
            DropReason::ShuttingDown => "shutting_down",
        }
    }
}

/// What happened to a submitted request.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Completed {
        queued: Duration,
        processing: Duration,
        /// Result of the CPU work (so it cannot be optimized away); a body may carry it.
        work: u64,
        /// Whether queueing plus processing stayed within the class timeout.
        in_time: bool,
    },
    Dropped { queued: Duration, reason: DropReason },
}

/// The reply callback.
pub type Reply = Box<dyn FnOnce(Outcome) + Send>;

/// [`StagePool::submit`] was given a stage index the pool does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownStage(pub usize);

impl std::fmt::Display for UnknownStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no stage with index {}", self.0)
    }
}

impl std::error::Error for UnknownStage {}

/// Counters of one stage; all cumulative except `queue_length`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StageMetrics {
    pub name: String,
    pub queue_length: usize,
    pub completed: u64,
    /// Completed after the class timeout (counted in `completed` too).
    pub late: u64,
    pub dropped_waiting_room: u64,
    pub dropped_deadline: u64,
    pub queueing_s: f64,
    /// Wall time of the completed requests' processing.
    pub processing_s: f64,
    /// Thread CPU time the completed requests' processing burned.
    pub cpu_s: f64,
    /// The dispatcher's current normalized weight of the stage (static for rr and wfs,
    /// recomputed before every dispatch by dwfs, equal shares otherwise).
    pub weight: f64,
}

/// A Prometheus series: name, type, and how to read it off a stage.
type Series = (&'static str, &'static str, fn(&StageMetrics) -> f64);

/// A snapshot of the pool's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// Seconds since the pool started.
    pub at_s: f64,
    pub stages: Vec<StageMetrics>,
}

impl Metrics {
    /// Requests completed in time (`c`) minus requests aborted (`e`: dropped
    /// or late) since `earlier` (003 §4.1).
    pub fn productivity_since(&self, earlier: &Metrics) -> i64 {
        let sum = |m: &Metrics| -> (i64, i64) {
            m.stages.iter().fold((0, 0), |(c, e), s| {
                let aborted = s.late + s.dropped_waiting_room + s.dropped_deadline;
                (c + (s.completed - s.late) as i64, e + aborted as i64)
            })
        };
        let ((c1, e1), (c0, e0)) = (sum(self), sum(earlier));
        (c1 - c0) - (e1 - e0)
    }

    /// Prometheus text exposition of the counters.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let series: [Series; 9] = [
            ("sojourn_stage_weight", "gauge", |s| s.weight),
            ("sojourn_stage_queue_length", "gauge", |s| s.queue_length as f64),
            ("sojourn_stage_completed_total", "counter", |s| s.completed as f64),
            ("sojourn_stage_late_total", "counter", |s| s.late as f64),
            ("sojourn_stage_dropped_waiting_room_total", "counter", |s| s.dropped_waiting_room as f64),
            ("sojourn_stage_dropped_deadline_total", "counter", |s| s.dropped_deadline as f64),
            ("sojourn_stage_queueing_seconds_total", "counter", |s| s.queueing_s),
            ("sojourn_stage_processing_seconds_total", "counter", |s| s.processing_s),
            ("sojourn_stage_cpu_seconds_total", "counter", |s| s.cpu_s),
        ];
        for (name, kind, value) in series {
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            for stage in &self.stages {
                out.push_str(&format!("{name}{{stage=\"{}\"}} {}\n", stage.name, value(stage)));
            }
        }
        // Not a counter: late and dropped requests make it fall (003 §4.1).
        out.push_str("# TYPE sojourn_stages_productivity gauge\n");
        out.push_str(&format!("sojourn_stages_productivity {}\n", self.productivity_since(&Metrics::default())));
        out
    }
}

struct Job {
    reply: Reply,
    timeout: Duration,
}

struct State {
    dispatcher: Dispatcher,
    /// Replies of queued requests, by request id.
    jobs: std::collections::HashMap<u64, Job>,
    metrics: Vec<StageMetrics>,
    next_id: u64,
    shutdown: bool,
}

struct Shared {
    spec: PoolSpec,
    epoch: Instant,
    state: Mutex<State>,
    work_ready: Condvar,
    /// Wakes the series sampler at shutdown (a separate condvar, so a
    /// `notify_one` meant for a worker never lands on the sampler).
    stopping: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker that panicked mid-update leaves counters at worst slightly
        // off; keep serving rather than poisoning every later request.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
}

/// Worker threads and the per-stage queues.
pub struct StagePool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    sampler: Option<JoinHandle<()>>,
}

impl StagePool {
    pub fn start(spec: PoolSpec) -> anyhow::Result<Self> {
        let dispatch = DispatchConfig {
            service_times: spec.processing.iter().map(Duration::as_secs_f64).collect(),
            class_timeouts: spec.class_timeouts.iter().map(Duration::as_secs_f64).collect(),
            transitions: spec.transitions.clone(),
            weights: spec.weights.clone(),
            stage_order: spec.stage_order,
        };
        let dispatcher = Dispatcher::new(spec.policy, &dispatch).map_err(|e| anyhow::anyhow!("stages: {e}"))?;
        let metrics = spec.stage_names.iter().map(|name| StageMetrics { name: name.clone(), ..StageMetrics::default() }).collect();
        let shared = Arc::new(Shared {
            epoch: Instant::now(),
            state: Mutex::new(State { dispatcher, jobs: Default::default(), metrics, next_id: 0, shutdown: false }),
            work_ready: Condvar::new(),
            stopping: Condvar::new(),
            spec,
        });
        let workers = (0..shared.spec.workers)
            .map(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new().name(format!("stage-worker-{i}")).spawn(move || work(&shared))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sampler = match &shared.spec.series_csv {
            Some(path) => {
                let file = std::fs::File::create(path).map_err(|e| anyhow::anyhow!("stages: series-csv {}: {e}", path.display()))?;
                let shared = Arc::clone(&shared);
                Some(std::thread::Builder::new().name("stage-series".into()).spawn(move || sample(&shared, file))?)
            }
            None => None,
        };
        Ok(StagePool { shared, workers, sampler })
    }

    pub fn spec(&self) -> &PoolSpec {
        &self.shared.spec
    }

    /// Queues a request for stage index `stage` (see [`PoolSpec::stage_index`])
    /// from a client at `client`; `reply` gets the outcome. An unknown stage
    /// index is refused before anything is queued.
    pub fn submit(&self, stage: usize, client: IpAddr, reply: Reply) -> Result<(), UnknownStage> {
        if stage >= self.shared.spec.stage_names.len() {
            return Err(UnknownStage(stage));
        }
        let class = self.shared.spec.class_of(client);
        let timeout = self.shared.spec.class_timeouts[class];
        let mut state = self.shared.lock();
        let reason = if state.shutdown {
            DropReason::ShuttingDown
        } else {
            let id = state.next_id;
            state.next_id += 1;
            let now = self.shared.now_s();
            match state.dispatcher.push(StageRequest { id, stage, class, arrival: now }, now) {
                Admission::Queued => {
                    state.jobs.insert(id, Job { reply, timeout });
                    state.metrics[stage].queue_length += 1;
                    drop(state);
                    self.shared.work_ready.notify_one();
                    return Ok(());
                }
                Admission::Refused(_) => {
                    state.metrics[stage].dropped_waiting_room += 1;
                    DropReason::WaitingRoomFull
                }
            }
        };
        drop(state);
        reply(Outcome::Dropped { queued: Duration::ZERO, reason });
        Ok(())
    }

    pub fn metrics(&self) -> Metrics {
        let state = self.shared.lock();
        let mut stages = state.metrics.clone();
        for (stage, &weight) in stages.iter_mut().zip(state.dispatcher.weights()) {
            stage.weight = weight;
        }
        Metrics { at_s: self.shared.now_s(), stages }
    }
}

impl Drop for StagePool {
    /// Stops the workers after their current request; queued requests are
    /// answered `ShuttingDown`.
    fn drop(&mut self) {
        let orphans: Vec<Job> = {
            let mut state = self.shared.lock();
            state.shutdown = true;
            state.jobs.drain().map(|(_, job)| job).collect()
        };
        self.shared.work_ready.notify_all();
        self.shared.stopping.notify_all();
        for job in orphans {
            (job.reply)(Outcome::Dropped { queued: Duration::ZERO, reason: DropReason::ShuttingDown });
        }
        for worker in self.workers.drain(..).chain(self.sampler.take()) {
            let _ = worker.join();
        }
    }
}

/// Columns of the series CSV, one row per stage per sample.
pub const SERIES_COLUMNS: [&str; 11] = [
    "t_s",
    "stage",
    "queue_length",
    "completed",
    "late",
    "dropped_waiting_room",
    "dropped_deadline",
    "queueing_s",
    "processing_s",
    "cpu_s",
    "weight",
];

/// Writes the counters every `series_interval` until shutdown (and once more then).
fn sample(shared: &Shared, file: std::fs::File) {
    let mut writer = csv::Writer::from_writer(std::io::BufWriter::new(file));
    let mut ok = writer.write_record(SERIES_COLUMNS).is_ok();
    let mut state = shared.lock();
    while ok {
        let stopping = state.shutdown;
        let at = shared.now_s();
        for (m, weight) in state.metrics.iter().zip(state.dispatcher.weights()) {
            let row = [
                format!("{at:.6}"),
                m.name.clone(),
                m.queue_length.to_string(),
                m.completed.to_string(),
                m.late.to_string(),
                m.dropped_waiting_room.to_string(),
                m.dropped_deadline.to_string(),
                format!("{:.6}", m.queueing_s),
                format!("{:.6}", m.processing_s),
                format!("{:.6}", m.cpu_s),
                // The dispatcher's share for the stage now (DWFS recomputes it before each
                // dispatch, 003 §4.2), so the timeout's effect on the weights can be seen.
                format!("{weight:.6}"),
            ];
            ok &= writer.write_record(&row).is_ok();
        }
        drop(state);
        ok &= writer.flush().is_ok();
        if stopping {
            return;
        }
        state = shared.lock();
        let deadline = Instant::now() + shared.spec.series_interval;
        while !state.shutdown {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = shared.stopping.wait_timeout(state, left).map_or_else(|p| p.into_inner().0, |(s, _)| s);
        }
    }
    eprintln!("sojourn-engine: stage series CSV could not be written; sampling stopped");
}

/// A worker: take the dispatcher's choice, burn its CPU time, reply.
fn work(shared: &Shared) {
    loop {
        let mut dropped = Vec::new();
        let next = {
            let mut state = shared.lock();
            loop {
                if state.shutdown {
                    return;
                }
                let now = shared.now_s();
                let mut doomed = Vec::new();
                let next = state.dispatcher.pop(now, &mut doomed);
                for request in doomed {
                    if let Some(job) = state.jobs.remove(&request.id) {
                        let m = &mut state.metrics[request.stage];
                        m.queue_length -= 1;
                        m.dropped_deadline += 1;
                        dropped.push((job, now - request.arrival));
                    }
                }
                if let Some(request) = next {
                    if let Some(job) = state.jobs.remove(&request.id) {
                        state.metrics[request.stage].queue_length -= 1;
                        break Some((request, job, now));
                    }
                }
                if !dropped.is_empty() {
                    break None;
                }
                state = shared.work_ready.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        };
        for (job, queued_s) in dropped {
            (job.reply)(Outcome::Dropped { queued: Duration::from_secs_f64(queued_s), reason: DropReason::CannotMeetDeadline });
        }
        let Some((request, job, started_s)) = next else { continue };
        let started = Instant::now();
        let (work, cpu) = burn_cpu(shared.spec.processing[request.stage], request.id);
        let processing = started.elapsed();
        let queued = Duration::from_secs_f64((started_s - request.arrival).max(0.0));
        let in_time = queued + processing <= job.timeout;
        {
            let mut state = shared.lock();
            let m = &mut state.metrics[request.stage];
            m.completed += 1;
            m.late += u64::from(!in_time);
            m.queueing_s += queued.as_secs_f64();
            m.processing_s += processing.as_secs_f64();
            m.cpu_s += cpu.as_secs_f64();
        }
        (job.reply)(Outcome::Completed { queued, processing, work, in_time });
    }
}

/// Computes (xorshift rounds) until this thread has used `cpu` of CPU time;
/// returns the final state, so the work is observable, and the CPU time used.
pub fn burn_cpu(cpu: Duration, seed: u64) -> (u64, Duration) {
    let start = thread_cpu_time();
    let mut x = seed | 1;
    loop {
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        x = std::hint::black_box(x);
        let used = thread_cpu_time().saturating_sub(start);
        if used >= cpu {
            return (x, used);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ClassConfig, StageConfig, StagesConfig};
    use std::sync::mpsc;

    fn spec(policy: &str, workers: usize, stages: &[f64], timeouts: &[(f64, &str)]) -> PoolSpec {
        StagesConfig {
            policy: policy.into(),
            stage_order: "deadline".into(),
            workers,
            stage: stages.iter().enumerate().map(|(i, ms)| StageConfig { name: format!("s{i}"), processing_ms: *ms }).collect(),
            class: timeouts
                .iter()
                .enumerate()
                .map(|(i, (ms, net))| ClassConfig { name: format!("c{i}"), timeout_ms: *ms, networks: vec![net.to_string()] })
                .collect(),
            transitions: None,
            weights: vec![],
            series_csv: None,
            series_interval_ms: 1000.0,
        }
        .validate()
        .unwrap()
    }

    fn submit_all(pool: &StagePool, requests: &[(usize, &str)]) -> Vec<Outcome> {
        let (tx, rx) = mpsc::channel();
        for (i, (stage, addr)) in requests.iter().enumerate() {
            let tx = tx.clone();
            pool.submit(*stage, addr.parse().unwrap(), Box::new(move |o| tx.send((i, o)).unwrap())).unwrap();
        }
        drop(tx);
        let mut outcomes: Vec<(usize, Outcome)> = rx.iter().collect();
        outcomes.sort_by_key(|(i, _)| *i);
        outcomes.into_iter().map(|(_, o)| o).collect()
    }

    #[test]
    fn burn_cpu_uses_at_least_the_requested_cpu_time() {
        let before = thread_cpu_time();
        burn_cpu(Duration::from_millis(20), 7);
        assert!(thread_cpu_time() - before >= Duration::from_millis(20));
    }

    #[test]
    fn fifo_completes_everything_and_counts_it() {
        let pool = StagePool::start(spec("fifo", 2, &[1.0, 2.0], &[(10_000.0, "127.0.0.1")])).unwrap();
        let outcomes = submit_all(&pool, &[(0, "127.0.0.1"), (1, "127.0.0.1"), (1, "10.0.0.1"), (0, "::1")]);
        assert_eq!(outcomes.len(), 4);
        for outcome in &outcomes {
            match outcome {
                Outcome::Completed { processing, .. } => assert!(*processing >= Duration::from_millis(1)),
                other => panic!("{other:?}"),
            }
        }
        let m = pool.metrics();
        assert_eq!((m.stages[0].completed, m.stages[1].completed), (2, 2));
        assert_eq!(m.stages.iter().map(|s| s.queue_length).sum::<usize>(), 0);
        assert!(m.stages[1].processing_s >= 0.004);
        // A thread burns no more CPU time than the wall time it ran for.
        assert!(m.stages[1].cpu_s >= 0.004 && m.stages[1].cpu_s <= m.stages[1].processing_s, "{m:?}");
        assert!(m.prometheus().contains("# TYPE sojourn_stage_cpu_seconds_total counter"));
        assert!(m.prometheus().contains("sojourn_stage_completed_total{stage=\"s1\"} 2"));
        assert_eq!(m.productivity_since(&Metrics::default()), 4);
    }

    #[test]
    fn dwfs_refuses_beyond_the_waiting_room_with_a_reason() {
        // One worker, 200 ms of CPU per request, a 500 ms timeout: room for 2,
        // so of six submitted at once at least three are refused (at most one
        // can have left the queue for the worker before the sixth arrives,
        // unless this thread stalls for 200 ms of the worker's CPU time).
        let pool = StagePool::start(spec("dwfs", 1, &[200.0], &[(500.0, "0.0.0.0/0")])).unwrap();
        let outcomes = submit_all(&pool, &[(0, "127.0.0.1"); 6]);
        let refused = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Dropped { reason: DropReason::WaitingRoomFull, .. }))
            .count();
        assert!(refused >= 3, "{outcomes:?}");
        let m = pool.metrics();
        assert_eq!(m.stages[0].dropped_waiting_room as usize, refused);
        let c = m.stages[0].completed - m.stages[0].late;
        let e = m.stages[0].late + m.stages[0].dropped_waiting_room + m.stages[0].dropped_deadline;
        assert_eq!(m.productivity_since(&Metrics::default()), c as i64 - e as i64);
    }

    #[test]
    fn series_csv_has_a_row_per_stage_per_sample() {
        let dir = std::env::temp_dir().join(format!("sojourn-stages-series-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("series.csv");
        let mut spec = spec("fifo", 1, &[1.0, 1.0], &[(1000.0, "127.0.0.1")]);
        spec.series_csv = Some(path.clone());
        spec.series_interval = Duration::from_millis(5);
        let pool = StagePool::start(spec).unwrap();
        submit_all(&pool, &[(1, "127.0.0.1"); 3]);
        drop(pool);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap(), SERIES_COLUMNS.join(","));
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        assert!(rows.len() >= 2 && rows.len() % 2 == 0, "{text}");
        // The last sample, taken at shutdown, has stage s1's three completions.
        let last = &rows[rows.len() - 1];
        assert_eq!((last[1], last[3]), ("s1", "3"), "{text}");
        assert!(last[9].parse::<f64>().unwrap() >= 0.003, "three requests of 1 ms of CPU: {text}");
        let weights: f64 = rows[rows.len() - 2..].iter().map(|row| row[10].parse::<f64>().unwrap()).sum();
        assert!((weights - 1.0).abs() < 1e-9, "a sample's weights are shares of the worker: {text}");
    }

    #[test]
    fn every_request_is_answered_once_even_at_shutdown() {
        let pool = StagePool::start(spec("edf", 1, &[5.0], &[(1000.0, "127.0.0.1")])).unwrap();
        let (tx, rx) = mpsc::channel();
        for i in 0..20 {
            let tx = tx.clone();
            pool.submit(0, "127.0.0.1".parse().unwrap(), Box::new(move |o| tx.send((i, o)).unwrap())).unwrap();
        }
        assert_eq!(pool.submit(1, "127.0.0.1".parse().unwrap(), Box::new(|_| ())), Err(UnknownStage(1)));
        drop(tx);
        drop(pool);
        let mut ids: Vec<i32> = rx.iter().map(|(i, _)| i).collect();
        ids.sort();
        assert_eq!(ids, (0..20).collect::<Vec<_>>());
    }
}
