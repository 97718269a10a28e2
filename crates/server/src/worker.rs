//! One worker: an epoll event loop (mio, edge-triggered) over its own SO_REUSEPORT
//! listener and the connections it accepted.
//!
//! Each loop iteration (1) waits for events, (2) reads requests and turns each into
//! a response (one at a time per connection, so pipelined responses go out in
//! order), (3) drives the [`Scheduler`] (crates/sched, the round the simulator
//! drives too): every response with bytes to send is ready, the granted one writes
//! at most one quantum (004 §3.1) before being ready again. A socket that would
//! block keeps its write slot (004 §3.3) until epoll reports it writable. With
//! `--kernel-bands` the socket's
//! SO_PRIORITY follows the band of its remaining bytes (000 §3), changed only when
//! the band changes.
//!
//! Bounded memory per connection: the read buffer holds at most twice the head
//! limit (reading pauses beyond it), and one response (a head plus a reference
//! to a cached file) is in flight at a time.

use std::collections::HashMap;
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use sojourn_http::{parse_request, resolve_target, select, write_head, Head, HttpError, Method, Request, Selection};
use sojourn_sched::{Bands, JobId, Progress, Scheduler};

use crate::access_log::{clf_time, format_line, Entry, LogSender};
use crate::bands::so_priority;
use crate::config::Settings;
use crate::files::{key_of, CachedFile, FileCache, Refusal};
use crate::metrics::{Metrics, Shard};
use crate::opener::{OpenerPool, WorkerOpener};
use crate::stage_route::{Pending, StageRoute};
use crate::sys;

