//! The access-log line parser behind `sojourn trace import clf`: a block of lines in,
//! columns out (docs/workloads.md "Importers").
//!
//! Why Rust: cutting lines with polars' string kernels ran at 540-620k lines/s on two
//! threads, the cut at the format's text alone 0.6 s per million lines per thread, and
//! pyarrow's regular-expression extraction needed 1-3 µs per line (docs/workloads.md
//! "Import speed"); a byte loop over the format's literal separators (memchr) does the
//! whole line in a fraction of that.
//!
//! Guarantees:
//!
//! - The layout is the one `sojourn.workloads.logformat` compiled (literal separators and
//!   field roles, [`Layout::from_json`]); lines are cut at the separators left to right,
//!   each at the first occurrence, exactly as `logformat.split` does.
//! - The parser is a *fast path*: a line it accepts gives the very row the Python reference
//!   (`importers._parse_lines`) gives: same method, path, time, status, size and response
//!   times. Every other line (not in the format, a bad field, or a form it does not decide
//!   itself, such as `+200` or a time in an unusual spelling) is handed back untouched as
//!   *pending*, with its number, and the Python reference decides it; so skips are counted
//!   by reason exactly as there.
//! - No input makes it panic (fuzz/fuzz_targets/logparse.rs).

pub mod block;
pub mod cli;
pub mod layout;
pub mod line;

pub use block::{parse_block, text_key, BlockOut, Numbered, Numbering};
pub use layout::{Layout, LayoutError, Role, TimeKind};
pub use line::{parse_line, Line, Scratch};
