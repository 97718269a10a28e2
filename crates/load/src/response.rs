//! Incremental HTTP/1.1 response framing for the client side (RFC 9112 §6).
//!
//! Pure: bytes in, events out, no I/O. Guarantees: a response is `Complete` only when its
//! head parsed and exactly the framed body arrived (Content-Length, chunked, or close-
//! delimited ended by `finish_at_eof`); extra bytes after a complete response, a head over
//! [`MAX_HEAD`], or malformed framing give `Invalid` with the reason. 1xx interim heads are
//! skipped (RFC 9110 §15.2).

use std::fmt;

/// Largest response head accepted.
pub const MAX_HEAD: usize = 16 * 1024;
const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub content_length: Option<u64>,
    /// The server will close after this response (`Connection: close`, or HTTP/1.0 without keep-alive).
    pub closes: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseError {
    HeadTooLarge,
    BadHead(String),
    BadContentLength,
    BadChunk,
    TrailingBytes(usize),
    ShortBody { expected: u64, got: u64 },
    ClosedBeforeHead,
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::HeadTooLarge => write!(f, "response head over {MAX_HEAD} bytes"),
            ResponseError::BadHead(why) => write!(f, "malformed response head: {why}"),
            ResponseError::BadContentLength => write!(f, "bad Content-Length"),
            ResponseError::BadChunk => write!(f, "malformed chunked body"),
            ResponseError::TrailingBytes(n) => write!(f, "{n} bytes after the response"),
            ResponseError::ShortBody { expected, got } => write!(f, "body ended after {got} of {expected} bytes"),
            ResponseError::ClosedBeforeHead => write!(f, "connection closed before a response head"),
        }
    }
}

#[derive(Debug)]
enum State {
    Head,
    Body { framing: Framing, received: u64 },
    ChunkSize { received: u64 },
    ChunkData { left: u64, received: u64 },
    ChunkEnd { received: u64 },
    Trailer,
    Complete,
}

/// What a call to [`ResponseReader::feed`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Body bytes in this chunk (their offsets in the body start at `body_offset`).
    pub body: std::ops::Range<usize>,
    pub complete: bool,
}

/// Reads one response. Body bytes are reported as ranges of the fed slice so the caller
/// can verify content without copying.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    buffered: Vec<u8>,
    head: Option<Head>,
}

impl Default for ResponseReader {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseReader {
    pub fn new() -> Self {
        ResponseReader { state: State::Head, buffered: Vec::new(), head: None }
    }

    pub fn head(&self) -> Option<&Head> {
        self.head.as_ref()
    }

