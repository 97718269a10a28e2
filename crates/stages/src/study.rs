//! The four-queue productivity study of 003 §4.1, in virtual time.
//!
//! One CPU serves per-stage queues through a [`Dispatcher`] from
//! `sojourn-sched` (the code the server's stage pool runs). A session starts at
//! the first stage (main menu); each completed request is followed after the
//! think time by one at the stage drawn from the transition matrix (003 Fig. 5)
//! unless the session ends (probability `1 / mean_session_length` after each
//! completed request; Fig. 5's rows sum to one, so without a length sessions end
//! only by abort); a request that misses its timeout aborts its session (003
//! §5.2). Each client (open loop: each session) belongs to a priority class in
//! turn, client `i` to class `i mod classes`, and a request's bound is its
//! class's timeout (003 §5.2: gold, silver, bronze), so the §5 set-up of the
//! testbed's stage pool can be run here in virtual time. Sessions come from one
//! of two sources:
//!
//! - closed loop (`session_rate == 0`): `clients` clients each run one session
//!   at a time and start a new one when it ends or aborts, like the WebStone
//!   clients of 003 §5.1;
//! - open loop (`session_rate > 0`): sessions arrive as a Poisson process and
//!   are gone once they end or abort, so shedding a session sheds its load.
//!
//! Counting (003 §4.1): `completed` are requests finished by their deadline,
//! `timed_out` are requests that expired in a queue, finished late, were
//! dropped early or refused by a waiting room; productivity is
//! `completed - timed_out`. Requests still queued at the end count as neither.
//!
//! Service: one request at a time by default, as the server's single stage worker
//! serves. With `threads` > 1 up to that many dispatched requests share the CPU
//! equally (processor sharing), as that many stage workers on one CPU do; with
//! `ready_queue` the dispatcher refills them only when all are done, as 003
//! §5.1's Apache did: "The DWFS module is invoked when the ready queue is empty
//! ... to assign jobs to the worker processes ... Finally the processor handles
//! the requests within the ready queue" (one batch of up to `threads` requests,
//! served by worker threads the OS shares the CPU among).
//!
//! Guarantees: deterministic for a given configuration and seed; the CPU is
//! never idle while a request is queued (the dispatcher is work conserving).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use sojourn_papers::papers;
use sojourn_sched::dispatch::{Admission, DispatchConfig, DispatchKind, Dispatcher, StageOrder, StageRequest};

/// The stage names of 003 §2, in the order of Fig. 5 (MM, CO, SR, BR; `sojourn_papers`).
pub fn stage_names() -> &'static [String] {
    &papers().sessions.stages
}

/// 003 §4.1: processing times of MM, CO, SR, BR.
pub fn study_service_times() -> &'static [f64] {
    &papers().sessions.study_service_times
}

/// 003 Table 2: the seven weight assignments.
pub fn table2_weights() -> &'static [Vec<f64>] {
    &papers().sessions.table2_weights
}

/// 003 Fig. 5 as probabilities, each row normalized to sum to one (the
/// printed SR row sums to 100.1%).
pub fn fig5_transitions() -> Vec<Vec<f64>> {
    papers().sessions.fig5_percent.iter().map(|row| normalize_row(row)).collect()
}

pub fn normalize_row(row: &[f64]) -> Vec<f64> {
    let total: f64 = row.iter().sum();
    row.iter().map(|p| p / total).collect()
}

