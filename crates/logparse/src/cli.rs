//! `sojourn-engine logparse --layout JSON --out DIR`: what `sojourn.workloads.importers`
//! runs to parse access logs; not meant for people.
//!
//! Requests come on stdin, each a 24-byte head of three little-endian words (kind,
//! length, first line number) and `length` bytes:
//!
//! - kind 0, a block: whole lines (decompressed by the caller), numbered from `first`;
//! - kind 1, a file: its path; the file is read here in blocks of `--block-bytes` cut at
//!   the last newline, lines numbered from 1 (no pipe carries its bytes).
//!
//! Each block parsed is written to `DIR/NNNNNN.bin` (a u64 header length, the JSON header
//! and the sections of [`crate::block`]) and named on stdout by a JSON line
//! `{"file": path, "bytes": n, "last": bool}`: `bytes` read from a file for that block,
//! `last` on the last block of a request. End of input ends the program.

use crate::block::{parse_block, BlockOut, Numbering};
use crate::layout::Layout;
use anyhow::Context;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;

#[derive(clap::Args, Debug)]
pub struct LogparseArgs {
    /// The log format as `sojourn.workloads.logformat` compiles it (JSON; see crates/logparse/src/layout.rs).
    #[arg(long)]
    pub layout: String,
    /// Where each parsed block is written.
    #[arg(long)]
    pub out: PathBuf,
    /// Bytes read from a file at a time.
    #[arg(long, default_value_t = 8 << 20)]
    pub block_bytes: usize,
    /// Blocks parsed at once.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

/// A block to parse: its first line's number, its bytes, the bytes read from a file for
/// it, and whether it ends its request.
struct Unit {
    first: i64,
    block: Vec<u8>,
    bytes: u64,
    last: bool,
    /// Read here from a file: its memory goes back to the reader once parsed.
    reuse: bool,
}

/// A request's head; `None` at a clean end of input.
fn head(input: &mut impl Read) -> io::Result<Option<[u64; 3]>> {
    let mut buf = [0u8; 24];
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..])? {
            0 if got == 0 => return Ok(None),
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "input ends inside a request head")),
            n => got += n,
        }
    }
    let word = |i: usize| u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    Ok(Some([word(0), word(1), word(2)]))
}

/// Up to `want` more bytes of `file` appended to `buf`; how many.
fn fill(file: &mut File, buf: &mut Vec<u8>, want: usize) -> io::Result<usize> {
    buf.reserve(want);
    Ok(file.take(want as u64).read_to_end(buf)?)
}

/// A file's lines in blocks of about `block_bytes`; false once the receiver has gone.
fn file_units(path: &[u8], block_bytes: usize, send: &mpsc::SyncSender<io::Result<Unit>>,
              recycled: &mpsc::Receiver<Vec<u8>>) -> io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let mut file = File::open(std::ffi::OsStr::from_bytes(path))?;
    let mut carry = Vec::new();
    let mut first = 1i64;
    let mut unreported = 0u64;
    loop {
        // A block already parsed lends its memory (no fresh pages to fault in).
        let mut buf = recycled.try_recv().unwrap_or_default();
        buf.clear();
        buf.append(&mut carry);
        let got = fill(&mut file, &mut buf, block_bytes.max(1))?;
        unreported += got as u64;
        if got == 0 {
            return Ok(send.send(Ok(Unit { first, block: buf, bytes: unreported, last: true, reuse: true })).is_ok());
        }
        // A line longer than a block is read on until its end.
        let Some(cut) = memchr::memrchr(b'\n', &buf) else {
            carry = buf;
            continue;
        };
        carry.extend_from_slice(&buf[cut + 1..]);
        buf.truncate(cut + 1);
        let lines = memchr::memchr_iter(b'\n', &buf).count() as i64;
        if send.send(Ok(Unit { first, block: buf, bytes: std::mem::take(&mut unreported), last: false, reuse: true })).is_err() {
            return Ok(false);
        }
        first += lines;
    }
}

/// The requests as units, read on a thread of their own so the next block is read while
/// this one is parsed.
fn units(input: impl Read + Send + 'static, block_bytes: usize, recycled: mpsc::Receiver<Vec<u8>>)
         -> mpsc::Receiver<io::Result<Unit>> {
    let (send, receive) = mpsc::sync_channel(1);
    thread::spawn(move || {
        let mut input = input;
        let result = (|| -> io::Result<()> {
            while let Some([kind, length, first]) = head(&mut input)? {
                let mut bytes = vec![0; usize::try_from(length).map_err(io::Error::other)?];
                input.read_exact(&mut bytes)?;
                let open = match kind {
                    0 => send.send(Ok(Unit { first: first as i64, block: bytes, bytes: 0, last: true, reuse: false })).is_ok(),
                    1 => file_units(&bytes, block_bytes, &send, &recycled)?,
                    _ => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("unknown request kind {kind}"))),
                };
                if !open {
                    return Ok(());
                }
            }
            Ok(())
        })();
        if let Err(err) = result {
            let _ = send.send(Err(err));
        }
    });
    receive
}

