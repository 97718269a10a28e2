//! A block of lines parsed into columns, and the bytes `importers.py` reads back: a u64
//! length and a JSON header (counts, methods, the byte length of each section) then the
//! sections, in the header's order, little-endian. Clients and paths are keyed by
//! [`text_key`]; paths are also numbered over the whole run (one import) by first
//! appearance, and a block sends the texts of the paths it adds.
//!
//! | section | type | what |
//! |---|---|---|
//! | `paths` | UTF-8 text, `\n`-joined | (encoded) paths first seen in this block |
//! | `client`, `path` | u64 per row | keys of the client and path texts |
//! | `time_s` | f64 | Unix seconds |
//! | `status` | u16 | |
//! | `logged_size` | u64 | |
//! | `number` | i64 | the line's number in its file |
//! | `response_s`, `upstream_response_s` | f64, NaN: none | empty when every row has none |
//! | `pending_numbers` | i64 | lines left to the Python reference |
//! | `pending_lines` | bytes, `\n`-joined | those lines as read |
//! | `block_paths`, `block_keys`, `block_any`, `block_ok` | u32, u64, u64, i64 (-1: none) | each path of the block (number, key), its largest logged size, and with status 200 |
//! | `seconds`, `lines` | i64, u32 | lines per whole second (floor of `time_s`), ascending |

use crate::layout::Layout;
use crate::line::{parse_line, Outcome, Scratch};
use memchr::memchr_iter;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};

/// The key of a client or path text: its Latin-1 bytes as little-endian 64-bit words
/// (the last zero-padded), each xored into the state and mixed by SplitMix64's output
/// function (Steele, Lea and Flood 2014). `importers._text_key` computes the same in
/// Python for the lines it judges (test vector below). Two texts with one key would be
/// one client or path; among 10^8 distinct texts the chance is about 3·10^-4, as for the
/// 64-bit keys the polars path stages rows by (importers._keyed).
pub fn text_key(bytes: &[u8]) -> u64 {
    #[inline]
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    let mut h = 0x9e37_79b9_7f4a_7c15 ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        h = mix(h ^ u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut word = [0u8; 8];
        word[..tail.len()].copy_from_slice(tail);
        h = mix(h ^ u64::from_le_bytes(word));
    }
    h
}

/// Hashes in a `HashMap` are already hashes: passed through.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The distinct paths of one block (by key) in order of first appearance: their texts
/// and largest logged sizes (any status; 200, -1: none).
#[derive(Default)]
struct BlockPaths {
    index: HashMap<u64, u32, BuildHasherDefault<Identity>>,
    keys: Vec<u64>,
    texts: Vec<u8>,
    ends: Vec<usize>,
    any: Vec<u64>,
    ok: Vec<i64>,
}

impl BlockPaths {
    fn clear(&mut self) {
        self.index.clear();
        self.keys.clear();
        self.texts.clear();
        self.ends.clear();
        self.any.clear();
        self.ok.clear();
    }

    /// The path's key, its sizes counted.
    #[inline]
    fn add(&mut self, text: &[u8], status: u16, size: u64) -> u64 {
        let key = text_key(text);
        let next = self.keys.len() as u32;
        let at = *self.index.entry(key).or_insert(next) as usize;
        if at == self.keys.len() {
            self.keys.push(key);
            self.texts.extend_from_slice(text);
            self.ends.push(self.texts.len());
            self.any.push(0);
            self.ok.push(-1);
        }
        self.any[at] = self.any[at].max(size);
        if status == 200 {
            // Sizes are at most 2^53 (line.rs): no overflow.
            self.ok[at] = self.ok[at].max(size as i64);
        }
        key
    }

    fn text(&self, at: usize) -> &[u8] {
        &self.texts[if at == 0 { 0 } else { self.ends[at - 1] }..self.ends[at]]
    }
}

/// Paths numbered over a run by first appearance, block after block (in the blocks' order,
/// whichever thread parsed them).
#[derive(Default)]
pub struct Numbering {
    index: HashMap<u64, u32, BuildHasherDefault<Identity>>,
}

/// A block's paths numbered: the number of each (in the block's order), and the texts of
/// those first seen in it (`\n`-joined UTF-8).
#[derive(Default)]
pub struct Numbered {
    pub codes: Vec<u32>,
    pub names: Vec<u8>,
    pub added: usize,
}

