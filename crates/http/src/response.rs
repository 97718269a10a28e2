//! Response heads (RFC 9112 §4, RFC 9110 §6.6, §8).
//!
//! [`write_head`] appends a complete head to a buffer; the caller passes the Date
//! value in (so one formatted date can serve a whole second of responses).

use std::io::Write;

use crate::conditional::Representation;
use crate::request::ALLOW;

/// The reason phrase of the statuses this server sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        416 => "Range Not Satisfiable",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

const OCTET_STREAM: &str = "application/octet-stream";

/// Content-Type by file extension (case-insensitive); `application/octet-stream` otherwise.
pub fn content_type(path: &std::path::Path) -> &'static str {
    const TYPES: [(&str, &str); 24] = [
        ("html", "text/html; charset=utf-8"),
        ("htm", "text/html; charset=utf-8"),
        ("css", "text/css; charset=utf-8"),
        ("js", "text/javascript; charset=utf-8"),
        ("mjs", "text/javascript; charset=utf-8"),
        ("json", "application/json"),
        ("txt", "text/plain; charset=utf-8"),
        ("csv", "text/csv; charset=utf-8"),
        ("xml", "application/xml"),
        ("svg", "image/svg+xml"),
        ("png", "image/png"),
        ("jpg", "image/jpeg"),
        ("jpeg", "image/jpeg"),
        ("gif", "image/gif"),
        ("webp", "image/webp"),
        ("ico", "image/vnd.microsoft.icon"),
        ("pdf", "application/pdf"),
        ("wasm", "application/wasm"),
        ("woff2", "font/woff2"),
        ("mp4", "video/mp4"),
        ("mp3", "audio/mpeg"),
        ("zip", "application/zip"),
        ("gz", "application/gzip"),
        ("bin", OCTET_STREAM),
    ];
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
    TYPES.iter().find(|(ext, _)| ext.eq_ignore_ascii_case(extension)).map_or(OCTET_STREAM, |&(_, t)| t)
}

/// Which optional fields a head carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HeadFields {
    /// Server, Last-Modified, ETag and Accept-Ranges too (254 bytes for a file's 200).
    #[default]
    Full,
    /// Only what the response needs: no Server (RFC 9110 §10.2.4, MAY), no validators
    /// (§8.8, SHOULD: caches revalidate less well) or Accept-Ranges (§14.3, MAY), and no
    /// Content-Type when it would be application/octet-stream, which a recipient may assume
    /// without one (§8.3). Each request then costs a bottleneck uplink ~160 bytes less
    /// (docs/analysis.md, "Where the time goes").
    Minimal,
}

impl std::str::FromStr for HeadFields {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "full" => Ok(HeadFields::Full),
            "minimal" => Ok(HeadFields::Minimal),
            _ => Err(format!("{name:?}: expected full or minimal")),
        }
    }
}

/// What every head a server writes shares: the current Date (formatted once a second,
/// RFC 9110 §6.6.1) and which optional fields go in.
#[derive(Clone, Debug, Default)]
pub struct HeadCommon {
    pub date: String,
    pub fields: HeadFields,
}

/// What goes into a response head.
#[derive(Clone, Debug, Default)]
pub struct Head<'a> {
    pub status: u16,
    /// The request's HTTP minor version (a 1.0 client is told `Connection: keep-alive`).
    pub minor_version: u8,
    pub keep_alive: bool,
    pub content_length: u64,
    pub content_type: Option<&'a str>,
    /// Adds Last-Modified, ETag and Accept-Ranges.
    pub representation: Option<&'a Representation>,
    /// `Content-Range: bytes start-end/size` for 206.
    pub range: Option<(u64, u64)>,
    /// Adds `Allow` (405).
    pub allow: bool,
}

