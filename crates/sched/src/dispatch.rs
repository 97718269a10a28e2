//! Dispatch among per-stage request queues (003 §4-§5): which queued dynamic
//! request a free worker runs next.
//!
//! Requests are parsed on arrival and queued per stage with their arrival time
//! and class (003 §5.1, Fig. 8); each class has its own timeout, so a request's
//! deadline is its arrival plus its class's timeout (003 §5.2). A [`Dispatcher`]
//! holds the queues and one [`DispatchKind`]:
//!
//! - `fifo`: the oldest request of all (the Apache baseline, 003 §5.1 Fig. 7);
//! - `rr`: weighted round robin over stages: a stage of weight `w` gets `w`
//!   requests per round (equal weights: one each), oldest first within a stage;
//! - `edf`: the earliest deadline of all;
//! - `wfs`: static weighted fair sharing of CPU time among stages (003 §4.1
//!   Table 2): start-time fair queueing charging each request's expected service
//!   time divided by its stage's weight;
//! - `dwfs`: the same sharing with weights recomputed before every dispatch by
//!   maximizing the productivity function (003 eqs. 5-6, Algorithm 1, see
//!   [`crate::dwfs`]); each stage has a waiting room of `timeout / service time`
//!   requests (003 §4.2; per class, counting the requests with earlier deadlines
//!   in the stage) and requests that can no longer meet their deadline are
//!   dropped early; within a stage, the shorter timeout goes first (003 §5.2),
//!   read as earliest deadline first unless [`StageOrder`] says otherwise.
//!
//! Guarantees: no clock and no I/O (`now` is passed in, in any unit, as long as
//! timeouts and service times use the same); every decision is deterministic
//! (ties go to the request queued first); every request pushed comes back out
//! exactly once, from `pop`, as refused by `push`, or in a drop list.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use crate::dwfs::{self, DwfsError};

/// A dynamic request waiting for a worker.
#[derive(Clone, Debug, PartialEq)]
pub struct StageRequest {
    /// Caller's identifier, returned untouched.
    pub id: u64,
    /// Index of the stage (queue) the request belongs to.
    pub stage: usize,
    /// Priority class, an index into the configured class timeouts.
    pub class: usize,
    /// When the request was queued.
    pub arrival: f64,
}

/// The dispatch disciplines, chosen by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DispatchKind {
    Fifo,
    RoundRobin,
    Edf,
    Wfs,
    Dwfs,
}

impl DispatchKind {
    pub const ALL: [DispatchKind; 5] =
        [DispatchKind::Fifo, DispatchKind::RoundRobin, DispatchKind::Edf, DispatchKind::Wfs, DispatchKind::Dwfs];

    /// The name used on command lines and in configs.
    pub fn name(self) -> &'static str {
        match self {
            DispatchKind::Fifo => "fifo",
            DispatchKind::RoundRobin => "rr",
            DispatchKind::Edf => "edf",
            DispatchKind::Wfs => "wfs",
            DispatchKind::Dwfs => "dwfs",
        }
    }
}

impl fmt::Display for DispatchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DispatchKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        by_name(&DispatchKind::ALL, DispatchKind::name, s, "dispatch policy")
    }
}

/// The value among `all` whose `name` is `s`, or an error naming `s` and listing the names.
fn by_name<T: Copy>(all: &[T], name: fn(T) -> &'static str, s: &str, what: &str) -> Result<T, String> {
    all.iter().copied().find(|value| name(*value) == s).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|value| name(*value)).collect();
        format!("unknown {what} {s:?}; expected one of {}", names.join(", "))
    })
}

/// Which of a stage's queued requests `dwfs` serves first. 003 §5.2 says only that "the
/// shorter timeout a request is assigned, the higher is its priority and thus it gets
/// quicker service"; the readings differ in how a class's drops compare with another's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StageOrder {
    /// The earliest deadline (arrival plus class timeout): the server's order.
    #[default]
    Deadline,
    /// The class with the shortest timeout, strictly; oldest first within it.
    Class,
    /// The oldest, whatever its class: class enters only through deadlines and rooms.
    Arrival,
}

