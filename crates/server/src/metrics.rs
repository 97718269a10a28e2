//! Server counters shared by the worker threads (relaxed atomics: each value is
//! exact, a scrape is not a consistent snapshot across values) and their
//! Prometheus text exposition (format 0.0.4).

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use sojourn_sched::bands::MAX_BANDS;

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

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Relaxed);
            let le = self.bounds.get(i).map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {cumulative}", self.sum_micro.load(Relaxed) as f64 / 1e6);
    }
}

/// Ready events returned by one epoll_wait (001 §6.1, Fig. 13).
const EVENTS_BOUNDS: [f64; 12] = [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];
/// Response service time in seconds: request head parsed to last byte handed to the kernel.
const SERVICE_BOUNDS: [f64; 14] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

#[derive(Debug)]
pub struct Metrics {
    pub policy: &'static str,
    requests: [AtomicU64; STATUSES.len()],
    pub bytes_sent: AtomicU64,
    pub connections_open: AtomicI64,
    pub connections_accepted: AtomicU64,
    pub connections_rejected: AtomicU64,
    pub quanta: AtomicU64,
    pub band_changes: AtomicU64,
    /// Responses with bytes left, by the band of their remaining bytes.
    pub waiting_by_band: [AtomicI64; MAX_BANDS],
    /// Responses in each worker's ready queue (waiting for a quantum).
    pub ready_by_worker: Vec<AtomicI64>,
    pub events_per_wait: Histogram,
    pub service_time: Histogram,
}

impl Metrics {
    pub fn new(policy: &'static str, workers: usize) -> Self {
        Metrics {
            policy,
            requests: Default::default(),
            bytes_sent: AtomicU64::new(0),
            connections_open: AtomicI64::new(0),
            connections_accepted: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            quanta: AtomicU64::new(0),
            band_changes: AtomicU64::new(0),
            waiting_by_band: Default::default(),
            ready_by_worker: (0..workers).map(|_| AtomicI64::new(0)).collect(),
            events_per_wait: Histogram::new(&EVENTS_BOUNDS),
            service_time: Histogram::new(&SERVICE_BOUNDS),
        }
    }

    pub fn count_status(&self, status: u16) {
        if let Some(i) = STATUSES.iter().position(|&s| s == status) {
            self.requests[i].fetch_add(1, Relaxed);
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self, bands: usize) -> String {
        let mut out = String::new();
        let policy = self.policy;
        let _ = writeln!(out, "# HELP sojourn_requests_total Responses sent, by status.\n# TYPE sojourn_requests_total counter");
        for (status, count) in STATUSES.iter().zip(&self.requests) {
            let _ = writeln!(out, "sojourn_requests_total{{status=\"{status}\"}} {}", count.load(Relaxed));
        }
        let counters: [(&str, &str, u64); 5] = [
            ("sojourn_bytes_sent_total", "Response bytes (heads and bodies) handed to the kernel.", self.bytes_sent.load(Relaxed)),
            ("sojourn_connections_accepted_total", "Connections accepted.", self.connections_accepted.load(Relaxed)),
            ("sojourn_connections_rejected_total", "Connections answered 503 and closed because --max-connections were open.", self.connections_rejected.load(Relaxed)),
            ("sojourn_write_quanta_total", "Write quanta granted by the scheduler.", self.quanta.load(Relaxed)),
            ("sojourn_priority_changes_total", "SO_PRIORITY changes made for --kernel-bands.", self.band_changes.load(Relaxed)),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{policy=\"{policy}\"}} {value}");
        }
        let _ = writeln!(
            out,
            "# HELP sojourn_connections_open Open client connections.\n# TYPE sojourn_connections_open gauge\nsojourn_connections_open {}",
            self.connections_open.load(Relaxed)
        );
        let _ = writeln!(out, "# HELP sojourn_responses_waiting Responses with bytes left, by band of their remaining bytes.\n# TYPE sojourn_responses_waiting gauge");
        for (band, count) in self.waiting_by_band.iter().take(bands).enumerate() {
            let _ = writeln!(out, "sojourn_responses_waiting{{band=\"{band}\"}} {}", count.load(Relaxed));
        }
        let _ = writeln!(out, "# HELP sojourn_ready_queue_length Responses waiting for a write quantum, by worker scheduler.\n# TYPE sojourn_ready_queue_length gauge");
        for (worker, count) in self.ready_by_worker.iter().enumerate() {
            let _ = writeln!(out, "sojourn_ready_queue_length{{worker=\"{worker}\",policy=\"{policy}\"}} {}", count.load(Relaxed));
        }
        self.events_per_wait.render(&mut out, "sojourn_epoll_ready_events", "Ready events returned per epoll_wait (001 §6.1).");
        self.service_time.render(&mut out, "sojourn_service_time_seconds", "Request head parsed to last response byte handed to the kernel.");
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
        h.render(&mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"0\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"1\"} 2\n"));
        assert!(out.contains("x_bucket{le=\"4\"} 4\n"));
        assert!(out.contains("x_bucket{le=\"1024\"} 4\n"));
        assert!(out.contains("x_bucket{le=\"+Inf\"} 5\nx_sum 5007\nx_count 5\n"), "{out}");
    }

    #[test]
    fn render_has_every_family() {
        let m = Metrics::new("srpt", 2);
        m.count_status(404);
        m.count_status(299); // not a status we send: ignored
        let text = m.render(5);
        assert!(text.contains("sojourn_requests_total{status=\"404\"} 1\n"));
        assert!(text.contains("sojourn_responses_waiting{band=\"4\"} 0\n") && !text.contains("band=\"5\""));
        assert!(text.contains("sojourn_ready_queue_length{worker=\"1\",policy=\"srpt\"} 0\n"));
        assert!(text.contains("sojourn_write_quanta_total{policy=\"srpt\"} 0\n"));
    }
}