/// Appends the head (status line, fields, blank line) to `out`.
pub fn write_head(head: &Head, common: &HeadCommon, out: &mut Vec<u8>) {
    let full = common.fields == HeadFields::Full;
    let date = &common.date;
    // Writing into a Vec cannot fail.
    let _ = write!(out, "HTTP/1.1 {} {}\r\n", head.status, reason(head.status));
    if full {
        out.extend_from_slice(b"Server: sojourn\r\n");
    }
    let _ = write!(out, "Date: {date}\r\n");
    if head.status != 304 {
        let _ = write!(out, "Content-Length: {}\r\n", head.content_length);
    }
    match head.content_type {
        Some(OCTET_STREAM) if !full => {}
        Some(content_type) => {
            let _ = write!(out, "Content-Type: {content_type}\r\n");
        }
        None => {}
    }
    if let Some(representation) = head.representation {
        if full {
            let _ = write!(out, "Last-Modified: {}\r\nETag: {}\r\nAccept-Ranges: bytes\r\n", representation.last_modified, representation.etag);
        }
        match (head.status, head.range) {
            (206, Some((start, end))) => {
                let _ = write!(out, "Content-Range: bytes {start}-{end}/{}\r\n", representation.size);
            }
            (416, _) => {
                let _ = write!(out, "Content-Range: bytes */{}\r\n", representation.size);
            }
            _ => {}
        }
    }
    if head.allow {
        let _ = write!(out, "Allow: {ALLOW}\r\n");
    }
    // RFC 9112 §9.6: announce the close; a 1.0 client must be told it may persist.
    if !head.keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if head.minor_version == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::UNIX_EPOCH;

    const DATE: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

    fn head_text(head: &Head) -> String {
        head_text_with(head, HeadFields::Full)
    }

    fn head_text_with(head: &Head, fields: HeadFields) -> String {
        let mut out = Vec::new();
        write_head(head, &HeadCommon { date: DATE.into(), fields }, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn heads() {
        let file = Representation::new(10, UNIX_EPOCH);
        let ok = head_text(&Head {
            status: 200,
            minor_version: 1,
            keep_alive: true,
            content_length: 10,
            content_type: Some("text/plain; charset=utf-8"),
            representation: Some(&file),
            ..Default::default()
        });
        assert_eq!(
            ok,
            format!("HTTP/1.1 200 OK\r\nServer: sojourn\r\nDate: {DATE}\r\nContent-Length: 10\r\nContent-Type: text/plain; charset=utf-8\r\nLast-Modified: Thu, 01 Jan 1970 00:00:00 GMT\r\nETag: {}\r\nAccept-Ranges: bytes\r\n\r\n", file.etag)
        );
        let partial = head_text(&Head { status: 206, keep_alive: true, content_length: 2, representation: Some(&file), range: Some((3, 4)), ..Default::default() });
        assert!(partial.contains("Content-Range: bytes 3-4/10\r\n") && partial.ends_with("Connection: keep-alive\r\n\r\n"), "{partial}");
        let unsatisfiable = head_text(&Head { status: 416, representation: Some(&file), ..Default::default() });
        assert!(unsatisfiable.contains("Content-Range: bytes */10\r\n") && unsatisfiable.contains("Connection: close\r\n"));
        let not_modified = head_text(&Head { status: 304, minor_version: 1, keep_alive: true, representation: Some(&file), ..Default::default() });
        assert!(!not_modified.contains("Content-Length"), "{not_modified}");
        let not_allowed = head_text(&Head { status: 405, allow: true, ..Default::default() });
        assert!(not_allowed.starts_with("HTTP/1.1 405 Method Not Allowed\r\n") && not_allowed.contains("Allow: GET, HEAD\r\n"));
    }

    #[test]
    fn minimal_heads_keep_what_the_response_needs() {
        let file = Representation::new(123_456, UNIX_EPOCH);
        let ok = head_text_with(
            &Head {
                status: 200,
                minor_version: 1,
                content_length: 123_456,
                content_type: Some(content_type(Path::new("a.bin"))),
                representation: Some(&file),
                ..Default::default()
            },
            HeadFields::Minimal,
        );
        assert_eq!(ok, format!("HTTP/1.1 200 OK\r\nDate: {DATE}\r\nContent-Length: 123456\r\nConnection: close\r\n\r\n"));
        let typed = head_text_with(&Head { status: 200, content_type: Some("text/html; charset=utf-8"), ..Default::default() }, HeadFields::Minimal);
        assert!(typed.contains("Content-Type: text/html; charset=utf-8\r\n"), "{typed}");
        let partial = head_text_with(&Head { status: 206, content_length: 2, representation: Some(&file), range: Some((3, 4)), ..Default::default() }, HeadFields::Minimal);
        assert!(partial.contains("Content-Range: bytes 3-4/123456\r\n") && !partial.contains("ETag"), "{partial}");
        assert_eq!("minimal".parse(), Ok(HeadFields::Minimal));
        assert!("lean".parse::<HeadFields>().unwrap_err().contains("full or minimal"));
    }

    #[test]
    fn content_types() {
        for (path, expect) in [("a.HTML", "text/html; charset=utf-8"), ("x/y.png", "image/png"), ("noext", "application/octet-stream"), ("a.tar.gz", "application/gzip")] {
            assert_eq!(content_type(Path::new(path)), expect, "{path}");
        }
    }
}