impl Numbering {
    pub fn number(&mut self, out: &BlockOut) -> Numbered {
        let mut numbered = Numbered::default();
        for (at, &key) in out.paths.keys.iter().enumerate() {
            let next = u32::try_from(self.index.len()).expect("fewer than 2^32 distinct paths");
            let code = *self.index.entry(key).or_insert(next);
            if code == next {
                if numbered.added > 0 {
                    numbered.names.push(b'\n');
                }
                push_latin1(&mut numbered.names, out.paths.text(at));
                numbered.added += 1;
            }
            numbered.codes.push(code);
        }
        numbered
    }
}

/// Lines per whole second; consecutive lines of one second (most logs) counted without a lookup.
#[derive(Default)]
struct Seconds {
    counts: BTreeMap<i64, u32>,
    run: Option<(i64, u32)>,
}

impl Seconds {
    #[inline]
    fn add(&mut self, time_s: f64) {
        let second = time_s.floor() as i64;
        match &mut self.run {
            Some((s, n)) if *s == second => *n += 1,
            run => {
                if let Some((s, n)) = run.take() {
                    *self.counts.entry(s).or_default() += n;
                }
                *run = Some((second, 1));
            }
        }
    }

    fn finish(&mut self) {
        if let Some((s, n)) = self.run.take() {
            *self.counts.entry(s).or_default() += n;
        }
    }
}

fn push_latin1(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.is_ascii() {
        out.extend_from_slice(bytes);
        return;
    }
    for &b in bytes {
        if b < 0x80 {
            out.push(b);
        } else {
            out.extend_from_slice(&[0xC0 | (b >> 6), 0x80 | (b & 0x3F)]);
        }
    }
}

/// One block's result (reused from block to block).
#[derive(Default)]
pub struct BlockOut {
    /// Lines that are not blank.
    pub entries: u64,
    paths: BlockPaths,
    pub methods: Vec<(Vec<u8>, u64)>,
    /// Keys ([`text_key`]) of the client and path texts.
    pub client: Vec<u64>,
    pub path: Vec<u64>,
    pub time_s: Vec<f64>,
    pub status: Vec<u16>,
    pub logged_size: Vec<u64>,
    pub number: Vec<i64>,
    pub response_s: Vec<f64>,
    pub upstream_response_s: Vec<f64>,
    /// Some usable line has text after an open layout's last field.
    pub rest: bool,
    pub pending_numbers: Vec<i64>,
    pub pending_lines: Vec<u8>,
    seconds: Seconds,
    scratch: Scratch,
}

impl BlockOut {
    fn clear(&mut self) {
        self.entries = 0;
        self.paths.clear();
        self.seconds.counts.clear();
        self.methods.clear();
        self.client.clear();
        self.path.clear();
        self.time_s.clear();
        self.status.clear();
        self.logged_size.clear();
        self.number.clear();
        self.response_s.clear();
        self.upstream_response_s.clear();
        self.rest = false;
        self.pending_numbers.clear();
        self.pending_lines.clear();
    }

    pub fn rows(&self) -> usize {
        self.time_s.len()
    }