impl StageOrder {
    pub const ALL: [StageOrder; 3] = [StageOrder::Deadline, StageOrder::Class, StageOrder::Arrival];

    /// The name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            StageOrder::Deadline => "deadline",
            StageOrder::Class => "class",
            StageOrder::Arrival => "arrival",
        }
    }
}

impl fmt::Display for StageOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for StageOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        by_name(&StageOrder::ALL, StageOrder::name, s, "stage order")
    }
}

/// What the dispatcher knows about the stages and classes.
#[derive(Clone, Debug, PartialEq)]
pub struct DispatchConfig {
    /// Expected processing time of a request at each stage (`T_j`).
    pub service_times: Vec<f64>,
    /// Timeout (delay bound) of each class.
    pub class_timeouts: Vec<f64>,
    /// Stage transition probabilities, `transitions[i][j]` from stage i to j
    /// (003 Fig. 5); used by `dwfs` for the credits `Q_j`.
    pub transitions: Vec<Vec<f64>>,
    /// Static weights of `wfs` (CPU time) and `rr` (requests per round), any
    /// positive scale, normalized; empty means equal weights.
    pub weights: Vec<f64>,
    /// `dwfs`' order within a stage.
    pub stage_order: StageOrder,
}

/// Why a dispatcher could not be built.
#[derive(Clone, Debug, PartialEq)]
pub enum DispatchError {
    NoStages,
    NoClasses,
    Values(DwfsError),
    /// `transitions` must be a square matrix with one row per stage.
    Transitions { row: usize, got: usize, expected: usize },
    /// A static weight must be positive.
    Weight { stage: usize, value: f64 },
}

impl fmt::Display for DispatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DispatchError::NoStages => f.write_str("no stages configured; expected at least one service time"),
            DispatchError::NoClasses => f.write_str("no classes configured; expected at least one class timeout"),
            DispatchError::Values(e) => e.fmt(f),
            DispatchError::Transitions { row, got, expected } => {
                write!(f, "transition matrix row {row} has {got} entries; expected one per stage ({expected}) and one row per stage")
            }
            DispatchError::Weight { stage, value } => {
                write!(f, "weight of stage {stage} is {value}; expected a finite number > 0")
            }
        }
    }
}

impl std::error::Error for DispatchError {}

impl From<DwfsError> for DispatchError {
    fn from(e: DwfsError) -> Self {
        DispatchError::Values(e)
    }
}

/// The outcome of [`Dispatcher::push`].
#[derive(Clone, Debug, PartialEq)]
pub enum Admission {
    Queued,
    /// `dwfs` only: the stage's waiting room is full (003 §4.2), or the stage's
    /// service time exceeds the class timeout.
    Refused(StageRequest),
}

/// A queued request with its derived deadline and insertion order.
#[derive(Clone, Debug)]
struct Entry {
    request: StageRequest,
    deadline: f64,
    seq: u64,
}

/// Per-stage queues under one dispatch discipline. Within a (stage, class)
/// queue, arrival order is also deadline order (one timeout per class), so
/// every discipline only ever looks at queue heads.
#[derive(Debug)]
pub struct Dispatcher {
    kind: DispatchKind,
    stage_order: StageOrder,
    service_times: Vec<f64>,
    class_timeouts: Vec<f64>,
    credits: Vec<f64>,
    /// Current normalized weights (static for `wfs`, recomputed for `dwfs`).
    weights: Vec<f64>,
    /// `queues[stage][class]`.
    queues: Vec<Vec<VecDeque<Entry>>>,
    /// Start-time fair queueing state: each stage's virtual finish time so far.
    pass: Vec<f64>,
    virtual_time: f64,
    next_seq: u64,
    len: usize,
}

