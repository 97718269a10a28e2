//! The thin I/O shell: a mio event loop thread driving the pure cores. A run has one loop
//! per `--threads`, each owning a [`Part`] of the clients (cli.rs merges their records).
//!
//! Pacing (docs/load.md): each wake-up is an absolute CLOCK_MONOTONIC deadline armed on a
//! timerfd (timer slack set to 1 µs) [`SPIN`] early, then the loop busy-polls to the
//! deadline, so requests leave within microseconds of their schedule.
//! Guarantees: every request taken from the workload ends with exactly one final record
//! (`interrupted` if the run stops first); connections follow [`ConnPool`]'s rules; an
//! attempt's abort/timeout clock starts at its scheduled time (first attempt) or its
//! issue (retries), so waiting for a connection counts (000 Table 2 (H)).

use crate::content::ContentCheck;
use crate::conn_pool::{Action, ConnId, ConnPool};
use crate::record::{Attempt, Outcome, Recorder};
use crate::response::ResponseReader;
use crate::workload::{Nanos, Part, Request, Workload};
use anyhow::Context;
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::cmp::Reverse;
use crate::ids::IdMap;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sojourn_sys::timer::Timer;
use sojourn_sys::{clock, signals, thread};

/// How long before a deadline the loop stops sleeping and busy-polls.
const SPIN: Nanos = 30_000;
const TIMER: Token = Token(usize::MAX);

/// Nanoseconds the calling thread has spent runnable but waiting for a CPU (the second
/// field of Linux's `/proc/thread-self/schedstat`); None where the kernel does not keep it.
fn runqueue_wait_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Where the loop thread's time went, to tell generator lag caused by CPU contention
/// (the thread runnable but not running) from lag caused by the loop's own work.
#[derive(Default)]
struct LoopClock {
    busy_ns: u64,
    longest_pass_ns: u64,
    runqueue_wait_at_start: Option<u64>,
    runqueue_wait_at_second: Option<u64>,
    worst_second_runqueue_wait_ns: u64,
    switches_at_start: Option<u64>,
}

impl LoopClock {
    fn start() -> Self {
        let wait = runqueue_wait_ns();
        LoopClock { runqueue_wait_at_start: wait, runqueue_wait_at_second: wait, switches_at_start: thread::involuntary_switches(), ..LoopClock::default() }
    }

    /// One pass of work (not sleeping in epoll) took `ns`.
    fn pass(&mut self, ns: u64) {
        self.busy_ns += ns;
        self.longest_pass_ns = self.longest_pass_ns.max(ns);
    }

    /// Called once per second of the run: the run-queue wait of the second that ended.
    fn second(&mut self) {
        let now = runqueue_wait_ns();
        if let (Some(now), Some(before)) = (now, self.runqueue_wait_at_second) {
            self.worst_second_runqueue_wait_ns = self.worst_second_runqueue_wait_ns.max(now.saturating_sub(before));
        }
        self.runqueue_wait_at_second = now;
    }

    fn end(&mut self, now: Nanos) -> LoopTimes {
        self.second();
        let secs = |ns: u64| ns as f64 / 1e9;
        LoopTimes {
            busy_fraction: if now > 0 { self.busy_ns as f64 / now as f64 } else { 0.0 },
            longest_pass_s: secs(self.longest_pass_ns),
            runqueue_wait_s: runqueue_wait_ns().zip(self.runqueue_wait_at_start).map(|(end, start)| secs(end.saturating_sub(start))),
            worst_second_runqueue_wait_s: self.runqueue_wait_at_start.map(|_| secs(self.worst_second_runqueue_wait_ns)),
            involuntary_switches: thread::involuntary_switches().zip(self.switches_at_start).map(|(end, start)| end.saturating_sub(start)),
        }
    }
}

/// How far an attempt got, to say in a `timeout` record's `error` where it stopped: a
/// connection never established (SYN or SYN-ACK lost for good, 000 §5) reads differently
/// from a request the server never answered (docs/load.md).
struct AttemptProgress {
    on_conn: bool,
    connecting: bool,
    sent: bool,
    first_byte: bool,
}