    /// The header and sections (see the module doc), written as they are (no copy).
    pub fn write_to(&self, numbered: &Numbered, out: &mut impl Write) -> io::Result<()> {
        type Writer<'a> = Box<dyn Fn(&mut dyn Write) -> io::Result<()> + 'a>;
        fn le<'a, T: Copy, const N: usize>(values: &'a [T], bytes: fn(T) -> [u8; N]) -> (usize, Writer<'a>) {
            (values.len() * N, Box::new(move |out: &mut dyn Write| values.iter().try_for_each(|&v| out.write_all(&bytes(v)))))
        }
        fn raw(data: &[u8]) -> (usize, Writer<'_>) {
            (data.len(), Box::new(move |out: &mut dyn Write| out.write_all(data)))
        }
        let some = |values| if values_all_nan(values) { raw(&[]) } else { le(values, f64::to_le_bytes) };
        let seconds: Vec<i64> = self.seconds.counts.keys().copied().collect();
        let lines: Vec<u32> = self.seconds.counts.values().copied().collect();
        let sections: [(&str, (usize, Writer)); 17] = [
            ("paths", raw(&numbered.names)),
            ("client", le(&self.client, u64::to_le_bytes)),
            ("path", le(&self.path, u64::to_le_bytes)),
            ("time_s", le(&self.time_s, f64::to_le_bytes)),
            ("status", le(&self.status, u16::to_le_bytes)),
            ("logged_size", le(&self.logged_size, u64::to_le_bytes)),
            ("number", le(&self.number, i64::to_le_bytes)),
            ("response_s", some(&self.response_s)),
            ("upstream_response_s", some(&self.upstream_response_s)),
            ("pending_numbers", le(&self.pending_numbers, i64::to_le_bytes)),
            ("pending_lines", raw(&self.pending_lines)),
            ("block_paths", le(&numbered.codes, u32::to_le_bytes)),
            ("block_keys", le(&self.paths.keys, u64::to_le_bytes)),
            ("block_any", le(&self.paths.any, u64::to_le_bytes)),
            ("block_ok", le(&self.paths.ok, i64::to_le_bytes)),
            ("seconds", le(&seconds, i64::to_le_bytes)),
            ("lines", le(&lines, u32::to_le_bytes)),
        ];
        let methods: serde_json::Map<String, serde_json::Value> = self
            .methods
            .iter()
            .map(|(m, n)| (String::from_utf8_lossy(m).into_owned(), (*n).into()))
            .collect();
        let header = serde_json::json!({
            "entries": self.entries,
            "rows": self.rows(),
            "pending": self.pending_numbers.len(),
            "paths": numbered.added,
            "rest": self.rest,
            "methods": methods,
            "sections": sections.iter().map(|(name, (len, _))| serde_json::json!([name, len])).collect::<Vec<_>>(),
        })
        .to_string();
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(header.as_bytes())?;
        for (_, (_, write)) in &sections {
            write(out)?;
        }
        Ok(())
    }
}

fn values_all_nan(values: &[f64]) -> bool {
    values.iter().all(|v| v.is_nan())
}

