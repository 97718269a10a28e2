//! Access log in Combined Log Format (Apache's `combined`, nginx's default):
//! `host - - [22/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 1234 "referer" "agent"`,
//! optionally followed by the service time in microseconds (Apache's `%D`).
//! Times are UTC.
//!
//! No write on an event loop (001 §4): each worker formats its lines into a
//! buffer and hands whole buffers to one writer thread ([`spawn_writer`])
//! through a bounded channel; the writer coalesces what is queued into one
//! `write` to the file (opened `O_APPEND`). When the channel is full the worker
//! drops the buffer and counts its lines ([`WhenFull::Drop`], the default), or
//! waits for room ([`WhenFull::Block`], `--access-log-block`).
//!
//! Guarantees: lines from one worker reach the file in the order they were
//! formatted; every line handed over before the last [`LogSender`] is dropped
//! is written before the writer thread ends (the caller joins it at shutdown);
//! a line is either written whole or counted as dropped.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::SystemTime;

/// One request as the log records it.
pub struct Entry<'a> {
    pub client: IpAddr,
    /// `[day/Mon/year:hh:mm:ss +0000]` contents, from [`clf_time`].
    pub time: &'a str,
    pub request_line: &'a str,
    pub status: u16,
    /// Body bytes sent (`-` when zero, as in CLF).
    pub body_bytes: u64,
    pub referer: Option<&'a str>,
    pub user_agent: Option<&'a str>,
    pub micros: Option<u64>,
}

/// `SystemTime` as CLF's `%d/%b/%Y:%H:%M:%S +0000`, by rearranging the fields of
/// the IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT` that httpdate produces.
pub fn clf_time(now: SystemTime) -> String {
    let imf = httpdate::fmt_http_date(now);
    let fields: Vec<&str> = imf.split_whitespace().collect();
    match fields.as_slice() {
        [_, day, month, year, time, _] => format!("{day}/{month}/{year}:{time} +0000"),
        _ => imf,
    }
}

/// Escapes `"` and `\` and control bytes the way nginx does (`\xHH`), so a line
/// always parses back.
fn quoted(out: &mut Vec<u8>, value: Option<&str>) {
    out.push(b'"');
    match value {
        None | Some("") => out.push(b'-'),
        Some(text) => {
            for &b in text.as_bytes() {
                if b == b'"' || b == b'\\' || b < 0x20 || b == 0x7f {
                    let _ = write!(out, "\\x{b:02X}");
                } else {
                    out.push(b);
                }
            }
        }
    }
    out.push(b'"');
}

/// Appends one line for `entry` to `out`.
pub fn format_line(out: &mut Vec<u8>, entry: &Entry) {
    let _ = write!(out, "{} - - [{}] ", entry.client, entry.time);
    quoted(out, Some(entry.request_line));
    let _ = write!(out, " {} ", entry.status);
    if entry.body_bytes == 0 {
        out.push(b'-');
    } else {
        let _ = write!(out, "{}", entry.body_bytes);
    }
    out.push(b' ');
    quoted(out, entry.referer);
    out.push(b' ');
    quoted(out, entry.user_agent);
    if let Some(micros) = entry.micros {
        let _ = write!(out, " {micros}");
    }
    out.push(b'\n');
}

/// Where the log goes: a file (or pipe), or stdout.
pub enum Sink {
    File(File),
    Stdout,
}

impl Sink {
    pub fn open(path: &Path) -> io::Result<Sink> {
        if path == Path::new("-") {
            return Ok(Sink::Stdout);
        }
        Ok(Sink::File(OpenOptions::new().create(true).append(true).open(path)?))
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::File(file) => file.write_all(bytes),
            Sink::Stdout => io::stdout().lock().write_all(bytes),
        }
    }
}

/// What a worker does when the writer's channel is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenFull {
    /// Drop the buffer and count its lines (the event loop never waits).
    Drop,
    /// Wait for room (no line is lost; the event loop waits behind the disk).
    Block,
}

/// A worker's end of the channel to the writer thread.
#[derive(Clone)]
pub struct LogSender {
    channel: SyncSender<Vec<u8>>,
    when_full: WhenFull,
}

