//! Server counters, one [`Shard`] per worker thread (relaxed atomics: each value
//! is exact, a scrape is not a consistent snapshot across values), and their
//! Prometheus text exposition (format 0.0.4), summed over the shards.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use sojourn_sched::bands::MAX_BANDS;
use sojourn_sched::Reason;

/// The statuses the server sends, in the order they are reported.
pub const STATUSES: [u16; 15] = [200, 206, 304, 400, 403, 404, 405, 408, 413, 414, 416, 431, 500, 501, 503];

/// A histogram with fixed upper bounds, in Prometheus' cumulative form when rendered.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    /// Sum of observations in millionths of the unit.
    sum_micro: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram { bounds, counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(), sum_micro: AtomicU64::new(0) }
    }

    pub fn observe(&self, value: f64) {
        let bucket = self.bounds.partition_point(|&b| b < value);
        self.counts[bucket].fetch_add(1, Relaxed);
        self.sum_micro.fetch_add((value * 1e6) as u64, Relaxed);
    }

    /// Renders the sum of `parts` (histograms with the same bounds).
    fn render(parts: &[&Histogram], out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let Some(first) = parts.first() else { return };
        let mut cumulative = 0;
        for (i, bound) in first.bounds.iter().map(Some).chain([None]).enumerate() {
            cumulative += parts.iter().map(|h| h.counts[i].load(Relaxed)).sum::<u64>();
            let le = bound.map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let sum: u64 = parts.iter().map(|h| h.sum_micro.load(Relaxed)).sum();
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {cumulative}", sum as f64 / 1e6);
    }
}

/// Ready events returned by one epoll_wait (001 §6.1, Fig. 13).
const EVENTS_BOUNDS: [f64; 12] = [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];
/// Response service time in seconds: request head parsed to last byte handed to the kernel.
const SERVICE_BOUNDS: [f64; 14] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// Waits (a request unread in the kernel or waiting for its first write, a blocked write
/// waiting for its socket): from CoDel's 5 ms target to past 000 (H)'s 10-s abort time and a
/// 21-s SYN retry.
const WAIT_BOUNDS: [f64; 13] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0];

/// One counter of the policy under test, with its HELP and TYPE lines.
fn counter(out: &mut String, name: &str, help: &str, policy: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{policy=\"{policy}\"}} {value}");
}

/// The counters one worker updates: each worker has its own, on its own cache
/// lines, so workers never contend; a scrape sums them.
#[derive(Debug)]
#[repr(align(128))]
pub struct Shard {
    requests: [AtomicU64; STATUSES.len()],
    pub bytes_sent: AtomicU64,
    pub connections_open: AtomicI64,
    pub connections_accepted: AtomicU64,
    pub connections_rejected: AtomicU64,
    /// Times accepting stopped because --accept-limit connections were open.
    pub accept_pauses: AtomicU64,
    /// accept() calls that failed (EMFILE, ENFILE, ENOBUFS...).
    pub accept_errors: AtomicU64,
    /// Connections in a lingering close; lingering closes ended by a timeout.
    pub lingering: AtomicI64,
    pub linger_timeouts: AtomicU64,
    /// Connections closed by --send-timeout: a response blocked that long on a closed window.
    pub send_timeouts: AtomicU64,
    pub quanta: AtomicU64,
    /// Nanoseconds this worker had a response ready and every write slot held by a blocked
    /// response (--write-concurrency, 004 §3.3).
    pub slots_full_nanos: AtomicU64,
    pub band_changes: AtomicU64,
    /// Access-log lines dropped because the writer thread's channel was full.
    pub log_lines_dropped: AtomicU64,
    /// Responses with bytes left, by the band of their remaining bytes.
    pub waiting_by_band: [AtomicI64; MAX_BANDS],
    /// Responses in this worker's ready queue (waiting for a quantum).
    pub ready_queue_length: AtomicI64,
    pub events_per_wait: Histogram,
    pub service_time: Histogram,
    /// How long a request's first bytes waited in the kernel (the accept queue included)
    /// before the server read them; measured only with --admission (receive timestamps).
    pub unread_wait: Histogram,
    /// How long an admitted request waited from its arrival in the kernel to its response's
    /// first byte handed to the kernel: the wait CoDel judges (RFC 8289 §3), the server's
    /// share of a client's wait for the first byte; measured only with --admission.
    pub first_write_wait: Histogram,
    /// How long a write that would block kept its response's socket full, from the blocked
    /// write to the writable event that freed its slot (004 §3.3).
    pub write_blocked: Histogram,
    /// Requests refused by --admission, by [`Reason::index`].
    pub refusals: [AtomicU64; Reason::ALL.len()],
    /// The admission policy's level (f64 bits; NaN until it has one).
    pub admission_level: AtomicU64,
}