/// Parse `block` (whole lines; the last may lack its newline), its first line numbered
/// `first`, into `out`.
pub fn parse_block(layout: &Layout, block: &[u8], first: i64, out: &mut BlockOut) {
    out.clear();
    let mut start = 0;
    let mut number = first;
    let ends = memchr_iter(b'\n', block).chain((!block.ends_with(b"\n") && !block.is_empty()).then_some(block.len()));
    for end in ends {
        let raw = &block[start..end];
        start = end + 1;
        let this = number;
        number += 1;
        match parse_line(layout, raw, &mut out.scratch) {
            Outcome::Blank => continue,
            Outcome::Pending => {
                out.entries += 1;
                if !out.pending_numbers.is_empty() {
                    out.pending_lines.push(b'\n');
                }
                out.pending_numbers.push(this);
                out.pending_lines.extend_from_slice(raw);
            }
            Outcome::Row(line) => {
                out.entries += 1;
                let client = text_key(&out.scratch.client);
                let path = out.paths.add(&out.scratch.path, line.status, line.size);
                match out.methods.iter_mut().find(|(m, _)| *m == out.scratch.method) {
                    Some((_, count)) => *count += 1,
                    None => out.methods.push((out.scratch.method.clone(), 1)),
                }
                out.seconds.add(line.time_s);
                out.client.push(client);
                out.path.push(path);
                out.time_s.push(line.time_s);
                out.status.push(line.status);
                out.logged_size.push(line.size);
                out.number.push(this);
                out.response_s.push(line.response_s.unwrap_or(f64::NAN));
                out.upstream_response_s.push(line.upstream_s.unwrap_or(f64::NAN));
                out.rest |= line.rest;
            }
        }
    }
    out.seconds.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT_KEY_A: u64 = 0xaa99_f946_d784_6937;
    const TEXT_KEY_LONG: u64 = 0xd2a4_0a28_b937_6b7e;

    #[test]
    fn a_block_in_columns_and_pending_lines() {
        let layout = Layout::common(true);
        let block = b"a - - [01/Jul/1995:00:00:01 -0400] \"GET /x HTTP/1.0\" 200 10\n\
            \n\
            junk\r\n\
            b\xe9 - - [01/Jul/1995:00:00:02 -0400] \"POST /x\" 404 - 7\n\
            a - - [01/Jul/1995:00:00:03 -0400] \"GET /y\" 200 3";
        let mut out = BlockOut::default();
        parse_block(&layout, block, 10, &mut out);
        assert_eq!(out.entries, 4);
        let (a, b) = (text_key(b"a"), text_key(b"b\xe9"));
        assert_eq!(out.client, [a, b, a]);
        assert_eq!(out.path, [text_key(b"/x"), text_key(b"/x"), text_key(b"/y")]);
        assert_eq!(out.number, [10, 13, 14]);
        assert_eq!(out.methods, [(b"GET".to_vec(), 2), (b"POST".to_vec(), 1)]);
        assert_eq!(out.pending_numbers, [12]);
        assert_eq!(out.pending_lines, b"junk\r");
        let mut numbering = Numbering::default();
        let numbered = numbering.number(&out);
        assert_eq!((numbered.codes.as_slice(), numbered.names.as_slice(), numbered.added), ([0, 1].as_slice(), b"/x\n/y".as_slice(), 2));
        assert_eq!((out.paths.any.as_slice(), out.paths.ok.as_slice()), ([10, 3].as_slice(), [10, 3].as_slice()));
        assert_eq!(out.seconds.counts.iter().map(|(&s, &n)| (s, n)).collect::<Vec<_>>(),
                   [(804571201, 1), (804571202, 1), (804571203, 1)]);
        assert!(out.rest);
        assert_eq!(out.response_s[1], 7e-6);
        assert!(out.response_s[0].is_nan());
        let mut bytes = Vec::new();
        out.write_to(&numbered, &mut bytes).unwrap();
        let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
        assert_eq!(header["rows"], 3);
        let total: u64 = header["sections"].as_array().unwrap().iter().map(|s| s[1].as_u64().unwrap()).sum();
        assert_eq!(bytes.len() as u64, 8 + header_len as u64 + total);
        // The next block numbers on and sends only the names it adds.
        parse_block(&layout, b"c - - [01/Jul/1995:00:00:04 -0400] \"GET /x\" 304 0\na - - [01/Jul/1995:00:00:04 -0400] \"GET /z\" 200 1", 20, &mut out);
        let numbered = numbering.number(&out);
        assert_eq!((numbered.codes.as_slice(), numbered.names.as_slice()), ([0, 2].as_slice(), b"/z".as_slice()));
        assert_eq!((out.paths.any.as_slice(), out.paths.ok.as_slice()), ([0, 1].as_slice(), [-1, 1].as_slice()));
    }

    /// The vector importers._text_key is tested against (python/tests/test_workloads_logparse.py).
    #[test]
    fn text_keys() {
        assert_eq!(text_key(b""), 0x9e37_79b9_7f4a_7c15);
        assert_eq!(text_key(b"/a"), TEXT_KEY_A);
        assert_eq!(text_key(b"/shuttle/missions/sts-73/mission-sts-73.html\xe9"), TEXT_KEY_LONG);
        assert_ne!(text_key(b"a"), text_key(b"a\0"));
    }

    /// fuzz/fuzz_targets/logparse.rs's checks on seeded random edits of good lines.
    #[test]
    fn every_line_is_a_row_pending_or_blank() {
        let layout = Layout::common(true);
        let good = b"h - - [01/Jul/1995:00:00:01 -0400] \"GET /a?b HTTP/1.0\" 200 10 \"r\" \"u\" 15\n".to_vec();
        let alphabet = b" \"[]/:-+.,?#\\x09AZaz\t\r\n\x1f\x85\xa0\xe9";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut out = BlockOut::default();
        for _ in 0..2000 {
            let mut block = good.repeat(3);
            for _ in 0..next(6) {
                let at = next(block.len());
                match next(3) {
                    0 => drop(block.remove(at)),
                    1 => block.insert(at, alphabet[next(alphabet.len())]),
                    _ => block[at] = alphabet[next(alphabet.len())],
                }
            }
            parse_block(&layout, &block, 1, &mut out);
            let lines = block.split(|&b| b == b'\n').count() - usize::from(block.ends_with(b"\n"));
            assert!(out.entries as usize <= lines);
            assert_eq!(out.rows() + out.pending_numbers.len(), out.entries as usize);
            assert!(out.time_s.iter().all(|t| t.is_finite()));
        }
    }

    #[test]
    fn an_empty_block_and_one_without_a_final_newline() {
        let layout = Layout::common(true);
        let mut out = BlockOut::default();
        parse_block(&layout, b"", 1, &mut out);
        assert_eq!((out.entries, out.rows()), (0, 0));
        parse_block(&layout, b"\n\nx", 1, &mut out);
        assert_eq!((out.entries, out.pending_numbers.as_slice()), (1, [3].as_slice()));
    }
}
