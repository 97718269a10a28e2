//! One worker: an epoll event loop (mio, edge-triggered) over its own SO_REUSEPORT
//! listener and the connections it accepted. This file owns the loop, the connection
//! state, the scheduling round, finishing and closing, and the timeout sweep; its
//! submodules own accepting (`accept`), reading and routing requests (`requests`) and
//! building and writing responses (`response`).
//!
//! Each loop iteration (1) waits for events, (2) reads requests and turns each into
//! a response (one at a time per connection, so pipelined responses go out in
//! order), (3) drives the [`Scheduler`] (crates/sched, the round the simulator
//! drives too): every response with bytes to send is ready, the granted one writes
//! at most one quantum (004 §3.1) before being ready again. A socket that would
//! block keeps its write slot (004 §3.3) until epoll reports it writable. With
//! `--kernel-bands` the socket's SO_PRIORITY follows the band of its remaining bytes
//! (000 §3), changed only when the band changes.
//!
//! Bounded memory per connection: the read buffer holds at most twice the head
//! limit (reading pauses beyond it), and one response (a head plus a reference
//! to a cached file) is in flight at a time.

use std::collections::HashMap;
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use sojourn_http::{parse_request, resolve_target, select, write_head, Head, HeadCommon, HttpError, Method, Request, Selection};
use sojourn_sched::{Admission, Bands, JobId, Progress, Scheduler, Verdict};

use crate::access_log::{clf_time, format_line, Entry, LogSender};
use crate::qdisc::so_priority;
use crate::config::Settings;
use crate::files::{key_of, CachedFile, FileCache, Refusal};
use crate::metrics::{Metrics, Shard};
use crate::opener::{OpenerPool, WorkerOpener};
use crate::stage_route::{Pending, StageRoute};
use sojourn_sys::{signals, socket};

mod accept;
mod requests;
mod response;

use response::{error_response, first_line, new_response, refusal, respond, without_keep_alive, write_quantum};

/// What every worker shares.
pub struct Shared {
    pub settings: Settings,
    pub metrics: Arc<Metrics>,
    pub log: Option<LogSender>,
    /// The pool behind `/stage/<name>/` (003), if configured.
    pub stages: Option<Arc<sojourn_stages::StagePool>>,
    /// The threads that open files on cache misses.
    pub opener: OpenerPool,
}

const LISTENER: Token = Token(0);
/// The worker's waker: stage replies or opened files arrived (connection tokens
/// count up from 1).
const WAKER: Token = Token(usize::MAX);
const EVENTS_CAPACITY: usize = 1024;
const READ_CHUNK: usize = 16 * 1024;
/// Quanta granted per loop iteration before epoll is asked again, so new requests
/// are seen while long responses are being written.
const QUANTA_PER_ROUND: usize = 1024;
/// How often timeouts are swept, the log flushed and shutdown checked.
const TICK: Duration = Duration::from_millis(100);
const LOG_FLUSH_BYTES: usize = 32 * 1024;

enum Body {
    Empty,
    Memory { bytes: Arc<[u8]>, offset: usize, end: usize },
    File { file: Arc<CachedFile>, offset: u64, end: u64 },
}

impl Body {
    fn remaining(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Memory { offset, end, .. } => (end - offset) as u64,
            Body::File { offset, end, .. } => end - offset,
        }
    }
}

/// What the access log needs of a request.
struct LogInfo {
    request_line: String,
    referer: Option<String>,
    user_agent: Option<String>,
}

struct Response {
    head: Vec<u8>,
    head_sent: usize,
    body: Body,
    body_len: u64,
    progress: Progress,
    /// Band of the remaining bytes, for the waiting-per-band gauge.
    band: usize,
    status: u16,
    keep_alive: bool,
    log: LogInfo,
    started: Instant,
}