impl Shard {
    fn new() -> Self {
        Shard {
            requests: Default::default(),
            bytes_sent: AtomicU64::new(0),
            connections_open: AtomicI64::new(0),
            connections_accepted: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            accept_pauses: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            lingering: AtomicI64::new(0),
            linger_timeouts: AtomicU64::new(0),
            send_timeouts: AtomicU64::new(0),
            quanta: AtomicU64::new(0),
            slots_full_nanos: AtomicU64::new(0),
            band_changes: AtomicU64::new(0),
            log_lines_dropped: AtomicU64::new(0),
            waiting_by_band: Default::default(),
            ready_queue_length: AtomicI64::new(0),
            events_per_wait: Histogram::new(&EVENTS_BOUNDS),
            service_time: Histogram::new(&SERVICE_BOUNDS),
            unread_wait: Histogram::new(&WAIT_BOUNDS),
            first_write_wait: Histogram::new(&WAIT_BOUNDS),
            write_blocked: Histogram::new(&WAIT_BOUNDS),
            refusals: Default::default(),
            admission_level: AtomicU64::new(f64::NAN.to_bits()),
        }
    }

    pub fn count_status(&self, status: u16) {
        if let Some(i) = STATUSES.iter().position(|&s| s == status) {
            self.requests[i].fetch_add(1, Relaxed);
        }
    }
}

#[derive(Debug)]
pub struct Metrics {
    pub policy: &'static str,
    /// The --admission policy's name, `none` without one.
    pub admission: &'static str,
    shards: Vec<Shard>,
}

impl Metrics {
    pub fn new(policy: &'static str, workers: usize) -> Self {
        Metrics { policy, admission: "none", shards: (0..workers.max(1)).map(|_| Shard::new()).collect() }
    }

    /// Labels the refusal counters with the admission policy's name.
    pub fn with_admission(mut self, admission: Option<&'static str>) -> Self {
        self.admission = admission.unwrap_or("none");
        self
    }

    /// The counters of worker `index`.
    pub fn shard(&self, index: usize) -> &Shard {
        &self.shards[index]
    }

    /// Open connections over all workers.
    pub fn connections_open(&self) -> i64 {
        self.sum(|s| s.connections_open.load(Relaxed) as u64) as i64
    }