    /// Feed bytes read from the socket. Returns the body slice positions found and whether the
    /// response completed; a chunked body's data can come in several ranges, so callers loop
    /// with the unconsumed rest until `consumed == data.len()`.
    pub fn feed(&mut self, data: &[u8]) -> Result<(usize, Progress), ResponseError> {
        let mut progress = Progress::default();
        match &mut self.state {
            State::Complete => Err(ResponseError::TrailingBytes(data.len())),
            State::Head => {
                // Usually the whole head is in one read: parse it in place, copy only a partial head.
                let already = self.buffered.len();
                if already > 0 {
                    self.buffered.extend_from_slice(data);
                }
                let input = if already > 0 { &self.buffered[..] } else { data };
                // Uninitialised header slots: httparse writes only those it fills (no 2 KiB
                // of zeroes per response); same default parser configuration as `parse`.
                let mut headers = [std::mem::MaybeUninit::uninit(); MAX_HEADERS];
                let mut parsed = httparse::Response::new(&mut []);
                match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut parsed, input, &mut headers) {
                    Ok(httparse::Status::Partial) => {
                        if already == 0 {
                            self.buffered.extend_from_slice(data);
                        }
                        if self.buffered.len() > MAX_HEAD {
                            return Err(ResponseError::HeadTooLarge);
                        }
                        Ok((data.len(), progress))
                    }
                    Ok(httparse::Status::Complete(head_len)) => {
                        let status = parsed.code.unwrap_or(0);
                        let (head, framing) = interpret_head(&parsed)?;
                        let consumed = head_len - already;
                        self.buffered.clear();
                        if (100..200).contains(&status) {
                            // RFC 9110 §15.2: interim response, the final one follows.
                            return Ok((consumed, progress));
                        }
                        self.head = Some(head);
                        self.state = match framing {
                            Framing::Length(0) => State::Complete,
                            Framing::Chunked => State::ChunkSize { received: 0 },
                            framing => State::Body { framing, received: 0 },
                        };
                        progress.complete = matches!(self.state, State::Complete);
                        Ok((consumed, progress))
                    }
                    Err(err) => Err(ResponseError::BadHead(err.to_string())),
                }
            }
            State::Body { framing, received } => {
                let take = match framing {
                    Framing::Length(total) => (*total - *received).min(data.len() as u64) as usize,
                    _ => data.len(),
                };
                *received += take as u64;
                progress.body = 0..take;
                if matches!(framing, Framing::Length(total) if *total == *received) {
                    self.state = State::Complete;
                    progress.complete = true;
                }
                Ok((take, progress))
            }
            State::ChunkSize { received } => {
                let received = *received;
                let already = self.buffered.len();
                self.buffered.extend_from_slice(data);
                match httparse::parse_chunk_size(&self.buffered) {
                    Ok(httparse::Status::Partial) => {
                        if self.buffered.len() > MAX_HEAD {
                            return Err(ResponseError::BadChunk);
                        }
                        Ok((data.len(), progress))
                    }
                    Ok(httparse::Status::Complete((line_len, size))) => {
                        self.buffered.clear();
                        self.state = if size == 0 {
                            State::Trailer
                        } else {
                            State::ChunkData { left: size, received }
                        };
                        Ok((line_len - already, progress))
                    }
                    Err(_) => Err(ResponseError::BadChunk),
                }
            }
            State::ChunkData { left, received } => {
                let take = (*left).min(data.len() as u64) as usize;
                *left -= take as u64;
                *received += take as u64;
                progress.body = 0..take;
                if *left == 0 {
                    self.state = State::ChunkEnd { received: *received };
                }
                Ok((take, progress))
            }
            State::ChunkEnd { received } => {
                // RFC 9112 §7.1: chunk-data is followed by CRLF.
                let received = *received;
                let already = self.buffered.len();
                let need = 2 - already;
                let take = need.min(data.len());
                self.buffered.extend_from_slice(&data[..take]);
                if self.buffered.len() == 2 {
                    if self.buffered != b"\r\n" {
                        return Err(ResponseError::BadChunk);
                    }
                    self.buffered.clear();
                    self.state = State::ChunkSize { received };
                }
                Ok((take, progress))
            }
            State::Trailer => {
                // RFC 9112 §7.1.2: trailer fields, then an empty line. Fields are ignored.
                let already = self.buffered.len();
                self.buffered.extend_from_slice(data);
                let end = if self.buffered.starts_with(b"\r\n") {
                    Some(2)
                } else {
                    self.buffered.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4)
                };
                match end {
                    Some(end) => {
                        self.buffered.clear();
                        self.state = State::Complete;
                        progress.complete = true;
                        Ok((end - already, progress))
                    }
                    None if self.buffered.len() > MAX_HEAD => Err(ResponseError::BadChunk),
                    None => Ok((data.len(), progress)),
                }
            }
        }
    }

    /// The peer closed the connection: completes a close-delimited body, else an error.
    pub fn finish_at_eof(&mut self) -> Result<(), ResponseError> {
        match self.state {
            State::Complete => Ok(()),
            State::Body { framing: Framing::UntilClose, .. } => {
                self.state = State::Complete;
                Ok(())
            }
            State::Head => Err(ResponseError::ClosedBeforeHead),
            State::Body { framing: Framing::Length(total), received } => {
                Err(ResponseError::ShortBody { expected: total, got: received })
            }
            _ => Err(ResponseError::BadChunk),
        }
    }
}

