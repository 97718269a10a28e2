//! A block of lines parsed into columns, and the bytes `importers.py` reads back: a u64
//! length and a JSON header (counts, methods, the byte length of each section) then the sections, in the
//! header's order, little-endian:
//!
//! | section | type | what |
//! |---|---|---|
//! | `clients`, `paths` | UTF-8 text, `\n`-joined | the block's distinct clients and (encoded) paths, by first appearance |
//! | `client`, `path` | u32 per row | index into those |
//! | `time_s` | f64 | Unix seconds |
//! | `status` | u16 | |
//! | `logged_size` | u64 | |
//! | `number` | i64 | the line's number in its file |
//! | `response_s`, `upstream_response_s` | f64, NaN: none | |
//! | `pending_numbers` | i64 | lines left to the Python reference |
//! | `pending_lines` | bytes, `\n`-joined | those lines as read |

use crate::layout::Layout;
use crate::line::{parse_line, Outcome, Scratch};
use memchr::memchr_iter;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};

/// FxHash (rustc's): a multiply-rotate hash for the block's small dictionaries of
/// clients and paths; the keys are never stored beyond one block.
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

impl Fx {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Distinct texts numbered by first appearance; their names as UTF-8 (from Latin-1).
#[derive(Default)]
struct Dict {
    index: HashMap<Box<[u8]>, u32, BuildHasherDefault<Fx>>,
    names: Vec<u8>,
}

impl Dict {
    fn code(&mut self, key: &[u8]) -> u32 {
        if let Some(&code) = self.index.get(key) {
            return code;
        }
        let code = self.index.len() as u32;
        if code > 0 {
            self.names.push(b'\n');
        }
        push_latin1(&mut self.names, key);
        self.index.insert(key.into(), code);
        code
    }

    fn clear(&mut self) {
        self.index.clear();
        self.names.clear();
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
    clients: Dict,
    paths: Dict,
    pub methods: Vec<(Vec<u8>, u64)>,
    pub client: Vec<u32>,
    pub path: Vec<u32>,
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
    scratch: Scratch,
}

impl BlockOut {
    fn clear(&mut self) {
        self.entries = 0;
        self.clients.clear();
        self.paths.clear();
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

    /// The distinct paths, `\n`-joined UTF-8.
    pub fn path_names(&self) -> &[u8] {
        &self.paths.names
    }

    pub fn client_names(&self) -> &[u8] {
        &self.clients.names
    }

    /// The header and sections (see the module doc).
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        fn bytes<T: Copy, const N: usize>(values: &[T], le: fn(T) -> [u8; N]) -> Vec<u8> {
            let mut out = Vec::with_capacity(values.len() * N);
            for &v in values {
                out.extend_from_slice(&le(v));
            }
            out
        }
        let sections: [(&str, Vec<u8>); 12] = [
            ("clients", self.clients.names.clone()),
            ("paths", self.paths.names.clone()),
            ("client", bytes(&self.client, u32::to_le_bytes)),
            ("path", bytes(&self.path, u32::to_le_bytes)),
            ("time_s", bytes(&self.time_s, f64::to_le_bytes)),
            ("status", bytes(&self.status, u16::to_le_bytes)),
            ("logged_size", bytes(&self.logged_size, u64::to_le_bytes)),
            ("number", bytes(&self.number, i64::to_le_bytes)),
            ("response_s", bytes(&self.response_s, f64::to_le_bytes)),
            ("upstream_response_s", bytes(&self.upstream_response_s, f64::to_le_bytes)),
            ("pending_numbers", bytes(&self.pending_numbers, i64::to_le_bytes)),
            ("pending_lines", self.pending_lines.clone()),
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
            "clients": self.clients.index.len(),
            "paths": self.paths.index.len(),
            "rest": self.rest,
            "methods": methods,
            "sections": sections.iter().map(|(name, data)| serde_json::json!([name, data.len()])).collect::<Vec<_>>(),
        })
        .to_string();
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(header.as_bytes())?;
        for (_, data) in &sections {
            out.write_all(data)?;
        }
        Ok(())
    }
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
                let client = out.clients.code(&out.scratch.client);
                let path = out.paths.code(&out.scratch.path);
                match out.methods.iter_mut().find(|(m, _)| *m == out.scratch.method) {
                    Some((_, count)) => *count += 1,
                    None => out.methods.push((out.scratch.method.clone(), 1)),
                }
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(out.client, [0, 1, 0]);
        assert_eq!(out.path, [0, 0, 1]);
        assert_eq!(out.number, [10, 13, 14]);
        assert_eq!(out.client_names(), "a\nbé".as_bytes());
        assert_eq!(out.path_names(), b"/x\n/y");
        assert_eq!(out.methods, [(b"GET".to_vec(), 2), (b"POST".to_vec(), 1)]);
        assert_eq!(out.pending_numbers, [12]);
        assert_eq!(out.pending_lines, b"junk\r");
        assert!(out.rest);
        assert_eq!(out.response_s[1], 7e-6);
        assert!(out.response_s[0].is_nan());
        let mut bytes = Vec::new();
        out.write_to(&mut bytes).unwrap();
        let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
        assert_eq!(header["rows"], 3);
        let total: u64 = header["sections"].as_array().unwrap().iter().map(|s| s[1].as_u64().unwrap()).sum();
        assert_eq!(bytes.len() as u64, 8 + header_len as u64 + total);
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