impl AttemptProgress {
    fn timeout_error(&self) -> &'static str {
        match self {
            AttemptProgress { on_conn: false, .. } => "timeout waiting for a free connection of the client",
            AttemptProgress { connecting: true, .. } => "timeout in the TCP handshake (connection never established)",
            AttemptProgress { sent: false, .. } => "timeout sending the request",
            AttemptProgress { first_byte: false, .. } => "timeout after the request was sent, no response byte",
            AttemptProgress { .. } => "timeout during the response (incomplete)",
        }
    }
}

/// The loop thread's time over a run (summary.json `loop_*`, docs/load.md).
pub struct LoopTimes {
    /// Share of the run spent working rather than sleeping in epoll.
    pub busy_fraction: f64,
    /// The longest single pass of work between two epoll waits.
    pub longest_pass_s: f64,
    /// Time runnable but waiting for a CPU (None without schedstat).
    pub runqueue_wait_s: Option<f64>,
    /// The largest such wait within one second of the run.
    pub worst_second_runqueue_wait_s: Option<f64>,
    /// Preemptions of the loop thread.
    pub involuntary_switches: Option<u64>,
}

/// Everything the loop needs besides the workload.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    pub target: SocketAddr,
    pub host_header: String,
    /// Client `c` binds to `source_addrs[c mod len]` (empty: the kernel chooses).
    pub source_addrs: Vec<IpAddr>,
    pub max_requests_per_conn: Option<u32>,
    pub max_conns_per_client: u32,
    /// User abort (000 Table 2 (H)): abort an attempt after this long and retry on a new connection.
    pub abort_after: Option<Nanos>,
    pub retries: u32,
    /// Hard limit per attempt (outcome `timeout`, no retry).
    pub timeout: Nanos,
    pub verify_content: bool,
    /// Stop at this time; whatever is outstanding then is `interrupted`.
    pub stop_at: Option<Nanos>,
    /// The clients this loop owns (all of them with one thread).
    pub part: Part,
}

/// A loop's running totals, published once per second for the progress line, which the
/// run's main thread prints summed over its loops.
#[derive(Default)]
pub struct Progress {
    pub issued: AtomicU64,
    pub done: AtomicU64,
    pub errors: AtomicU64,
    pub in_flight: AtomicU64,
    pub connections: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Waiting,
    OnConn(ConnId),
}

struct Live {
    request: Request,
    attempt: Attempt,
    place: Place,
}

enum ConnState {
    Connecting,
    Open,
}

struct Conn {
    stream: TcpStream,
    state: ConnState,
    request: Option<u64>,
    reader: ResponseReader,
    check: Option<ContentCheck>,
    out: Vec<u8>,
    written: usize,
}

/// What happened to a finished run.
pub struct RunEnd {
    pub interrupted_by_signal: bool,
    pub loop_times: LoopTimes,
    pub connections_opened: u64,
    pub now: Nanos,
}

pub struct EventLoop<'a> {
    config: LoopConfig,
    poll: Poll,
    timer: Timer,
    start: u64,
    pool: ConnPool,
    live: IdMap<u64, Live>,
    conns: IdMap<ConnId, Conn>,
    deadlines: BinaryHeap<Reverse<(Nanos, u64, u32)>>,
    actions: VecDeque<Action>,
    recorder: &'a mut Recorder,
    progress: &'a Progress,
    read_buffer: Vec<u8>,
    connections_opened: u64,
}

impl<'a> EventLoop<'a> {
    pub fn new(config: LoopConfig, recorder: &'a mut Recorder, progress: &'a Progress) -> anyhow::Result<Self> {
        let poll = Poll::new().context("creating the epoll instance")?;
        let timer = Timer::new().context("creating the pacing timerfd")?;
        // Wake-ups within 1 µs of the deadline instead of the default 50 µs slack.
        let _ = thread::set_timer_slack(Duration::from_micros(1));
        poll.registry().register(&mut SourceFd(&timer.as_raw_fd()), TIMER, Interest::READABLE)?;
        let pool = ConnPool::new(config.max_requests_per_conn, config.max_conns_per_client);
        Ok(EventLoop {
            config,
            poll,
            timer,
            start: clock::monotonic_ns(),
            pool,
            live: IdMap::default(),
            conns: IdMap::default(),
            deadlines: BinaryHeap::new(),
            actions: VecDeque::new(),
            recorder,
            progress,
            read_buffer: vec![0; 256 * 1024],
            connections_opened: 0,
        })
    }

