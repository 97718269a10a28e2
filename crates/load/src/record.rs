//! Output files of a run (docs/formats.md): `records.csv`, one row per attempt, streamed;
//! `intervals.csv`, one row per second; `summary.json`. Memory is constant in the number
//! of records (histograms and counters only). Rows are formatted on the event loop thread
//! and written to disk by one writer thread per file ([`BackgroundFile`]), so a slow disk
//! never stalls pacing; at most [`QUEUED_CHUNKS`] chunks of [`CHUNK`] bytes wait in memory
//! (beyond that the loop waits: back-pressure, never dropped rows).
//!
//! `summary.json` keys: `mode`, `target`, `duration_s` (first schedule to last outcome),
//! `requests` (logical), `attempts`, `outcomes` (final outcome -> count; they sum to
//! `requests`), `attempt_outcomes`, `connections_opened`, `bytes`, `throughput_rps` (ok
//! requests / duration), `response_time_s`, `ttfb_s`, `service_time_s`, `lag_s` (each
//! `{count, mean, min, p50, p90, p95, p99, p999, max}` from HdrHistogram, µs resolution;
//! response time and ttfb over final `ok` attempts from the scheduled time, service time
//! from the send, lag = issue minus schedule of first attempts), `record_writer_waits`
//! (times the event loop waited for the disk because the record queue was full), `loop_busy_fraction`,
//! `loop_longest_pass_s`, `loop_runqueue_wait_s` and `loop_worst_second_runqueue_wait_s` (the
//! loop thread runnable but not running, over the run and in its worst second; null without
//! schedstat), `loop_involuntary_switches`, `fd_limit`, `warnings` (list of strings), `workload` (mode-specific, e.g. session counts).

use anyhow::Context;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// Bytes handed to a writer thread at once.
pub const CHUNK: usize = 256 * 1024;
/// Chunks that may wait for the disk before the event loop blocks.
pub const QUEUED_CHUNKS: usize = 64;

/// A file written by its own thread: `write` only appends to memory and queues full chunks.
pub struct BackgroundFile {
    buffer: Vec<u8>,
    sender: Option<SyncSender<Vec<u8>>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
    /// Times the queue was full and the caller waited for the disk (reported in summary.json).
    waits: u64,
}

impl BackgroundFile {
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let (sender, receiver) = sync_channel::<Vec<u8>>(QUEUED_CHUNKS);
        let writer = std::thread::Builder::new().name("load-writer".into()).spawn(move || {
            // If the generator runs with real-time priority (chrt), the disk writer must not:
            // it would take the CPU from pacing. Normal scheduling (not a low nice value either:
            // starved on a busy machine, it would fill the queue and stall the loop).
            let _ = sojourn_sys::thread::set_normal_scheduling();
            let mut file = BufWriter::new(file);
            for chunk in receiver {
                file.write_all(&chunk)?;
            }
            file.flush()
        })?;
        Ok(BackgroundFile { buffer: Vec::with_capacity(CHUNK), sender: Some(sender), writer: Some(writer), waits: 0 })
    }

    fn send(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buffer, Vec::with_capacity(CHUNK));
        let sender = self.sender.as_ref().ok_or_else(|| std::io::Error::other("file already finished"))?;
        let stopped = || std::io::Error::other("the writer thread stopped (see the error at finish)");
        match sender.try_send(chunk) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(chunk)) => {
                self.waits += 1;
                sender.send(chunk).map_err(|_| stopped())
            }
            Err(TrySendError::Disconnected(_)) => Err(stopped()),
        }
    }

    /// Write everything out and wait for the writer thread; reports its I/O error if any.
    pub fn finish(&mut self) -> std::io::Result<()> {
        let sent = self.send();
        self.sender = None;
        let written = match self.writer.take() {
            Some(writer) => writer.join().unwrap_or_else(|_| Err(std::io::Error::other("the writer thread panicked"))),
            None => Ok(()),
        };
        written.and(sent)
    }
}

impl Write for BackgroundFile {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        // Queue the chunk before it would outgrow its capacity: growing it would copy it.
        if self.buffer.len() + data.len() > CHUNK {
            self.send()?;
        }
        self.buffer.extend_from_slice(data);
        Ok(data.len())
    }

    /// Queues what is buffered; [`BackgroundFile::finish`] waits for the disk.
    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

