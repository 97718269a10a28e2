//! Request parsing on arbitrary bytes: `cargo +nightly fuzz run request` (from fuzz/).
//! Checks that parsing never panics, never claims more bytes than it was given,
//! and that whatever path a parsed target resolves to stays under the root.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sojourn_http::{parse_request, resolve_target, select, Limits, Representation};
use std::path::Component;
use std::time::{Duration, UNIX_EPOCH};

fuzz_target!(|data: &[u8]| {
    let limits = Limits { max_head_bytes: 1024, max_headers: 16, max_target_bytes: 256 };
    if let Ok(Some((request, used))) = parse_request(data, &limits) {
        assert!(used <= data.len());
        if let Ok(resolved) = resolve_target(&request.target) {
            assert!(resolved.relative.components().all(|c| matches!(c, Component::Normal(_))));
        }
        let file = Representation::new(1000, UNIX_EPOCH + Duration::from_secs(1_000_000));
        if let sojourn_http::Selection::Range { start, end } = select(&request, &file) {
            assert!(start <= end && end < file.size);
        }
    }
});
