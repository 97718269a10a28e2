//! The admin listener: Prometheus text on `GET /metrics` (the server's counters and, with
//! `--stages`, the stage pool's queues, weights and productivity), 404 for anything else.
//! It runs on its own thread with blocking sockets, away from the event loops,
//! one short-lived connection at a time (a scraper, not a client load).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use sojourn_http::{parse_request, write_head, Head, HeadCommon, Limits};

use sojourn_stages::StagePool;

use crate::metrics::Metrics;

/// Serves `/metrics` on `listener` until the process exits.
pub fn serve(listener: TcpListener, metrics: Arc<Metrics>, bands: usize, stages: Option<Arc<StagePool>>) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let request = loop {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => break None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            match parse_request(&buf, &Limits::default()) {
                Ok(Some((request, _))) => break Some(Ok(request)),
                Ok(None) => {}
                Err(error) => break Some(Err(error.status())),
            }
        };
        let (status, body) = match request {
            None => continue,
            Some(Ok(request)) if request.target.split('?').next() == Some("/metrics") => {
                let pool = stages.as_ref().map(|pool| pool.metrics().prometheus()).unwrap_or_default();
                (200, metrics.render(bands) + &pool)
            }
            Some(Ok(_)) => (404, "only /metrics is served here\n".to_string()),
            Some(Err(status)) => (status, format!("{status}\n")),
        };
        let mut out = Vec::new();
        let content_type = Some("text/plain; version=0.0.4; charset=utf-8");
        let head = Head { status, minor_version: 1, keep_alive: false, content_length: body.len() as u64, content_type, ..Default::default() };
        let common = HeadCommon { date: httpdate::fmt_http_date(std::time::SystemTime::now()), ..Default::default() };
        write_head(&head, &common, &mut out);
        out.extend_from_slice(body.as_bytes());
        let _ = stream.write_all(&out);
    }
}