impl Dispatcher {
    pub fn new(kind: DispatchKind, config: &DispatchConfig) -> Result<Self, DispatchError> {
        let n = config.service_times.len();
        if n == 0 {
            return Err(DispatchError::NoStages);
        }
        if config.class_timeouts.is_empty() {
            return Err(DispatchError::NoClasses);
        }
        if let Some((index, &value)) = config.service_times.iter().enumerate().find(|(_, t)| !(t.is_finite() && **t > 0.0)) {
            return Err(DwfsError::NotNonNegative { what: "service_times", index, value }.into());
        }
        for &timeout in &config.class_timeouts {
            dwfs::check_timeout(timeout)?;
        }
        let weights = match kind {
            DispatchKind::Wfs | DispatchKind::RoundRobin if !config.weights.is_empty() => {
                normalized_weights(&config.weights, n)?
            }
            _ => vec![1.0 / n as f64; n],
        };
        let credits = match kind {
            DispatchKind::Dwfs => {
                if config.transitions.len() != n {
                    return Err(DispatchError::Transitions { row: config.transitions.len(), got: 0, expected: n });
                }
                if let Some((row, r)) = config.transitions.iter().enumerate().find(|(_, r)| r.len() != n) {
                    return Err(DispatchError::Transitions { row, got: r.len(), expected: n });
                }
                let credits = dwfs::credits(&config.transitions);
                if let Some((index, &value)) = credits.iter().enumerate().find(|(_, q)| !(q.is_finite() && **q >= 0.0)) {
                    return Err(DwfsError::NotNonNegative { what: "transition column sums", index, value }.into());
                }
                credits
            }
            _ => vec![1.0; n],
        };
        Ok(Dispatcher {
            kind,
            stage_order: config.stage_order,
            service_times: config.service_times.clone(),
            class_timeouts: config.class_timeouts.clone(),
            credits,
            weights,
            queues: vec![vec![VecDeque::new(); config.class_timeouts.len()]; n],
            pass: vec![0.0; n],
            virtual_time: 0.0,
            next_seq: 0,
            len: 0,
        })
    }

    pub fn kind(&self) -> DispatchKind {
        self.kind
    }

    pub fn stages(&self) -> usize {
        self.service_times.len()
    }

    /// Requests queued in all stages.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Requests queued at `stage`.
    pub fn stage_len(&self, stage: usize) -> usize {
        self.queues.get(stage).map_or(0, |classes| classes.iter().map(VecDeque::len).sum())
    }

    /// The current normalized weights of the stages (static for `wfs` and `rr`, the
    /// result of the last recomputation for `dwfs`, equal shares otherwise).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The deadline of a request: its arrival plus its class's timeout.
    pub fn deadline(&self, request: &StageRequest) -> f64 {
        request.arrival + self.class_timeouts[request.class.min(self.class_timeouts.len() - 1)]
    }

