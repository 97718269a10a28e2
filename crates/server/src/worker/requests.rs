//! Reading requests and routing them: a connection's bytes are read (or discarded while
//! it lingers), its next request parsed once no response is in flight (so pipelined
//! responses go out in order), and answered from the file cache, through the opener
//! threads on a cache miss, or by the stage pool for `/stage/<name>/` (003).

use super::*;

impl Worker {
    /// Reads what the socket holds; `to_end` when the peer closed, so the EOF is seen too.
    pub(super) fn on_readable(&mut self, id: JobId, now: Instant, to_end: bool) {
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
            // A new head's first read says when its bytes reached the host (the listener's
            // receive timestamps, set with --admission): what admission judges the wait by.
            let read = if self.admission.is_some() && conn.head_started.is_none() {
                socket::recv_stamped(conn.stream.as_raw_fd(), &mut self.scratch)
            } else {
                conn.stream.read(&mut self.scratch).map(|n| (n, None))
            };
            match read {
                Ok((0, _)) => conn.peer_closed = true,
                Ok((n, stamp)) => {
                    if conn.head_started.is_none() {
                        conn.head_started = Some(now);
                        if let Some(stamp) = stamp {
                            // Both clocks read together: how long the bytes sat unread, and so when they came.
                            let age = SystemTime::now().duration_since(stamp).unwrap_or_default();
                            conn.head_arrived = Instant::now().checked_sub(age);
                            self.shared.metrics.shard(self.index).unread_wait.observe(age.as_secs_f64());
                        }
                    }
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
    pub(super) fn next_request(&mut self, id: JobId, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if conn.response.is_some() || conn.awaiting_file || self.stages.as_ref().is_some_and(|s| s.is_waiting(id)) {
            return;
        }
        let settings = &self.shared.settings;
        let response = match parse_request(&conn.read_buf, &settings.limits) {
            Ok(Some((request, used))) => {
                conn.read_buf.drain(..used);
                let peer = conn.peer;
                if let Some(stage) = self.stages.as_ref().and_then(|r| r.stage_of(&request.target)) {
                    // The reply's size is not known before the stage made it.
                    if self.admit(id, None, now) {
                        let response = refusal(&self.bands, &self.heads, request.request_line(), now);
                        self.start(id, response);
                        return;
                    }
                    let pending = Pending {
                        arrived: now,
                        keep_alive: request.keep_alive && self.shutdown_deadline.is_none(),
                        minor_version: request.minor_version,
                        head_only: request.method == Method::Head,
                        request_line: request.request_line(),
                        referer: request.referer.clone(),
                        user_agent: request.user_agent.clone(),
                    };
                    if let Some(route) = self.stages.as_mut() {
                        route.submit(id, stage, peer, pending);
                    }
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
                let response = self.admitted_or_refused(id, respond(lookup, &self.bands, &self.heads, &request, now), now);
                Some(if self.shutdown_deadline.is_some() { without_keep_alive(response) } else { response })
            }
            Ok(None) if conn.peer_closed => None,
            Ok(None) => return,
            Err(error) => {
                let line = first_line(&conn.read_buf);
                conn.read_buf = Vec::new();
                Some(error_response(&self.bands, &self.heads, error.status(), &error, line, now))
            }
        };
        match response {
            Some(response) => self.start(id, response),
            None => self.close(id),
        }
    }

    /// `--admission` for the connection's request, judged `now`: whether it is refused. It
    /// arrived when its head's first read's bytes reached the host (a pipelined head: when it
    /// was read). `size`: the response's bytes, `None` when not known yet. An admitted
    /// request is marked on its connection, to leave the policy when it is done.
    fn admit(&mut self, id: JobId, size: Option<u64>, now: Instant) -> bool {
        let Some(admission) = self.admission.as_mut() else { return false };
        let arrived = self.conns.get(&id).and_then(|conn| conn.head_arrived.or(conn.head_started)).map_or(now, |at| at.min(now));
        let since_origin = |at: Instant| at.saturating_duration_since(self.origin);
        match admission.arrive(since_origin(now), id, since_origin(arrived), size) {
            Verdict::Admit => {
                if let Some(conn) = self.conns.get_mut(&id) {
                    conn.admitted = Some(Admitted { arrived, served: Duration::ZERO, written: false });
                }
                false
            }
            Verdict::Refuse(reason) => {
                self.shared.metrics.shard(self.index).refusals[reason.index()].fetch_add(1, Relaxed);
                true
            }
        }
    }

    /// `response`, or a 503 in its place if `--admission` refuses its request.
    fn admitted_or_refused(&mut self, id: JobId, response: Box<Response>, now: Instant) -> Box<Response> {
        if self.admit(id, Some(response.progress.remaining), now) {
            refusal(&self.bands, &self.heads, response.log.request_line, response.started)
        } else {
            response
        }
    }

    /// Stage replies arrived (see [`crate::stage_route`]): write their responses.
    pub(super) fn on_stage_replies(&mut self) {
        let Some(route) = self.stages.as_mut() else { return };
        for reply in route.replies() {
            if let Some(admitted) = self.conns.get_mut(&reply.conn).and_then(|conn| conn.admitted.as_mut()) {
                admitted.served = reply.processing;
            }
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
            write_head(&head, &self.heads, &mut out);
            let body_len = reply.body.len();
            let body = if p.head_only { Body::Empty } else { Body::Memory { bytes: Arc::from(reply.body.into_bytes()), offset: 0, end: body_len } };
            let log = LogInfo { request_line: p.request_line, referer: p.referer, user_agent: p.user_agent };
            // `started` is the request's arrival, so logged service time includes the stage queue.
            let response = new_response(&self.bands, out, body, reply.status, p.keep_alive, log, p.arrived);
            self.start(reply.conn, response);
        }
    }

    /// Files the opener threads opened: cache them and answer the requests that waited.
    pub(super) fn on_files_opened(&mut self, now: Instant) {
        for (key, lookup, waiters) in self.opener.arrived() {
            self.files.store(key, now, lookup.clone());
            for waiting in waiters {
                let Some(conn) = self.conns.get_mut(&waiting.conn) else { continue }; // closed meanwhile
                conn.awaiting_file = false;
                let lookup = lookup.clone().map_err(Refusal::status);
                let response = respond(lookup, &self.bands, &self.heads, &waiting.request, waiting.arrived);
                let response = self.admitted_or_refused(waiting.conn, response, now);
                let response = if self.shutdown_deadline.is_some() { without_keep_alive(response) } else { response };
                self.start(waiting.conn, response);
            }
        }
    }
}