/// One study run.
#[derive(Clone, Debug, PartialEq)]
pub struct StudyConfig {
    pub policy: DispatchKind,
    /// `dwfs`' order within a stage.
    pub stage_order: StageOrder,
    /// Static weights (for `wfs`).
    pub weights: Vec<f64>,
    pub service_times: Vec<f64>,
    /// Row-stochastic transition matrix among the stages.
    pub transitions: Vec<Vec<f64>>,
    /// The delay bound of each priority class's requests (one class: every request's).
    pub timeouts: Vec<f64>,
    pub duration: f64,
    pub clients: usize,
    /// Poisson session arrivals per time unit; 0 for the closed loop.
    pub session_rate: f64,
    /// Mean requests per session (geometric); `None`: sessions end only by abort.
    pub mean_session_length: Option<f64>,
    /// Pause between a response and the session's next request.
    pub think_time: f64,
    /// Think times are exponential with mean `think_time` when true (the
    /// testbed's session clients), exactly `think_time` when false.
    pub exponential_think: bool,
    /// Service times are exponential with the stage's mean when true,
    /// exactly the stage's time when false.
    pub exponential_service: bool,
    /// Dispatched requests served at once, sharing the CPU equally (1: one at a time).
    pub threads: usize,
    /// Refill the `threads` only when every one is done (003 §5.1's ready queue)
    /// instead of each as soon as it is free.
    pub ready_queue: bool,
    /// A request finished past its class's bound counts as timed out either way; with a
    /// session bound its session goes on unless the response took longer than this, as the
    /// testbed's clients take a late response and give up only past their delay bound
    /// (`workload.sessions.delay_bound_s`). `None`: every late request ends its session, a
    /// missed bound aborting it (003 §5.2).
    pub session_bound: Option<f64>,
    pub seed: u64,
}

impl StudyConfig {
    /// 003 §4.1 with the given policy and weights.
    pub fn paper(policy: DispatchKind, weights: &[f64]) -> Self {
        StudyConfig {
            policy,
            stage_order: StageOrder::Deadline,
            weights: weights.to_vec(),
            service_times: study_service_times().to_vec(),
            transitions: fig5_transitions(),
            timeouts: vec![20.0],
            duration: 10_000.0,
            clients: 20,
            session_rate: 0.0,
            mean_session_length: None,
            think_time: 0.0,
            exponential_think: false,
            exponential_service: true,
            threads: 1,
            ready_queue: false,
            session_bound: None,
            seed: 1,
        }
    }
}

/// What a study run counted.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StudyResult {
    pub completed: u64,
    pub timed_out: u64,
    /// `completed - timed_out` (003 §4.1).
    pub productivity: i64,
    pub sessions_started: u64,
    pub sessions_aborted: u64,
    /// Sessions that reached their end (only with a mean session length).
    pub sessions_completed: u64,
    /// Completed requests per stage.
    pub completed_by_stage: Vec<u64>,
    /// Completed (in time) and timed-out requests per class.
    pub completed_by_class: Vec<u64>,
    pub timed_out_by_class: Vec<u64>,
    /// Of those timed out, the requests that finished past their bound (the rest were
    /// refused by a waiting room, dropped early or expired in a queue: the dispatcher's drops).
    pub late_by_class: Vec<u64>,
    /// Summed response time (issue to completion) of the requests completed in time, per
    /// class: over `completed_by_class`, the class's mean response (003 Tables 3-5).
    pub response_sum_by_class: Vec<f64>,
    /// Fraction of the duration the CPU was busy.
    pub utilization: f64,
    /// Busy time spent on requests that then missed their deadline.
    pub wasted_cpu: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The request on the CPU nearest its end finished, unless the requests on
    /// the CPU changed since this was scheduled (its number is then out of date).
    Done(u64),
    /// A client issues its next request.
    Issue(usize),
    /// Open loop: a new session arrives.
    Arrival,
}

/// A request on the CPU: the work it has left (shared with the others on it).
struct InService {
    request: StageRequest,
    deadline: f64,
    work: f64,
    left: f64,
}

