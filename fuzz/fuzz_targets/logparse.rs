//! The access-log parser behind `sojourn trace import clf` (crates/logparse) on arbitrary
//! bytes: `cargo +nightly fuzz run logparse` (from fuzz/). The first byte picks a layout
//! (Common with anything after, Combined, an nginx format with forwarded-for and upstream
//! times, an epoch-time format); the rest is a block of lines. Checks that no block makes
//! it panic, and that every line is counted once: as a row, as pending, or as blank.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sojourn_logparse::{parse_block, BlockOut, Layout, Numbering};

const LAYOUTS: [&str; 4] = [
    r#"{"separators": ["", " ", " ", " [", "] \"", "\" ", " ", ""], "open_end": true,
        "fields": [{"role": "host"}, {"role": ""}, {"role": ""}, {"role": "time", "time": "clf"},
                   {"role": "request"}, {"role": "status"}, {"role": "size"}]}"#,
    r#"{"separators": ["", " ", " ", " [", "] \"", "\" ", " ", " \"", "\" \"", "\""],
        "fields": [{"role": "host"}, {"role": ""}, {"role": ""}, {"role": "time", "time": "clf"},
                   {"role": "request"}, {"role": "status"}, {"role": "size"}, {"role": ""}, {"role": ""}]}"#,
    r#"{"separators": ["", " - ", " [", "] \"", "\" ", " ", " \"", "\" ", " ", ""],
        "fields": [{"role": "host"}, {"role": ""}, {"role": "time", "time": "iso"}, {"role": "request"},
                   {"role": "status"}, {"role": "size"}, {"role": "forwarded_for"},
                   {"role": "response_s", "unit": "1.0"}, {"role": "upstream_response_s"}]}"#,
    r#"{"separators": ["", " ", " \"", " ", "\" ", " ", ""],
        "fields": [{"role": "host"}, {"role": "time", "time": "epoch", "unit": "0.001"}, {"role": "method"},
                   {"role": "path"}, {"role": "status"}, {"role": "size"}]}"#,
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, block)) = data.split_first() else { return };
    let layout = Layout::from_json(LAYOUTS[usize::from(pick) % LAYOUTS.len()]).expect("the layouts above are valid");
    let mut out = BlockOut::default();
    parse_block(&layout, block, 1, &mut out);
    let lines = block.split(|&b| b == b'\n').count() - usize::from(block.is_empty() || block.ends_with(b"\n"));
    assert!(out.entries as usize <= lines);
    assert_eq!(out.rows() + out.pending_numbers.len(), out.entries as usize);
    assert!(out.time_s.iter().all(|t| t.is_finite()));
    let mut bytes = Vec::new();
    let numbered = Numbering::default().number(&out);
    out.write_to(&numbered, &mut bytes).expect("writing to memory");
});
