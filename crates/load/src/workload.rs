//! When which request falls due: the pure pacing core. Every method takes `now` (ns since
//! the run started) from the caller; nothing here reads a clock or touches a socket.
//!
//! - [`TraceReplay`]: open loop over a trace file, streamed row by row (memory does not
//!   grow with the trace), times divided by a time-scale factor (000 §2.4).
//! - [`PoissonOpen`]: open loop, Poisson arrivals at a fixed rate over a path list.
//! - [`ClosedUsers`]: N user equivalents, request -> response -> think -> request (002 §3.3,
//!   004 §4.2); with think time 0 and one connection each, the capacity probe of 001 §2.1.
//! - [`Sessions`]: Poisson session arrivals or closed-loop users (003 §5.1), each session
//!   a Markov chain over URL groups (003 §2); a failed request (incl. a missed delay bound
//!   of its class, 003 §5.2) aborts its session, or with `on_failure = "continue"` the
//!   session goes on.
//! - [`OpenPart`]: one event-loop thread's share of an open workload (`load --threads`).

use crate::session::{Arrivals, OnFailure, PoissonArrivals, SessionModel};
use crate::think::ThinkTime;
use anyhow::{bail, Context};
use rand::rngs::SmallRng;
use rand::Rng;
use rand_distr::{Distribution, Exp};
use serde::Deserialize;
use std::cmp::Reverse;
use crate::ids::IdMap;
use std::collections::{BinaryHeap, VecDeque};

pub type Nanos = u64;

/// One event-loop thread's share of a run (`load --threads N`): loop `index` of `count`
/// owns the clients with `client mod count == index`, so each client's connections, its
/// connection limit and its FIFO of waiting requests live in one loop (000 §2.4's rules
/// keep their meaning). Ids a loop makes itself (connections, closed-loop requests) are
/// numbered `local * count + index`, so they stay unique across the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub index: u32,
    pub count: u32,
}

impl Part {
    /// The whole run on one loop.
    pub const WHOLE: Part = Part { index: 0, count: 1 };

    pub fn owns(self, client: u32) -> bool {
        client % self.count == self.index
    }

    /// A run-wide id for this loop's `local` id.
    pub fn global(self, local: u64) -> u64 {
        local * u64::from(self.count) + u64::from(self.index)
    }

    /// Thread `thread` of `threads` within this part (a process's share, `--process-part`):
    /// the clients of this part with `client mod threads*count` one residue, so the parts of
    /// all threads of all processes cover every client once and their ids stay run-wide.
    pub fn thread(self, thread: u32, threads: u32) -> Part {
        Part { index: self.index + self.count * thread, count: self.count * threads }
    }
}

impl std::str::FromStr for Part {
    type Err = String;
    /// `I/K`: part I of K (0 <= I < K).
    fn from_str(text: &str) -> Result<Part, String> {
        let parsed = text.split_once('/').and_then(|(i, k)| Some((i.trim().parse().ok()?, k.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) if index < count => Ok(Part { index, count }),
            _ => Err(format!("{text:?}: expected I/K with 0 <= I < K, e.g. 0/2")),
        }
    }
}

/// One logical request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: u64,
    pub client: u32,
    pub session: i64,
    pub class: u8,
    pub path: String,
    pub expected_size: Option<u64>,
    pub scheduled: Nanos,
    /// This request's own delay bound (session classes); `None`: the run's `abort_after`.
    pub delay_bound: Option<Nanos>,
}