use crate::workload::Nanos;

/// Final and intermediate outcomes of an attempt (docs/formats.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    HttpError,
    /// 503 Service Unavailable: the server refused the request under overload (RFC 9110
    /// §15.6.4), e.g. by `serve --admission`; its own outcome, apart from other errors.
    Refused,
    Aborted,
    GaveUp,
    ConnectError,
    Reset,
    Timeout,
    Invalid,
    Interrupted,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::HttpError => "http_error",
            Outcome::Refused => "refused",
            Outcome::Aborted => "aborted",
            Outcome::GaveUp => "gave_up",
            Outcome::ConnectError => "connect_error",
            Outcome::Reset => "reset",
            Outcome::Timeout => "timeout",
            Outcome::Invalid => "invalid",
            Outcome::Interrupted => "interrupted",
        }
    }
}

/// Seconds with microsecond resolution, as figures for summary.json.
fn seconds(ns: Nanos) -> f64 {
    (ns / 1_000) as f64 / 1e6
}

/// A time written to the tables as seconds with exactly six decimals (`12.000345`),
/// formatted with integer arithmetic: exact, and cheaper than shortest-float printing.
fn push_seconds(row: &mut Vec<u8>, ns: Nanos) {
    let micros = ns / 1_000;
    let mut digits = itoa::Buffer::new();
    if micros >= 1_000_000 {
        // One conversion: at least seven digits, the point goes before the last six.
        let text = digits.format(micros).as_bytes();
        let (whole, fraction) = text.split_at(text.len() - 6);
        row.extend_from_slice(whole);
        row.push(b'.');
        row.extend_from_slice(fraction);
    } else {
        // Under a second: "0." and six digits with their leading zeros ("1" + six digits).
        row.extend_from_slice(b"0.");
        row.extend_from_slice(&digits.format(micros + 1_000_000).as_bytes()[1..]);
    }
}

/// Column names of `records.csv`, in order (docs/formats.md).
const RECORD_COLUMNS: [&str; 22] = [
    "request_id", "attempt", "final", "client", "session", "class", "path", "expected_size", "bytes", "status",
    "scheduled_s", "issued_s", "dispatch_s", "connect_start_s", "connect_end_s", "conn_id", "reuse_index", "sent_s",
    "first_byte_s", "last_byte_s", "outcome", "error",
];

/// Formats one `records.csv` row per attempt into a reused buffer: integers with itoa,
/// times with [`push_seconds`], missing values as empty fields, and text fields quoted
/// by csv-core exactly as the csv crate's writer does (RFC 4180 §2: quotes only when a
/// field holds a delimiter, quote or line break; quotes doubled). Numbers never need quotes.
/// The same bytes as serialising the row with the csv crate, without serde's per-field cost.
struct RecordRow {
    quoting: csv_core::Writer,
    row: Vec<u8>,
}

impl RecordRow {
    fn new() -> Self {
        RecordRow { quoting: csv_core::Writer::new(), row: Vec::with_capacity(256) }
    }

    fn header(&mut self) -> &[u8] {
        self.row.clear();
        for column in RECORD_COLUMNS {
            self.text(column);
        }
        self.end()
    }

    fn integer(&mut self, value: impl itoa::Integer) {
        self.row.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
        self.row.push(b',');
    }

    fn optional_integer(&mut self, value: Option<impl itoa::Integer>) {
        match value {
            Some(value) => self.integer(value),
            None => self.row.push(b','),
        }
    }

    fn seconds(&mut self, value: Option<Nanos>) {
        if let Some(ns) = value {
            push_seconds(&mut self.row, ns);
        }
        self.row.push(b',');
    }

    fn text(&mut self, value: &str) {
        let input = value.as_bytes();
        if self.quoting.should_quote(input) {
            let start = self.row.len();
            // Worst case every byte is a quote, doubled, plus the two enclosing quotes.
            self.row.resize(start + 2 * input.len() + 2, 0);
            self.row[start] = b'"';
            let (_, _, written) = csv_core::quote(input, &mut self.row[start + 1..], b'"', b'"', true);
            self.row.truncate(start + 1 + written);
            self.row.push(b'"');
        } else {
            self.row.extend_from_slice(input);
        }
        self.row.push(b',');
    }