/// Time as a totally ordered key for the event heap.
#[derive(Debug, Clone, Copy, PartialEq)]
struct At(f64);
impl Eq for At {}
impl PartialOrd for At {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for At {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Runs one study. Errors name the bad configuration value.
pub fn simulate(config: &StudyConfig) -> anyhow::Result<StudyResult> {
    let n = config.service_times.len();
    let open = config.session_rate > 0.0;
    anyhow::ensure!(
        config.session_rate.is_finite() && config.session_rate >= 0.0,
        "session rate {}; expected a finite number >= 0 (0 for closed-loop clients)",
        config.session_rate
    );
    anyhow::ensure!(open || config.clients > 0, "clients = 0 and no session rate; expected one of them");
    let end_probability = match config.mean_session_length {
        None => 0.0,
        Some(length) if length.is_finite() && length >= 1.0 => 1.0 / length,
        Some(length) => anyhow::bail!("mean session length {length}; expected a finite number >= 1"),
    };
    anyhow::ensure!(
        config.duration.is_finite() && config.duration > 0.0,
        "duration {}; expected a finite number > 0",
        config.duration
    );
    anyhow::ensure!(
        config.think_time.is_finite() && config.think_time >= 0.0,
        "think time {}; expected a finite number >= 0",
        config.think_time
    );
    anyhow::ensure!(config.threads >= 1, "threads = 0; expected at least 1 request served at a time");
    if let Some(bound) = config.session_bound {
        anyhow::ensure!(bound.is_finite() && bound > 0.0, "session bound {bound}; expected a finite number > 0");
    }
    check_stochastic(&config.transitions, n)?;
    let dispatch_config = DispatchConfig {
        service_times: config.service_times.clone(),
        class_timeouts: config.timeouts.clone(),
        transitions: config.transitions.clone(),
        weights: config.weights.clone(),
        stage_order: config.stage_order,
    };
    let mut dispatcher = Dispatcher::new(config.policy, &dispatch_config)?;
    let mut rng = SmallRng::seed_from_u64(config.seed);
    let classes = config.timeouts.len();
    let mut result = StudyResult {
        completed_by_stage: vec![0; n],
        completed_by_class: vec![0; classes],
        timed_out_by_class: vec![0; classes],
        late_by_class: vec![0; classes],
        response_sum_by_class: vec![0.0; classes],
        ..StudyResult::default()
    };
    let think = |rng: &mut SmallRng| if config.exponential_think { exponential(config.think_time, rng) } else { config.think_time };

    // Per client (open loop: per session): the stage of its next request
    // (None: start a new session).
    let mut next_stage: Vec<Option<usize>> = vec![None; if open { 0 } else { config.clients }];
    let mut events: BinaryHeap<Reverse<(At, u64, Event)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut schedule = |events: &mut BinaryHeap<_>, at: f64, event: Event| {
        events.push(Reverse((At(at), seq, event)));
        seq += 1;
    };
    for client in 0..next_stage.len() {
        schedule(&mut events, 0.0, Event::Issue(client));
    }
    if open {
        schedule(&mut events, exponential(1.0 / config.session_rate, &mut rng), Event::Arrival);
    }
    // The requests on the CPU, when their shares were last counted, and the number of
    // the Done event that is not out of date.
    let mut running: Vec<InService> = Vec::new();
    let mut counted_at = 0.0;
    let mut current_done = 0u64;
    let mut busy = 0.0;
    // owner[request id] = the client that issued it.
    let mut owner: Vec<usize> = Vec::new();
    let mut gone = Vec::new();
    // When a closed-loop client's request was last refused the instant it was sent (NaN:
    // not), and the clients waiting for the CPU to finish a request before asking again.
    let mut refused_at = vec![f64::NAN; next_stage.len()];
    let mut waiting_for_cpu: Vec<usize> = Vec::new();

    while let Some(Reverse((At(now), _, event))) = events.pop() {
        if now > config.duration {
            break;
        }
        if !running.is_empty() {
            // Processor sharing: each request on the CPU got an equal share since the last event.
            let share = (now - counted_at) / running.len() as f64;
            running.iter_mut().for_each(|r| r.left -= share);
            busy += now - counted_at;
        }
        counted_at = now;
        let on_cpu = running.len();
        match event {
            Event::Issue(client) => {
                let stage = match next_stage[client] {
                    Some(stage) => stage,
                    None => {
                        result.sessions_started += 1;
                        0
                    }
                };
                let request = StageRequest { id: owner.len() as u64, stage, class: client % classes, arrival: now };
                owner.push(client);
                if let Admission::Refused(request) = dispatcher.push(request, now) {
                    gone.push(request);
                }
            }
            Event::Arrival => {
                next_stage.push(None);
                schedule(&mut events, now, Event::Issue(next_stage.len() - 1));
                schedule(&mut events, now + exponential(1.0 / config.session_rate, &mut rng), Event::Arrival);
            }
            Event::Done(number) if number == current_done => {
                for client in waiting_for_cpu.drain(..) {
                    schedule(&mut events, now, Event::Issue(client));
                }
                // The request nearest its end is done; any other left within rounding of it too.
                let least = least_left(&running).unwrap_or(f64::INFINITY);
                let (done, rest): (Vec<_>, Vec<_>) = running.drain(..).partition(|r| r.left <= least + 1e-12);
                running = rest;
                for InService { request, deadline, work, .. } in done {
                    let client = owner[request.id as usize];
                    if now <= deadline {
                        result.completed += 1;
                        result.completed_by_stage[request.stage] += 1;
                        result.completed_by_class[request.class] += 1;
                        result.response_sum_by_class[request.class] += now - request.arrival;
                    } else {
                        result.wasted_cpu += work;
                        result.late_by_class[request.class] += 1;
                        if !config.session_bound.is_some_and(|bound| now - request.arrival <= bound) {
                            gone.push(request);
                            continue;
                        }
                        // Late, but within the client's patience: it goes on.
                        result.timed_out += 1;
                        result.timed_out_by_class[request.class] += 1;
                    }
                    let ends = end_probability > 0.0 && rng.gen::<f64>() < end_probability;
                    if ends {
                        result.sessions_completed += 1;
                        next_stage[client] = None;
                    } else {
                        next_stage[client] = Some(sample(&config.transitions[request.stage], &mut rng));
                    }
                    if !(ends && open) {
                        schedule(&mut events, now + think(&mut rng), Event::Issue(client));
                    }
                }
            }
            Event::Done(_) => {}
        }
        // Free threads take the dispatcher's next requests: each as soon as it is free, or
        // with a ready queue only once all are.
        if !config.ready_queue || running.is_empty() {
            while running.len() < config.threads {
                dispatcher.remove_expired(now, &mut gone);
                let Some(request) = dispatcher.pop(now, &mut gone) else { break };
                let mean = config.service_times[request.stage];
                let work = if config.exponential_service { exponential(mean, &mut rng) } else { mean };
                let deadline = dispatcher.deadline(&request);
                running.push(InService { request, deadline, work, left: work });
            }
        }
        if running.len() != on_cpu || matches!(event, Event::Done(number) if number == current_done) {
            // The shares changed: the next end is the least work left, at the new share.
            current_done += 1;
            if let Some(least) = least_left(&running) {
                schedule(&mut events, now + least * running.len() as f64, Event::Done(current_done));
            }
        }
        // Every request that missed its bound aborts its session (003 §5.2).
        for request in gone.drain(..) {
            let client = owner[request.id as usize];
            result.timed_out += 1;
            result.timed_out_by_class[request.class] += 1;
            result.sessions_aborted += 1;
            next_stage[client] = None;
            if !open {
                let pause = think(&mut rng);
                if pause == 0.0 && request.arrival == now && refused_at[client] == now {
                    // Refused twice at one instant with no think time: asking again now
                    // would meet the same full waiting room forever (the clock would not
                    // move), so the client asks when the CPU next finishes a request.
                    waiting_for_cpu.push(client);
                } else {
                    refused_at[client] = if request.arrival == now { now } else { f64::NAN };
                    schedule(&mut events, now + pause, Event::Issue(client));
                }
            }
        }
    }
    result.productivity = result.completed as i64 - result.timed_out as i64;
    result.utilization = busy / config.duration;
    Ok(result)
}

/// The least work left among the requests on the CPU: the next to finish.
fn least_left(running: &[InService]) -> Option<f64> {
    running.iter().map(|r| r.left).min_by(f64::total_cmp)
}

fn exponential(mean: f64, rng: &mut SmallRng) -> f64 {
    -mean * (1.0 - rng.gen::<f64>()).ln()
}

/// Draws the next stage from a row of the transition matrix.
fn sample(row: &[f64], rng: &mut SmallRng) -> usize {
    let mut u: f64 = rng.gen();
    for (j, p) in row.iter().enumerate() {
        if u < *p {
            return j;
        }
        u -= p;
    }
    row.len() - 1
}

fn check_stochastic(transitions: &[Vec<f64>], n: usize) -> anyhow::Result<()> {
    anyhow::ensure!(transitions.len() == n, "transition matrix has {} rows; expected one per stage ({n})", transitions.len());
    for (i, row) in transitions.iter().enumerate() {
        anyhow::ensure!(row.len() == n, "transition matrix row {i} has {} entries; expected {n}", row.len());
        anyhow::ensure!(
            row.iter().all(|p| p.is_finite() && *p >= 0.0),
            "transition matrix row {i} has a negative or non-finite entry; expected probabilities"
        );
        let total: f64 = row.iter().sum();
        anyhow::ensure!((total - 1.0).abs() < 1e-6, "transition matrix row {i} sums to {total}; expected 1");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: DispatchKind, weights: &[f64]) -> StudyResult {
        simulate(&StudyConfig::paper(policy, weights)).unwrap()
    }

    #[test]
    fn same_seed_same_result_other_seed_other_result() {
        let config = StudyConfig::paper(DispatchKind::Dwfs, &[]);
        assert_eq!(simulate(&config).unwrap(), simulate(&config).unwrap());
        let other = StudyConfig { seed: 2, ..config.clone() };
        assert_ne!(simulate(&config).unwrap(), simulate(&other).unwrap());
    }

    #[test]
    fn table2_ordering_of_weight_assignments() {
        // 003 Table 2 under weighted round robin: favouring MM is best, MM and SR
        // second, equal weights beat favouring SR alone (the paper's ranks 1, 2,
        // 3 and 1,1,1,1 > 1,1,5,1). The paper also ranks 1,1,5,1 above the CO
        // and BR assignments; here it comes last (docs/dwfs.md).
        let p: Vec<i64> = table2_weights().iter().map(|w| run(DispatchKind::RoundRobin, w).productivity).collect();
        let [equal, mm, _co, sr, _br, mm_sr, _co_br] = p[..] else { unreachable!() };
        assert!(mm > mm_sr && mm_sr > equal && equal > sr, "{p:?}");
        for (i, other) in p.iter().enumerate().skip(2).filter(|(i, _)| *i != 5) {
            assert!(mm_sr > *other, "5,1,5,1 vs assignment {i}: {p:?}");
        }
        // Best several times the worst (the paper: nearly eight times).
        let worst = *p.iter().min().unwrap();
        assert!(mm > 2 * worst, "{p:?}");
    }

    #[test]
    fn dwfs_beats_static_equal_weights_and_fifo() {
        let dwfs = run(DispatchKind::Dwfs, &[]);
        let rr = run(DispatchKind::RoundRobin, &[1.0; 4]);
        let fifo = run(DispatchKind::Fifo, &[]);
        assert!(dwfs.productivity > rr.productivity, "{dwfs:?} vs {rr:?}");
        assert!(dwfs.productivity > fifo.productivity, "{dwfs:?} vs {fifo:?}");
        // DWFS drops early instead of finishing late: less CPU spent on misses.
        assert!(dwfs.wasted_cpu < fifo.wasted_cpu, "{dwfs:?} vs {fifo:?}");
    }

    #[test]
    fn light_load_loses_nothing() {
        // One client, no contention: every request meets a 20-unit bound
        // unless its exponential service time alone exceeds it (e^-10 for SR).
        for policy in DispatchKind::ALL {
            let config = StudyConfig { clients: 1, duration: 2_000.0, ..StudyConfig::paper(policy, &[]) };
            let r = simulate(&config).unwrap();
            assert_eq!(r.timed_out, 0, "{policy}: {r:?}");
            assert!(r.completed > 1_000, "{policy}: {r:?}");
        }
    }

    #[test]
    fn classes_of_one_bound_dispatch_as_one_class() {
        // Two classes with the same timeout are the same queues split in two: the
        // dispatcher orders by deadline across classes, so the run is the same run.
        // DWFS sums its demand per class, so rounding may break a tie of Algorithm 1
        // the other way and the runs part a little.
        for policy in DispatchKind::ALL {
            let one = StudyConfig { clients: 25, duration: 2_000.0, ..StudyConfig::paper(policy, &[]) };
            let two = StudyConfig { timeouts: vec![20.0, 20.0], ..one.clone() };
            let (a, b) = (simulate(&one).unwrap(), simulate(&two).unwrap());
            if policy == DispatchKind::Dwfs {
                let near = |x: u64, y: u64| (x as f64 / y as f64 - 1.0).abs() < 0.03;
                assert!(near(a.completed, b.completed) && near(a.timed_out, b.timed_out), "{a:?} vs {b:?}");
            } else {
                assert_eq!((a.completed, a.timed_out, a.sessions_aborted), (b.completed, b.timed_out, b.sessions_aborted), "{policy}");
            }
            assert_eq!(b.completed_by_class.iter().sum::<u64>(), b.completed, "{policy}");
            assert_eq!(b.timed_out_by_class.iter().sum::<u64>(), b.timed_out, "{policy}");
            assert!(b.completed_by_class.iter().all(|&c| c > 0), "{policy}: {b:?}");
        }
    }

    #[test]
    fn a_class_mean_response_lies_between_the_cheapest_stage_and_its_bound() {
        // A request counted completed finished within its class's bound (003 §5.2) and
        // took at least the exact cost of the cheapest stage, in every order within a stage.
        let timeouts = vec![2.0, 5.0, 20.0];
        let cheapest = study_service_times().iter().copied().fold(f64::INFINITY, f64::min);
        for stage_order in StageOrder::ALL {
            let config = StudyConfig {
                clients: 30,
                duration: 2_000.0,
                timeouts: timeouts.clone(),
                exponential_service: false,
                stage_order,
                ..StudyConfig::paper(DispatchKind::Dwfs, &[])
            };
            let r = simulate(&config).unwrap();
            for (class, bound) in timeouts.iter().enumerate() {
                let mean = r.response_sum_by_class[class] / r.completed_by_class[class] as f64;
                assert!(cheapest <= mean && mean <= *bound, "{stage_order} class {class}: mean {mean} ({r:?})");
            }
        }
    }

    #[test]
    fn a_late_request_ends_its_session_unless_its_client_waits_past_it() {
        // One client, FIFO, every stage 2 s exactly against a 1-s bound: the first request
        // is on the CPU from 0 to 2, late. By default its session is aborted and the client
        // starts another at 2; a client that gives up only past 5 s takes it and goes on.
        let config = StudyConfig {
            clients: 1,
            service_times: vec![2.0; 4],
            timeouts: vec![1.0],
            duration: 3.0,
            exponential_service: false,
            ..StudyConfig::paper(DispatchKind::Fifo, &[])
        };
        let aborted = simulate(&config).unwrap();
        assert_eq!((aborted.timed_out, aborted.sessions_aborted, aborted.sessions_started), (1, 1, 2));
        assert_eq!(aborted.late_by_class, vec![1]);
        let patient = simulate(&StudyConfig { session_bound: Some(5.0), ..config.clone() }).unwrap();
        assert_eq!((patient.timed_out, patient.sessions_aborted, patient.sessions_started), (1, 0, 1));
        assert_eq!((patient.completed, patient.wasted_cpu, patient.late_by_class), (0, 2.0, vec![1]));
        // A response slower than the client's patience ends the session as before.
        let impatient = simulate(&StudyConfig { session_bound: Some(1.5), ..config.clone() }).unwrap();
        assert_eq!(impatient, aborted);
        let err = simulate(&StudyConfig { session_bound: Some(0.0), ..config }).unwrap_err().to_string();
        assert!(err.contains("session bound 0"), "{err}");
    }

    #[test]
    fn a_bound_below_the_stage_costs_times_its_class_out() {
        // Under DWFS a class whose bound (0.6) is below every stage's exact cost but
        // MM's (0.5) can complete only MM requests; the class bounded at 20 completes
        // the rest of the mix. With no think time, its clients refused by MM's waiting
        // room of one wait for the CPU instead of asking again at the same instant.
        let config = StudyConfig {
            clients: 10,
            timeouts: vec![0.6, 20.0],
            exponential_service: false,
            ..StudyConfig::paper(DispatchKind::Dwfs, &[])
        };
        let r = simulate(&config).unwrap();
        let rate = |c: usize| r.timed_out_by_class[c] as f64 / (r.timed_out_by_class[c] + r.completed_by_class[c]) as f64;
        assert!(rate(0) > 2.0 * rate(1) && r.completed_by_class[1] > r.completed_by_class[0], "{r:?}");
    }

    #[test]
    fn exponential_think_times_keep_their_mean() {
        // One client, no contention: the cycle is service + think, so the request
        // count pins the mean think time whether it is drawn or fixed.
        let fixed = StudyConfig { clients: 1, think_time: 5.0, duration: 50_000.0, ..StudyConfig::paper(DispatchKind::Fifo, &[]) };
        let drawn = StudyConfig { exponential_think: true, ..fixed.clone() };
        let (a, b) = (simulate(&fixed).unwrap().completed as f64, simulate(&drawn).unwrap().completed as f64);
        assert!((a / b - 1.0).abs() < 0.05, "{a} vs {b}");
    }

    #[test]
    fn threads_share_the_cpu_and_a_ready_queue_waits_for_all_of_them() {
        // Three clients, one per class, each sending a main-menu request (0.5 exactly) at 0
        // and then thinking past the run: one at a time they finish at 0.5, 1.0 and 1.5; two
        // threads share the CPU, so the first two finish together at 1.0 and the third,
        // taken when a thread frees, at 1.5; a ready queue of two was refilled at 0 with the
        // only request then queued, and takes the other two together once it is done.
        let base = StudyConfig {
            policy: DispatchKind::Fifo,
            clients: 3,
            timeouts: vec![100.0; 3],
            think_time: 100.0,
            duration: 2.0,
            exponential_service: false,
            ..StudyConfig::paper(DispatchKind::Fifo, &[])
        };
        let responses = |threads: usize, ready_queue: bool| {
            let r = simulate(&StudyConfig { threads, ready_queue, ..base.clone() }).unwrap();
            assert_eq!(r.completed_by_class, vec![1, 1, 1], "{threads} {ready_queue}: {r:?}");
            assert!((r.utilization - 1.5 / 2.0).abs() < 1e-9, "the CPU did 1.5 of work either way: {r:?}");
            r.response_sum_by_class
        };
        let near = |a: Vec<f64>, b: [f64; 3]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9);
        assert!(near(responses(1, false), [0.5, 1.0, 1.5]));
        assert!(near(responses(1, true), [0.5, 1.0, 1.5]));
        assert!(near(responses(2, false), [1.0, 1.0, 1.5]));
        assert!(near(responses(2, true), [0.5, 1.5, 1.5]));
    }