struct Conn {
    stream: TcpStream,
    peer: IpAddr,
    read_buf: Vec<u8>,
    /// Reading stopped because `read_buf` was full: read again once it drains.
    read_paused: bool,
    /// Boxed so an idle connection stays small.
    response: Option<Box<Response>>,
    /// When the connection began waiting for its next request.
    idle_since: Instant,
    /// When the first byte of the pending request head was read.
    head_started: Option<Instant>,
    /// When the bytes of the pending head's first read reached the host, by the kernel's
    /// receive stamp (with --admission): what admission judges the request's wait from.
    head_arrived: Option<Instant>,
    /// A write would block: out of the ready queue until epoll says writable.
    blocked: bool,
    /// Since when the socket has been full (meaningful while `blocked`).
    blocked_since: Instant,
    /// When --send-timeout last found the client's window open while blocked: the timeout
    /// runs from the later of this and `blocked_since`.
    window_seen_open: Instant,
    peer_closed: bool,
    /// In a lingering close since (start, last read): the response is done and our
    /// side shut down; reads are discarded until the client closes.
    lingering: Option<(Instant, Instant)>,
    priority: Option<u32>,
    /// The request's file is being opened by the opener threads.
    awaiting_file: bool,
    /// The request in progress was admitted by `--admission` (and must leave it once).
    admitted: Option<Admitted>,
}

/// An admitted request: when it arrived, how long it was served before its response was
/// ready (a stage's CPU processing), and whether its first write was granted yet.
#[derive(Clone, Copy)]
struct Admitted {
    arrived: Instant,
    served: Duration,
    written: bool,
}

impl Admitted {
    /// Where the request's wait for its first write is counted from: its arrival, moved on by
    /// the time it was being served. CoDel's sojourn time and DAGOR's queueing delay are time
    /// spent queued, not in service (RFC 8289 §3.2: the time in the queue); a dynamic
    /// request's processing counted as waiting made every stage request of 003's 5-20 ms
    /// costs overstay CoDel's 5-ms target, and CoDel refused 99.8% of them at 1.2 times the
    /// stage worker's CPU (overload-control-dwfs, 27 Nov 2026).
    fn waiting_since(&self) -> Instant {
        self.arrived + self.served
    }
}

/// A request waiting for its file to be opened.
struct AwaitingFile {
    conn: JobId,
    request: Request,
    arrived: Instant,
}

enum Quantum {
    /// The quantum (or the rest of the response) went out.
    Written,
    /// The socket buffer is full.
    Blocked,
}

pub struct Worker {
    index: usize,
    poll: Poll,
    listener: Option<TcpListener>,
    conns: HashMap<JobId, Conn>,
    next_id: JobId,
    /// The scheduling round (ready queue, write slots, quantum), shared with the simulator.
    sched: Scheduler,
    files: FileCache,
    opener: WorkerOpener<AwaitingFile>,
    shared: Arc<Shared>,
    /// Cutoffs for the waiting-per-band gauge and --kernel-bands.
    bands: Bands,
    scratch: Vec<u8>,
    date_second: u64,
    /// The Date of this second and the configured field set, shared by every head written.
    heads: HeadCommon,
    log_time: String,
    log_buf: Vec<u8>,
    shutdown_deadline: Option<Instant>,
    stages: Option<StageRoute>,
    /// Accepting stopped at --accept-limit; resumed when connections close.
    accept_paused: bool,
    /// When an accept error was last logged (they are rate-limited).
    accept_error_logged: Option<Instant>,
    /// `--admission`: this worker's policy, which is told times since `origin`.
    admission: Option<Box<dyn Admission>>,
    origin: Instant,
    /// When the scheduler was last seen with a response ready and every write slot held.
    slots_full_since: Option<Instant>,
}

fn is_transient(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted)
}