    /// The finished row: the last field's delimiter becomes the line end.
    fn end(&mut self) -> &[u8] {
        if let Some(last) = self.row.last_mut() {
            *last = b'\n';
        }
        &self.row
    }

    fn format(&mut self, attempt: &Attempt, path: &str, outcome: Outcome, error: &str, is_final: bool, now: Nanos) -> &[u8] {
        self.row.clear();
        self.integer(attempt.request_id);
        self.integer(attempt.attempt);
        self.integer(u8::from(is_final));
        self.integer(attempt.client);
        self.integer(attempt.session);
        self.integer(attempt.class);
        self.text(path);
        self.optional_integer(attempt.expected_size);
        self.integer(attempt.bytes);
        self.optional_integer(attempt.status);
        self.seconds(Some(attempt.scheduled));
        self.seconds(Some(attempt.issued));
        self.seconds(attempt.dispatch);
        self.seconds(attempt.connect_start);
        self.seconds(attempt.connect_end);
        self.optional_integer(attempt.conn_id);
        self.optional_integer(attempt.reuse_index);
        self.seconds(attempt.sent);
        self.seconds(attempt.first_byte);
        self.seconds(Some(attempt.last_byte.unwrap_or(now)));
        self.text(outcome.name());
        self.text(error);
        self.end()
    }
}

/// One attempt, as the event loop fills it in (times in ns since the run started).
#[derive(Debug, Clone, Default)]
pub struct Attempt {
    pub request_id: u64,
    pub attempt: u32,
    pub client: u32,
    pub session: i64,
    pub class: u8,
    pub expected_size: Option<u64>,
    pub bytes: u64,
    pub status: Option<u16>,
    pub scheduled: Nanos,
    pub issued: Nanos,
    pub dispatch: Option<Nanos>,
    pub connect_start: Option<Nanos>,
    pub connect_end: Option<Nanos>,
    pub conn_id: Option<u64>,
    pub reuse_index: Option<u32>,
    pub sent: Option<Nanos>,
    pub first_byte: Option<Nanos>,
    pub last_byte: Option<Nanos>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Interval {
    issued: u64,
    completed: u64,
    bytes: u64,
    errors: u64,
}

/// Histogram summary in seconds.
fn describe(histogram: &Histogram<u64>) -> serde_json::Value {
    let s = |us: u64| us as f64 / 1e6;
    if histogram.is_empty() {
        return serde_json::json!({ "count": 0 });
    }
    serde_json::json!({
        "count": histogram.len(),
        "mean": histogram.mean() / 1e6,
        "min": s(histogram.min()),
        "p50": s(histogram.value_at_quantile(0.50)),
        "p90": s(histogram.value_at_quantile(0.90)),
        "p95": s(histogram.value_at_quantile(0.95)),
        "p99": s(histogram.value_at_quantile(0.99)),
        "p999": s(histogram.value_at_quantile(0.999)),
        "max": s(histogram.max()),
    })
}

fn new_histogram() -> Histogram<u64> {
    // 1 µs .. about 3 days, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000 * 72, 3).expect("valid bounds")
}

/// A histogram kept as its recorded (value, count) pairs: exact, and plain JSON.
mod histogram_counts {
    use hdrhistogram::Histogram;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(histogram: &Histogram<u64>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(histogram.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Histogram<u64>, D::Error> {
        let mut histogram = super::new_histogram();
        for (value, count) in Vec::<(u64, u64)>::deserialize(deserializer)? {
            histogram.record_n(value, count).map_err(|err| D::Error::custom(format!("value {value}: {err}")))?;
        }
        Ok(histogram)
    }
}

/// What summary.json is computed from: counters and histograms, mergeable across the
/// event-loop threads of one run (`load --threads`) and, through `tally.json`, across the
/// processes of one run (`load --process-part`, joined by `load merge`).
#[derive(Serialize, Deserialize)]
pub struct Tally {
    pub requests: u64,
    pub attempts: u64,
    pub final_outcomes: BTreeMap<Outcome, u64>,
    attempt_outcomes: BTreeMap<Outcome, u64>,
    bytes: u64,
    first_scheduled: Option<Nanos>,
    last_outcome: Nanos,
    #[serde(with = "histogram_counts")]
    response_time: Histogram<u64>,
    #[serde(with = "histogram_counts")]
    ttfb: Histogram<u64>,
    #[serde(with = "histogram_counts")]
    service_time: Histogram<u64>,
    #[serde(with = "histogram_counts")]
    lag: Histogram<u64>,
    /// Times an event loop waited for the disk because a file's queue was full.
    writer_waits: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            requests: 0,
            attempts: 0,
            final_outcomes: BTreeMap::new(),
            attempt_outcomes: BTreeMap::new(),
            bytes: 0,
            first_scheduled: None,
            last_outcome: 0,
            response_time: new_histogram(),
            ttfb: new_histogram(),
            service_time: new_histogram(),
            lag: new_histogram(),
            writer_waits: 0,
        }
    }
}

impl Tally {
    pub fn ok_requests(&self) -> u64 {
        self.final_outcomes.get(&Outcome::Ok).copied().unwrap_or(0)
    }