    /// Queues `request`. Out-of-range stages and classes are clamped to the
    /// last one (the caller validates names; the queues never panic).
    pub fn push(&mut self, mut request: StageRequest, _now: f64) -> Admission {
        request.stage = request.stage.min(self.stages() - 1);
        request.class = request.class.min(self.class_timeouts.len() - 1);
        let stage = request.stage;
        let deadline = self.deadline(&request);
        if self.kind == DispatchKind::Dwfs {
            // 003 §4.2: a k-waiting-room queue, k = timeout / service time. With
            // several classes, the room is the class's, and only the requests the
            // stage would serve before this one (in its stage order) take it up.
            let room = (self.class_timeouts[request.class] / self.service_times[stage]).floor() as usize;
            let timeout = self.class_timeouts[request.class];
            let ahead: usize = match self.stage_order {
                StageOrder::Deadline => {
                    self.queues[stage].iter().map(|q| q.partition_point(|e| e.deadline <= deadline)).sum()
                }
                StageOrder::Class => self.queues[stage]
                    .iter()
                    .zip(&self.class_timeouts)
                    .filter(|(_, class_timeout)| **class_timeout <= timeout)
                    .map(|(q, _)| q.len())
                    .sum(),
                StageOrder::Arrival => self.stage_len(stage),
            };
            if ahead >= room {
                return Admission::Refused(request);
            }
        }
        if self.stage_len(stage) == 0 {
            // A stage that was idle starts at the current virtual time: no banked credit.
            self.pass[stage] = self.pass[stage].max(self.virtual_time);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queues[stage][request.class].push_back(Entry { request, deadline, seq });
        self.len += 1;
        Admission::Queued
    }

    /// Takes out every queued request whose deadline is before `now` (the
    /// client or the script timeout gave up on it), oldest first per queue.
    pub fn remove_expired(&mut self, now: f64, out: &mut Vec<StageRequest>) {
        self.drop_heads(out, |entry, _| entry.deadline < now);
    }

    /// The request a free worker should run now, or `None` if nothing is
    /// queued. `dwfs` first moves into `dropped` the requests that can no
    /// longer finish by their deadline (`now + T_j > deadline`).
    pub fn pop(&mut self, now: f64, dropped: &mut Vec<StageRequest>) -> Option<StageRequest> {
        if self.kind == DispatchKind::Dwfs {
            self.drop_heads(dropped, |entry, service| now + service > entry.deadline);
            self.recompute_dwfs_weights();
        }
        let (stage, class) = match self.kind {
            DispatchKind::Fifo => self.best_head(0..self.stages(), |e| (e.request.arrival, e.seq))?,
            DispatchKind::Edf => self.best_head(0..self.stages(), |e| (e.deadline, e.seq))?,
            DispatchKind::RoundRobin | DispatchKind::Wfs => {
                let stage = self.least_pass(|_| true)?;
                self.best_head(stage..stage + 1, |e| (e.request.arrival, e.seq))?
            }
            DispatchKind::Dwfs => {
                // Weighted stages first; if only stages judged unproductive have
                // work, serve them anyway (work conserving), in the stage order.
                let stages = match self.least_pass(|w| w > 0.0) {
                    Some(stage) => stage..stage + 1,
                    None => 0..self.stages(),
                };
                let timeouts = &self.class_timeouts;
                match self.stage_order {
                    StageOrder::Deadline => self.best_head(stages, |e| (e.deadline, e.seq))?,
                    StageOrder::Class => self.best_head(stages, |e| (timeouts[e.request.class], e.seq))?,
                    StageOrder::Arrival => self.best_head(stages, |e| (e.request.arrival, e.seq))?,
                }
            }
        };
        let entry = self.queues[stage][class].pop_front()?;
        self.len -= 1;
        // Round robin charges a turn per request, the fair-sharing policies
        // the request's expected CPU time; a stage served without weight
        // (dwfs' work-conserving fallback) is not charged.
        let charge = match self.kind {
            DispatchKind::RoundRobin => 1.0,
            DispatchKind::Wfs | DispatchKind::Dwfs => self.service_times[stage],
            DispatchKind::Fifo | DispatchKind::Edf => 0.0,
        };
        let weight = self.weights[stage];
        if weight > 0.0 {
            self.virtual_time = self.pass[stage];
            self.pass[stage] += charge / weight;
        }
        Some(entry.request)
    }

    /// Algorithm 1 over the current queue lengths: a stage's demand is the CPU
    /// share its backlog needs to finish within each request's class timeout.
    fn recompute_dwfs_weights(&mut self) {
        let demands: Vec<f64> = (0..self.stages())
            .map(|s| {
                self.queues[s]
                    .iter()
                    .enumerate()
                    .map(|(class, q)| dwfs::demand(q.len() as f64, self.service_times[s], self.class_timeouts[class]))
                    .sum()
            })
            .collect();
        // Inputs were validated in `new`, so the solver cannot refuse them.
        if let Ok(choice) = dwfs::solve(&demands, &self.credits, 1.0) {
            self.weights = choice.weights(&demands, 1.0);
        }
    }

    /// The non-empty stage with the least virtual finish time among those whose
    /// weight passes `eligible`; ties to the lower index.
    fn least_pass(&self, eligible: impl Fn(f64) -> bool) -> Option<usize> {
        (0..self.stages())
            .filter(|&s| self.stage_len(s) > 0 && eligible(self.weights[s]))
            .min_by(|&a, &b| self.pass[a].total_cmp(&self.pass[b]).then(a.cmp(&b)))
    }

    /// The (stage, class) whose head has the least `key` among `stages`.
    fn best_head(&self, stages: std::ops::Range<usize>, key: impl Fn(&Entry) -> (f64, u64)) -> Option<(usize, usize)> {
        stages
            .flat_map(|s| self.queues[s].iter().enumerate().filter_map(move |(c, q)| q.front().map(|e| (s, c, e))))
            .min_by(|a, b| {
                let (ka, kb) = (key(a.2), key(b.2));
                ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1))
            })
            .map(|(s, c, _)| (s, c))
    }

    /// Pops queue heads for which `doomed(entry, service time)` holds. Deadlines
    /// are monotone within a queue, so checking heads suffices.
    fn drop_heads(&mut self, out: &mut Vec<StageRequest>, doomed: impl Fn(&Entry, f64) -> bool) {
        for (stage, classes) in self.queues.iter_mut().enumerate() {
            for queue in classes.iter_mut() {
                while queue.front().is_some_and(|e| doomed(e, self.service_times[stage])) {
                    if let Some(entry) = queue.pop_front() {
                        out.push(entry.request);
                        self.len -= 1;
                    }
                }
            }
        }
    }
}