    fn sum(&self, value: impl Fn(&Shard) -> u64) -> u64 {
        self.shards.iter().map(value).fold(0, u64::wrapping_add)
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self, bands: usize) -> String {
        let mut out = String::new();
        let policy = self.policy;
        let _ = writeln!(out, "# HELP sojourn_requests_total Responses sent, by status.\n# TYPE sojourn_requests_total counter");
        for (i, status) in STATUSES.iter().enumerate() {
            let _ = writeln!(out, "sojourn_requests_total{{status=\"{status}\"}} {}", self.sum(|s| s.requests[i].load(Relaxed)));
        }
        let counters: [(&str, &str, u64); 10] = [
            ("sojourn_bytes_sent_total", "Response bytes (heads and bodies) handed to the kernel.", self.sum(|s| s.bytes_sent.load(Relaxed))),
            ("sojourn_connections_accepted_total", "Connections accepted.", self.sum(|s| s.connections_accepted.load(Relaxed))),
            (
                "sojourn_connections_rejected_total",
                "Connections answered 503 and closed because --max-connections were open.",
                self.sum(|s| s.connections_rejected.load(Relaxed)),
            ),
            (
                "sojourn_accept_pauses_total",
                "Times the server stopped accepting because --accept-limit connections were open (they wait in the kernel).",
                self.sum(|s| s.accept_pauses.load(Relaxed)),
            ),
            (
                "sojourn_accept_errors_total",
                "accept() calls that failed (e.g. EMFILE); the connection stays in the kernel's queue.",
                self.sum(|s| s.accept_errors.load(Relaxed)),
            ),
            (
                "sojourn_linger_timeouts_total",
                "Lingering closes ended by --linger-timeout or --linger-read-timeout instead of the client's close.",
                self.sum(|s| s.linger_timeouts.load(Relaxed)),
            ),
            (
                "sojourn_send_timeouts_total",
                "Connections closed because a response stayed blocked --send-timeout on a client that read nothing (its receive window closed).",
                self.sum(|s| s.send_timeouts.load(Relaxed)),
            ),
            ("sojourn_write_quanta_total", "Write quanta granted by the scheduler.", self.sum(|s| s.quanta.load(Relaxed))),
            ("sojourn_priority_changes_total", "SO_PRIORITY changes made for --kernel-bands.", self.sum(|s| s.band_changes.load(Relaxed))),
            (
                "sojourn_access_log_lines_dropped_total",
                "Access-log lines dropped because the log writer thread fell behind (see --access-log-block).",
                self.sum(|s| s.log_lines_dropped.load(Relaxed)),
            ),
        ];
        for (name, help, value) in counters {
            counter(&mut out, name, help, policy, value);
        }
        counter(
            &mut out,
            "sojourn_write_slots_full_seconds_total",
            "Seconds a worker had a response ready to write and every --write-concurrency slot held by a blocked response, summed over workers.",
            policy,
            self.sum(|s| s.slots_full_nanos.load(Relaxed)) as f64 / 1e9,
        );
        let _ = writeln!(
            out,
            "# HELP sojourn_connections_open Open client connections.\n# TYPE sojourn_connections_open gauge\nsojourn_connections_open {}",
            self.connections_open()
        );
        let _ = writeln!(
            out,
            "# HELP sojourn_connections_lingering Connections in a lingering close (--linger-close).\n# TYPE sojourn_connections_lingering gauge\nsojourn_connections_lingering {}",
            self.sum(|s| s.lingering.load(Relaxed) as u64) as i64
        );
        let _ = writeln!(out, "# HELP sojourn_responses_waiting Responses with bytes left, by band of their remaining bytes.\n# TYPE sojourn_responses_waiting gauge");
        for band in 0..bands.min(MAX_BANDS) {
            let waiting = self.sum(|s| s.waiting_by_band[band].load(Relaxed) as u64) as i64;
            let _ = writeln!(out, "sojourn_responses_waiting{{band=\"{band}\"}} {waiting}");
        }
        let _ = writeln!(out, "# HELP sojourn_ready_queue_length Responses waiting for a write quantum, by worker scheduler.\n# TYPE sojourn_ready_queue_length gauge");
        for (worker, shard) in self.shards.iter().enumerate() {
            let _ = writeln!(out, "sojourn_ready_queue_length{{worker=\"{worker}\",policy=\"{policy}\"}} {}", shard.ready_queue_length.load(Relaxed));
        }
        let admission = self.admission;
        let _ = writeln!(
            out,
            "# HELP sojourn_admission_refusals_total Requests refused by --admission with a 503 before any byte of their response, by reason.\n# TYPE sojourn_admission_refusals_total counter"
        );
        for reason in Reason::ALL {
            let refused = self.sum(|s| s.refusals[reason.index()].load(Relaxed));
            let _ = writeln!(out, "sojourn_admission_refusals_total{{admission=\"{admission}\",reason=\"{}\"}} {refused}", reason.name());
        }
        let _ = writeln!(
            out,
            "# HELP sojourn_admission_level The admission policy's level by worker: gradient's concurrency limit, delay's share of arrivals admitted.\n# TYPE sojourn_admission_level gauge"
        );
        for (worker, shard) in self.shards.iter().enumerate() {
            let level = f64::from_bits(shard.admission_level.load(Relaxed));
            if !level.is_nan() {
                let _ = writeln!(out, "sojourn_admission_level{{worker=\"{worker}\",admission=\"{admission}\"}} {level}");
            }
        }
        let histograms: Vec<&Histogram> = self.shards.iter().map(|s| &s.events_per_wait).collect();
        Histogram::render(&histograms, &mut out, "sojourn_epoll_ready_events", "Ready events returned per epoll_wait (001 §6.1).");
        let histograms: Vec<&Histogram> = self.shards.iter().map(|s| &s.service_time).collect();
        Histogram::render(&histograms, &mut out, "sojourn_service_time_seconds", "Request head parsed to last response byte handed to the kernel.");
        let histograms: Vec<&Histogram> = self.shards.iter().map(|s| &s.unread_wait).collect();
        Histogram::render(
            &histograms,
            &mut out,
            "sojourn_unread_wait_seconds",
            "A request's first bytes received by the host to read by the server, the accept queue included (measured with --admission only).",
        );
        let histograms: Vec<&Histogram> = self.shards.iter().map(|s| &s.first_write_wait).collect();
        Histogram::render(
            &histograms,
            &mut out,
            "sojourn_first_write_wait_seconds",
            "An admitted request's first bytes received by the host to its response's first byte handed to the kernel, less a stage request's processing (measured with --admission only).",
        );
        let histograms: Vec<&Histogram> = self.shards.iter().map(|s| &s.write_blocked).collect();
        Histogram::render(
            &histograms,
            &mut out,
            "sojourn_write_blocked_seconds",
            "A write that would block to the writable event that let its response write again: how long a blocked response held its write slot.",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let h = Histogram::new(&EVENTS_BOUNDS);
        for v in [0.0, 1.0, 3.0, 3.0, 5000.0] {
            h.observe(v);
        }
        let mut out = String::new();
        Histogram::render(&[&h], &mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"0\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"1\"} 2\n"));
        assert!(out.contains("x_bucket{le=\"4\"} 4\n"));
        assert!(out.contains("x_bucket{le=\"1024\"} 4\n"));
        assert!(out.contains("x_bucket{le=\"+Inf\"} 5\nx_sum 5007\nx_count 5\n"), "{out}");
    }