    fn now(&self) -> Nanos {
        clock::monotonic_ns() - self.start
    }

    /// Run the workload to its end (or `stop_at`, or Ctrl-C), times counted from `start`
    /// ([`clock::monotonic_ns`]; the same for every loop of a run).
    pub fn run(&mut self, workload: &mut dyn Workload, start: u64) -> anyhow::Result<RunEnd> {
        let mut events = Events::with_capacity(1024);
        let mut due = Vec::new();
        let mut next_second = 1_000_000_000;
        let mut interrupted_by_signal = false;
        self.start = start;
        let mut clock = LoopClock::start();
        loop {
            let now = self.now();
            // Every loop of the run sees the flag (it is never reset; the run ends).
            if signals::stop_requested() {
                interrupted_by_signal = true;
                break;
            }
            if self.config.stop_at.is_some_and(|stop| now >= stop) {
                break;
            }
            due.clear();
            workload.poll_due(now, &mut due)?;
            for request in due.drain(..) {
                self.issue(request, 0, now, workload)?;
            }
            self.expire_deadlines(now, workload)?;
            if workload.exhausted() && self.live.is_empty() {
                break;
            }
            self.recorder.tick(now, self.live.len() as u64, self.conns.len() as u64)?;
            if now >= next_second {
                clock.second();
                self.publish_progress();
                next_second = (now / 1_000_000_000 + 1) * 1_000_000_000;
            }
            let wake = [workload.next_due(), self.deadlines.peek().map(|Reverse((at, _, _))| *at), self.config.stop_at, Some((now / 1_000_000_000 + 1) * 1_000_000_000)]
                .into_iter()
                .flatten()
                .min()
                .expect("the next second is always a candidate");
            let after_work = self.now();
            clock.pass(after_work - now);
            let timeout = if wake <= after_work + SPIN {
                Some(std::time::Duration::ZERO)
            } else {
                self.timer.arm_no_later_than(self.start + wake - SPIN)?;
                None
            };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) => return Err(err).context("epoll_wait"),
            }
            let woke = self.now();
            for event in events.iter() {
                if event.token() == TIMER {
                    self.timer.clear();
                    continue;
                }
                self.handle_event(event.token().0 as ConnId, event, woke, workload)?;
            }
            clock.pass(self.now() - woke);
        }
        let now = self.now();
        self.interrupt_all(now)?;
        self.publish_progress();
        Ok(RunEnd {
            interrupted_by_signal,
            loop_times: clock.end(now),
            connections_opened: self.connections_opened,
            now,
        })
    }

    fn publish_progress(&self) {
        let tally = &self.recorder.tally;
        let done: u64 = tally.final_outcomes.values().sum();
        let p = self.progress;
        p.issued.store(tally.requests, Ordering::Relaxed);
        p.done.store(done, Ordering::Relaxed);
        p.errors.store(done - tally.ok_requests(), Ordering::Relaxed);
        p.in_flight.store(self.live.len() as u64, Ordering::Relaxed);
        p.connections.store(self.conns.len() as u64, Ordering::Relaxed);
    }

    /// Start attempt `attempt` of `request` (a retry when `attempt` > 0).
    fn issue(&mut self, request: Request, attempt: u32, now: Nanos, workload: &mut dyn Workload) -> anyhow::Result<()> {
        if attempt == 0 {
            self.recorder.issued(request.scheduled, now);
        }
        let base = if attempt == 0 { request.scheduled } else { now };
        let limit = match request.delay_bound.or(self.config.abort_after) {
            Some(abort) => abort.min(self.config.timeout),
            None => self.config.timeout,
        };
        self.deadlines.push(Reverse((base + limit, request.id, attempt)));
        // Deadlines of finished attempts stay in the heap until they pass; purge them when they
        // outnumber the live ones, so memory follows requests in flight (amortized O(1)).
        if self.deadlines.len() > 2 * self.live.len() + 4096 {
            let live = &self.live;
            self.deadlines.retain(|Reverse((_, id, attempt))| live.get(id).is_some_and(|l| l.attempt.attempt == *attempt) || *id == request.id);
        }
        let record = Attempt {
            request_id: request.id,
            attempt,
            client: request.client,
            session: request.session,
            class: request.class,
            expected_size: request.expected_size,
            scheduled: request.scheduled,
            issued: now,
            ..Attempt::default()
        };
        let (id, client) = (request.id, request.client);
        self.live.insert(id, Live { request, attempt: record, place: Place::Waiting });
        self.pool.submit(client, id, attempt > 0, &mut self.actions);
        self.apply_actions(now, workload)
    }

    fn apply_actions(&mut self, now: Nanos, workload: &mut dyn Workload) -> anyhow::Result<()> {
        while let Some(action) = self.actions.pop_front() {
            match action {
                Action::Close { conn } => self.drop_conn(conn),
                Action::Reuse { request, conn, reuse_index } => {
                    let live = self.live.get_mut(&request).expect("dispatched requests are live");
                    live.place = Place::OnConn(conn);
                    live.attempt.dispatch = Some(now);
                    live.attempt.conn_id = Some(self.config.part.global(conn));
                    live.attempt.reuse_index = Some(reuse_index);
                    self.start_request(conn, request, now, workload)?;
                }
                Action::Connect { request, conn, client } => {
                    let live = self.live.get_mut(&request).expect("dispatched requests are live");
                    live.place = Place::OnConn(conn);
                    live.attempt.dispatch = Some(now);
                    live.attempt.connect_start = Some(now);
                    live.attempt.conn_id = Some(self.config.part.global(conn));
                    live.attempt.reuse_index = Some(0);
                    match self.connect(client) {
                        Ok(stream) => {
                            self.connections_opened += 1;
                            let mut state = Conn { stream, state: ConnState::Connecting, request: Some(request), reader: ResponseReader::new(), check: None, out: Vec::new(), written: 0 };
                            self.poll.registry().register(&mut state.stream, Token(conn as usize), Interest::READABLE | Interest::WRITABLE)?;
                            self.conns.insert(conn, state);
                        }
                        Err(err) => {
                            let error = err.to_string();
                            self.end_attempt(request, Outcome::ConnectError, &error, now, None, workload)?;
                            self.pool.closed(conn, &mut self.actions);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn connect(&self, client: u32) -> std::io::Result<TcpStream> {
        let target = self.config.target;
        let socket = socket2::Socket::new(socket2::Domain::for_address(target), socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
        socket.set_nonblocking(true)?;
        socket.set_nodelay(true)?;
        if !self.config.source_addrs.is_empty() {
            let source = self.config.source_addrs[client as usize % self.config.source_addrs.len()];
            // The port is chosen at connect(), against the 4-tuple, not by bind()'s search of
            // the whole port range: with thousands of connections per address that search
            // (inet_bind2_bucket_find, seen in perf) stalled the loop for seconds.
            // A kernel without the option refuses it and bind() chooses the port as before.
            let _ = sojourn_sys::socket::bind_address_no_port(socket.as_raw_fd());
            socket.bind(&SocketAddr::new(source, 0).into())?;
        }
        match socket.connect(&target.into()) {
            Ok(()) => {}
            Err(err) if err.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(err) => return Err(err),
        }
        Ok(TcpStream::from_std(std::net::TcpStream::from(socket)))
    }

    /// Put the request on `conn` and write as much as the socket takes.
    fn start_request(&mut self, conn: ConnId, request: u64, now: Nanos, workload: &mut dyn Workload) -> anyhow::Result<()> {
        let last = self.pool.is_last_on(conn);
        let live = &self.live[&request];
        let state = self.conns.get_mut(&conn).expect("reused connections exist");
        state.request = Some(request);
        state.reader = ResponseReader::new();
        state.check = self.config.verify_content.then(|| ContentCheck::new(&live.request.path));
        state.out.clear();
        state.written = 0;
        // Appended piece by piece rather than through `write!`: no formatting machinery per request.
        for piece in [
            "GET ",
            &live.request.path,
            " HTTP/1.1\r\nHost: ",
            &self.config.host_header,
            "\r\nUser-Agent: sojourn-load\r\n",
            if last { "Connection: close\r\n\r\n" } else { "\r\n" },
        ] {
            state.out.extend_from_slice(piece.as_bytes());
        }
        self.flush(conn, now, workload)
    }

    fn flush(&mut self, conn: ConnId, now: Nanos, workload: &mut dyn Workload) -> anyhow::Result<()> {
        let Some(state) = self.conns.get_mut(&conn) else { return Ok(()) };
        while state.written < state.out.len() {
            match state.stream.write(&state.out[state.written..]) {
                Ok(n) => state.written += n,
                Err(err) if err.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) => {
                    let request = state.request.expect("flushing connections carry a request");
                    return self.fail_on_conn(conn, request, Outcome::Reset, &err.to_string(), now, workload);
                }
            }
        }
        if let Some(request) = state.request {
            let live = self.live.get_mut(&request).expect("carried requests are live");
            live.attempt.sent.get_or_insert(now);
        }
        Ok(())
    }

    fn handle_event(&mut self, conn: ConnId, event: &mio::event::Event, now: Nanos, workload: &mut dyn Workload) -> anyhow::Result<()> {
        let Some(state) = self.conns.get_mut(&conn) else { return Ok(()) };
        if matches!(state.state, ConnState::Connecting) {
            if !(event.is_writable() || event.is_error() || event.is_read_closed() || event.is_write_closed()) {
                return Ok(());
            }
            let request = state.request.expect("connecting connections carry a request");
            let failure = match state.stream.take_error() {
                Ok(Some(err)) | Err(err) => Some(err),
                Ok(None) => match state.stream.peer_addr() {
                    Ok(_) => None,
                    Err(err) if err.kind() == ErrorKind::NotConnected => return Ok(()),
                    Err(err) => Some(err),
                },
            };
            if let Some(err) = failure {
                return self.fail_on_conn(conn, request, Outcome::ConnectError, &err.to_string(), now, workload);
            }
            state.state = ConnState::Open;
            self.live.get_mut(&request).expect("live").attempt.connect_end = Some(now);
            self.start_request(conn, request, now, workload)?;
        }
        if event.is_writable() {
            self.flush(conn, now, workload)?;
        }
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            self.read(conn, now, workload)?;
        }
        Ok(())
    }

    fn read(&mut self, conn: ConnId, now: Nanos, workload: &mut dyn Workload) -> anyhow::Result<()> {
        loop {
            let Some(state) = self.conns.get_mut(&conn) else { return Ok(()) };
            let n = match state.stream.read(&mut self.read_buffer) {
                Ok(n) => n,
                Err(err) if err.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) => match state.request {
                    Some(request) => return self.fail_on_conn(conn, request, Outcome::Reset, &err.to_string(), now, workload),
                    None => return self.idle_closed(conn, now, workload),
                },
            };
            let Some(request) = state.request else {
                // Idle: EOF (server timeout) or unsolicited bytes both end the connection.
                return self.idle_closed(conn, now, workload);
            };
            let live = self.live.get_mut(&request).expect("carried requests are live");
            if n == 0 {
                return match state.reader.finish_at_eof() {
                    Ok(()) => self.complete(conn, request, now, false, workload),
                    Err(err) => {
                        let outcome = if state.reader.head().is_none() { Outcome::Reset } else { Outcome::Invalid };
                        // A body cut short is still checked: the bytes that came must be right,
                        // so a truncation and a corruption are told apart.
                        let error = match state.check.as_ref().and_then(|check| check.first_mismatch()) {
                            Some(at) => format!("body differs from the content rule at byte {at}; {err}"),
                            None => err.to_string(),
                        };
                        self.fail_on_conn(conn, request, outcome, &error, now, workload)
                    }
                };
            }
            live.attempt.first_byte.get_or_insert(now);
            let mut rest = &self.read_buffer[..n];
            let mut completed = false;
            while !rest.is_empty() {
                match state.reader.feed(rest) {
                    Ok((consumed, progress)) => {
                        let body = &rest[progress.body.clone()];
                        live.attempt.bytes += body.len() as u64;
                        if let Some(check) = state.check.as_mut() {
                            check.feed(body);
                        }
                        if let Some(head) = state.reader.head() {
                            live.attempt.status = Some(head.status);
                        }
                        rest = &rest[consumed..];
                        if progress.complete {
                            completed = true;
                            if !rest.is_empty() {
                                let error = format!("{} bytes after the response", rest.len());
                                return self.fail_on_conn(conn, request, Outcome::Invalid, &error, now, workload);
                            }
                        }
                    }
                    Err(err) => return self.fail_on_conn(conn, request, Outcome::Invalid, &err.to_string(), now, workload),
                }
            }
            if completed {
                // Connections are serial, so nothing more is due on this one now. Linux reports
                // every later arrival (a FIN included) as a new edge, so the usual read until
                // WouldBlock (one more recv per request) is not needed here.
                let keeps_open = !state.reader.head().is_some_and(|head| head.closes);
                return self.complete(conn, request, now, keeps_open, workload);
            }
        }
    }

    /// The response on `conn` is complete: validate, record, and hand the connection back.
    fn complete(&mut self, conn: ConnId, request: u64, now: Nanos, keeps_open: bool, workload: &mut dyn Workload) -> anyhow::Result<()> {
        let state = self.conns.get_mut(&conn).expect("completing connections exist");
        state.request = None;
        let live = &self.live[&request];
        let head = state.reader.head().cloned().expect("complete responses have a head");
        let mismatch = state.check.as_ref().and_then(|check| check.first_mismatch());
        let (outcome, error) = if head.status == 503 {
            (Outcome::Refused, String::new())
        } else if head.status >= 400 {
            (Outcome::HttpError, String::new())
        } else if let Some(at) = mismatch.filter(|_| head.status == 200) {
            (Outcome::Invalid, format!("body differs from the content rule at byte {at}"))
        } else if let Some(expected) = live.request.expected_size.filter(|&size| head.status == 200 && size != live.attempt.bytes) {
            (Outcome::Invalid, format!("{} body bytes, the trace expects {expected}", live.attempt.bytes))
        } else {
            (Outcome::Ok, String::new())
        };
        if self.pool.response_done(conn, keeps_open, &mut self.actions) {
            self.drop_conn(conn);
        }
        self.end_attempt(request, outcome, &error, now, Some(now), workload)?;
        self.apply_actions(now, workload)
    }

    /// The attempt on `conn` failed: close the connection, record, maybe retry.
    /// A reused connection that the server closed before sending any byte of the response
    /// (its keep-alive timeout raced our request) is not the request's failure: the request
    /// goes out again on a fresh connection without a new attempt (RFC 9112 §9.3.1, GET is
    /// idempotent). Fresh connections have reuse index 0, so this happens at most once.
    fn fail_on_conn(&mut self, conn: ConnId, request: u64, outcome: Outcome, error: &str, now: Nanos, workload: &mut dyn Workload) -> anyhow::Result<()> {
        self.drop_conn(conn);
        self.pool.closed(conn, &mut self.actions);
        let live = self.live.get_mut(&request).expect("failing attempts are live");
        let stale = outcome == Outcome::Reset && live.attempt.first_byte.is_none() && live.attempt.reuse_index.is_some_and(|reuse| reuse > 0);
        if stale {
            let attempt = &mut live.attempt;
            (attempt.dispatch, attempt.conn_id, attempt.reuse_index, attempt.sent) = (None, None, None, None);
            live.place = Place::Waiting;
            let client = live.request.client;
            self.pool.submit(client, request, true, &mut self.actions);
        } else {
            self.end_attempt(request, outcome, error, now, None, workload)?;
        }
        self.apply_actions(now, workload)
    }

    fn idle_closed(&mut self, conn: ConnId, now: Nanos, workload: &mut dyn Workload) -> anyhow::Result<()> {
        self.drop_conn(conn);
        self.pool.closed(conn, &mut self.actions);
        self.apply_actions(now, workload)
    }

    fn drop_conn(&mut self, conn: ConnId) {
        if let Some(mut state) = self.conns.remove(&conn) {
            // Deregistering a socket about to close cannot usefully fail.
            let _ = self.poll.registry().deregister(&mut state.stream);
        }
    }

    /// Record the end of the current attempt of `request`; retry after an abort if allowed.
    fn end_attempt(&mut self, request: u64, outcome: Outcome, error: &str, now: Nanos, last_byte: Option<Nanos>, workload: &mut dyn Workload) -> anyhow::Result<()> {
        let mut live = self.live.remove(&request).expect("ending attempts are live");
        live.attempt.last_byte = last_byte.or(Some(now));
        let outcome = match outcome {
            Outcome::Aborted if live.attempt.attempt >= self.config.retries => Outcome::GaveUp,
            other => other,
        };
        let is_final = outcome != Outcome::Aborted;
        self.recorder.attempt_ended(&live.attempt, &live.request.path, outcome, error, is_final, now)?;
        if is_final {
            workload.finished(&live.request, outcome == Outcome::Ok, now);
            Ok(())
        } else {
            self.issue(live.request, live.attempt.attempt + 1, now, workload)
        }
    }

    /// Abort (user reload, 000 Table 2 (H)) or time out attempts whose deadline passed.
    fn expire_deadlines(&mut self, now: Nanos, workload: &mut dyn Workload) -> anyhow::Result<()> {
        while let Some(&Reverse((at, request, attempt))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            let Some(live) = self.live.get(&request).filter(|live| live.attempt.attempt == attempt) else { continue };
            let bound = live.request.delay_bound.or(self.config.abort_after);
            let aborting = bound.is_some_and(|abort| abort <= self.config.timeout);
            let (outcome, error) = if aborting {
                (Outcome::Aborted, "user abort")
            } else {
                let connecting = match live.place {
                    Place::OnConn(conn) => self.conns.get(&conn).is_some_and(|c| matches!(c.state, ConnState::Connecting)),
                    Place::Waiting => false,
                };
                let progress = AttemptProgress {
                    on_conn: matches!(live.place, Place::OnConn(_)),
                    connecting,
                    sent: live.attempt.sent.is_some(),
                    first_byte: live.attempt.first_byte.is_some(),
                };
                (Outcome::Timeout, progress.timeout_error())
            };
            match live.place {
                Place::OnConn(conn) => self.fail_on_conn(conn, request, outcome, error, now, workload)?,
                Place::Waiting => {
                    self.pool.cancel(live.request.client, request);
                    self.end_attempt(request, outcome, error, now, None, workload)?;
                    self.apply_actions(now, workload)?;
                }
            }
        }
        Ok(())
    }

    /// The run stops: every outstanding request gets its final `interrupted` record.
    fn interrupt_all(&mut self, now: Nanos) -> anyhow::Result<()> {
        let mut outstanding: Vec<u64> = self.live.keys().copied().collect();
        outstanding.sort_unstable();
        for request in outstanding {
            let mut live = self.live.remove(&request).expect("listed");
            live.attempt.last_byte = Some(now);
            self.recorder.attempt_ended(&live.attempt, &live.request.path, Outcome::Interrupted, "run stopped", true, now)?;
        }
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for conn in conns {
            self.drop_conn(conn);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_errors_name_the_stage_the_attempt_reached() {
        let at = |on_conn, connecting, sent, first_byte| AttemptProgress { on_conn, connecting, sent, first_byte }.timeout_error();
        assert!(at(false, false, false, false).contains("free connection"));
        assert!(at(true, true, false, false).contains("handshake"));
        assert!(at(true, false, false, false).contains("sending the request"));
        assert!(at(true, false, true, false).contains("no response byte"));
        assert!(at(true, false, true, true).contains("during the response"));
    }

    #[test]
    fn loop_clock_keeps_the_longest_pass_and_reads_the_scheduler() {
        let mut clock = LoopClock::start();
        clock.pass(3_000);
        clock.pass(250_000_000);
        clock.pass(1_000);
        let times = clock.end(1_000_000_000);
        assert_eq!(times.longest_pass_s, 0.25);
        assert!((times.busy_fraction - 0.250_004).abs() < 1e-9);
        // Linux keeps schedstat and rusage per thread: the figures exist and are consistent.
        let total = times.runqueue_wait_s.expect("schedstat");
        let worst = times.worst_second_runqueue_wait_s.expect("schedstat");
        assert!(worst <= total + 1e-9, "worst second {worst} > total {total}");
        assert!(times.involuntary_switches.is_some());
    }
}
