//! Building responses and writing them: response heads for files, errors and stage
//! replies (RFC 9110/9112 through sojourn-http), and [`write_quantum`], which writes one
//! granted quantum of a response (head, then body from memory or by sendfile) and
//! keeps the socket's SO_PRIORITY on the band of its remaining bytes (000 §3).

use super::*;

/// Writes at most `budget` bytes of the connection's response (the scheduler's grant).
pub(super) fn write_quantum(conn: &mut Conn, budget: u64, kernel_bands: Option<&Bands>, bands: &Bands, metrics: &Shard) -> io::Result<Quantum> {
    let fd = conn.stream.as_raw_fd();
    let Some(response) = conn.response.as_mut() else { return Ok(Quantum::Written) };
    if let Some(kernel_bands) = kernel_bands {
        // 000 §3: the socket's band follows its remaining bytes; a call only when it changes.
        let priority = so_priority(kernel_bands.band(response.progress.remaining));
        if conn.priority != Some(priority) {
            socket::set_priority(fd, priority)?;
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
            (Body::File { .. }, false) if budget > head_left.len() => {
                // The body follows by sendfile: MSG_MORE holds the head back so head and
                // body leave in full segments, as TCP_CORK does for nginx's sendfile.
                socket2::SockRef::from(&conn.stream).send_with_flags(head_left, libc::MSG_MORE)
            }
            (_, false) => conn.stream.write(&head_left[..head_left.len().min(budget)]),
            (Body::Memory { bytes, offset, end }, true) => conn.stream.write(&bytes[*offset..(*end).min(*offset + budget)]),
            (Body::File { file, offset, end }, true) => {
                let count = ((*end - *offset) as usize).min(budget);
                let mut position = *offset;
                let sent = socket::sendfile(fd, file.file.as_raw_fd(), &mut position, count);
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

pub(super) fn new_response(bands: &Bands, head: Vec<u8>, body: Body, status: u16, keep_alive: bool, log: LogInfo, now: Instant) -> Box<Response> {
    let body_len = body.remaining();
    let progress = Progress::new(head.len() as u64 + body_len);
    Box::new(Response { band: bands.band(progress.remaining), head, head_sent: 0, body, body_len, progress, status, keep_alive, log, started: now })
}

pub(super) fn without_keep_alive(mut response: Box<Response>) -> Box<Response> {
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
pub(super) fn first_line(buf: &[u8]) -> String {
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(&line[..line.len().min(200)]).trim_end_matches('\r').to_string();
    if line.is_empty() { "-".into() } else { line }
}

/// A response to a request the parser or a timeout rejected: always closes.
pub(super) fn error_response(bands: &Bands, common: &HeadCommon, status: u16, error: &HttpError, request_line: String, now: Instant) -> Box<Response> {
    closing_response(bands, common, status, matches!(error, HttpError::MethodNotAllowed), request_line, now)
}

/// A request refused by `--admission`: a short 503 ("temporary overload", RFC 9110 §15.6.4)
/// that closes the connection, so a refused client does not queue its next request here.
pub(super) fn refusal(bands: &Bands, common: &HeadCommon, request_line: String, arrived: Instant) -> Box<Response> {
    closing_response(bands, common, 503, false, request_line, arrived)
}

fn closing_response(bands: &Bands, common: &HeadCommon, status: u16, allow: bool, request_line: String, now: Instant) -> Box<Response> {
    let body = format!("{status} {}\n", sojourn_http::response::reason(status));
    let mut head = Vec::new();
    write_head(
        &Head { status, minor_version: 1, keep_alive: false, content_length: body.len() as u64, content_type: Some("text/plain; charset=utf-8"), allow, ..Default::default() },
        common,
        &mut head,
    );
    let body_len = body.len();
    let body = Body::Memory { bytes: Arc::from(body.into_bytes()), offset: 0, end: body_len };
    new_response(bands, head, body, status, false, LogInfo { request_line, referer: None, user_agent: None }, now)
}

/// The response to a well-formed request whose target was looked up (or refused with a status).
pub(super) fn respond(lookup: Result<Arc<CachedFile>, u16>, bands: &Bands, common: &HeadCommon, request: &Request, now: Instant) -> Box<Response> {
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
            write_head(&head, common, &mut out);
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
    write_head(&head, common, &mut out);
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
            head_arrived: None,
            blocked: false,
            blocked_since: Instant::now(),
            window_seen_open: Instant::now(),
            peer_closed: false,
            lingering: None,
            priority: None,
            awaiting_file: false,
            admitted: None,
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
            write_head(&Head { status: 200, minor_version, keep_alive: true, content_length: 2, ..Default::default() }, &HeadCommon::default(), &mut head);
            let response = new_response(&bands, head, Body::Memory { bytes: Arc::from(&b"ok"[..]), offset: 0, end: 2 }, 200, true, log(), Instant::now());
            let closed = without_keep_alive(response);
            let text = String::from_utf8(closed.head.clone()).unwrap();
            assert!(text.ends_with("Content-Length: 2\r\nConnection: close\r\n\r\n"), "{text:?}");
            assert!(!closed.keep_alive);
            assert_eq!(closed.progress.remaining, closed.head.len() as u64 + 2);
        }
    }
}
