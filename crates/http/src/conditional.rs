//! Validators, conditional requests and byte ranges (RFC 9110 §8.8, §13, §14).
//!
//! [`select`] decides, from a request and what the server knows of a file, which
//! response to send: the whole file, 304, one byte range (206) or 416. It is
//! pure: the file's size and modification time are passed in.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::request::{Method, Request};

/// What the server knows of a representation: enough for validators and ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Representation {
    pub size: u64,
    /// Truncated to whole seconds, as Last-Modified carries them.
    pub modified: SystemTime,
    /// A strong entity tag with its quotes (RFC 9110 §8.8.3).
    pub etag: String,
    /// `modified` as an IMF-fixdate, ready for the Last-Modified field (RFC 9110 §8.8.2).
    pub last_modified: String,
}

impl Representation {
    /// The validators of a file of `size` bytes modified at `modified`: the ETag is
    /// size and modification time in nanoseconds, like nginx's size-mtime tag.
    pub fn new(size: u64, modified: SystemTime) -> Self {
        let since_epoch = modified.duration_since(UNIX_EPOCH).unwrap_or_default();
        let modified = UNIX_EPOCH + Duration::from_secs(since_epoch.as_secs());
        Representation {
            size,
            modified,
            etag: format!("\"{:x}-{:x}\"", since_epoch.as_nanos(), size),
            last_modified: httpdate::fmt_http_date(modified),
        }
    }
}

/// The response chosen for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// 200 with the whole representation.
    Full,
    /// 304 (RFC 9110 §15.4.5).
    NotModified,
    /// 206 with bytes `start..=end` (RFC 9110 §14.4).
    Range { start: u64, end: u64 },
    /// 416 with `Content-Range: bytes */size` (RFC 9110 §15.5.17).
    Unsatisfiable,
}

/// Weak comparison of entity tags (RFC 9110 §8.8.3.2): `W/` is ignored.
fn weak_match(a: &str, b: &str) -> bool {
    a.trim_start_matches("W/") == b.trim_start_matches("W/")
}

/// Whether an `If-None-Match` value (`*` or a list of entity tags) matches `etag`.
fn none_match_hits(header: &str, etag: &str) -> bool {
    header.trim() == "*" || header.split(',').any(|tag| weak_match(tag.trim(), etag))
}

/// Parses a single-range `bytes=` value against `size` (RFC 9110 §14.1.2).
/// `None`: no usable range (ignored, answer 200); `Some(None)`: unsatisfiable.
fn parse_range(header: &str, size: u64) -> Option<Option<(u64, u64)>> {
    let spec = header.trim().strip_prefix("bytes=")?.trim();
    if spec.contains(',') {
        return None; // several ranges: a server may ignore Range (RFC 9110 §14.2)
    }
    let (first, last) = spec.split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    let range = if first.is_empty() {
        let suffix: u64 = last.parse().ok()?;
        (suffix > 0 && size > 0).then(|| (size.saturating_sub(suffix), size - 1))
    } else {
        let start: u64 = first.parse().ok()?;
        let end = if last.is_empty() { u64::MAX } else { last.parse().ok()? };
        if end < start {
            return None; // invalid range-spec: ignored
        }
        (start < size).then(|| (start, end.min(size - 1)))
    };
    Some(range)
}

