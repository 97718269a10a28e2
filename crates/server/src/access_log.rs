//! Access log in Combined Log Format (Apache's `combined`, nginx's default):
//! `host - - [22/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 1234 "referer" "agent"`,
//! optionally followed by the service time in microseconds (Apache's `%D`).
//! Times are UTC. Each worker buffers its lines and appends them to the shared
//! file (opened `O_APPEND`, so whole buffers of whole lines never interleave)
//! when the buffer fills or at least once a second.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
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

/// Where the log goes: a file shared by all workers, or stdout.
#[derive(Clone)]
pub enum Sink {
    File(Arc<File>),
    Stdout,
}

impl Sink {
    pub fn open(path: &Path) -> io::Result<Sink> {
        if path == Path::new("-") {
            return Ok(Sink::Stdout);
        }
        Ok(Sink::File(Arc::new(OpenOptions::new().create(true).append(true).open(path)?)))
    }

    pub fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::File(file) => (&**file).write_all(bytes),
            Sink::Stdout => io::stdout().lock().write_all(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