impl Worker {
    pub fn new(index: usize, listener: std::net::TcpListener, shared: Arc<Shared>) -> io::Result<Worker> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::from_std(listener);
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        let settings = &shared.settings;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let stages = shared.stages.clone().map(|pool| StageRoute::new(pool, Arc::clone(&waker)));
        let opener = shared.opener.for_worker(waker);
        let admission = settings.admission.as_ref().map(|spec| spec.build(settings.order()));
        Ok(Worker {
            index,
            poll,
            listener: Some(listener),
            conns: HashMap::new(),
            next_id: 1,
            sched: Scheduler::new(settings.policy, settings.quantum, settings.write_concurrency).slots_from(settings.write_concurrency_from),
            files: FileCache::new(settings.cache_ttl, settings.file_cache_entries),
            opener,
            bands: settings.kernel_bands.clone().unwrap_or_default(),
            heads: HeadCommon { date: String::new(), fields: settings.head_fields },
            shared,
            scratch: vec![0; READ_CHUNK],
            date_second: u64::MAX,
            log_time: String::new(),
            log_buf: Vec::new(),
            shutdown_deadline: None,
            stages,
            accept_paused: false,
            accept_error_logged: None,
            admission,
            origin: Instant::now(),
            slots_full_since: None,
        })
    }

    /// Runs until shutdown is asked and the in-flight responses are done (or the grace period ends).
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        let mut next_tick = Instant::now();
        loop {
            let can_write = self.sched.can_grant();
            let timeout = if can_write { Duration::ZERO } else { next_tick.saturating_duration_since(Instant::now()) };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            self.shared.metrics.shard(self.index).events_per_wait.observe(events.iter().count() as f64);
            let now = Instant::now();
            self.refresh_date();
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept_all(now),
                    WAKER => {
                        self.on_stage_replies();
                        self.on_files_opened(now);
                    }
                    Token(id) => {
                        let id = id as JobId;
                        if event.is_writable() {
                            self.on_writable(id, now);
                        }
                        if event.is_read_closed() || event.is_error() {
                            self.on_readable(id, now, true);
                        } else if event.is_readable() {
                            self.on_readable(id, now, false);
                        }
                    }
                }
            }
            self.run_scheduler(Instant::now());
            if self.accept_paused && !self.at_accept_limit() {
                // Edge-triggered: connections waiting in the backlog (after --accept-limit or a
                // failed accept) bring no new event.
                self.accept_paused = false;
                self.accept_all(Instant::now());
            }
            if self.log_buf.len() >= LOG_FLUSH_BYTES {
                self.flush_log();
            }
            let now = Instant::now();
            if now >= next_tick {
                next_tick = now + TICK;
                self.tick(now);
                if let Some(deadline) = self.shutdown_deadline {
                    if self.conns.is_empty() || now >= deadline {
                        break;
                    }
                }
            }
            self.time_slots_full(now);
        }
        self.flush_log();
        let open = self.conns.len();
        for id in self.conns.keys().copied().collect::<Vec<_>>() {
            self.close(id);
        }
        if open > 0 {
            eprintln!("sojourn-engine serve: worker {} closed {open} connections at the shutdown deadline", self.index);
        }
        Ok(())
    }

    /// Adds the time since the last look to `sojourn_write_slots_full_seconds_total` if every
    /// slot was held then, and looks again: called once a round, after its work, so the look
    /// holds through the next wait for events (only what that wait brings changes it).
    fn time_slots_full(&mut self, now: Instant) {
        if let Some(since) = self.slots_full_since {
            let nanos = now.saturating_duration_since(since).as_nanos() as u64;
            self.shared.metrics.shard(self.index).slots_full_nanos.fetch_add(nanos, Relaxed);
        }
        self.slots_full_since = self.sched.waiting_for_a_slot().then_some(now);
    }

    fn refresh_date(&mut self) {
        let now = SystemTime::now();
        let second = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if second != self.date_second {
            self.date_second = second;
            self.heads.date = httpdate::fmt_http_date(now);
            self.log_time = clf_time(now);
        }
    }

    fn on_writable(&mut self, id: JobId, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if conn.blocked {
            // The kernel took our data (below TCP_NOTSENT_LOWAT if set): the slot is free again.
            conn.blocked = false;
            let held = now.saturating_duration_since(conn.blocked_since);
            self.shared.metrics.shard(self.index).write_blocked.observe(held.as_secs_f64());
            match &conn.response {
                Some(response) => self.sched.writable(id, response.progress),
                None => self.sched.closed(id),
            }
        }
    }

    fn start(&mut self, id: JobId, response: Box<Response>) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if !response.keep_alive {
            // The connection ends with this response: TCP_CORK holds its last partial
            // segment until the shutdown in `finish`, which sends it with the FIN
            // (tcp_send_fin marks an unsent tail), one packet fewer per connection.
            let _ = socket2::SockRef::from(&conn.stream).set_cork(true);
        }
        let metrics = self.shared.metrics.shard(self.index);
        metrics.waiting_by_band[response.band].fetch_add(1, Relaxed);
        if !conn.blocked {
            self.sched.ready(id, response.progress);
        }
        conn.response = Some(response);
    }

    fn run_scheduler(&mut self, now: Instant) {
        for _ in 0..QUANTA_PER_ROUND {
            let Some(grant) = self.sched.grant() else { break };
            let id = grant.job;
            let Some(conn) = self.conns.get_mut(&id) else {
                self.sched.closed(id);
                continue;
            };
            self.shared.metrics.shard(self.index).quanta.fetch_add(1, Relaxed);
            if let (Some(admission), Some(admitted)) = (self.admission.as_mut(), conn.admitted.as_mut().filter(|a| !a.written)) {
                admitted.written = true;
                let waiting_since = admitted.waiting_since().saturating_duration_since(self.origin);
                match admission.first_write(now.saturating_duration_since(self.origin), id, waiting_since) {
                    Verdict::Admit => {
                        let waited = now.saturating_duration_since(admitted.waiting_since());
                        self.shared.metrics.shard(self.index).first_write_wait.observe(waited.as_secs_f64());
                    }
                    Verdict::Refuse(reason) => {
                        // Nothing of the response was written: a 503 goes out instead (CoDel's drop at dequeue).
                        let arrived = admitted.arrived.saturating_duration_since(self.origin);
                        admission.left(now.saturating_duration_since(self.origin), id, arrived, false);
                        conn.admitted = None;
                        let metrics = self.shared.metrics.shard(self.index);
                        metrics.refusals[reason.index()].fetch_add(1, Relaxed);
                        if let Some(old) = conn.response.take() {
                            metrics.waiting_by_band[old.band].fetch_sub(1, Relaxed);
                            let new = refusal(&self.bands, &self.heads, old.log.request_line, old.started);
                            metrics.waiting_by_band[new.band].fetch_add(1, Relaxed);
                            conn.response = Some(new);
                        }
                    }
                }
            }
            let kernel_bands = self.shared.settings.kernel_bands.as_ref();
            match write_quantum(conn, grant.bytes, kernel_bands, &self.bands, self.shared.metrics.shard(self.index)) {
                Err(_) => self.close(id),
                Ok(Quantum::Blocked) => {
                    self.sched.blocked(id);
                    conn.blocked = true;
                    conn.blocked_since = now;
                }
                Ok(Quantum::Written) => {
                    let more = match conn.response.as_ref() {
                        Some(response) => self.sched.wrote(id, response.progress),
                        None => {
                            self.sched.closed(id);
                            false
                        }
                    };
                    if !more {
                        self.finish(id, now);
                    }
                }
            }
        }
        self.shared.metrics.shard(self.index).ready_queue_length.store(self.sched.queued() as i64, Relaxed);
    }

    /// The response's last byte went to the kernel: account, log, then close or go on.
    fn finish(&mut self, id: JobId, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        let Some(response) = conn.response.take() else { return };
        if let (Some(admission), Some(admitted)) = (self.admission.as_mut(), conn.admitted.take()) {
            admission.left(now.saturating_duration_since(self.origin), id, admitted.arrived.saturating_duration_since(self.origin), true);
        }
        let metrics = self.shared.metrics.shard(self.index);
        let service = now.duration_since(response.started);
        metrics.waiting_by_band[response.band].fetch_sub(1, Relaxed);
        metrics.count_status(response.status);
        metrics.service_time.observe(service.as_secs_f64());
        if self.shared.log.is_some() {
            let entry = Entry {
                client: conn.peer,
                time: &self.log_time,
                request_line: &response.log.request_line,
                status: response.status,
                body_bytes: response.body_len,
                referer: response.log.referer.as_deref(),
                user_agent: response.log.user_agent.as_deref(),
                micros: self.shared.settings.log_request_time.then_some(service.as_micros() as u64),
            };
            format_line(&mut self.log_buf, &entry);
        }
        if !response.keep_alive {
            let _ = conn.stream.shutdown(std::net::Shutdown::Write);
            if self.shared.settings.linger.is_some() && !conn.peer_closed {
                conn.lingering = Some((now, now));
                metrics.lingering.fetch_add(1, Relaxed);
                // Bytes that arrived before the shutdown bring no new edge: read them now.
                self.on_readable(id, now, false);
            } else {
                self.close(id);
            }
            return;
        }
        conn.idle_since = now;
        conn.head_started = (!conn.read_buf.is_empty()).then_some(now);
        conn.head_arrived = None;
        if conn.read_buf.is_empty() {
            conn.read_buf = Vec::new(); // idle connections keep no buffer
        }
        if conn.read_paused {
            // Edge-triggered: bytes may be waiting that were not read while the buffer was full.
            self.on_readable(id, now, false);
        } else {
            self.next_request(id, now);
        }
    }

    fn close(&mut self, id: JobId) {
        let Some(conn) = self.conns.remove(&id) else { return };
        if let Some(route) = self.stages.as_mut() {
            route.forget(id);
        }
        self.sched.closed(id);
        if let (Some(admission), Some(admitted)) = (self.admission.as_mut(), conn.admitted) {
            let origin = self.origin;
            admission.left(Instant::now().saturating_duration_since(origin), id, admitted.arrived.saturating_duration_since(origin), false);
        }
        let metrics = self.shared.metrics.shard(self.index);
        if conn.lingering.is_some() {
            metrics.lingering.fetch_sub(1, Relaxed);
        }
        if let Some(response) = conn.response {
            metrics.waiting_by_band[response.band].fetch_sub(1, Relaxed);
        }
        metrics.connections_open.fetch_sub(1, Relaxed);
        // Dropping the stream closes it, which also removes it from the epoll set.
    }

    /// Timeouts (408 for a slow head, silent close for an idle persistent
    /// connection or one whose client stopped reading), log flushing and shutdown.
    fn tick(&mut self, now: Instant) {
        if self.shutdown_deadline.is_none() && signals::stop_requested() {
            self.shutdown_deadline = Some(now + self.shared.settings.shutdown_grace);
            if let Some(mut listener) = self.listener.take() {
                let _ = self.poll.registry().deregister(&mut listener);
            }
        }
        let settings = &self.shared.settings;
        let shutting_down = self.shutdown_deadline.is_some();
        let mut slow = Vec::new();
        let mut idle = Vec::new();
        let mut stalled = Vec::new();
        let mut lingered = Vec::new();
        for (&id, conn) in &mut self.conns {
            if let (Some((started, last_read)), Some((total, between))) = (conn.lingering, settings.linger) {
                // Apache 1.3's lingering_close: at most `total`, and `between` of silence.
                if shutting_down || now.duration_since(started) >= total || now.duration_since(last_read) >= between {
                    lingered.push(id);
                }
                continue;
            }
            if conn.blocked && now.duration_since(conn.blocked_since.max(conn.window_seen_open)) >= settings.send_timeout {
                // Only a client that stopped reading is timed out: its receive window is
                // closed. Behind an open window the bytes wait in this host (a higher band
                // of --kernel-bands, a full uplink queue), which is the scheduling under
                // test, not the client's fault; a client that vanished is the kernel's to
                // give up on (tcp_retries2), and its error wakes the connection. An open
                // window starts the timeout again, so a starved response costs one TCP_INFO
                // call a timeout, not one a tick.
                if socket::peer_window(conn.stream.as_raw_fd()).map_or(true, |window| window == 0) {
                    stalled.push(id);
                } else {
                    conn.window_seen_open = now;
                }
                continue;
            }
            if conn.response.is_some() || conn.awaiting_file || self.stages.as_ref().is_some_and(|s| s.is_waiting(id)) {
                continue;
            }
            match conn.head_started {
                Some(started) if now.duration_since(started) >= settings.header_timeout => slow.push(id),
                None if shutting_down || now.duration_since(conn.idle_since) >= settings.keepalive_timeout => idle.push(id),
                _ => {}
            }
        }
        let metrics = self.shared.metrics.shard(self.index);
        metrics.send_timeouts.fetch_add(stalled.len() as u64, Relaxed);
        metrics.linger_timeouts.fetch_add(lingered.len() as u64, Relaxed);
        if let Some(level) = self.admission.as_ref().and_then(|a| a.level()) {
            metrics.admission_level.store(level.to_bits(), Relaxed);
        }
        for id in idle.into_iter().chain(stalled).chain(lingered) {
            self.close(id);
        }
        for id in slow {
            if let Some(conn) = self.conns.get_mut(&id) {
                conn.read_buf = Vec::new();
            }
            let error = HttpError::BadRequest("request head not received in time");
            let response = error_response(&self.bands, &self.heads, 408, &error, "-".into(), now);
            self.start(id, response);
        }
        self.flush_log();
    }

    /// Hands the buffered lines to the access-log writer thread (no write here).
    fn flush_log(&mut self) {
        if let (Some(log), false) = (&self.shared.log, self.log_buf.is_empty()) {
            let dropped = log.send(std::mem::take(&mut self.log_buf));
            if dropped > 0 {
                self.shared.metrics.shard(self.index).log_lines_dropped.fetch_add(dropped, Relaxed);
            }
        }
    }
}

fn peer_ip(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}