    pub fn duration_s(&self) -> f64 {
        seconds(self.last_outcome.saturating_sub(self.first_scheduled.unwrap_or(0)))
    }

    pub fn lag_p99_s(&self) -> f64 {
        if self.lag.is_empty() { 0.0 } else { self.lag.value_at_quantile(0.99) as f64 / 1e6 }
    }

    /// Add another loop's tally: the counts sum, the histograms merge, the run spans both.
    pub fn merge(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.attempts += other.attempts;
        for (mine, theirs) in [(&mut self.final_outcomes, &other.final_outcomes), (&mut self.attempt_outcomes, &other.attempt_outcomes)] {
            for (outcome, count) in theirs {
                *mine.entry(*outcome).or_default() += count;
            }
        }
        self.bytes += other.bytes;
        self.first_scheduled = match (self.first_scheduled, other.first_scheduled) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_outcome = self.last_outcome.max(other.last_outcome);
        for (mine, theirs) in [
            (&mut self.response_time, &other.response_time),
            (&mut self.ttfb, &other.ttfb),
            (&mut self.service_time, &other.service_time),
            (&mut self.lag, &other.lag),
        ] {
            mine.add(theirs).expect("histograms of the same bounds");
        }
        self.writer_waits += other.writer_waits;
    }

    /// The common part of summary.json.
    pub fn summary(&self) -> serde_json::Value {
        let names = |map: &BTreeMap<Outcome, u64>| -> BTreeMap<&'static str, u64> { map.iter().map(|(k, v)| (k.name(), *v)).collect() };
        let duration = self.duration_s();
        serde_json::json!({
            "duration_s": duration,
            "requests": self.requests,
            "attempts": self.attempts,
            "outcomes": names(&self.final_outcomes),
            "attempt_outcomes": names(&self.attempt_outcomes),
            "bytes": self.bytes,
            "throughput_rps": if duration > 0.0 { self.ok_requests() as f64 / duration } else { 0.0 },
            "response_time_s": describe(&self.response_time),
            "ttfb_s": describe(&self.ttfb),
            "service_time_s": describe(&self.service_time),
            "lag_s": describe(&self.lag),
            "record_writer_waits": self.writer_waits,
        })
    }
}

/// Streams records and intervals; accumulates what summary.json needs.
pub struct Recorder {
    records: BackgroundFile,
    record_row: RecordRow,
    intervals: csv::Writer<BackgroundFile>,
    current_second: u64,
    current: Interval,
    pub tally: Tally,
}

#[derive(Serialize, serde::Deserialize)]
struct IntervalRow {
    t_s: u64,
    issued: u64,
    completed: u64,
    bytes: u64,
    in_flight: u64,
    errors: u64,
    connections_open: u64,
}

impl Recorder {
    pub fn create(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating output directory {}", dir.display()))?;
        let open = |name: &str| -> anyhow::Result<csv::Writer<BackgroundFile>> {
            Ok(csv::Writer::from_writer(BackgroundFile::create(&dir.join(name))?))
        };
        let mut records = BackgroundFile::create(&dir.join("records.csv"))?;
        let mut record_row = RecordRow::new();
        records.write_all(record_row.header())?;
        Ok(Recorder {
            records,
            record_row,
            intervals: open("intervals.csv")?,
            current_second: 0,
            current: Interval::default(),
            tally: Tally::default(),
        })
    }