/// Parses blocks on `threads` threads, in turn, and hands the results back in order.
struct Parsers<'scope> {
    jobs: Vec<mpsc::SyncSender<(Unit, BlockOut)>>,
    done: Vec<mpsc::Receiver<(Unit, BlockOut)>>,
    _scope: std::marker::PhantomData<&'scope ()>,
}

impl<'scope> Parsers<'scope> {
    fn new<'env>(scope: &'scope thread::Scope<'scope, 'env>, layout: &'env Layout, threads: usize) -> Self {
        let (mut jobs, mut done) = (Vec::new(), Vec::new());
        for _ in 0..threads {
            let (job, jobs_in) = mpsc::sync_channel::<(Unit, BlockOut)>(1);
            let (result, results) = mpsc::sync_channel(1);
            scope.spawn(move || {
                for (unit, mut out) in jobs_in {
                    parse_block(layout, &unit.block, unit.first, &mut out);
                    if result.send((unit, out)).is_err() {
                        return;
                    }
                }
            });
            jobs.push(job);
            done.push(results);
        }
        Parsers { jobs, done, _scope: std::marker::PhantomData }
    }
}

pub fn run(args: LogparseArgs) -> anyhow::Result<()> {
    let layout = Layout::from_json(&args.layout).context("--layout")?;
    let threads = args.threads.max(1);
    let mut stdout = io::stdout().lock();
    let mut numbering = Numbering::default();
    let mut spare: Vec<BlockOut> = (0..threads).map(|_| BlockOut::default()).collect();
    let (recycle, recycled) = mpsc::channel();
    let mut input = units(io::stdin(), args.block_bytes, recycled).into_iter();
    thread::scope(|scope| -> anyhow::Result<()> {
        let parsers = Parsers::new(scope, &layout, threads);
        // Block i goes to thread i % threads; at most one block per thread in flight.
        let (mut sent, mut received) = (0usize, 0usize);
        loop {
            while sent - received < threads {
                match input.next() {
                    Some(unit) => {
                        let unit = unit.context("reading the input")?;
                        let out = spare.pop().expect("one output per thread");
                        parsers.jobs[sent % threads].send((unit, out)).context("a parser thread stopped")?;
                        sent += 1;
                    }
                    None => break,
                }
            }
            if received == sent {
                return Ok(());
            }
            let (unit, out) = parsers.done[received % threads].recv().context("a parser thread stopped")?;
            let numbered = numbering.number(&out);
            let path = args.out.join(format!("{received:06}.bin"));
            let mut file = BufWriter::with_capacity(1 << 20, File::create(&path).with_context(|| format!("{}", path.display()))?);
            out.write_to(&numbered, &mut file)?;
            file.flush()?;
            let line = serde_json::json!({"file": path, "bytes": unit.bytes, "last": unit.last});
            writeln!(stdout, "{line}")?;
            stdout.flush()?;
            spare.push(out);
            if unit.reuse {
                let _ = recycle.send(unit.block); // the reader may have finished
            }
            received += 1;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: u64, first: i64, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for word in [kind, bytes.len() as u64, first as u64] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn files_are_cut_at_newlines_and_numbered_on() {
        let dir = std::env::temp_dir().join(format!("sojourn-logparse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("log");
        std::fs::write(&file, b"a\nbb\nccc\n\nlong line without end").unwrap();
        let mut input = request(0, 7, b"x\ny\n");
        input.extend(request(1, 0, file.as_os_str().as_encoded_bytes()));
        let got: Vec<Unit> = units(io::Cursor::new(input), 4, mpsc::channel().1).into_iter().map(Result::unwrap).collect();
        let seen: Vec<(i64, &[u8], u64, bool)> = got.iter().map(|u| (u.first, u.block.as_slice(), u.bytes, u.last)).collect();
        assert_eq!(seen, [
            (7, b"x\ny\n".as_slice(), 0, true),
            (1, b"a\n".as_slice(), 4, false),
            (2, b"bb\n".as_slice(), 4, false),
            (3, b"ccc\n\n".as_slice(), 4, false),
            (5, b"long line without end".as_slice(), 19, true),
        ]);
        let bad = units(io::Cursor::new(request(1, 0, b"/nonexistent/sojourn")), 4, mpsc::channel().1).into_iter().next().unwrap();
        assert!(bad.is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
