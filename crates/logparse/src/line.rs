//! One access-log line: cut at the layout's literal text and its fields checked, with the
//! rules of the Python reference (`sojourn.workloads.importers._parse_lines`), which every
//! comment here names as "Python". Lines are bytes read as Latin-1 (every byte one
//! character), as Python reads a block that is not ASCII.

use crate::layout::{Layout, Role, TimeKind};
use memchr::{memchr2, memchr3};

/// The first `byte` in `text`: a plain loop for the short fields of a log line (a call
/// into memchr's vector code costs more than it saves below a few dozen bytes).
#[inline]
fn memchr(byte: u8, text: &[u8]) -> Option<usize> {
    if text.len() < 64 {
        text.iter().position(|&b| b == byte)
    } else {
        memchr::memchr(byte, text)
    }
}

/// What a line is.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Empty once trimmed: not an entry.
    Blank,
    /// Not decided here: the Python reference reads it (see the crate doc).
    Pending,
    /// A usable line; its client, method and path are in the [`Scratch`].
    Row(Line),
}

/// The values of a usable line.
#[derive(Debug, PartialEq)]
pub struct Line {
    /// Unix seconds.
    pub time_s: f64,
    pub status: u16,
    pub size: u64,
    pub response_s: Option<f64>,
    pub upstream_s: Option<f64>,
    /// Text follows the last field of an open layout (a default-layout block keeps a
    /// response column when any of its lines has some).
    pub rest: bool,
}

/// Buffers reused from line to line; after [`Outcome::Row`], `client`, `method` and `path`
/// hold the row's texts (Latin-1 bytes, the path percent-encoded).
#[derive(Default)]
pub struct Scratch {
    clean: Vec<u8>,
    request: Vec<u8>,
    pub client: Vec<u8>,
    pub method: Vec<u8>,
    pub path: Vec<u8>,
}

/// Sizes a double no longer counts exactly (2^53 bytes): Python's "out of range".
const MAX_SIZE: u64 = 1 << 53;

/// Unicode White_Space among U+0000-U+00FF: what Python's strip and regex `\s` match
/// on a Latin-1 line.
#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, 9..=13 | b' ' | 0x85 | 0xA0)
}

/// Whether `s` holds white space: a branch-free fold the compiler vectorises (this scan
/// over every request was a tenth of the parse as a `position` loop).
#[inline]
fn has_space(s: &[u8]) -> bool {
    s.iter().fold(false, |any, &b| any | is_space(b))
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, tail @ ..] = s {
        if !is_space(*first) {
            break;
        }
        s = tail;
    }
    while let [head @ .., last] = s {
        if !is_space(*last) {
            break;
        }
        s = head;
    }
    s
}

/// The line as Python cuts it: `\\` and `\"` percent-encoded (%5C, %22), the unit
/// separator read as `?`, then trimmed.
fn clean<'a>(raw: &'a [u8], buf: &'a mut Vec<u8>) -> &'a [u8] {
    if memchr2(b'\\', 0x1f, raw).is_none() {
        return trim(raw);
    }
    buf.clear();
    let mut i = 0;
    while i < raw.len() {
        match (raw[i], raw.get(i + 1)) {
            (b'\\', Some(b'\\')) => {
                buf.extend_from_slice(b"%5C");
                i += 2;
            }
            (b'\\', Some(b'"')) => {
                buf.extend_from_slice(b"%22");
                i += 2;
            }
            (0x1f, _) => {
                buf.push(b'?');
                i += 1;
            }
            (b, _) => {
                buf.push(b);
                i += 1;
            }
        }
    }
    trim(buf)
}

/// Fields by role (`None`: the layout has none).
#[derive(Default)]
struct Cut<'a> {
    host: Option<&'a [u8]>,
    time: Option<&'a [u8]>,
    request: Option<&'a [u8]>,
    method: Option<&'a [u8]>,
    path: Option<&'a [u8]>,
    status: Option<&'a [u8]>,
    size: Option<&'a [u8]>,
    response: Option<&'a [u8]>,
    upstream: Option<&'a [u8]>,
    forwarded: Option<&'a [u8]>,
    rest: &'a [u8],
}