fn normalized_weights(weights: &[f64], n: usize) -> Result<Vec<f64>, DispatchError> {
    if weights.len() != n {
        return Err(DwfsError::LengthMismatch { what: "weights", expected: n, got: weights.len() }.into());
    }
    if let Some((stage, &value)) = weights.iter().enumerate().find(|(_, w)| !(w.is_finite() && **w > 0.0)) {
        return Err(DispatchError::Weight { stage, value });
    }
    let total: f64 = weights.iter().sum();
    Ok(weights.iter().map(|w| w / total).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(service_times: &[f64], class_timeouts: &[f64], weights: &[f64]) -> DispatchConfig {
        let n = service_times.len();
        DispatchConfig {
            service_times: service_times.to_vec(),
            class_timeouts: class_timeouts.to_vec(),
            transitions: vec![vec![1.0 / n as f64; n]; n],
            weights: weights.to_vec(),
            stage_order: StageOrder::Deadline,
        }
    }

    fn req(id: u64, stage: usize, class: usize, arrival: f64) -> StageRequest {
        StageRequest { id, stage, class, arrival }
    }

    /// Pushes all, then pops until empty, returning ids in order.
    fn order(d: &mut Dispatcher, requests: &[StageRequest], now: f64) -> Vec<u64> {
        for r in requests {
            assert_eq!(d.push(r.clone(), r.arrival), Admission::Queued);
        }
        let mut dropped = Vec::new();
        std::iter::from_fn(|| d.pop(now, &mut dropped).map(|r| r.id)).collect()
    }

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for kind in DispatchKind::ALL {
            assert_eq!(kind.name().parse::<DispatchKind>(), Ok(kind));
        }
        let err = "lifo".parse::<DispatchKind>().unwrap_err();
        assert!(err.contains("\"lifo\"") && err.contains("fifo, rr, edf, wfs, dwfs"), "{err}");
    }

    #[test]
    fn fifo_serves_oldest_first_across_stages_and_classes() {
        let mut d = Dispatcher::new(DispatchKind::Fifo, &config(&[1.0, 2.0], &[10.0, 5.0], &[])).unwrap();
        let got = order(&mut d, &[req(1, 1, 0, 0.0), req(2, 0, 1, 1.0), req(3, 0, 0, 2.0), req(4, 1, 1, 3.0)], 0.0);
        assert_eq!(got, vec![1, 2, 3, 4]);
    }

    #[test]
    fn edf_serves_earliest_deadline_first() {
        // Class 0 times out after 10, class 1 after 2.
        let mut d = Dispatcher::new(DispatchKind::Edf, &config(&[1.0, 1.0], &[10.0, 2.0], &[])).unwrap();
        let got = order(&mut d, &[req(1, 0, 0, 0.0), req(2, 1, 1, 1.0), req(3, 1, 0, 1.5), req(4, 0, 1, 9.0)], 0.0);
        // Deadlines: 10, 3, 11.5, 11.
        assert_eq!(got, vec![2, 1, 4, 3]);
    }

    #[test]
    fn round_robin_takes_one_request_per_stage_in_turn() {
        let mut d = Dispatcher::new(DispatchKind::RoundRobin, &config(&[1.0, 1.0, 1.0], &[10.0], &[])).unwrap();
        let reqs = [req(1, 0, 0, 0.0), req(2, 0, 0, 0.1), req(3, 0, 0, 0.2), req(4, 2, 0, 0.3), req(5, 2, 0, 0.4)];
        assert_eq!(order(&mut d, &reqs, 0.0), vec![1, 4, 2, 5, 3]);
    }

    #[test]
    fn weighted_round_robin_counts_requests_not_time() {
        // Stage 1 costs 3x but weights 2:1 are in requests: two of stage 0 per one of stage 1.
        let mut d = Dispatcher::new(DispatchKind::RoundRobin, &config(&[1.0, 3.0], &[100.0], &[2.0, 1.0])).unwrap();
        let reqs: Vec<_> = (0..12).map(|i| req(i, (i % 2) as usize, 0, i as f64 * 0.01)).collect();
        let stages: Vec<u64> = order(&mut d, &reqs, 0.0).iter().map(|id| id % 2).collect();
        assert_eq!(&stages[..6], &[0, 1, 0, 0, 1, 0]);
    }

    #[test]
    fn wfs_shares_cpu_time_in_proportion_to_weights() {
        // Equal service times, weights 3:1: three of stage 0 per one of stage 1.
        let mut d = Dispatcher::new(DispatchKind::Wfs, &config(&[1.0, 1.0], &[100.0], &[3.0, 1.0])).unwrap();
        let reqs: Vec<_> = (0..20).map(|i| req(i, (i % 2) as usize, 0, i as f64 * 0.01)).collect();
        let got = order(&mut d, &reqs, 0.0);
        let first_eight: Vec<usize> = got[..8].iter().map(|id| (id % 2) as usize).collect();
        assert_eq!(first_eight.iter().filter(|s| **s == 0).count(), 6, "{got:?}");
        // Time, not request count, is shared: stage 1 costs 3x, weights equal.
        let mut d = Dispatcher::new(DispatchKind::Wfs, &config(&[1.0, 3.0], &[100.0], &[1.0, 1.0])).unwrap();
        let got = order(&mut d, &reqs, 0.0);
        let first_eight: Vec<usize> = got[..8].iter().map(|id| (id % 2) as usize).collect();
        assert_eq!(first_eight.iter().filter(|s| **s == 0).count(), 6, "{got:?}");
    }

    #[test]
    fn wfs_rejects_zero_and_missing_weights() {
        let err = Dispatcher::new(DispatchKind::Wfs, &config(&[1.0, 1.0], &[10.0], &[1.0, 0.0])).unwrap_err();
        assert!(err.to_string().contains("stage 1"), "{err}");
        let err = Dispatcher::new(DispatchKind::Wfs, &config(&[1.0, 1.0], &[10.0], &[1.0])).unwrap_err();
        assert!(err.to_string().contains("weights has 1 entries"), "{err}");
    }

    #[test]
    fn dwfs_refuses_beyond_the_waiting_room() {
        // Timeout 5, service time 2: room for floor(5/2) = 2.
        let mut d = Dispatcher::new(DispatchKind::Dwfs, &config(&[2.0], &[5.0], &[])).unwrap();
        assert_eq!(d.push(req(1, 0, 0, 0.0), 0.0), Admission::Queued);
        assert_eq!(d.push(req(2, 0, 0, 0.0), 0.0), Admission::Queued);
        assert_eq!(d.push(req(3, 0, 0, 0.0), 0.0), Admission::Refused(req(3, 0, 0, 0.0)));
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn dwfs_room_counts_only_requests_served_earlier() {
        // Service 2; class 0 times out after 5 (room 2), class 1 after 40 (room 20).
        let mut d = Dispatcher::new(DispatchKind::Dwfs, &config(&[2.0], &[5.0, 40.0], &[])).unwrap();
        for id in 0..5 {
            assert_eq!(d.push(req(id, 0, 1, 0.0), 0.0), Admission::Queued);
        }
        // Five later-deadline requests do not take the short class's room...
        assert_eq!(d.push(req(10, 0, 0, 0.0), 0.0), Admission::Queued);
        assert_eq!(d.push(req(11, 0, 0, 0.0), 0.0), Admission::Queued);
        // ...but two of its own do.
        assert_eq!(d.push(req(12, 0, 0, 0.0), 0.0), Admission::Refused(req(12, 0, 0, 0.0)));
    }

    #[test]
    fn dwfs_drops_requests_that_can_no_longer_meet_their_deadline() {
        let mut d = Dispatcher::new(DispatchKind::Dwfs, &config(&[2.0, 1.0], &[5.0], &[])).unwrap();
        d.push(req(1, 0, 0, 0.0), 0.0);
        d.push(req(2, 1, 0, 0.0), 0.0);
        let mut dropped = Vec::new();
        // At 3.5, stage 0 (2.0) cannot end by 5, stage 1 (1.0) can.
        assert_eq!(d.pop(3.5, &mut dropped).map(|r| r.id), Some(2));
        assert_eq!(dropped, vec![req(1, 0, 0, 0.0)]);
        assert!(d.is_empty());
    }

    #[test]
    fn dwfs_serves_shorter_timeouts_first_within_a_stage() {
        let mut d = Dispatcher::new(DispatchKind::Dwfs, &config(&[1.0], &[20.0, 10.0], &[])).unwrap();
        assert_eq!(order(&mut d, &[req(1, 0, 0, 0.0), req(2, 0, 1, 1.0)], 0.0), vec![2, 1]);
    }

    #[test]
    fn dwfs_stage_orders_differ_only_in_whom_a_stage_serves_first() {
        // One stage; class 0 times out after 10, class 1 after 4. Deadlines: 10, 5, 12, 7.
        let requests = [req(1, 0, 0, 0.0), req(2, 0, 1, 1.0), req(3, 0, 0, 2.0), req(4, 0, 1, 3.0)];
        let expected = [(StageOrder::Deadline, vec![2, 4, 1, 3]), (StageOrder::Class, vec![2, 4, 1, 3]),
                        (StageOrder::Arrival, vec![1, 2, 3, 4])];
        for (stage_order, ids) in expected {
            let cfg = DispatchConfig { stage_order, ..config(&[0.1], &[10.0, 4.0], &[]) };
            let mut d = Dispatcher::new(DispatchKind::Dwfs, &cfg).unwrap();
            assert_eq!(order(&mut d, &requests, 0.0), ids, "{stage_order}");
        }
        // An old short-timeout request against a young long-timeout one: deadline 9 against
        // 1.5 + 6 = 7.5 when class 0 times out after 6; class order still serves class 1 first.
        let requests = [req(1, 0, 1, 5.0), req(2, 0, 0, 1.5)];
        let expected = [(StageOrder::Deadline, vec![2, 1]), (StageOrder::Class, vec![1, 2]), (StageOrder::Arrival, vec![2, 1])];
        for (stage_order, ids) in expected {
            let cfg = DispatchConfig { stage_order, ..config(&[0.1], &[6.0, 4.0], &[]) };
            let mut d = Dispatcher::new(DispatchKind::Dwfs, &cfg).unwrap();
            assert_eq!(order(&mut d, &requests, 0.0), ids, "{stage_order}");
        }
    }

    #[test]
    fn dwfs_room_counts_the_requests_ahead_in_the_stage_order() {
        // Service 2; class 0 times out after 5 (room 2), class 1 after 40 (room 20). Two
        // class-1 requests queued first: ahead of a class-0 one only in arrival order.
        for (stage_order, third_class0) in [(StageOrder::Deadline, true), (StageOrder::Class, true), (StageOrder::Arrival, false)] {
            let cfg = DispatchConfig { stage_order, ..config(&[2.0], &[5.0, 40.0], &[]) };
            let mut d = Dispatcher::new(DispatchKind::Dwfs, &cfg).unwrap();
            assert_eq!(d.push(req(1, 0, 1, 0.0), 0.0), Admission::Queued);
            assert_eq!(d.push(req(2, 0, 1, 0.0), 0.0), Admission::Queued);
            let admitted = d.push(req(3, 0, 0, 0.0), 0.0) == Admission::Queued;
            assert_eq!(admitted, third_class0, "{stage_order}");
        }
    }

    #[test]
    fn stage_order_names_round_trip_and_unknown_names_list_the_choices() {
        for stage_order in StageOrder::ALL {
            assert_eq!(stage_order.name().parse::<StageOrder>(), Ok(stage_order));
        }
        let err = "random".parse::<StageOrder>().unwrap_err();
        assert!(err.contains("\"random\"") && err.contains("deadline, class, arrival"), "{err}");
    }

    #[test]
    fn dwfs_weights_follow_algorithm_1() {
        // 003 §4.1 service times, timeout 20, Fig. 5 transitions, ten requests
        // per stage: Algorithm 1 makes MM and SR productive (see dwfs tests).
        let cfg = DispatchConfig {
            service_times: sojourn_papers::papers().sessions.study_service_times.clone(),
            class_timeouts: vec![20.0],
            transitions: crate::dwfs::tests::fig5(),
            weights: vec![],
            stage_order: StageOrder::Deadline,
        };
        let mut d = Dispatcher::new(DispatchKind::Dwfs, &cfg).unwrap();
        let mut id = 0;
        for stage in 0..4 {
            for _ in 0..11 {
                id += 1;
                d.push(req(id, stage, 0, 0.0), 0.0);
            }
        }
        // BR's room is 20 / 2 = 10.
        assert_eq!((d.stage_len(2), d.stage_len(3)), (11, 10));
        let mut dropped = Vec::new();
        let first = d.pop(0.0, &mut dropped).unwrap();
        assert!(dropped.is_empty());
        // Demands 0.275, 0.55, 0.825, 1.0 with credits 1.201, 0.499, 1.486,
        // 0.815: MM + CO (weight 0.825, credit 1.700) beats SR alone (1.486).
        assert_eq!(d.weights().iter().map(|w| *w > 0.0).collect::<Vec<_>>(), vec![true, true, false, false]);
        assert!(first.stage == 0 || first.stage == 1, "{first:?}");
    }

    #[test]
    fn every_pushed_request_comes_back_exactly_once() {
        let dwfs_orders = StageOrder::ALL.map(|stage_order| (DispatchKind::Dwfs, stage_order));
        for (kind, stage_order) in DispatchKind::ALL.map(|kind| (kind, StageOrder::Deadline)).into_iter().chain(dwfs_orders) {
            let cfg = DispatchConfig { stage_order, ..config(&[0.5, 1.0, 1.5], &[3.0, 6.0], &[1.0, 2.0, 3.0]) };
            let mut d = Dispatcher::new(kind, &cfg).unwrap();
            let mut seen = Vec::new();
            let mut dropped = Vec::new();
            for i in 0..60u64 {
                let now = i as f64 * 0.3;
                let r = req(i, (i * 7 % 3) as usize, (i % 2) as usize, now);
                if let Admission::Refused(r) = d.push(r, now) {
                    seen.push(r.id);
                }
                if i % 3 == 0 {
                    d.remove_expired(now, &mut dropped);
                    if let Some(r) = d.pop(now, &mut dropped) {
                        seen.push(r.id);
                    }
                }
            }
            while let Some(r) = d.pop(100.0, &mut dropped) {
                seen.push(r.id);
            }
            seen.extend(dropped.iter().map(|r| r.id));
            seen.sort();
            assert_eq!(seen, (0..60).collect::<Vec<_>>(), "{kind} {stage_order}");
            assert!(d.is_empty());
        }
    }
}
