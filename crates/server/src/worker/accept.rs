//! Accepting connections: at most `--accept-limit` open (000 §2: connections then wait in
//! the kernel's accept queue, as with every Apache process busy), `--max-connections`
//! answered 503 beyond it, and accept errors counted and retried from the event loop.

use super::*;

impl Worker {
    pub(super) fn at_accept_limit(&self) -> bool {
        self.shared.settings.accept_limit.is_some_and(|limit| self.shared.metrics.connections_open() >= limit as i64)
    }

    pub(super) fn accept_all(&mut self, now: Instant) {
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
                write_head(&Head { status: 503, minor_version: 1, keep_alive: false, ..Default::default() }, &self.heads, &mut head);
                let _ = stream.write(&head);
                continue;
            }
            metrics.connections_accepted.fetch_add(1, Relaxed);
            metrics.connections_open.fetch_add(1, Relaxed);
            let _ = stream.set_nodelay(true);
            if let Some(lowat) = settings.notsent_lowat {
                if let Err(e) = socket::set_notsent_lowat(stream.as_raw_fd(), lowat) {
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
                    head_arrived: None,
                    blocked: false,
                    blocked_since: now,
                    window_seen_open: now,
                    peer_closed: false,
                    lingering: None,
                    priority: None,
                    awaiting_file: false,
                    admitted: None,
                },
            );
        }
    }
}