/// What every worker shares.
pub struct Shared {
    pub settings: Settings,
    pub metrics: Arc<Metrics>,
    pub log: Option<LogSender>,
    pub shutdown: Arc<AtomicBool>,
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
    /// When the first byte of the pending request head arrived.
    head_started: Option<Instant>,
    /// A write would block: out of the ready queue until epoll says writable.
    blocked: bool,
    /// Since when the socket has been full (meaningful while `blocked`).
    blocked_since: Instant,
    peer_closed: bool,
    /// In a lingering close since (start, last read): the response is done and our
    /// side shut down; reads are discarded until the client closes.
    lingering: Option<(Instant, Instant)>,
    priority: Option<u32>,
    /// The request's file is being opened by the opener threads.
    awaiting_file: bool,
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
    http_date: String,
    log_time: String,
    log_buf: Vec<u8>,
    shutdown_deadline: Option<Instant>,
    stages: Option<StageRoute>,
    /// Accepting stopped at --accept-limit; resumed when connections close.
    accept_paused: bool,
    /// When an accept error was last logged (they are rate-limited).
    accept_error_logged: Option<Instant>,
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
        Ok(Worker {
            index,
            poll,
            listener: Some(listener),
            conns: HashMap::new(),
            next_id: 1,
            sched: Scheduler::new(settings.policy, settings.quantum, settings.write_concurrency),
            files: FileCache::new(settings.cache_ttl, settings.file_cache_entries),
            opener,
            bands: settings.kernel_bands.clone().unwrap_or_default(),
            shared,
            scratch: vec![0; READ_CHUNK],
            date_second: u64::MAX,
            http_date: String::new(),
            log_time: String::new(),
            log_buf: Vec::new(),
            shutdown_deadline: None,
            stages,
            accept_paused: false,
            accept_error_logged: None,
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
                            self.on_writable(id);
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

    fn refresh_date(&mut self) {
        let now = SystemTime::now();
        let second = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if second != self.date_second {
            self.date_second = second;
            self.http_date = httpdate::fmt_http_date(now);
            self.log_time = clf_time(now);
        }
    }

    fn at_accept_limit(&self) -> bool {
        self.shared.settings.accept_limit.is_some_and(|limit| self.shared.metrics.connections_open() >= limit as i64)
    }

    fn accept_all(&mut self, now: Instant) {
        loop {
            if self.at_accept_limit() {
                // 000 §2: with every Apache process busy, connections wait in the accept
                // queue (and SYNs are dropped once it is full); so do they here.
                if !self.accept_paused {
                    self.accept_paused = true;
                    self.shared.metrics.shard(self.index).accept_pauses.fetch_add(1, Relaxed);
                }
                return;
            }
            let Some(listener) = &self.listener else { return };
            let (mut stream, addr) = match listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // EMFILE and the like: the connection stays in the backlog. Edge-triggered, a
                    // full backlog brings no new event, so retry from the loop (as after a pause:
                    // at the next wake-up, a tick at the latest), never waiting on the listener.
                    // Counted always, logged at most once a second (a storm must not flood stderr).
                    self.accept_paused = true;
                    self.shared.metrics.shard(self.index).accept_errors.fetch_add(1, Relaxed);
                    if self.accept_error_logged.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1)) {
                        self.accept_error_logged = Some(now);
                        eprintln!("sojourn-engine serve: accept failed: {e} (counted in sojourn_accept_errors_total)");
                    }
                    return;
                }
            };
            let metrics = self.shared.metrics.shard(self.index);
            let settings = &self.shared.settings;
            if self.shared.metrics.connections_open() >= settings.max_connections as i64 {
                // Over the limit: a best-effort 503 and close, without registering the socket.
                metrics.connections_rejected.fetch_add(1, Relaxed);
                metrics.count_status(503);
                let mut head = Vec::new();
                write_head(&Head { status: 503, minor_version: 1, keep_alive: false, ..Default::default() }, &self.http_date, &mut head);
                let _ = stream.write(&head);
                continue;
            }
            metrics.connections_accepted.fetch_add(1, Relaxed);
            metrics.connections_open.fetch_add(1, Relaxed);
            let _ = stream.set_nodelay(true);
            if let Some(lowat) = settings.notsent_lowat {
                if let Err(e) = sys::set_notsent_lowat(stream.as_raw_fd(), lowat) {
                    eprintln!("sojourn-engine serve: TCP_NOTSENT_LOWAT: {e}");
                }
            }
            let id = self.next_id;
            self.next_id += 1;
            if let Err(e) = self.poll.registry().register(&mut stream, Token(id as usize), Interest::READABLE | Interest::WRITABLE) {
                eprintln!("sojourn-engine serve: cannot register connection: {e}");
                metrics.connections_open.fetch_sub(1, Relaxed);
                continue;
            }
            self.conns.insert(
                id,
                Conn {
                    stream,
                    peer: peer_ip(addr),
                    read_buf: Vec::new(),
                    read_paused: false,
                    response: None,
                    idle_since: now,
                    head_started: None,
                    blocked: false,
                    blocked_since: now,
                    peer_closed: false,
                    lingering: None,
                    priority: None,
                    awaiting_file: false,
                },
            );
        }
    }

    fn on_writable(&mut self, id: JobId) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if conn.blocked {
            // The kernel took our data (below TCP_NOTSENT_LOWAT if set): the slot is free again.
            conn.blocked = false;
            match &conn.response {
                Some(response) => self.sched.writable(id, response.progress),
                None => self.sched.closed(id),
            }
        }
    }

    /// Reads what the socket holds; `to_end` when the peer closed, so the EOF is seen too.
    fn on_readable(&mut self, id: JobId, now: Instant, to_end: bool) {
        let cap = 2 * self.shared.settings.limits.max_head_bytes;
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if let Some((started, _)) = conn.lingering {
            // Lingering close: discard what the client still sends, close on its FIN.
            loop {
                match conn.stream.read(&mut self.scratch) {
                    Ok(0) => break,
                    Ok(_) => conn.lingering = Some((started, now)),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(_) => break,
                }
            }
            self.close(id);
            return;
        }
        conn.read_paused = false;
        while !conn.peer_closed {
            if conn.read_buf.len() >= cap {
                conn.read_paused = true;
                break;
            }
            match conn.stream.read(&mut self.scratch) {
                Ok(0) => conn.peer_closed = true,
                Ok(n) => {
                    conn.head_started.get_or_insert(now);
                    conn.read_buf.extend_from_slice(&self.scratch[..n]);
                    if n < self.scratch.len() && !to_end {
                        // A short read emptied the socket; more data brings a new edge.
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.close(id);
                    return;
                }
            }
        }
        self.next_request(id, now);
    }

    /// If the connection has no response in flight, parses its next request (if
    /// complete) and starts the response.
    fn next_request(&mut self, id: JobId, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if conn.response.is_some() || conn.awaiting_file || self.stages.as_ref().is_some_and(|s| s.is_waiting(id)) {
            return;
        }
        let settings = &self.shared.settings;
        let response = match parse_request(&conn.read_buf, &settings.limits) {
            Ok(Some((request, used))) => {
                conn.read_buf.drain(..used);
                if let Some((route, stage)) = self.stages.as_mut().and_then(|r| r.stage_of(&request.target).map(|s| (r, s))) {
                    let pending = Pending {
                        arrived: now,
                        keep_alive: request.keep_alive && self.shutdown_deadline.is_none(),
                        minor_version: request.minor_version,
                        head_only: request.method == Method::Head,
                        request_line: request.request_line(),
                        referer: request.referer.clone(),
                        user_agent: request.user_agent.clone(),
                    };
                    route.submit(id, stage, conn.peer, pending);
                    return;
                }
                let lookup = match resolve_target(&request.target) {
                    Err(error) => Err(error.status()),
                    Ok(resolved) => {
                        let key = key_of(&resolved);
                        match self.files.fresh(&key, now) {
                            Some(lookup) => lookup.map_err(Refusal::status),
                            None => {
                                // A blocking open/stat: done by the opener threads, answered in `on_files_opened`.
                                conn.awaiting_file = true;
                                self.opener.request(key, AwaitingFile { conn: id, request, arrived: now });
                                return;
                            }
                        }
                    }
                };
                let response = respond(lookup, &self.bands, &self.http_date, &request, now);
                Some(if self.shutdown_deadline.is_some() { without_keep_alive(response) } else { response })
            }
            Ok(None) if conn.peer_closed => None,
            Ok(None) => return,
            Err(error) => {
                let line = first_line(&conn.read_buf);
                conn.read_buf = Vec::new();
                Some(error_response(&self.bands, &self.http_date, error.status(), &error, line, now))
            }
        };
        match response {
            Some(response) => self.start(id, response),
            None => self.close(id),
        }
    }

    fn start(&mut self, id: JobId, response: Box<Response>) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
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
        if self.shutdown_deadline.is_none() && self.shared.shutdown.load(Relaxed) {
            self.shutdown_deadline = Some(now + self.shared.settings.shutdown_grace);
            if let Some(mut listener) = self.listener.take() {
                let _ = self.poll.registry().deregister(&mut listener);
            }
        }
        let settings = &self.shared.settings;
        let shutting_down = self.shutdown_deadline.is_some();
        let mut slow = Vec::new();
        let mut idle = Vec::new();
        let mut lingered = Vec::new();
        for (&id, conn) in &self.conns {
            if let (Some((started, last_read)), Some((total, between))) = (conn.lingering, settings.linger) {
                // Apache 1.3's lingering_close: at most `total`, and `between` of silence.
                if shutting_down || now.duration_since(started) >= total || now.duration_since(last_read) >= between {
                    lingered.push(id);
                }
                continue;
            }
            if conn.blocked && now.duration_since(conn.blocked_since) >= settings.send_timeout {
                idle.push(id); // the client stopped reading
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
        for id in idle {
            self.close(id);
        }
        self.shared.metrics.shard(self.index).linger_timeouts.fetch_add(lingered.len() as u64, Relaxed);
        for id in lingered {
            self.close(id);
        }
        for id in slow {
            if let Some(conn) = self.conns.get_mut(&id) {
                conn.read_buf = Vec::new();
            }
            let error = HttpError::BadRequest("request head not received in time");
            let response = error_response(&self.bands, &self.http_date, 408, &error, "-".into(), now);
            self.start(id, response);
        }
        self.flush_log();
    }

    /// Stage replies arrived (see [`crate::stage_route`]): write their responses.
    fn on_stage_replies(&mut self) {
        let Some(route) = self.stages.as_mut() else { return };
        for reply in route.replies() {
            let p = reply.pending;
            let head = Head {
                status: reply.status,
                minor_version: p.minor_version,
                keep_alive: p.keep_alive,
                content_length: reply.body.len() as u64,
                content_type: Some("text/plain; charset=utf-8"),
                ..Default::default()
            };
            let mut out = Vec::new();
            write_head(&head, &self.http_date, &mut out);
            let body_len = reply.body.len();
            let body = if p.head_only { Body::Empty } else { Body::Memory { bytes: Arc::from(reply.body.into_bytes()), offset: 0, end: body_len } };
            let log = LogInfo { request_line: p.request_line, referer: p.referer, user_agent: p.user_agent };
            // `started` is the request's arrival, so logged service time includes the stage queue.
            let response = new_response(&self.bands, out, body, reply.status, p.keep_alive, log, p.arrived);
            self.start(reply.conn, response);
        }
    }

    /// Files the opener threads opened: cache them and answer the requests that waited.
    fn on_files_opened(&mut self, now: Instant) {
        for (key, lookup, waiters) in self.opener.arrived() {
            self.files.store(key, now, lookup.clone());
            for waiting in waiters {
                let Some(conn) = self.conns.get_mut(&waiting.conn) else { continue }; // closed meanwhile
                conn.awaiting_file = false;
                let lookup = lookup.clone().map_err(Refusal::status);
                let response = respond(lookup, &self.bands, &self.http_date, &waiting.request, waiting.arrived);
                let response = if self.shutdown_deadline.is_some() { without_keep_alive(response) } else { response };
                self.start(waiting.conn, response);
            }
        }
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

/// Writes at most `budget` bytes of the connection's response (the scheduler's grant).
fn write_quantum(conn: &mut Conn, budget: u64, kernel_bands: Option<&Bands>, bands: &Bands, metrics: &Shard) -> io::Result<Quantum> {
    let fd = conn.stream.as_raw_fd();
    let Some(response) = conn.response.as_mut() else { return Ok(Quantum::Written) };
    if let Some(kernel_bands) = kernel_bands {
        // 000 §3: the socket's band follows its remaining bytes; a call only when it changes.
        let priority = so_priority(kernel_bands.band(response.progress.remaining));
        if conn.priority != Some(priority) {
            sys::set_priority(fd, priority)?;
            conn.priority = Some(priority);
            metrics.band_changes.fetch_add(1, Relaxed);
        }
    }
    let mut budget = budget.min(response.progress.remaining) as usize;
    while budget > 0 {
        let head_left = &response.head[response.head_sent..];
        let result = match (&mut response.body, head_left.is_empty()) {
            (Body::Memory { bytes, offset, end }, false) => {
                let body = &bytes[*offset..(*end).min(*offset + budget.saturating_sub(head_left.len()))];
                let head = &head_left[..head_left.len().min(budget)];
                conn.stream.write_vectored(&[IoSlice::new(head), IoSlice::new(body)])
            }
            (_, false) => conn.stream.write(&head_left[..head_left.len().min(budget)]),
            (Body::Memory { bytes, offset, end }, true) => conn.stream.write(&bytes[*offset..(*end).min(*offset + budget)]),
            (Body::File { file, offset, end }, true) => {
                let count = ((*end - *offset) as usize).min(budget);
                let mut position = *offset;
                let sent = sys::sendfile(fd, file.file.as_raw_fd(), &mut position, count);
                if let Ok(0) = sent {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while being sent"));
                }
                sent
            }
            (Body::Empty, true) => Ok(0),
        };
        let written = match result {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_transient(&e) => return Ok(Quantum::Blocked),
            Err(e) => return Err(e),
        };
        budget -= written;
        metrics.bytes_sent.fetch_add(written as u64, Relaxed);
        let from_head = written.min(response.head.len() - response.head_sent);
        response.head_sent += from_head;
        let from_body = written - from_head;
        match &mut response.body {
            Body::Memory { offset, .. } => *offset += from_body,
            Body::File { offset, .. } => *offset += from_body as u64,
            Body::Empty => {}
        }
        response.progress = response.progress.after(written as u64);
        let band = bands.band(response.progress.remaining);
        if band != response.band {
            metrics.waiting_by_band[response.band].fetch_sub(1, Relaxed);
            metrics.waiting_by_band[band].fetch_add(1, Relaxed);
            response.band = band;
        }
    }
    Ok(Quantum::Written)
}

fn new_response(bands: &Bands, head: Vec<u8>, body: Body, status: u16, keep_alive: bool, log: LogInfo, now: Instant) -> Box<Response> {
    let body_len = body.remaining();
    let progress = Progress::new(head.len() as u64 + body_len);
    Box::new(Response { band: bands.band(progress.remaining), head, head_sent: 0, body, body_len, progress, status, keep_alive, log, started: now })
}

fn without_keep_alive(mut response: Box<Response>) -> Box<Response> {
    if response.keep_alive {
        // Rewrite the head's end to announce the close (RFC 9112 §9.6).
        let end = response.head.len() - 2;
        let keep_alive_field: &[u8] = b"Connection: keep-alive\r\n";
        if response.head[..end].ends_with(keep_alive_field) {
            response.head.truncate(end - keep_alive_field.len());
        } else {
            response.head.truncate(end);
        }
        response.head.extend_from_slice(b"Connection: close\r\n\r\n");
        response.progress = Progress::new(response.head.len() as u64 + response.body_len);
        response.keep_alive = false;
    }
    response
}

/// The start of a rejected request as the access log shows it: its first line, at
/// most 200 bytes, `-` if empty.
fn first_line(buf: &[u8]) -> String {
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(&line[..line.len().min(200)]).trim_end_matches('\r').to_string();
    if line.is_empty() { "-".into() } else { line }
}

/// A response to a request the parser or a timeout rejected: always closes.
fn error_response(bands: &Bands, date: &str, status: u16, error: &HttpError, request_line: String, now: Instant) -> Box<Response> {
    let body = format!("{status} {}\n", sojourn_http::response::reason(status));
    let mut head = Vec::new();
    let allow = matches!(error, HttpError::MethodNotAllowed);
    write_head(
        &Head { status, minor_version: 1, keep_alive: false, content_length: body.len() as u64, content_type: Some("text/plain; charset=utf-8"), allow, ..Default::default() },
        date,
        &mut head,
    );
    let body_len = body.len();
    let body = Body::Memory { bytes: Arc::from(body.into_bytes()), offset: 0, end: body_len };
    new_response(bands, head, body, status, false, LogInfo { request_line, referer: None, user_agent: None }, now)
}

/// The response to a well-formed request whose target was looked up (or refused with a status).
fn respond(lookup: Result<Arc<CachedFile>, u16>, bands: &Bands, date: &str, request: &Request, now: Instant) -> Box<Response> {
    let log = LogInfo { request_line: request.request_line(), referer: request.referer.clone(), user_agent: request.user_agent.clone() };
    let mut head = Head { minor_version: request.minor_version, keep_alive: request.keep_alive, ..Default::default() };
    let mut out = Vec::with_capacity(256);
    let file = match lookup {
        Ok(file) => file,
        Err(status) => {
            let text = format!("{status} {}\n", sojourn_http::response::reason(status));
            head.status = status;
            head.content_length = text.len() as u64;
            head.content_type = Some("text/plain; charset=utf-8");
            write_head(&head, date, &mut out);
            let body = if request.method == Method::Head {
                Body::Empty
            } else {
                Body::Memory { bytes: Arc::from(text.into_bytes()), offset: 0, end: head.content_length as usize }
            };
            return new_response(bands, out, body, status, request.keep_alive, log, now);
        }
    };
    let size = file.representation.size;
    let (status, range) = match select(request, &file.representation) {
        Selection::Full => (200, (0, size)),
        Selection::NotModified => (304, (0, 0)),
        Selection::Range { start, end } => (206, (start, end + 1)),
        Selection::Unsatisfiable => (416, (0, 0)),
    };
    head.status = status;
    head.content_length = range.1 - range.0;
    head.content_type = (status != 304).then_some(file.content_type);
    head.representation = Some(&file.representation);
    head.range = (status == 206).then(|| (range.0, range.1 - 1));
    write_head(&head, date, &mut out);
    let body = match (&file.bytes, request.method) {
        _ if range.0 == range.1 => Body::Empty,
        (_, Method::Head) => Body::Empty,
        (Some(bytes), Method::Get) => Body::Memory { bytes: bytes.clone(), offset: range.0 as usize, end: range.1 as usize },
        (None, Method::Get) => Body::File { file: file.clone(), offset: range.0, end: range.1 },
    };
    new_response(bands, out, body, status, request.keep_alive, log, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    fn log() -> LogInfo {
        LogInfo { request_line: "GET / HTTP/1.1".into(), referer: None, user_agent: None }
    }

    /// A connected pair: the server side as the worker holds it, the client side to read from.
    fn connection(response: Box<Response>) -> (Conn, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let conn = Conn {
            stream: TcpStream::from_std(server),
            peer: peer.ip(),
            read_buf: Vec::new(),
            read_paused: false,
            response: Some(response),
            idle_since: Instant::now(),
            head_started: None,
            blocked: false,
            blocked_since: Instant::now(),
            peer_closed: false,
            lingering: None,
            priority: None,
            awaiting_file: false,
        };
        (conn, client)
    }

    #[test]
    fn quanta_carry_head_then_body_and_track_progress() {
        let bands = Bands::default();
        let metrics = Metrics::new("fair", 1);
        let shard = metrics.shard(0);
        let body: Vec<u8> = (0..60_000u32).map(|i| i as u8).collect();
        let response = new_response(&bands, b"HEAD\r\n\r\n".to_vec(), Body::Memory { bytes: Arc::from(body.clone()), offset: 0, end: 60_000 }, 200, true, log(), Instant::now());
        assert_eq!((response.progress.remaining, response.band), (60_008, 4));
        shard.waiting_by_band[4].fetch_add(1, Relaxed); // as `start` does
        let (mut conn, mut client) = connection(response);
        assert!(matches!(write_quantum(&mut conn, 32 * 1024, None, &bands, shard).unwrap(), Quantum::Written));
        let r = conn.response.as_ref().unwrap();
        assert_eq!((r.head_sent, r.progress.attained, r.progress.remaining, r.band), (8, 32_768, 27_240, 3));
        assert_eq!((shard.waiting_by_band[4].load(Relaxed), shard.waiting_by_band[3].load(Relaxed)), (0, 1));
        assert!(matches!(write_quantum(&mut conn, 32 * 1024, None, &bands, shard).unwrap(), Quantum::Written));
        assert_eq!(conn.response.as_ref().unwrap().progress.remaining, 0);
        assert_eq!(shard.bytes_sent.load(Relaxed), 60_008);
        let mut received = vec![0u8; 60_008];
        client.read_exact(&mut received).unwrap();
        assert_eq!(&received[..8], b"HEAD\r\n\r\n");
        assert!(received[8..] == body[..]);
    }

    #[test]
    fn a_full_socket_blocks_the_quantum() {
        let bands = Bands::default();
        let metrics = Metrics::new("fair", 1);
        let size = 64 << 20; // more than any socket buffer holds
        let response = new_response(&bands, Vec::new(), Body::Memory { bytes: Arc::from(vec![0u8; size]), offset: 0, end: size }, 200, true, log(), Instant::now());
        let (mut conn, _client) = connection(response);
        let mut outcome = Quantum::Written;
        for _ in 0..10_000 {
            outcome = write_quantum(&mut conn, 1 << 20, None, &bands, metrics.shard(0)).unwrap();
            if matches!(outcome, Quantum::Blocked) {
                break;
            }
        }
        assert!(matches!(outcome, Quantum::Blocked), "the unread socket never filled");
        assert!(conn.response.as_ref().unwrap().progress.remaining > 0);
    }

    #[test]
    fn rejected_requests_are_logged_by_their_first_line() {
        assert_eq!(first_line(b"BREW /pot HTTP/1.1\r\nHost: t\r\n"), "BREW /pot HTTP/1.1");
        assert_eq!(first_line(b""), "-");
        assert_eq!(first_line(&[b'a'; 500]).len(), 200);
    }

    #[test]
    fn shutdown_turns_keep_alive_into_close() {
        let bands = Bands::default();
        for minor_version in [0, 1] {
            let mut head = Vec::new();
            write_head(&Head { status: 200, minor_version, keep_alive: true, content_length: 2, ..Default::default() }, "D", &mut head);
            let response = new_response(&bands, head, Body::Memory { bytes: Arc::from(&b"ok"[..]), offset: 0, end: 2 }, 200, true, log(), Instant::now());
            let closed = without_keep_alive(response);
            let text = String::from_utf8(closed.head.clone()).unwrap();
            assert!(text.ends_with("Content-Length: 2\r\nConnection: close\r\n\r\n"), "{text:?}");
            assert!(!closed.keep_alive);
            assert_eq!(closed.progress.remaining, closed.head.len() as u64 + 2);
        }
    }
}
