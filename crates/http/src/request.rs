//! Request framing on httparse with limits (RFC 9112 §2-§3, §9.3).
//!
//! Guarantees: [`parse_request`] never panics and never reads past `buf`; it returns
//! `Ok(None)` while the head is incomplete and within limits, a complete
//! [`Request`] with the number of bytes it used, or an [`HttpError`] naming the
//! status to answer. Every error response closes the connection.

use std::fmt;
use std::time::SystemTime;

/// Limits on what a client may send before the server gives up on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Request line plus header fields, in bytes (431 beyond it; 414 if the line alone).
    pub max_head_bytes: usize,
    /// Number of header fields (431 beyond it).
    pub max_headers: usize,
    /// Length of the request target (414 beyond it).
    pub max_target_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_head_bytes: 8192, max_headers: 64, max_target_bytes: 4096 }
    }
}

/// The most header fields `Limits::max_headers` can allow (parsing uses a stack array).
pub const MAX_HEADERS_CAP: usize = 256;

/// The methods a static server implements (RFC 9110 §9.3.1-§9.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
        }
    }
}

/// The value of the `Allow` header sent with 405 (RFC 9110 §15.5.6).
pub const ALLOW: &str = "GET, HEAD";

/// Methods registered in RFC 9110 §9 (and PATCH) that this server recognizes but does
/// not allow: answered 405; any other method is 501 (RFC 9110 §15.6.2).
const KNOWN_NOT_ALLOWED: [&str; 7] = ["POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

/// Why a request cannot be served; each maps to one status code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// Malformed syntax (RFC 9112 §2.2, §3): 400.
    BadRequest(&'static str),
    /// A known method other than GET/HEAD: 405 with `Allow`.
    MethodNotAllowed,
    /// A method this server does not know: 501.
    NotImplemented,
    /// The request carries a body, which a static server does not accept: 413.
    ContentTooLarge,
    /// Request target longer than `max_target_bytes`: 414.
    UriTooLong,
    /// Header section larger than `max_head_bytes` or more than `max_headers` fields: 431.
    HeaderFieldsTooLarge,
}

impl HttpError {
    pub fn status(&self) -> u16 {
        match self {
            HttpError::BadRequest(_) => 400,
            HttpError::MethodNotAllowed => 405,
            HttpError::NotImplemented => 501,
            HttpError::ContentTooLarge => 413,
            HttpError::UriTooLong => 414,
            HttpError::HeaderFieldsTooLarge => 431,
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::BadRequest(why) => write!(f, "bad request: {why}"),
            other => write!(f, "status {}", other.status()),
        }
    }
}

/// A parsed request head: only what a static server needs, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// The request target as sent (origin-form path and query, percent-encoded).
    pub target: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// Whether the connection persists after this response (RFC 9112 §9.3).
    pub keep_alive: bool,
    pub if_none_match: Option<String>,
    pub if_modified_since: Option<SystemTime>,
    pub range: Option<String>,
    pub if_range: Option<String>,
    pub referer: Option<String>,
    pub user_agent: Option<String>,
}

impl Request {
    /// The request line as the access log shows it (`GET /a HTTP/1.1`).
    pub fn request_line(&self) -> String {
        format!("{} {} HTTP/1.{}", self.method.as_str(), self.target, self.minor_version)
    }
}

