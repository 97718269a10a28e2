//! `sojourn-engine logparse --layout JSON`: blocks in on stdin, columns out on stdout, one
//! reply per block, in order. What `sojourn.workloads.importers` runs; not meant for people.
//!
//! A request is a u64 (little-endian) byte length, an i64 first line number, then the
//! block; a reply is the block's header and sections ([`crate::block`]). End of input ends
//! the program.

use crate::block::{parse_block, BlockOut};
use crate::layout::Layout;
use anyhow::Context;
use std::io::{self, BufWriter, Read, Write};

#[derive(clap::Args, Debug)]
pub struct LogparseArgs {
    /// The log format as `sojourn.workloads.logformat` compiles it (JSON; see crates/logparse/src/layout.rs).
    #[arg(long)]
    pub layout: String,
}

/// Reads a request's 16-byte head; `None` at a clean end of input.
fn head(input: &mut impl Read) -> io::Result<Option<(u64, i64)>> {
    let mut buf = [0u8; 16];
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..])? {
            0 if got == 0 => return Ok(None),
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "input ends inside a request head")),
            n => got += n,
        }
    }
    let length = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    let first = i64::from_le_bytes(buf[8..].try_into().expect("8 bytes"));
    Ok(Some((length, first)))
}

pub fn run(args: LogparseArgs) -> anyhow::Result<()> {
    let layout = Layout::from_json(&args.layout).context("--layout")?;
    let mut input = io::stdin().lock();
    let mut output = BufWriter::with_capacity(1 << 20, io::stdout().lock());
    let mut block = Vec::new();
    let mut out = BlockOut::default();
    while let Some((length, first)) = head(&mut input)? {
        block.resize(usize::try_from(length).context("block length")?, 0);
        input.read_exact(&mut block).context("reading a block")?;
        parse_block(&layout, &block, first, &mut out);
        out.write_to(&mut output)?;
        output.flush()?;
    }
    Ok(())
}
