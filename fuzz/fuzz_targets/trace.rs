//! The load generator's trace reader (docs/formats.md trace.csv) on arbitrary bytes:
//! `cargo +nightly fuzz run trace` (from fuzz/). Checks that validating and replaying any
//! input never panics: a bad trace is an error naming its line, not a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sojourn_load::workload::{TraceReplay, Workload};

fuzz_target!(|data: &[u8]| {
    let _ = TraceReplay::check(data, 1.0, None);
    if let Ok(mut replay) = TraceReplay::new(data, 0.5, Some(1_000_000_000)) {
        let mut due = Vec::new();
        let _ = replay.poll_due(u64::MAX, &mut due);
    }
});