/// The first occurrence of `separator` (not empty) in `text`. The separators are a few
/// bytes and the fields before them short: a memchr for the first byte and a compare beat
/// a general substring search here (measured: memmem's searcher was a tenth of the parse).
#[inline]
fn find(separator: &[u8], text: &[u8]) -> Option<usize> {
    let (&first, tail) = separator.split_first()?;
    let mut from = 0;
    while let Some(at) = memchr(first, &text[from..]) {
        let at = from + at;
        if text[at + 1..].starts_with(tail) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// `logformat.split`: each field ends at the first occurrence of the text after it; the
/// last field of an open layout with nothing after it ends at a space (or the line's end);
/// a closed layout's line ends with its last text. `None`: the line does not fit.
fn cut<'a>(layout: &Layout, line: &'a [u8]) -> Option<Cut<'a>> {
    let mut rest = line.strip_prefix(layout.separators[0].as_slice())?;
    let mut fields = Cut::default();
    let last = layout.roles.len() - 1;
    for (i, role) in layout.roles.iter().enumerate() {
        let separator = &layout.separators[i + 1];
        let field;
        if !separator.is_empty() {
            let at = find(separator, rest)?;
            field = &rest[..at];
            rest = &rest[at + separator.len()..];
        } else if i < last {
            return None; // formats with two fields touching are refused by logformat.parse
        } else if layout.open_end {
            match memchr(b' ', rest) {
                Some(at) => {
                    field = &rest[..at];
                    rest = &rest[at + 1..];
                }
                None => {
                    field = rest;
                    rest = &rest[rest.len()..];
                }
            }
        } else {
            field = rest;
            rest = &rest[rest.len()..];
        }
        let slot = match role {
            Role::Host => &mut fields.host,
            Role::Time(_) => &mut fields.time,
            Role::Request => &mut fields.request,
            Role::Method => &mut fields.method,
            Role::Path => &mut fields.path,
            Role::Status => &mut fields.status,
            Role::Size => &mut fields.size,
            Role::Response(_) => &mut fields.response,
            Role::Upstream => &mut fields.upstream,
            Role::Forwarded => &mut fields.forwarded,
            Role::Ignored => continue,
        };
        *slot = Some(field);
    }
    if !layout.open_end && !rest.is_empty() {
        return None;
    }
    fields.rest = rest;
    Some(fields)
}

/// Python's `REQUEST_LINE`:
/// `^(?P<method>[A-Z]+) (?:[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s]*)?(?P<path>/[^\s?#]*)[^\s]*(?: HTTP/\d\.\d)?$`.
/// On a match, the method and the path (escapes percent-encoded) are in the buffers.
fn request(text: &[u8], method: &mut Vec<u8>, path: &mut Vec<u8>) -> bool {
    let letters = text.iter().take_while(|b| b.is_ascii_uppercase()).count();
    if letters == 0 || text.get(letters) != Some(&b' ') {
        return false;
    }
    let target = &text[letters + 1..];
    // The target holds no white space but for a final " HTTP/d.d".
    let target = match target.len().checked_sub(9).map(|at| target.split_at(at)) {
        Some((head, version))
            if version.starts_with(b" HTTP/")
                && version[6].is_ascii_digit()
                && version[7] == b'.'
                && version[8].is_ascii_digit() =>
        {
            head
        }
        _ => target,
    };
    if has_space(target) {
        return false;
    }
    let start = match target.first() {
        Some(b'/') => 0,
        Some(b) if b.is_ascii_alphabetic() => {
            // Absolute form: scheme "://" authority, then the path.
            let scheme = target.iter().take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-')).count();
            if !target[scheme..].starts_with(b"://") {
                return false;
            }
            match memchr(b'/', &target[scheme + 3..]) {
                Some(at) => scheme + 3 + at,
                None => return false,
            }
        }
        _ => return false,
    };
    let target = &target[start..];
    let end = memchr2(b'?', b'#', target).unwrap_or(target.len());
    method.clear();
    method.extend_from_slice(&text[..letters]);
    encode_path(&target[..end], path);
    true
}