fn interpret_head(parsed: &httparse::Response) -> Result<(Head, Framing), ResponseError> {
    let status = parsed.code.unwrap_or(0);
    let mut content_length = None;
    let mut chunked = false;
    let mut connection_close = false;
    let mut keep_alive = false;
    for header in parsed.headers.iter() {
        // Each header name compared once against the three that frame a response.
        let Some(framing_header) = ["content-length", "transfer-encoding", "connection"].iter().position(|name| header.name.eq_ignore_ascii_case(name))
        else {
            continue;
        };
        let value = std::str::from_utf8(header.value).map_err(|_| ResponseError::BadHead(format!("non-UTF-8 {}", header.name)))?;
        match framing_header {
            0 => {
                let length: u64 = value.trim().parse().map_err(|_| ResponseError::BadContentLength)?;
                // RFC 9112 §6.3: differing repeated Content-Length values are an error.
                if content_length.is_some_and(|seen| seen != length) {
                    return Err(ResponseError::BadContentLength);
                }
                content_length = Some(length);
            }
            1 => chunked = value.split(',').next_back().is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked")),
            _ => {
                for token in value.split(',') {
                    connection_close |= token.trim().eq_ignore_ascii_case("close");
                    keep_alive |= token.trim().eq_ignore_ascii_case("keep-alive");
                }
            }
        }
    }
    let http10 = parsed.version == Some(0);
    let closes = connection_close || (http10 && !keep_alive);
    // RFC 9112 §6.3: 1xx, 204 and 304 have no body; chunked overrides Content-Length.
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(length) = content_length {
        Framing::Length(length)
    } else {
        Framing::UntilClose
    };
    let closes = closes || framing == Framing::UntilClose;
    Ok((Head { status, content_length, closes }, framing))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `data` in pieces of `step` bytes; returns head, body bytes and completion.
    fn read_all(data: &[u8], step: usize) -> Result<(Option<Head>, Vec<u8>, bool), ResponseError> {
        let mut reader = ResponseReader::new();
        let mut body = Vec::new();
        let mut complete = false;
        for piece in data.chunks(step) {
            let mut rest = piece;
            while !rest.is_empty() {
                let (consumed, progress) = reader.feed(rest)?;
                body.extend_from_slice(&rest[progress.body.clone()]);
                complete |= progress.complete;
                rest = &rest[consumed..];
            }
        }
        Ok((reader.head().cloned(), body, complete))
    }

    #[test]
    fn content_length_body_in_any_split() {
        let data = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        for step in 1..data.len() {
            let (head, body, complete) = read_all(data, step).unwrap();
            assert_eq!(head.unwrap(), Head { status: 200, content_length: Some(5), closes: false });
            assert_eq!(body, b"hello");
            assert!(complete);
        }
    }

    #[test]
    fn chunked_body_with_trailer() {
        let data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nX-T: 1\r\n\r\n";
        for step in 1..data.len() {
            let (_, body, complete) = read_all(data, step).unwrap();
            assert_eq!(body, b"abcde", "step {step}");
            assert!(complete);
        }
    }

    #[test]
    fn interim_100_is_skipped_and_304_has_no_body() {
        let (head, body, complete) = read_all(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", 7).unwrap();
        assert_eq!(head.unwrap().status, 304);
        assert!(body.is_empty() && complete);
    }

    #[test]
    fn errors_name_the_fault() {
        let cases: [(&[u8], ResponseError); 3] = [
            (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabc", ResponseError::TrailingBytes(1)),
            (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", ResponseError::BadContentLength),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", ResponseError::BadContentLength),
        ];
        for (data, expected) in cases {
            assert_eq!(read_all(data, data.len()).unwrap_err(), expected);
        }
        assert!(matches!(read_all(b"HTTQ/1.1 200\r\n\r\n", 100), Err(ResponseError::BadHead(_))));
    }

    #[test]
    fn eof_ends_close_delimited_body_and_flags_short_ones() {
        let mut reader = ResponseReader::new();
        reader.feed(b"HTTP/1.0 200 OK\r\n\r\nabc").unwrap();
        assert!(reader.head().unwrap().closes);
        assert_eq!(reader.finish_at_eof(), Ok(()));
        let mut reader = ResponseReader::new();
        let (consumed, _) = reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc").unwrap();
        reader.feed(&b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc"[consumed..]).unwrap();
        assert_eq!(reader.finish_at_eof(), Err(ResponseError::ShortBody { expected: 9, got: 3 }));
        assert_eq!(ResponseReader::new().finish_at_eof(), Err(ResponseError::ClosedBeforeHead));
    }
}