    /// Close the per-second rows up to (not including) the second holding `now`.
    pub fn tick(&mut self, now: Nanos, in_flight: u64, connections_open: u64) -> anyhow::Result<()> {
        let second = now / 1_000_000_000;
        while self.current_second < second {
            self.intervals.serialize(IntervalRow {
                t_s: self.current_second,
                issued: self.current.issued,
                completed: self.current.completed,
                bytes: self.current.bytes,
                in_flight,
                errors: self.current.errors,
                connections_open,
            })?;
            self.current = Interval::default();
            self.current_second += 1;
        }
        Ok(())
    }

    /// A logical request was issued (its first attempt); `lag` = issue minus schedule.
    pub fn issued(&mut self, scheduled: Nanos, issued: Nanos) {
        let tally = &mut self.tally;
        tally.requests += 1;
        self.current.issued += 1;
        tally.first_scheduled = Some(tally.first_scheduled.map_or(scheduled, |first| first.min(scheduled)));
        tally.lag.saturating_record((issued.saturating_sub(scheduled) / 1_000).max(1));
    }

    /// An attempt ended at `now` with `outcome`; `is_final` when it carries the request's final outcome.
    pub fn attempt_ended(&mut self, attempt: &Attempt, path: &str, outcome: Outcome, error: &str, is_final: bool, now: Nanos) -> anyhow::Result<()> {
        let tally = &mut self.tally;
        tally.attempts += 1;
        *tally.attempt_outcomes.entry(outcome).or_default() += 1;
        tally.bytes += attempt.bytes;
        self.current.bytes += attempt.bytes;
        tally.last_outcome = tally.last_outcome.max(now);
        if is_final {
            *tally.final_outcomes.entry(outcome).or_default() += 1;
            self.current.completed += 1;
            if outcome != Outcome::Ok {
                self.current.errors += 1;
            } else {
                let us = |ns: Nanos| (ns / 1_000).max(1);
                tally.response_time.saturating_record(us(now.saturating_sub(attempt.scheduled)));
                if let Some(first_byte) = attempt.first_byte {
                    tally.ttfb.saturating_record(us(first_byte.saturating_sub(attempt.scheduled)));
                }
                if let Some(sent) = attempt.sent {
                    tally.service_time.saturating_record(us(now.saturating_sub(sent)));
                }
            }
        }
        self.records.write_all(self.record_row.format(attempt, path, outcome, error, is_final, now))?;
        Ok(())
    }