/// nginx's `\xHH` escapes as `%HH`, then `,` and `"` percent-encoded (a trace CSV needs
/// no quoting): Python's replacements on the path, in that order.
fn encode_path(raw: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut i = 0;
    while i < raw.len() {
        // Most paths have none of the three: copied in one piece.
        match memchr3(b'\\', b',', b'"', &raw[i..]) {
            None => {
                out.extend_from_slice(&raw[i..]);
                return;
            }
            Some(at) => {
                out.extend_from_slice(&raw[i..i + at]);
                i += at;
            }
        }
        match raw[i] {
            b'\\' if raw.get(i + 1) == Some(&b'x')
                && raw.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                && raw.get(i + 3).is_some_and(u8::is_ascii_hexdigit) =>
            {
                out.push(b'%');
                out.extend_from_slice(&raw[i + 2..i + 4]);
                i += 4;
                continue;
            }
            b',' => out.extend_from_slice(b"%2C"),
            b'"' => out.extend_from_slice(b"%22"),
            b => out.push(b),
        }
        i += 1;
    }
}

/// `[0-9]+(\.[0-9]+)?`, the only number spelling decided here (Python's casts accept
/// more: `+1`, `1e3`, `.5`, `inf`; those lines are pending).
fn plain_number(text: &[u8]) -> Option<f64> {
    let int = text.iter().take_while(|b| b.is_ascii_digit()).count();
    if int == 0 {
        return None;
    }
    if int < text.len() {
        let fraction = &text[int..];
        if fraction.len() < 2 || fraction[0] != b'.' || !fraction[1..].iter().all(u8::is_ascii_digit) {
            return None;
        }
    }
    // ASCII digits and a dot: valid UTF-8, and a correctly rounded parse as Python's.
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn digits(text: &[u8]) -> Option<u32> {
    text.iter().try_fold(0u32, |n, &b| b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0')))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

const MONTHS: [&[u8; 3]; 12] = [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];

/// Unix seconds of a date, a time of day and a `+hhmm` zone, each already split out;
/// `None` unless every part is in range (the years 1000-9999 only: rarer spellings are
/// left to Python).
fn seconds(date: [u32; 3], time: [u32; 3], sign: u8, zone: [u32; 2]) -> Option<f64> {
    let [year, month, day] = date;
    let [hour, minute, second] = time;
    let ok = (1000..=9999).contains(&year)
        && (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
        && hour <= 23
        && minute <= 59
        && second <= 59
        && zone[0] <= 23
        && zone[1] <= 59;
    let sign = match sign {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    if !ok {
        return None;
    }
    let local = days_from_civil(year.into(), month.into(), day.into()) * 86400
        + i64::from(hour * 3600 + minute * 60 + second);
    Some((local - sign * i64::from(zone[0] * 3600 + zone[1] * 60)) as f64)
}

/// `10/Oct/2000:13:55:36 -0700` exactly (two-digit day, English month as written).
fn clf_time(t: &[u8]) -> Option<f64> {
    if t.len() != 26 || t[2] != b'/' || t[6] != b'/' || t[11] != b':' || t[14] != b':' || t[17] != b':' || t[20] != b' ' {
        return None;
    }
    let month = MONTHS.iter().position(|m| &t[3..6] == m.as_slice())? as u32 + 1;
    seconds(
        [digits(&t[7..11])?, month, digits(&t[0..2])?],
        [digits(&t[12..14])?, digits(&t[15..17])?, digits(&t[18..20])?],
        t[21],
        [digits(&t[22..24])?, digits(&t[24..26])?],
    )
}

/// `2000-10-10T13:55:36-07:00` or `...-0700`.
fn iso_time(t: &[u8]) -> Option<f64> {
    if t.len() < 24 || t[4] != b'-' || t[7] != b'-' || t[10] != b'T' || t[13] != b':' || t[16] != b':' {
        return None;
    }
    let zone = match &t[20..] {
        [h1, h2, b':', m1, m2] | [h1, h2, m1, m2] => [digits(&[*h1, *h2])?, digits(&[*m1, *m2])?],
        _ => return None,
    };
    seconds(
        [digits(&t[0..4])?, digits(&t[5..7])?, digits(&t[8..10])?],
        [digits(&t[11..13])?, digits(&t[14..16])?, digits(&t[17..19])?],
        t[19],
        zone,
    )
}

fn time(kind: TimeKind, text: &[u8]) -> Option<f64> {
    match kind {
        TimeKind::Clf => clf_time(text),
        TimeKind::Iso => iso_time(text),
        TimeKind::Epoch(unit) => Some(plain_number(text)? * unit).filter(|t| t.is_finite()),
    }
}

/// A response time: `Ok(None)` for the texts Python's cast reads as null (`-`, empty),
/// `Err` for those left to Python.
fn response(text: &[u8], unit: f64) -> Result<Option<f64>, ()> {
    match text {
        b"" | b"-" => Ok(None),
        _ => plain_number(text).map(|v| Some(v * unit)).ok_or(()),
    }
}

/// nginx's `$upstream_response_time` ("0.010, 0.020 : 0.005", "-"): the sum of its numbers
/// (`[0-9]+(\.[0-9]+)?`), none: null. More than two numbers are left to Python (the order
/// in which polars sums a longer list is its own).
fn upstream(text: &[u8]) -> Result<Option<f64>, ()> {
    let mut sum: Option<f64> = None;
    let mut count = 0;
    let mut i = 0;
    while i < text.len() {
        if !text[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < text.len() && text[i].is_ascii_digit() {
            i += 1;
        }
        if text.get(i) == Some(&b'.') && text.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
            while i < text.len() && text[i].is_ascii_digit() {
                i += 1;
            }
        }
        count += 1;
        if count > 2 {
            return Err(());
        }
        let value = plain_number(&text[start..i]).ok_or(())?;
        sum = Some(sum.map_or(value, |s| s + value));
    }
    Ok(sum)
}

/// Python's `TRAILING_TIME` on what follows the default layout's size:
/// `^(?:"[^"]*" "[^"]*" ?)?([0-9]+(?:\.[0-9]+)?)(?: |$)`; an integer is microseconds
/// (Apache `%D`), a decimal seconds (nginx `$request_time`).
fn trailing_time(rest: &[u8]) -> Option<f64> {
    let mut at = 0;
    if rest.first() == Some(&b'"') {
        let close = 1 + memchr(b'"', &rest[1..])?;
        if !rest[close + 1..].starts_with(b" \"") {
            return None;
        }
        let open = close + 3;
        at = open + memchr(b'"', &rest[open..])? + 1;
        if rest.get(at) == Some(&b' ') {
            at += 1;
        }
    }
    let token = &rest[at..];
    let token = &token[..memchr(b' ', token).unwrap_or(token.len())];
    let value = plain_number(token)?;
    Some(value * if memchr(b'.', token).is_some() { 1.0 } else { 1e-6 })
}

fn status(text: &[u8]) -> Option<u16> {
    match text {
        [b'1'..=b'9', b'0'..=b'9', b'0'..=b'9'] => Some(digits(text)? as u16),
        _ => None,
    }
}

fn size(text: &[u8]) -> Option<u64> {
    if text == b"-" {
        return Some(0);
    }
    if text.is_empty() || text.len() > 16 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = text.iter().fold(0u64, |n, &b| n * 10 + u64::from(b - b'0'));
    (value <= MAX_SIZE).then_some(value)
}

/// One line (without its newline) as the layout reads it.
pub fn parse_line(layout: &Layout, raw: &[u8], scratch: &mut Scratch) -> Outcome {
    let Scratch { clean: clean_buf, request: request_buf, client, method, path } = scratch;
    let line = clean(raw, clean_buf);
    if line.is_empty() {
        return Outcome::Blank;
    }
    match row(layout, line, request_buf, client, method, path) {
        Some(row) => Outcome::Row(row),
        None => Outcome::Pending,
    }
}

fn row(layout: &Layout, line: &[u8], request_buf: &mut Vec<u8>, client: &mut Vec<u8>, method: &mut Vec<u8>,
       path: &mut Vec<u8>) -> Option<Line> {
    let fields = cut(layout, line)?;
    let text = match fields.request {
        Some(text) => text,
        None => {
            request_buf.clear();
            request_buf.extend_from_slice(fields.method.unwrap_or(b"GET"));
            request_buf.push(b' ');
            request_buf.extend_from_slice(fields.path?);
            request_buf
        }
    };
    if !request(text, method, path) {
        return None;
    }
    let kind = layout.roles.iter().find_map(|r| match r {
        Role::Time(kind) => Some(*kind),
        _ => None,
    })?;
    let time_s = time(kind, fields.time?)?;
    let status = status(fields.status?)?;
    let size = size(fields.size?)?;
    let response_s = match layout.roles.iter().find_map(|r| match r {
        Role::Response(unit) => Some(*unit),
        _ => None,
    }) {
        Some(unit) => response(fields.response?, unit).ok()?,
        None if layout.open_end => trailing_time(fields.rest),
        None => None,
    };
    let upstream_s = match fields.upstream {
        Some(text) => upstream(text).ok()?,
        None => None,
    };
    let host = fields.host?;
    let chosen = match fields.forwarded {
        Some(forwarded) => {
            let first = trim(&forwarded[..memchr(b',', forwarded).unwrap_or(forwarded.len())]);
            if first.is_empty() || first == b"-" { host } else { first }
        }
        None => host,
    };
    client.clear();
    client.extend_from_slice(chosen);
    Some(Line { time_s, status, size, response_s, upstream_s, rest: !fields.rest.is_empty() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(layout: &Layout, line: &str) -> Option<(String, String, String, Line)> {
        let mut scratch = Scratch::default();
        match parse_line(layout, line.as_bytes(), &mut scratch) {
            Outcome::Row(row) => Some((
                String::from_utf8(scratch.client.clone()).unwrap(),
                String::from_utf8(scratch.method.clone()).unwrap(),
                String::from_utf8(scratch.path.clone()).unwrap(),
                row,
            )),
            Outcome::Pending => None,
            Outcome::Blank => panic!("blank: {line:?}"),
        }
    }

    #[test]
    fn common_and_combined_lines() {
        let layout = Layout::common(true);
        let (client, method, path, row) =
            one(&layout, r#"h1 - - [01/Jul/1995:00:00:01 -0400] "GET /a/b.html?x=1 HTTP/1.0" 200 6245"#).unwrap();
        assert_eq!((client.as_str(), method.as_str(), path.as_str()), ("h1", "GET", "/a/b.html"));
        assert_eq!(row, Line { time_s: 804571201.0, status: 200, size: 6245, response_s: None, upstream_s: None, rest: false });
        let (_, _, _, row) = one(&layout, r#"h - - [01/Jul/1995:00:00:01 +0000] "HEAD http://x.org:80/p HTTP/1.1" 304 - "r" "ua 1" 1500"#).unwrap();
        assert_eq!((row.size, row.response_s, row.rest), (0, Some(1500.0 * 1e-6), true));
        let (_, _, _, row) = one(&layout, r#"h - - [01/Jul/1995:00:00:01 +0000] "GET / HTTP/1.1" 200 5 0.250 x"#).unwrap();
        assert_eq!(row.response_s, Some(0.25));
    }

    /// Table of lines Python decides (pending) with the reason it gives.
    #[test]
    fn lines_left_to_python() {
        let layout = Layout::common(true);
        for (line, python) in [
            ("not a log line", "not Common/Combined Log Format"),
            (r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200"#, "not Common/Combined Log Format"),
            (r#"h - - [01/Jul/1995:00:00:01 -0400] "GET a HTTP/1.0" 200 1"#, "request line without METHOD /path"),
            (r#"h - - [01/Jul/1995:00:00:01 -0400] "get /a" 200 1"#, "request line without METHOD /path"),
            (r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /a  HTTP/1.0" 200 1"#, "request line without METHOD /path"),
            (r#"h - - [1/Jul/1995:00:00:01 -0400] "GET /a" 200 1"#, "imports (chrono reads one digit)"),
            (r#"h - - [30/Feb/1995:00:00:01 -0400] "GET /a" 200 1"#, "bad timestamp"),
            (r#"h - - [01/Jul/1995:00:00:60 -0400] "GET /a" 200 1"#, "imports (a leap second)"),
            (r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /a" 2000 1"#, "bad status"),
            (r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /a" +200 1"#, "imports (a cast reads +200)"),
            (r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /a" 200 -1"#, "bad response size"),
            (r#"h - - [01/Jul/1995:00:00:01 -0400] "GET /a" 200 99999999999999999"#, "response size out of range"),
        ] {
            assert_eq!(one(&layout, line), None, "{line} ({python})");
        }
    }

    #[test]
    fn escapes_and_latin1() {
        let layout = Layout::common(true);
        let mut scratch = Scratch::default();
        let line = b"h - - [01/Jul/1995:00:00:01 -0400] \"GET /a\\\"q\\\".html,\\x41\xe9 HTTP/1.0\" 200 1 \xa0";
        assert!(matches!(parse_line(&layout, line, &mut scratch), Outcome::Row(Line { rest: false, .. })));
        assert_eq!(scratch.path, b"/a%22q%22.html%2C%41\xe9");
        assert_eq!(parse_line(&layout, b" \t\r\x85", &mut scratch), Outcome::Blank);
        // \x1f reads as '?': the query is dropped.
        let line = b"h - - [01/Jul/1995:00:00:01 -0400] \"GET /a\x1fb\" 200 1";
        assert!(matches!(parse_line(&layout, line, &mut scratch), Outcome::Row(_)));
        assert_eq!(scratch.path, b"/a");
    }

    #[test]
    fn times() {
        assert_eq!(clf_time(b"01/Jan/1970:00:00:00 +0000"), Some(0.0));
        assert_eq!(clf_time(b"29/Feb/2000:23:59:59 +0100"), Some(951865199.0));
        assert_eq!(clf_time(b"29/Feb/1900:00:00:00 +0000"), None);
        assert_eq!(clf_time(b"01/Jul/1995:00:00:01 +2400"), None);
        assert_eq!(iso_time(b"2024-01-02T03:04:05+00:00"), Some(1704164645.0));
        assert_eq!(iso_time(b"2024-01-02T03:04:05+0130"), Some(1704159245.0));
        assert_eq!(iso_time(b"2024-01-02T03:04:05Z"), None);
        assert_eq!(time(TimeKind::Epoch(1e-3), b"1700000000123"), Some(1700000000123.0 * 1e-3));
        assert_eq!(time(TimeKind::Epoch(1.0), b"1e9"), None);
    }

    #[test]
    fn numbers() {
        assert_eq!(trailing_time(br#""r" "ua" 1500"#), Some(1500.0 * 1e-6));
        assert_eq!(trailing_time(br#""r" "ua"0.5 x"#), Some(0.5));
        assert_eq!(trailing_time(br#""r" "ua"  0.5"#), None);
        assert_eq!(trailing_time(b"12x"), None);
        assert_eq!(trailing_time(b"1.5.3"), None);
        assert_eq!(upstream(b"0.010, 0.020"), Ok(Some(0.010 + 0.020)));
        assert_eq!(upstream(b"-"), Ok(None));
        assert_eq!(upstream(b"1, 2 : 3"), Err(()));
        assert_eq!(response(b"-", 1.0), Ok(None));
        assert_eq!(response(b"1e3", 1.0), Err(()));
        assert_eq!((status(b"099"), status(b"599")), (None, Some(599)));
        assert_eq!((size(b"-"), size(b"9007199254740992"), size(b"9007199254740993")), (Some(0), Some(1 << 53), None));
    }

    #[test]
    fn closed_layouts_and_forwarded_for() {
        // nginx: $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_x_forwarded_for" $upstream_response_time
        let roles = vec![Role::Host, Role::Ignored, Role::Time(TimeKind::Clf), Role::Request, Role::Status, Role::Size,
                         Role::Forwarded, Role::Upstream];
        let separators = ["", " - ", " [", "] \"", "\" ", " ", " \"", "\" ", ""].iter().map(|s| s.as_bytes().to_vec()).collect();
        let layout = Layout::new(roles, separators, false).unwrap();
        let (client, _, _, row) =
            one(&layout, r#"10.0.0.1 - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.1" 200 5 " 1.2.3.4 , 10.0.0.9" 0.5, 0.25"#).unwrap();
        assert_eq!((client.as_str(), row.upstream_s), ("1.2.3.4", Some(0.75)));
        let (client, ..) = one(&layout, r#"10.0.0.1 - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.1" 200 5 "-" -"#).unwrap();
        assert_eq!(client, "10.0.0.1");
    }
}