impl LogSender {
    /// Hands `lines` (whole lines, each ending in `\n`) to the writer. Returns
    /// how many lines were dropped: all of them if the channel was full under
    /// [`WhenFull::Drop`] or the writer is gone, else none.
    pub fn send(&self, lines: Vec<u8>) -> u64 {
        let refused = match self.when_full {
            WhenFull::Drop => match self.channel.try_send(lines) {
                Ok(()) => return 0,
                Err(TrySendError::Full(lines) | TrySendError::Disconnected(lines)) => lines,
            },
            WhenFull::Block => match self.channel.send(lines) {
                Ok(()) => return 0,
                Err(error) => error.0,
            },
        };
        refused.iter().filter(|&&b| b == b'\n').count() as u64
    }
}

/// Largest write the writer makes at once when buffers are queued behind each other.
const COALESCE_BYTES: usize = 256 * 1024;

/// Starts the writer thread, with room for `capacity` buffers in the channel.
/// The thread ends once every [`LogSender`] is dropped and what they sent is written.
pub fn spawn_writer(mut sink: Sink, capacity: usize, when_full: WhenFull) -> io::Result<(LogSender, JoinHandle<()>)> {
    let (channel, receiver) = sync_channel(capacity);
    let thread = std::thread::Builder::new().name("access-log".into()).spawn(move || write_batches(&mut sink, &receiver))?;
    Ok((LogSender { channel, when_full }, thread))
}

fn write_batches(sink: &mut Sink, receiver: &Receiver<Vec<u8>>) {
    let mut failed = false;
    while let Ok(mut batch) = receiver.recv() {
        while batch.len() < COALESCE_BYTES {
            match receiver.try_recv() {
                Ok(more) => batch.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        match sink.write_all(&batch) {
            Err(e) if !failed => {
                eprintln!("sojourn-engine serve: access log write failed (further failures not reported): {e}");
                failed = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn combined_format() {
        let time = clf_time(UNIX_EPOCH + Duration::from_secs(784_111_777));
        assert_eq!(time, "06/Nov/1994:08:49:37 +0000");
        let mut out = Vec::new();
        let entry = Entry {
            client: "10.0.0.1".parse().unwrap(),
            time: &time,
            request_line: "GET /a\"b HTTP/1.1",
            status: 200,
            body_bytes: 1234,
            referer: None,
            user_agent: Some("curl/8"),
            micros: Some(57),
        };
        format_line(&mut out, &entry);
        assert_eq!(String::from_utf8(out).unwrap(), "10.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a\\x22b HTTP/1.1\" 200 1234 \"-\" \"curl/8\" 57\n");
        let mut out = Vec::new();
        format_line(&mut out, &Entry { body_bytes: 0, micros: None, ..entry });
        assert!(String::from_utf8(out).unwrap().ends_with(" 200 - \"-\" \"curl/8\"\n"));
    }

    fn numbered(range: std::ops::Range<u64>) -> Vec<u8> {
        range.map(|n| format!("line {n}\n")).collect::<String>().into_bytes()
    }

    fn line_numbers(text: &str) -> Vec<u64> {
        text.lines().map(|l| l.strip_prefix("line ").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("torn line {l:?}"))).collect()
    }

    #[test]
    fn every_line_arrives_in_order_before_the_writer_ends() {
        let path = std::env::temp_dir().join(format!("sjs2-log-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let (sender, writer) = spawn_writer(Sink::open(&path).unwrap(), 4, WhenFull::Block).unwrap();
        for batch in 0..1000 {
            assert_eq!(sender.send(numbered(batch * 10..batch * 10 + 10)), 0);
        }
        drop(sender);
        writer.join().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(line_numbers(&text), (0..10_000).collect::<Vec<_>>());
    }

    #[test]
    fn a_full_channel_drops_and_counts_whole_buffers() {
        let (mut reader, write_end) = sojourn_sys::fd::pipe().unwrap();
        let (sender, writer) = spawn_writer(Sink::File(write_end), 2, WhenFull::Drop).unwrap();
        // Nobody reads the pipe yet: once its buffer (64 KiB) and the channel are
        // full, the writer is stuck in `write` and buffers must be dropped.
        let mut dropped = 0;
        let mut sent = 0;
        while dropped == 0 {
            assert!(sent < 1_000_000, "the channel never filled");
            dropped += sender.send(numbered(sent..sent + 100));
            sent += 100;
        }
        assert_eq!(dropped, 100, "one buffer of 100 lines was refused");
        drop(sender);
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        writer.join().unwrap();
        let received = line_numbers(&text);
        assert_eq!(received.len() as u64 + dropped, sent);
        assert_eq!(received, (0..sent - 100).collect::<Vec<_>>(), "everything before the refused buffer, in order");
    }
}