    /// Flush the files and return the tally (summary.json's figures).
    pub fn finish(mut self, now: Nanos, in_flight: u64, connections_open: u64) -> anyhow::Result<Tally> {
        self.tick(now + 1_000_000_000, in_flight, connections_open)?;
        let intervals = self.intervals.into_inner().map_err(|err| err.into_error()).context("writing intervals.csv")?;
        for (mut file, name) in [(self.records, "records.csv"), (intervals, "intervals.csv")] {
            file.finish().with_context(|| format!("writing {name}"))?;
            self.tally.writer_waits += file.waits;
        }
        Ok(self.tally)
    }
}

/// Column of `records.csv` the merge orders rows by: when the attempt ended.
const END_COLUMN: usize = 19;

/// A row's `last_byte_s` in µs (six decimals, the point removed).
fn end_micros(row: &csv::ByteRecord) -> anyhow::Result<u64> {
    let field = row.get(END_COLUMN).context("a records.csv row without last_byte_s")?;
    let digits: Vec<u8> = field.iter().copied().filter(|&b| b != b'.').collect();
    std::str::from_utf8(&digits).ok().and_then(|d| d.parse().ok()).with_context(|| format!("last_byte_s {:?}", String::from_utf8_lossy(field)))
}

/// Join the files of a run's parts (event loops, `load --threads`; processes, `load merge`)
/// in `dir`: `records.csv` rows merged in order of their end (each part writes its rows in
/// that order, so a k-way merge keeps a one-part run's order), `intervals.csv` summed second
/// by second. The parts' files stay: the caller removes them once it holds the merge.
pub fn merge_parts(dir: &Path, parts: &[std::path::PathBuf]) -> anyhow::Result<()> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut readers = Vec::new();
    for part in parts {
        let path = part.join("records.csv");
        readers.push(csv::Reader::from_path(&path).with_context(|| format!("reading {}", path.display()))?);
    }
    let records_path = dir.join("records.csv");
    let file = File::create(&records_path).with_context(|| format!("creating {}", records_path.display()))?;
    let mut out = csv::Writer::from_writer(BufWriter::with_capacity(CHUNK, file));
    out.write_record(RECORD_COLUMNS)?;
    let mut heads: Vec<csv::ByteRecord> = vec![csv::ByteRecord::new(); readers.len()];
    let mut queue = BinaryHeap::new();
    for (index, reader) in readers.iter_mut().enumerate() {
        if reader.read_byte_record(&mut heads[index])? {
            queue.push(Reverse((end_micros(&heads[index])?, index)));
        }
    }
    while let Some(Reverse((_, index))) = queue.pop() {
        out.write_byte_record(&heads[index])?;
        if readers[index].read_byte_record(&mut heads[index])? {
            queue.push(Reverse((end_micros(&heads[index])?, index)));
        }
    }
    out.flush().with_context(|| format!("writing {}", records_path.display()))?;

    let mut seconds: BTreeMap<u64, IntervalRow> = BTreeMap::new();
    for part in parts {
        let path = part.join("intervals.csv");
        for row in csv::Reader::from_path(&path).with_context(|| format!("reading {}", path.display()))?.deserialize() {
            let row: IntervalRow = row.with_context(|| format!("reading {}", path.display()))?;
            let sum = seconds.entry(row.t_s).or_insert(IntervalRow { t_s: row.t_s, issued: 0, completed: 0, bytes: 0, in_flight: 0, errors: 0, connections_open: 0 });
            sum.issued += row.issued;
            sum.completed += row.completed;
            sum.bytes += row.bytes;
            sum.in_flight += row.in_flight;
            sum.errors += row.errors;
            sum.connections_open += row.connections_open;
        }
    }
    let intervals_path = dir.join("intervals.csv");
    let mut intervals = csv::Writer::from_path(&intervals_path).with_context(|| format!("creating {}", intervals_path.display()))?;
    for row in seconds.values() {
        intervals.serialize(row)?;
    }
    intervals.flush().with_context(|| format!("writing {}", intervals_path.display()))?;
    Ok(())
}