    #[test]
    fn render_has_every_family() {
        let m = Metrics::new("srpt", 2);
        m.shard(0).count_status(404);
        m.shard(1).count_status(404);
        m.shard(1).count_status(299); // not a status we send: ignored
        m.shard(0).service_time.observe(0.5);
        m.shard(1).service_time.observe(2.0);
        m.shard(1).first_write_wait.observe(0.03);
        m.shard(0).write_blocked.observe(0.2);
        m.shard(0).slots_full_nanos.fetch_add(250_000_000, Relaxed);
        m.shard(1).slots_full_nanos.fetch_add(1_000_000_000, Relaxed);
        m.shard(1).connections_open.fetch_add(3, Relaxed);
        m.shard(0).connections_open.fetch_sub(1, Relaxed);
        let text = m.render(5);
        assert!(text.contains("sojourn_requests_total{status=\"404\"} 2\n"), "{text}");
        assert!(text.contains("sojourn_service_time_seconds_bucket{le=\"1\"} 1\n"));
        assert!(text.contains("sojourn_service_time_seconds_sum 2.5\nsojourn_service_time_seconds_count 2\n"));
        assert!(text.contains("sojourn_first_write_wait_seconds_bucket{le=\"0.05\"} 1\n"), "{text}");
        assert!(text.contains("sojourn_write_blocked_seconds_sum 0.2\nsojourn_write_blocked_seconds_count 1\n"), "{text}");
        assert_eq!(m.connections_open(), 2);
        assert!(text.contains("sojourn_responses_waiting{band=\"4\"} 0\n") && !text.contains("band=\"5\""));
        assert!(text.contains("sojourn_ready_queue_length{worker=\"1\",policy=\"srpt\"} 0\n"));
        assert!(text.contains("sojourn_write_quanta_total{policy=\"srpt\"} 0\n"));
        assert!(text.contains("sojourn_write_slots_full_seconds_total{policy=\"srpt\"} 1.25\n"), "{text}");
        assert!(text.contains("sojourn_access_log_lines_dropped_total{policy=\"srpt\"} 0\n"));
        assert!(text.contains("sojourn_admission_refusals_total{admission=\"none\",reason=\"deadline\"} 0\n"));
        assert!(!text.contains("sojourn_admission_level{"), "no level without a policy that has one");
    }

    #[test]
    fn refusals_are_counted_by_reason_and_levels_by_worker() {
        let m = Metrics::new("srpt", 2).with_admission(Some("gradient"));
        m.shard(0).refusals[Reason::ConcurrencyLimit.index()].fetch_add(2, Relaxed);
        m.shard(1).refusals[Reason::ConcurrencyLimit.index()].fetch_add(1, Relaxed);
        m.shard(1).admission_level.store(42.0f64.to_bits(), Relaxed);
        let text = m.render(5);
        assert!(text.contains("sojourn_admission_refusals_total{admission=\"gradient\",reason=\"concurrency_limit\"} 3\n"), "{text}");
        assert!(text.contains("sojourn_admission_refusals_total{admission=\"gradient\",reason=\"codel\"} 0\n"));
        assert!(text.contains("sojourn_admission_level{worker=\"1\",admission=\"gradient\"} 42\n"));
        assert!(!text.contains("sojourn_admission_level{worker=\"0\""));
    }
}