    #[test]
    fn one_thread_with_a_ready_queue_is_one_at_a_time() {
        let one = StudyConfig { clients: 30, duration: 2_000.0, timeouts: vec![2.0, 5.0, 20.0], ..StudyConfig::paper(DispatchKind::Dwfs, &[]) };
        let queued = StudyConfig { ready_queue: true, ..one.clone() };
        assert_eq!(simulate(&one).unwrap(), simulate(&queued).unwrap());
        let shared = simulate(&StudyConfig { threads: 4, ..one.clone() }).unwrap();
        assert_ne!(simulate(&one).unwrap(), shared);
        assert_eq!(shared.completed_by_class.iter().sum::<u64>(), shared.completed, "{shared:?}");
    }

    #[test]
    fn open_loop_sessions_complete() {
        let config = StudyConfig {
            session_rate: 0.05,
            mean_session_length: Some(10.0),
            ..StudyConfig::paper(DispatchKind::Dwfs, &[])
        };
        let r = simulate(&config).unwrap();
        assert!(r.sessions_completed > 300 && r.sessions_started >= r.sessions_completed + r.sessions_aborted, "{r:?}");
    }

    #[test]
    fn bad_configurations_are_named() {
        let mut config = StudyConfig::paper(DispatchKind::Fifo, &[]);
        config.transitions[1][1] += 0.5;
        let err = simulate(&config).unwrap_err().to_string();
        assert!(err.contains("row 1 sums to"), "{err}");
        let config = StudyConfig { clients: 0, ..StudyConfig::paper(DispatchKind::Fifo, &[]) };
        assert!(simulate(&config).unwrap_err().to_string().contains("clients = 0"));
        let config = StudyConfig { mean_session_length: Some(0.5), ..StudyConfig::paper(DispatchKind::Fifo, &[]) };
        assert!(simulate(&config).unwrap_err().to_string().contains("session length 0.5"));
        let config = StudyConfig { threads: 0, ..StudyConfig::paper(DispatchKind::Fifo, &[]) };
        assert!(simulate(&config).unwrap_err().to_string().contains("threads = 0"));
    }
}