/// Chooses the response (RFC 9110 §13.2.2 order of evaluation for a server without
/// If-Match/If-Unmodified-Since: If-None-Match, else If-Modified-Since, then Range).
pub fn select(request: &Request, representation: &Representation) -> Selection {
    let not_modified = match (&request.if_none_match, request.if_modified_since) {
        (Some(tags), _) => none_match_hits(tags, &representation.etag),
        (None, Some(since)) => representation.modified <= since,
        (None, None) => false,
    };
    if not_modified {
        return Selection::NotModified;
    }
    let Some(range) = request.range.as_deref().filter(|_| request.method == Method::Get) else {
        return Selection::Full;
    };
    // RFC 9110 §13.1.5: If-Range with a strong tag or exact date that does not match means "send all".
    if let Some(if_range) = &request.if_range {
        let matches = if if_range.starts_with('"') {
            *if_range == representation.etag
        } else {
            httpdate::parse_http_date(if_range).is_ok_and(|date| date == representation.modified)
        };
        if !matches {
            return Selection::Full;
        }
    }
    match parse_range(range, representation.size) {
        None => Selection::Full,
        Some(None) => Selection::Unsatisfiable,
        Some(Some((start, end))) => Selection::Range { start, end },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{parse_request, Limits};

    fn request(headers: &str) -> Request {
        let head = format!("GET /f HTTP/1.1\r\nHost: x\r\n{headers}\r\n");
        parse_request(head.as_bytes(), &Limits::default()).unwrap().unwrap().0
    }

    fn file() -> Representation {
        Representation::new(1000, UNIX_EPOCH + Duration::from_millis(784_111_777_500))
    }

    #[test]
    fn validators() {
        let f = file();
        assert_eq!(f.modified, UNIX_EPOCH + Duration::from_secs(784_111_777));
        assert_eq!(f.last_modified, "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(f.etag, format!("\"{:x}-3e8\"", 784_111_777_500_000_000u128));
    }

    #[test]
    fn table() {
        let f = file();
        let etag = f.etag.clone();
        let cases: Vec<(String, Selection)> = vec![
            (String::new(), Selection::Full),
            (format!("If-None-Match: {etag}\r\n"), Selection::NotModified),
            (format!("If-None-Match: \"x\", W/{etag}\r\n"), Selection::NotModified),
            ("If-None-Match: *\r\n".into(), Selection::NotModified),
            ("If-None-Match: \"other\"\r\n".into(), Selection::Full),
            ("If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n".into(), Selection::NotModified),
            ("If-Modified-Since: Sun, 06 Nov 1994 08:49:36 GMT\r\n".into(), Selection::Full),
            // If-None-Match wins over If-Modified-Since (RFC 9110 §13.1.3)
            ("If-None-Match: \"other\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n".into(), Selection::Full),
            ("Range: bytes=0-99\r\n".into(), Selection::Range { start: 0, end: 99 }),
            ("Range: bytes=990-\r\n".into(), Selection::Range { start: 990, end: 999 }),
            ("Range: bytes=-10\r\n".into(), Selection::Range { start: 990, end: 999 }),
            ("Range: bytes=-5000\r\n".into(), Selection::Range { start: 0, end: 999 }),
            ("Range: bytes=500-5000\r\n".into(), Selection::Range { start: 500, end: 999 }),
            ("Range: bytes=1000-\r\n".into(), Selection::Unsatisfiable),
            ("Range: bytes=-0\r\n".into(), Selection::Unsatisfiable),
            ("Range: bytes=5-1\r\n".into(), Selection::Full),
            ("Range: bytes=0-1,5-6\r\n".into(), Selection::Full),
            ("Range: items=0-1\r\n".into(), Selection::Full),
            ("Range: bytes=x-y\r\n".into(), Selection::Full),
            (format!("Range: bytes=0-9\r\nIf-Range: {etag}\r\n"), Selection::Range { start: 0, end: 9 }),
            ("Range: bytes=0-9\r\nIf-Range: \"stale\"\r\n".into(), Selection::Full),
            ("Range: bytes=0-9\r\nIf-Range: Sun, 06 Nov 1994 08:49:37 GMT\r\n".into(), Selection::Range { start: 0, end: 9 }),
            ("Range: bytes=0-9\r\nIf-Range: Sun, 06 Nov 1994 08:49:38 GMT\r\n".into(), Selection::Full),
        ];
        for (headers, expect) in cases {
            assert_eq!(select(&request(&headers), &f), expect, "{headers:?}");
        }
    }

    #[test]
    fn empty_file_ranges() {
        let empty = Representation::new(0, UNIX_EPOCH);
        assert_eq!(select(&request("Range: bytes=0-\r\n"), &empty), Selection::Unsatisfiable);
        assert_eq!(select(&request("Range: bytes=-1\r\n"), &empty), Selection::Unsatisfiable);
    }
}