/// Write `summary.json` atomically enough for readers (write then rename).
pub fn write_summary(dir: &Path, summary: &serde_json::Value) -> anyhow::Result<()> {
    let path = dir.join("summary.json");
    let temporary = dir.join(".summary.json.tmp");
    let mut file = File::create(&temporary).with_context(|| format!("creating {}", temporary.display()))?;
    serde_json::to_writer_pretty(&mut file, summary)?;
    file.write_all(b"\n")?;
    std::fs::rename(&temporary, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seconds_have_six_decimals() {
        let mut text = Vec::new();
        for ns in [0, 999, 1_000, 12_000_345_999, 86_400_000_000_000] {
            push_seconds(&mut text, ns);
            text.push(b' ');
        }
        assert_eq!(String::from_utf8(text).unwrap(), "0.000000 0.000000 0.000001 12.000345 86400.000000 ");
    }

    /// The row as the csv crate writes it through serde: the reference [`RecordRow`] must match.
    #[derive(Serialize)]
    struct ReferenceRow<'a> {
        request_id: u64,
        attempt: u32,
        #[serde(rename = "final")]
        is_final: u8,
        client: u32,
        session: i64,
        class: u8,
        path: &'a str,
        expected_size: Option<u64>,
        bytes: u64,
        status: Option<u16>,
        scheduled_s: String,
        issued_s: String,
        dispatch_s: Option<String>,
        connect_start_s: Option<String>,
        connect_end_s: Option<String>,
        conn_id: Option<u64>,
        reuse_index: Option<u32>,
        sent_s: Option<String>,
        first_byte_s: Option<String>,
        last_byte_s: String,
        outcome: &'static str,
        error: &'a str,
    }

    fn reference_seconds(ns: Nanos) -> String {
        format!("{}.{:06}", ns / 1_000_000_000, ns / 1_000 % 1_000_000)
    }

    fn reference_csv(attempt: &Attempt, path: &str, outcome: Outcome, error: &str, is_final: bool, now: Nanos) -> String {
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer
            .serialize(ReferenceRow {
                request_id: attempt.request_id,
                attempt: attempt.attempt,
                is_final: u8::from(is_final),
                client: attempt.client,
                session: attempt.session,
                class: attempt.class,
                path,
                expected_size: attempt.expected_size,
                bytes: attempt.bytes,
                status: attempt.status,
                scheduled_s: reference_seconds(attempt.scheduled),
                issued_s: reference_seconds(attempt.issued),
                dispatch_s: attempt.dispatch.map(reference_seconds),
                connect_start_s: attempt.connect_start.map(reference_seconds),
                connect_end_s: attempt.connect_end.map(reference_seconds),
                conn_id: attempt.conn_id,
                reuse_index: attempt.reuse_index,
                sent_s: attempt.sent.map(reference_seconds),
                first_byte_s: attempt.first_byte.map(reference_seconds),
                last_byte_s: reference_seconds(attempt.last_byte.unwrap_or(now)),
                outcome: outcome.name(),
                error,
            })
            .unwrap();
        String::from_utf8(writer.into_inner().unwrap()).unwrap()
    }

    fn times() -> impl Strategy<Value = Option<Nanos>> {
        proptest::option::of(0..u64::MAX / 2)
    }

    proptest::proptest! {
        #[test]
        fn rows_are_the_bytes_the_csv_crate_writes(
            request_id: u64, attempt_number: u32, client: u32, session: i64, class: u8,
            path in "[ -~\n\r]{0,12}", error in "[ -~\n\r]{0,12}", is_final: bool,
            expected_size: Option<u64>, bytes: u64, status: Option<u16>, scheduled in 0..u64::MAX / 2,
            issued in 0..u64::MAX / 2, dispatch in times(), connect_start in times(), connect_end in times(),
            conn_id: Option<u64>, reuse_index: Option<u32>, sent in times(), first_byte in times(),
            last_byte in times(), now in 0..u64::MAX / 2, outcome_index in 0usize..10,
        ) {
            let outcomes = [Outcome::Ok, Outcome::HttpError, Outcome::Refused, Outcome::Aborted, Outcome::GaveUp, Outcome::ConnectError,
                            Outcome::Reset, Outcome::Timeout, Outcome::Invalid, Outcome::Interrupted];
            let attempt = Attempt {
                request_id, attempt: attempt_number, client, session, class, expected_size, bytes, status,
                scheduled, issued, dispatch, connect_start, connect_end, conn_id, reuse_index, sent, first_byte, last_byte,
            };
            let outcome = outcomes[outcome_index];
            let reference = reference_csv(&attempt, &path, outcome, &error, is_final, now);
            let mut row = RecordRow::new();
            let (header, body) = reference.split_once('\n').unwrap();
            prop_assert_eq!(String::from_utf8(row.header().to_vec()).unwrap(), format!("{header}\n"));
            let formatted = String::from_utf8(row.format(&attempt, &path, outcome, &error, is_final, now).to_vec()).unwrap();
            prop_assert_eq!(formatted, body);
        }
    }

    #[test]
    fn records_intervals_and_summary_agree() {
        let dir = std::env::temp_dir().join(format!("sojourn-load-record-{}", std::process::id()));
        let mut recorder = Recorder::create(&dir).unwrap();
        let mut attempt = Attempt { request_id: 0, scheduled: 1_000, issued: 2_000, bytes: 10, status: Some(200), sent: Some(3_000), ..Attempt::default() };
        recorder.issued(attempt.scheduled, attempt.issued);
        recorder.attempt_ended(&attempt, "/a", Outcome::Aborted, "", false, 1_500_000_000).unwrap();
        attempt.attempt = 1;
        recorder.attempt_ended(&attempt, "/a", Outcome::Ok, "", true, 2_500_000_000).unwrap();
        let summary = recorder.finish(3_000_000_000, 0, 0).unwrap().summary();
        assert_eq!(summary["requests"], 1);
        assert_eq!(summary["attempts"], 2);
        assert_eq!(summary["outcomes"]["ok"], 1);
        let records = std::fs::read_to_string(dir.join("records.csv")).unwrap();
        let lines: Vec<&str> = records.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("request_id,attempt,final,client"));
        assert!(lines[2].contains(",ok,"), "{}", lines[2]);
        let intervals = std::fs::read_to_string(dir.join("intervals.csv")).unwrap();
        // Seconds 0, 1, 2 and the one holding the end.
        assert_eq!(intervals.lines().count(), 1 + 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parts_merge_in_order_of_completion_and_intervals_sum() {
        let dir = std::env::temp_dir().join(format!("sojourn-load-merge-{}", std::process::id()));
        let parts = [dir.join(".loop-0"), dir.join(".loop-1")];
        // Loop 0 ends requests at 1 s and 3 s, loop 1 at 2 s (a path CSV must quote) and 4 s.
        for (part, (ends, path)) in parts.iter().zip([([1u64, 3], "/a"), ([2, 4], "/b,\"c\"\nd")]) {
            let mut recorder = Recorder::create(part).unwrap();
            for (i, end) in ends.iter().enumerate() {
                let attempt = Attempt { request_id: end * 10, client: i as u32, bytes: 5, ..Attempt::default() };
                recorder.issued(0, 0);
                recorder.tick(end * 1_000_000_000 - 1, 1, 1).unwrap();
                recorder.attempt_ended(&attempt, path, Outcome::Ok, "", true, end * 1_000_000_000).unwrap();
            }
            recorder.finish(5_000_000_000, 0, 0).unwrap();
        }
        let expected_rows: Vec<String> = {
            let mut rows = Vec::new();
            for part in &parts {
                let text = std::fs::read_to_string(part.join("records.csv")).unwrap();
                let mut reader = csv::Reader::from_reader(text.as_bytes());
                rows.extend(reader.records().map(|r| r.unwrap().iter().collect::<Vec<_>>().join("|")));
            }
            rows.sort_by_key(|row| row.split('|').nth(END_COLUMN).unwrap().replace('.', "").parse::<u64>().unwrap());
            rows
        };
        merge_parts(&dir, &parts).unwrap();
        let merged = std::fs::read_to_string(dir.join("records.csv")).unwrap();
        let mut reader = csv::Reader::from_reader(merged.as_bytes());
        let ids: Vec<String> = reader.records().map(|r| r.unwrap().iter().collect::<Vec<_>>().join("|")).collect();
        assert_eq!(ids, expected_rows, "rows byte-identical, ordered by last_byte_s");
        assert_eq!(ids.iter().map(|row| row.split('|').next().unwrap()).collect::<Vec<_>>(), ["10", "20", "30", "40"]);
        assert!(merged.contains("\"/b,\"\"c\"\"\nd\""), "the quoted path is written as the csv crate quotes it");
        let intervals = std::fs::read_to_string(dir.join("intervals.csv")).unwrap();
        let completed: u64 = intervals.lines().skip(1).map(|l| l.split(',').nth(2).unwrap().parse::<u64>().unwrap()).sum();
        assert_eq!(completed, 4);
        assert!(parts.iter().all(|part| part.join("records.csv").exists()), "the parts' files are the caller's to remove");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tally_survives_its_json_exactly() {
        let mut tally = Tally::default();
        tally.requests = 3;
        tally.final_outcomes.insert(Outcome::Interrupted, 1);
        for (value, count) in [(1, 1), (1_234, 2), (987_654_321, 5)] {
            tally.response_time.record_n(value, count).unwrap();
            tally.lag.record_n(value / 2 + 1, count).unwrap();
        }
        let copy: Tally = serde_json::from_str(&serde_json::to_string(&tally).unwrap()).unwrap();
        assert_eq!(copy.summary(), tally.summary(), "counts, outcomes and every percentile the same");
    }
}