/// Whether a comma-separated field value holds `token` (case-insensitive, RFC 9110 §5.6.1).
fn has_token(value: &[u8], token: &str) -> bool {
    value.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Parses one request head from the start of `buf`.
///
/// Returns `Ok(Some((request, consumed)))` for a complete head, `Ok(None)` when more
/// bytes are needed (and the limits still allow them).
pub fn parse_request(buf: &[u8], limits: &Limits) -> Result<Option<(Request, usize)>, HttpError> {
    let mut storage = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    let mut parsed = httparse::Request::new(&mut storage[..limits.max_headers.min(MAX_HEADERS_CAP)]);
    let consumed = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            let line_complete = buf.contains(&b'\n');
            if !line_complete && buf.len() > limits.max_target_bytes + 32 {
                return Err(HttpError::UriTooLong);
            }
            if buf.len() > limits.max_head_bytes {
                return Err(if line_complete { HttpError::HeaderFieldsTooLarge } else { HttpError::UriTooLong });
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::HeaderFieldsTooLarge),
        Err(httparse::Error::Version) => return Err(HttpError::BadRequest("unsupported HTTP version")),
        Err(_) => return Err(HttpError::BadRequest("malformed request head")),
    };
    let (Some(method), Some(target), Some(minor_version)) = (parsed.method, parsed.path, parsed.version) else {
        return Err(HttpError::BadRequest("incomplete request line"));
    };
    if target.len() > limits.max_target_bytes {
        return Err(HttpError::UriTooLong);
    }
    if consumed > limits.max_head_bytes {
        return Err(HttpError::HeaderFieldsTooLarge);
    }
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        m if KNOWN_NOT_ALLOWED.contains(&m) => return Err(HttpError::MethodNotAllowed),
        _ => return Err(HttpError::NotImplemented),
    };
    let mut request = Request {
        method,
        target: target.to_string(),
        minor_version,
        keep_alive: minor_version >= 1,
        if_none_match: None,
        if_modified_since: None,
        range: None,
        if_range: None,
        referer: None,
        user_agent: None,
    };
    let mut hosts = 0;
    let mut connection_close = false;
    let mut connection_keep_alive = false;
    for header in parsed.headers.iter() {
        let value = header.value;
        let text = || String::from_utf8_lossy(value).trim().to_string();
        let name = header.name;
        if name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case("connection") {
            connection_close |= has_token(value, "close");
            connection_keep_alive |= has_token(value, "keep-alive");
        } else if name.eq_ignore_ascii_case("content-length") {
            // RFC 9112 §6.3: a body we would have to read; zero is harmless.
            if value.trim_ascii() != b"0" {
                return Err(HttpError::ContentTooLarge);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(HttpError::ContentTooLarge);
        } else if name.eq_ignore_ascii_case("if-none-match") {
            request.if_none_match = Some(text());
        } else if name.eq_ignore_ascii_case("if-modified-since") {
            // RFC 9110 §13.1.3: an invalid date is ignored.
            request.if_modified_since = std::str::from_utf8(value).ok().and_then(|v| httpdate::parse_http_date(v.trim()).ok());
        } else if name.eq_ignore_ascii_case("range") {
            request.range = Some(text());
        } else if name.eq_ignore_ascii_case("if-range") {
            request.if_range = Some(text());
        } else if name.eq_ignore_ascii_case("referer") {
            request.referer = Some(text());
        } else if name.eq_ignore_ascii_case("user-agent") {
            request.user_agent = Some(text());
        }
    }
    // RFC 9112 §3.2: a 1.1 request without exactly one Host, or with several, is 400.
    if (minor_version >= 1 && hosts != 1) || hosts > 1 {
        return Err(HttpError::BadRequest("HTTP/1.1 needs exactly one Host header"));
    }
    // RFC 9112 §9.3: "close" ends the connection; 1.0 persists only when asked.
    request.keep_alive = !connection_close && (minor_version >= 1 || connection_keep_alive);
    Ok(Some((request, consumed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<(Request, usize)>, HttpError> {
        parse_request(text.as_bytes(), &Limits::default())
    }

    fn status(text: &str) -> u16 {
        parse(text).map(|_| 200).unwrap_or_else(|e| e.status())
    }

    #[test]
    fn complete_and_partial() {
        let head = "GET /a?b HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\nGET /next";
        let (request, used) = parse(head).unwrap().unwrap();
        assert_eq!(used, head.find("GET /next").unwrap());
        assert_eq!(request.target, "/a?b");
        assert_eq!(request.method, Method::Get);
        assert_eq!(request.user_agent.as_deref(), Some("t"));
        assert_eq!(request.request_line(), "GET /a?b HTTP/1.1");
        assert_eq!(parse("GET /a HTTP/1.1\r\nHost: x\r\n").unwrap(), None);
        assert_eq!(parse("").unwrap(), None);
    }

    #[test]
    fn keep_alive_rules() {
        // (head, keep-alive) per RFC 9112 §9.3
        let cases = [
            ("GET / HTTP/1.1\r\nHost: x\r\n\r\n", true),
            ("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false),
            ("GET / HTTP/1.1\r\nHost: x\r\nConnection: foo, Close\r\n\r\n", false),
            ("GET / HTTP/1.0\r\n\r\n", false),
            ("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
            ("HEAD / HTTP/1.0\r\nConnection: Keep-Alive, close\r\n\r\n", false),
        ];
        for (head, keep) in cases {
            assert_eq!(parse(head).unwrap().unwrap().0.keep_alive, keep, "{head:?}");
        }
    }

    #[test]
    fn error_statuses() {
        let long_target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(5000));
        let many_headers = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", "X-A: b\r\n".repeat(70));
        let big_header = format!("GET / HTTP/1.1\r\nHost: x\r\nX-A: {}\r\n\r\n", "b".repeat(9000));
        let endless_line = format!("GET /{}", "a".repeat(9000));
        let cases: [(&str, u16); 14] = [
            ("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 200),
            ("BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 501),
            ("POST / HTTP/1.1\r\nHost: x\r\n\r\n", 405),
            ("DELETE / HTTP/1.1\r\nHost: x\r\n\r\n", 405),
            ("GET / HTTP/1.1\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            ("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 400),
            ("GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 413),
            ("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 200),
            ("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 413),
            (&long_target, 414),
            (&many_headers, 431),
            (&big_header, 431),
        ];
        for (head, expect) in cases {
            assert_eq!(status(head), expect, "{:?}", &head[..head.len().min(60)]);
        }
        assert_eq!(status(&endless_line), 414);
    }

    #[test]
    fn conditional_headers() {
        let (r, _) = parse("GET / HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\nIf-None-Match: \"a\"\r\nRange: bytes=0-1\r\n\r\n").unwrap().unwrap();
        assert_eq!(r.if_modified_since, Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(784111777)));
        assert_eq!(r.if_none_match.as_deref(), Some("\"a\""));
        assert_eq!(r.range.as_deref(), Some("bytes=0-1"));
        let (r, _) = parse("GET / HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: yesterday\r\n\r\n").unwrap().unwrap();
        assert_eq!(r.if_modified_since, None, "an invalid date is ignored");
    }
}