pub trait Workload {
    /// Append the requests due at or before `now`, in schedule order.
    fn poll_due(&mut self, now: Nanos, due: &mut Vec<Request>) -> anyhow::Result<()>;
    /// When the next request falls due, if one is known.
    fn next_due(&self) -> Option<Nanos>;
    /// `request` reached its final outcome (`ok`: a complete valid 2xx/3xx response).
    fn finished(&mut self, request: &Request, ok: bool, now: Nanos);
    /// No request will ever become due again (finished ones have been reported).
    fn exhausted(&self) -> bool;
    /// Mode-specific figures for summary.json.
    fn summary(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

fn seconds_to_ns(seconds: f64) -> Nanos {
    (seconds * 1e9).round() as Nanos
}

#[derive(Debug, Deserialize)]
struct TraceRow {
    arrival_s: f64,
    client: u32,
    path: String,
    size: u64,
    #[serde(default, deserialize_with = "csv::invalid_option")]
    session: Option<i64>,
    #[serde(default, deserialize_with = "csv::invalid_option")]
    class: Option<u8>,
}

/// What [`TraceReplay::check`] found in a trace (within its `end`).
#[derive(Debug, PartialEq, Eq)]
pub struct TraceShape {
    pub requests: u64,
    pub clients: usize,
    /// The last request's scheduled time (scaled).
    pub last_scheduled: Nanos,
}

/// Open-loop replay of a `trace.csv` (docs/formats.md), read as it is replayed.
pub struct TraceReplay<R: std::io::Read> {
    rows: csv::DeserializeRecordsIntoIter<R, TraceRow>,
    time_scale: f64,
    end: Option<Nanos>,
    next: Option<Request>,
    row_number: u64,
    last_arrival: f64,
}

impl<R: std::io::Read> TraceReplay<R> {
    /// `time_scale` > 1 replays faster; `end` stops replay at that (scaled) time.
    pub fn new(reader: R, time_scale: f64, end: Option<Nanos>) -> anyhow::Result<Self> {
        let rows = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(reader).into_deserialize();
        let mut replay = TraceReplay { rows, time_scale, end, next: None, row_number: 0, last_arrival: 0.0 };
        replay.advance()?;
        Ok(replay)
    }

    /// Read the whole trace once without keeping it, so a bad row is reported before anything
    /// is sent; returns its size, clients and last scheduled time.
    pub fn check(reader: R, time_scale: f64, end: Option<Nanos>) -> anyhow::Result<TraceShape> {
        let mut replay = TraceReplay::new(reader, time_scale, end)?;
        let mut clients = std::collections::HashSet::new();
        let mut last_scheduled = 0;
        while let Some(request) = replay.next.take() {
            clients.insert(request.client);
            last_scheduled = request.scheduled;
            replay.advance()?;
        }
        Ok(TraceShape { requests: replay.row_number, clients: clients.len(), last_scheduled })
    }

    fn advance(&mut self) -> anyhow::Result<()> {
        self.next = None;
        let Some(row) = self.rows.next() else { return Ok(()) };
        let line = self.row_number + 2;
        let row: TraceRow = row.with_context(|| format!("trace line {line} (columns: arrival_s,client,path,size[,session,class])"))?;
        if !(row.arrival_s.is_finite() && row.arrival_s >= self.last_arrival) {
            bail!("trace line {line}: arrival_s {} must be a number ≥ the previous arrival {}", row.arrival_s, self.last_arrival);
        }
        if !row.path.starts_with('/') {
            bail!("trace line {line}: path {:?} must start with '/'", row.path);
        }
        self.last_arrival = row.arrival_s;
        let scheduled = seconds_to_ns(row.arrival_s / self.time_scale);
        if self.end.is_some_and(|end| scheduled >= end) {
            return Ok(());
        }
        self.next = Some(Request {
            id: self.row_number,
            client: row.client,
            session: row.session.unwrap_or(-1),
            class: row.class.unwrap_or(0),
            path: row.path,
            expected_size: Some(row.size),
            scheduled,
            delay_bound: None,
        });
        self.row_number += 1;
        Ok(())
    }
}

impl<R: std::io::Read> Workload for TraceReplay<R> {
    fn poll_due(&mut self, now: Nanos, due: &mut Vec<Request>) -> anyhow::Result<()> {
        while self.next.as_ref().is_some_and(|next| next.scheduled <= now) {
            due.push(self.next.take().expect("checked"));
            self.advance()?;
        }
        Ok(())
    }

    fn next_due(&self) -> Option<Nanos> {
        self.next.as_ref().map(|next| next.scheduled)
    }

    fn finished(&mut self, _request: &Request, _ok: bool, _now: Nanos) {}

    fn exhausted(&self) -> bool {
        self.next.is_none()
    }
}

/// Open loop: Poisson arrivals at `rate` per second until `end`, paths drawn uniformly,
/// clients assigned round robin.
pub struct PoissonOpen {
    gaps: Exp<f64>,
    next_at: f64,
    end: Nanos,
    paths: Vec<String>,
    clients: u32,
    next_id: u64,
    rng: SmallRng,
}

impl PoissonOpen {
    pub fn new(rate: f64, end: Nanos, paths: Vec<String>, clients: u32, mut rng: SmallRng) -> Self {
        let gaps = Exp::new(rate * 1e-9).expect("rate validated positive");
        let next_at = gaps.sample(&mut rng);
        PoissonOpen { gaps, next_at, end, paths, clients, next_id: 0, rng }
    }
}

impl Workload for PoissonOpen {
    fn poll_due(&mut self, now: Nanos, due: &mut Vec<Request>) -> anyhow::Result<()> {
        while let Some(at) = self.next_due().filter(|&at| at <= now) {
            let path = self.paths[self.rng.gen_range(0..self.paths.len())].clone();
            due.push(Request {
                id: self.next_id,
                client: (self.next_id % u64::from(self.clients)) as u32,
                session: -1,
                class: 0,
                path,
                expected_size: None,
                scheduled: at,
                delay_bound: None,
            });
            self.next_id += 1;
            self.next_at += self.gaps.sample(&mut self.rng);
        }
        Ok(())
    }

    fn next_due(&self) -> Option<Nanos> {
        let at = self.next_at.round() as Nanos;
        (at < self.end).then_some(at)
    }

    fn finished(&mut self, _request: &Request, _ok: bool, _now: Nanos) {}

    fn exhausted(&self) -> bool {
        self.next_due().is_none()
    }
}

/// One loop's share of an open workload (trace replay, Poisson): every loop draws the whole
/// sequence (the same file or seed) and keeps its own clients' requests, so ids, clients and
/// times are those of a one-loop run. It reads ahead to its next own request, so the loop
/// wakes only for requests it sends (open workloads take no feedback from completions).
pub struct OpenPart<W> {
    whole: W,
    part: Part,
    own: VecDeque<Request>,
    scratch: Vec<Request>,
}

impl<W: Workload> OpenPart<W> {
    pub fn new(whole: W, part: Part) -> anyhow::Result<Self> {
        let mut open = OpenPart { whole, part, own: VecDeque::new(), scratch: Vec::new() };
        open.read_ahead()?;
        Ok(open)
    }

    /// Draw from the whole sequence until one of this part's requests is known (or none is left).
    fn read_ahead(&mut self) -> anyhow::Result<()> {
        while self.own.is_empty() {
            let Some(at) = self.whole.next_due() else { return Ok(()) };
            self.whole.poll_due(at, &mut self.scratch)?;
            let part = self.part;
            self.own.extend(self.scratch.drain(..).filter(|request| part.owns(request.client)));
        }
        Ok(())
    }
}

impl<W: Workload> Workload for OpenPart<W> {
    fn poll_due(&mut self, now: Nanos, due: &mut Vec<Request>) -> anyhow::Result<()> {
        while self.own.front().is_some_and(|next| next.scheduled <= now) {
            due.push(self.own.pop_front().expect("checked"));
            self.read_ahead()?;
        }
        Ok(())
    }

    fn next_due(&self) -> Option<Nanos> {
        self.own.front().map(|next| next.scheduled)
    }

    fn finished(&mut self, request: &Request, ok: bool, now: Nanos) {
        self.whole.finished(request, ok, now);
    }

    fn exhausted(&self) -> bool {
        self.own.is_empty() && self.whole.exhausted()
    }
}

/// Timers ordered by due time, then insertion order (deterministic ties).
struct Timers<T> {
    heap: BinaryHeap<Reverse<(Nanos, u64)>>,
    payloads: IdMap<u64, T>,
    sequence: u64,
}

impl<T> Timers<T> {
    fn new() -> Self {
        Timers { heap: BinaryHeap::new(), payloads: IdMap::default(), sequence: 0 }
    }
    fn push(&mut self, at: Nanos, payload: T) {
        self.heap.push(Reverse((at, self.sequence)));
        self.payloads.insert(self.sequence, payload);
        self.sequence += 1;
    }
    fn next_at(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }
    fn pop_due(&mut self, now: Nanos) -> Option<(Nanos, T)> {
        let Reverse((at, sequence)) = *self.heap.peek().filter(|Reverse((at, _))| *at <= now)?;
        self.heap.pop();
        Some((at, self.payloads.remove(&sequence).expect("every timer has a payload")))
    }
    fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// Closed loop: `users` user equivalents (client id = user index), each with at most one
/// request outstanding; the next is due `think` after the previous one's final outcome.
/// User `u` issues its first request at `u * start_spread / users` (all at 0 without a
/// spread). New requests stop at `end`.
pub struct ClosedUsers {
    think: ThinkTime,
    end: Nanos,
    paths: Vec<String>,
    ready: Timers<u32>,
    outstanding: u64,
    issued: u64,
    part: Part,
    rng: SmallRng,
}

impl ClosedUsers {
    /// The users of `part` among `users` (all of them for [`Part::WHOLE`]). Users who start
    /// together with no think time stay in step, a wave a round trip apart, when the round
    /// trip dominates their cycle; `start_spread` spaces their first requests evenly so their
    /// phases start (and, with equal cycles, stay) apart.
    pub fn new(users: u32, think: ThinkTime, start_spread: Nanos, end: Nanos, paths: Vec<String>, rng: SmallRng, part: Part) -> Self {
        let mut ready = Timers::new();
        for user in (0..users).filter(|&user| part.owns(user)) {
            ready.push((u128::from(start_spread) * u128::from(user) / u128::from(users)) as Nanos, user);
        }
        ClosedUsers { think, end, paths, ready, outstanding: 0, issued: 0, part, rng }
    }
}

impl Workload for ClosedUsers {
    fn poll_due(&mut self, now: Nanos, due: &mut Vec<Request>) -> anyhow::Result<()> {
        while let Some((at, user)) = self.ready.pop_due(now) {
            due.push(Request {
                id: self.part.global(self.issued),
                client: user,
                session: -1,
                class: 0,
                path: self.paths[self.rng.gen_range(0..self.paths.len())].clone(),
                expected_size: None,
                scheduled: at,
                delay_bound: None,
            });
            self.issued += 1;
            self.outstanding += 1;
        }
        Ok(())
    }

    fn next_due(&self) -> Option<Nanos> {
        self.ready.next_at()
    }

    fn finished(&mut self, request: &Request, _ok: bool, now: Nanos) {
        self.outstanding -= 1;
        let at = now + self.think.sample_ns(&mut self.rng);
        if at < self.end {
            self.ready.push(at, request.client);
        }
    }

    fn exhausted(&self) -> bool {
        self.ready.is_empty() && self.outstanding == 0
    }
}

#[derive(Debug)]
struct ActiveSession {
    state: usize,
    requests: u32,
    /// The client (connections, source address, class) the session runs on.
    client: u32,
}

/// Session mode (003 §2). Open loop: sessions arrive as a Poisson process until `end`, at a
/// constant rate or one following a profile's periods; session `s` is client `s` (its own
/// connections). Closed loop (003 §5.1's WebStone
/// clients): user `u` is client `u` and runs one session after another, the next starting
/// a think time after the last completed or was aborted; no request starts after `end`.
/// A session's first state comes from the model's `start` row, each later one from the
/// transition matrix; it completes on `exit` (or after `max_requests`) and is aborted
/// when a request fails or misses its class's delay bound (the class of the client's
/// source address, [`SessionModel::class_of`]), unless the model's `on_failure` is
/// `continue`: then the session goes on to its next state (`failures_continued` counts them).
pub struct Sessions {
    model: SessionModel,
    /// The open loop's arrival process; None for closed-loop users.
    open: Option<PoissonArrivals>,
    next_arrival: f64,
    end: Nanos,
    ready: Timers<u64>,
    active: IdMap<u64, ActiveSession>,
    /// Class and delay bound of client `c` are `classes[c mod len]` (the source
    /// addresses' order; one entry when no source addresses are given).
    classes: Vec<(u8, Nanos)>,
    next_session: u64,
    next_id: u64,
    completed: u64,
    aborted: u64,
    failures_continued: u64,
    cut_at_end: u64,
    requests_ok: u64,
    rng: SmallRng,
}

impl Sessions {
    /// `sources`: the load generator's source addresses, client `c` binding to
    /// `sources[c mod len]` as the event loop does.
    pub fn new(model: SessionModel, end: Nanos, sources: &[std::net::IpAddr], mut rng: SmallRng) -> Self {
        let classes: Vec<(u8, Nanos)> = if sources.is_empty() { vec![model.class_of(None)] } else {
            sources.iter().map(|&addr| model.class_of(Some(addr))).collect()
        }
        .into_iter()
        .map(|(class, bound_s)| (class, seconds_to_ns(bound_s)))
        .collect();
        let (mut open, users) = match &model.arrivals {
            Arrivals::Poisson(periods) => (Some(PoissonArrivals::new(periods)), 0),
            Arrivals::Users(users) => (None, *users),
        };
        let next_arrival = open.as_mut().map_or(f64::INFINITY, |open| open.next_after(0.0, &mut rng));
        let mut sessions = Sessions {
            model,
            open,
            next_arrival,
            end,
            ready: Timers::new(),
            active: IdMap::default(),
            classes,
            next_session: 0,
            next_id: 0,
            completed: 0,
            aborted: 0,
            failures_continued: 0,
            cut_at_end: 0,
            requests_ok: 0,
            rng,
        };
        for user in 0..users {
            let session = sessions.start_session(user);
            sessions.ready.push(0, session);
        }
        sessions
    }

    fn arrival_due(&self) -> Option<Nanos> {
        let at = self.next_arrival.round() as Nanos;
        (self.open.is_some() && at < self.end).then_some(at)
    }

    /// A new session of `client`; returns its id.
    fn start_session(&mut self, client: u32) -> u64 {
        let session = self.next_session;
        self.next_session += 1;
        let state = self.model.first_state(&mut self.rng);
        self.active.insert(session, ActiveSession { state, requests: 1, client });
        session
    }

    fn request_for(&mut self, session: u64, at: Nanos) -> Request {
        let ActiveSession { state, client, .. } = self.active[&session];
        let (class, bound) = self.classes[client as usize % self.classes.len()];
        let request = Request {
            id: self.next_id,
            client,
            session: session as i64,
            class,
            path: self.model.pick_path(state, &mut self.rng).to_owned(),
            expected_size: None,
            scheduled: at,
            delay_bound: Some(bound),
        };
        self.next_id += 1;
        request
    }

    /// After a session of `client` ended at `now`: a closed-loop user starts its next one.
    fn session_ended(&mut self, client: u32, now: Nanos) {
        if self.open.is_none() {
            let at = now + self.model.think_time.sample_ns(&mut self.rng);
            if at < self.end {
                let session = self.start_session(client);
                self.ready.push(at, session);
            }
        }
    }
}

impl Workload for Sessions {
    fn poll_due(&mut self, now: Nanos, due: &mut Vec<Request>) -> anyhow::Result<()> {
        loop {
            let arrival = self.arrival_due().filter(|&at| at <= now);
            let think_over = self.ready.next_at().filter(|&at| at <= now);
            // Whichever is earlier first; a new session wins a tie.
            let new_session_first = match (arrival, think_over) {
                (Some(arrival), Some(think)) => arrival <= think,
                (arrival, _) => arrival.is_some(),
            };
            match (arrival, think_over) {
                (Some(arrival), _) if new_session_first => {
                    let client = self.next_session as u32;
                    let session = self.start_session(client);
                    due.push(self.request_for(session, arrival));
                    self.next_arrival = self.open.as_mut().expect("open loop").next_after(self.next_arrival, &mut self.rng);
                }
                (_, Some(_)) => {
                    let (at, session) = self.ready.pop_due(now).expect("peeked");
                    due.push(self.request_for(session, at));
                }
                _ => return Ok(()),
            }
        }
    }

    fn next_due(&self) -> Option<Nanos> {
        match (self.arrival_due(), self.ready.next_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn finished(&mut self, request: &Request, ok: bool, now: Nanos) {
        let session = request.session as u64;
        let Some(mut active) = self.active.remove(&session) else { return };
        match (ok, self.model.on_failure) {
            (true, _) => self.requests_ok += 1,
            (false, OnFailure::Continue) => self.failures_continued += 1,
            (false, OnFailure::Restart) => {
                self.aborted += 1;
                self.session_ended(active.client, now);
                return;
            }
        }
        let limit_reached = self.model.max_requests.is_some_and(|max| active.requests >= max);
        match self.model.next_state(active.state, &mut self.rng) {
            Some(state) if !limit_reached => {
                let at = now + self.model.think_time.sample_ns(&mut self.rng);
                if self.open.is_none() && at >= self.end {
                    self.cut_at_end += 1; // a closed loop issues nothing after the end
                    return;
                }
                active.state = state;
                active.requests += 1;
                self.active.insert(session, active);
                self.ready.push(at, session);
            }
            _ => {
                self.completed += 1;
                self.session_ended(active.client, now);
            }
        }
    }

    fn exhausted(&self) -> bool {
        self.arrival_due().is_none() && self.active.is_empty()
    }

    fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "sessions_started": self.next_session,
            "sessions_completed": self.completed,
            "sessions_aborted": self.aborted,
            "session_failures_continued": self.failures_continued,
            "sessions_unfinished": self.active.len() as u64 + self.cut_at_end,
            "session_abort_rate": if self.completed + self.aborted > 0 { self.aborted as f64 / (self.completed + self.aborted) as f64 } else { 0.0 },
            "state_names": self.model.state_names,
            "class_names": self.model.classes.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
            "arrivals": match self.model.arrivals { Arrivals::Poisson(_) => "poisson", Arrivals::Users(_) => "users" },
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn process_parts_and_their_threads_cover_every_client_once_with_run_wide_ids() {
        let (processes, threads) = (3u32, 2u32);
        let parts: Vec<Part> = (0..processes)
            .flat_map(|p| (0..threads).map(move |t| Part { index: p, count: processes }.thread(t, threads)))
            .collect();
        for client in 0..60 {
            assert_eq!(parts.iter().filter(|part| part.owns(client)).count(), 1, "client {client}");
        }
        let ids: std::collections::HashSet<u64> = parts.iter().flat_map(|part| (0..10).map(|local| part.global(local))).collect();
        assert_eq!(ids.len(), parts.len() * 10);
        assert_eq!(Part::WHOLE.thread(0, 1), Part::WHOLE);
        assert_eq!("1/3".parse(), Ok(Part { index: 1, count: 3 }));
        assert!("3/3".parse::<Part>().is_err() && "x".parse::<Part>().is_err() && "0/0".parse::<Part>().is_err());
    }

    use super::*;
    use rand::SeedableRng;

    fn drain(workload: &mut dyn Workload, until: Nanos) -> Vec<Request> {
        let mut due = Vec::new();
        workload.poll_due(until, &mut due).unwrap();
        due
    }

    #[test]
    fn trace_replay_scales_time_and_streams() {
        let trace = "arrival_s,client,path,size,session\n0.0,0,/a,10,-1\n0.5,1,/b,20,\n1.0,0,/c,30,7\n";
        let mut replay = TraceReplay::new(trace.as_bytes(), 2.0, None).unwrap();
        assert_eq!(replay.next_due(), Some(0));
        let first = drain(&mut replay, 250_000_000);
        assert_eq!(first.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(), ["/a", "/b"]);
        assert_eq!(first[1].scheduled, 250_000_000);
        assert_eq!(first[1].session, -1);
        let rest = drain(&mut replay, u64::MAX);
        assert_eq!((rest[0].id, rest[0].session, rest[0].expected_size), (2, 7, Some(30)));
        assert!(replay.exhausted());
    }

    #[test]
    fn trace_paths_quoted_by_the_python_writer_read_back() {
        // Byte for byte what sojourn.workloads.io.write_trace writes for paths with quotes
        // (RFC 4180: the field quoted, its quotes doubled; pyarrow quotes every string column).
        let trace = "arrival_s,client,path,size\n\"0.000000\",0,\"/a\"\"b\"\".html\",10\n\"0.500000\",1,\"/\u{e9};x\",20\n";
        let mut replay = TraceReplay::new(trace.as_bytes(), 1.0, None).unwrap();
        let due = drain(&mut replay, u64::MAX);
        assert_eq!(due.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(), ["/a\"b\".html", "/\u{e9};x"]);
        assert_eq!(due[1].scheduled, 500_000_000);
    }

    #[test]
    fn check_reads_the_whole_trace_first() {
        let trace = "arrival_s,client,path,size\n0.0,0,/a,1\n0.1,3,/b,1\n0.2,0,/c,1\n";
        assert_eq!(TraceReplay::check(trace.as_bytes(), 1.0, None).unwrap(), TraceShape { requests: 3, clients: 2, last_scheduled: 200_000_000 });
        // Within --duration (end) and at --time-scale 2: the last request kept, at its scaled time.
        assert_eq!(TraceReplay::check(trace.as_bytes(), 2.0, Some(100_000_000)).unwrap(), TraceShape { requests: 2, clients: 2, last_scheduled: 50_000_000 });
        let late_error = format!("{trace}0.1,0,/d,1\n");
        let err = format!("{:#}", TraceReplay::check(late_error.as_bytes(), 1.0, None).unwrap_err());
        assert!(err.contains("trace line 5"), "{err}");
    }

    #[test]
    fn trace_errors_name_the_line() {
        let bad_order = "arrival_s,client,path,size\n1.0,0,/a,1\n0.5,0,/b,1\n";
        let mut replay = TraceReplay::new(bad_order.as_bytes(), 1.0, None).unwrap();
        let err = format!("{:#}", replay.poll_due(u64::MAX, &mut Vec::new()).unwrap_err());
        assert!(err.contains("trace line 3"), "{err}");
        let bad_field = "arrival_s,client,path,size\n0.0,x,/a,1\n";
        let err = format!("{:#}", TraceReplay::new(bad_field.as_bytes(), 1.0, None).err().unwrap());
        assert!(err.contains("trace line 2"), "{err}");
    }

    #[test]
    fn poisson_rate_is_close_to_target() {
        let mut open = PoissonOpen::new(10_000.0, 2_000_000_000, vec!["/x".into()], 4, SmallRng::seed_from_u64(9));
        let due = drain(&mut open, u64::MAX);
        assert!((due.len() as f64 - 20_000.0).abs() < 600.0, "{}", due.len());
        assert!(due.windows(2).all(|w| w[0].scheduled <= w[1].scheduled));
        assert!(open.exhausted());
    }

    #[test]
    fn closed_users_wait_for_their_response_and_think() {
        let think = ThinkTime::Constant { s: 1.0 };
        let mut users = ClosedUsers::new(2, think, 0, 10_000_000_000, vec!["/x".into()], SmallRng::seed_from_u64(1), Part::WHOLE);
        let first = drain(&mut users, 0);
        assert_eq!(first.len(), 2);
        assert!(drain(&mut users, 5_000_000_000).is_empty(), "nobody issues before a response");
        users.finished(&first[0], true, 100);
        assert_eq!(users.next_due(), Some(1_000_000_100));
        let next = drain(&mut users, 1_000_000_100);
        assert_eq!((next.len(), next[0].client), (1, first[0].client));
        assert!(!users.exhausted());
    }

    #[test]
    fn a_start_spread_spaces_the_users_first_requests_evenly() {
        let mut users = ClosedUsers::new(4, ThinkTime::None, 2_000_000_000, 10_000_000_000, vec!["/x".into()], SmallRng::seed_from_u64(1), Part::WHOLE);
        let first = drain(&mut users, 0);
        assert_eq!((first.len(), first[0].client), (1, 0));
        let rest: Vec<(u32, Nanos)> = drain(&mut users, u64::MAX).iter().map(|r| (r.client, r.scheduled)).collect();
        assert_eq!(rest, vec![(1, 500_000_000), (2, 1_000_000_000), (3, 1_500_000_000)]);
    }

    #[test]
    fn sessions_abort_on_failure_and_complete_on_exit() {
        let model = SessionModel::parse(
            "arrival-rate = 1000.0\ndelay-bound-s = 1.0\nstart = { A = 1.0 }\n[states.A]\npaths = [\"/a\"]\nnext = { exit = 1.0 }\n",
        )
        .unwrap();
        let mut sessions = Sessions::new(model, 10_000_000, &[], SmallRng::seed_from_u64(2));
        let due = drain(&mut sessions, 10_000_000);
        assert!(due.len() > 2);
        sessions.finished(&due[0], false, 10_000_000);
        for request in &due[1..] {
            sessions.finished(request, true, 10_000_000);
        }
        assert!(sessions.exhausted());
        let summary = sessions.summary();
        assert_eq!(summary["sessions_aborted"], 1);
        assert_eq!(summary["sessions_completed"], due.len() as u64 - 1);
    }

    #[test]
    fn closed_loop_users_restart_sessions_and_carry_their_class_bound() {
        let model = SessionModel::parse(concat!(
            "users = 2\ndelay-bound-s = 9.0\nthink-time = { distribution = \"constant\", s = 1.0 }\n",
            "start = { A = 1.0 }\n[states.A]\npaths = [\"/a\"]\nnext = { A = 1.0 }\n",
            "[[classes]]\nname = \"gold\"\ndelay-bound-s = 0.1\nsources = [\"10.0.0.1\"]\n",
            "[[classes]]\nname = \"bronze\"\ndelay-bound-s = 0.2\n",
        ))
        .unwrap();
        let sources = ["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()];
        let mut sessions = Sessions::new(model, 5_000_000_000, &sources, SmallRng::seed_from_u64(4));
        let first = drain(&mut sessions, 0);
        assert_eq!(first.iter().map(|r| (r.client, r.class, r.delay_bound)).collect::<Vec<_>>(),
                   [(0, 0, Some(100_000_000)), (1, 1, Some(200_000_000))]);
        // User 0's request fails: its session is aborted and a new one starts a think time later.
        sessions.finished(&first[0], false, 50_000_000);
        sessions.finished(&first[1], true, 60_000_000);
        let next = drain(&mut sessions, 1_060_000_000);
        assert_eq!(next.iter().map(|r| (r.client, r.session)).collect::<Vec<_>>(), [(0, 2), (1, 1)]);
        // Nothing is issued after the end: the sessions are cut, counted as unfinished.
        sessions.finished(&next[0], true, 4_500_000_000);
        sessions.finished(&next[1], true, 4_500_000_000);
        assert!(drain(&mut sessions, u64::MAX).is_empty() && sessions.exhausted());
        let summary = sessions.summary();
        assert_eq!((summary["sessions_aborted"].as_u64(), summary["sessions_unfinished"].as_u64()), (Some(1), Some(2)));
        assert_eq!(summary["arrivals"], "users");
    }

    #[test]
    fn with_on_failure_continue_a_failed_request_leaves_its_session_going() {
        let model = |on_failure: &str| {
            SessionModel::parse(&format!(
                "users = 1\ndelay-bound-s = 1.0\non-failure = \"{on_failure}\"\nstart = {{ A = 1.0 }}\n\
                 [states.A]\npaths = [\"/a\"]\nnext = {{ B = 1.0 }}\n[states.B]\npaths = [\"/b\"]\nnext = {{ exit = 1.0 }}\n"
            ))
            .unwrap()
        };
        for (on_failure, second_path, session) in [("continue", "/b", 0), ("restart", "/a", 1)] {
            let mut sessions = Sessions::new(model(on_failure), 10_000_000_000, &[], SmallRng::seed_from_u64(5));
            let first = drain(&mut sessions, 0);
            assert_eq!(first[0].path, "/a");
            sessions.finished(&first[0], false, 1_000);
            let second = drain(&mut sessions, 1_000);
            assert_eq!((second[0].path.as_str(), second[0].session), (second_path, session), "{on_failure}");
            let summary = sessions.summary();
            let continued = u64::from(on_failure == "continue");
            assert_eq!((summary["sessions_aborted"].as_u64(), summary["session_failures_continued"].as_u64()),
                       (Some(1 - continued), Some(continued)), "{on_failure}");
        }
        assert!(SessionModel::parse("users = 1\ndelay-bound-s = 1.0\non-failure = \"retry\"\nstart = { A = 1.0 }\n\
                                     [states.A]\npaths = [\"/a\"]\nnext = { exit = 1.0 }\n").is_err());
    }

    /// Draw a workload to its end in steps of `step` ns, reporting each request finished.
    fn run_out(workload: &mut dyn Workload, step: Nanos) -> Vec<Request> {
        let (mut all, mut now) = (Vec::new(), 0);
        while !workload.exhausted() {
            let due = drain(workload, now);
            for request in &due {
                workload.finished(request, true, now);
            }
            all.extend(due);
            now += step;
        }
        all
    }

    proptest::proptest! {
        #[test]
        fn open_parts_split_the_whole_sequence_by_client(count in 1u32..5, clients in 1u32..9, seed: u64) {
            let whole = |seed| PoissonOpen::new(5_000.0, 200_000_000, vec!["/a".into(), "/b".into()], clients, SmallRng::seed_from_u64(seed));
            let expected = run_out(&mut whole(seed), 1_000_000);
            let mut merged = Vec::new();
            for index in 0..count {
                let part = Part { index, count };
                let mine = run_out(&mut OpenPart::new(whole(seed), part).unwrap(), 1_000_000);
                proptest::prop_assert!(mine.iter().all(|r| part.owns(r.client)));
                proptest::prop_assert!(mine.windows(2).all(|w| w[0].scheduled <= w[1].scheduled));
                merged.extend(mine);
            }
            merged.sort_by_key(|r| r.id);
            proptest::prop_assert_eq!(merged, expected);
        }

        #[test]
        fn closed_parts_own_disjoint_users_and_ids(count in 1u32..5, users in 1u32..12) {
            let mut ids = std::collections::HashSet::new();
            let mut seen_users = std::collections::BTreeSet::new();
            for index in 0..count {
                let part = Part { index, count };
                let mut closed = ClosedUsers::new(users, ThinkTime::None, 0, 5_000_000, vec!["/a".into()], SmallRng::seed_from_u64(1), part);
                for request in run_out(&mut closed, 1_000_000) {
                    proptest::prop_assert!(part.owns(request.client) && request.client < users);
                    proptest::prop_assert!(ids.insert(request.id), "id {} twice", request.id);
                    seen_users.insert(request.client);
                }
            }
            proptest::prop_assert_eq!(seen_users.len() as u32, users);
        }
    }
}
