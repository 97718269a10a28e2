//! The load generator's response reader on arbitrary bytes (any server's, fed in pieces):
//! `cargo +nightly fuzz run response` (from fuzz/). Checks that it never panics, never
//! consumes more than it was fed, reports body ranges inside the fed slice, and once
//! complete refuses more bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sojourn_load::response::ResponseReader;

fuzz_target!(|data: &[u8]| {
    // The first byte chooses where the input is cut into two reads.
    let Some((&cut, bytes)) = data.split_first() else { return };
    let cut = (cut as usize).min(bytes.len());
    let mut reader = ResponseReader::new();
    let mut complete = false;
    for piece in [&bytes[..cut], &bytes[cut..]] {
        let mut rest = piece;
        while !rest.is_empty() && !complete {
            match reader.feed(rest) {
                Ok((consumed, progress)) => {
                    assert!(consumed <= rest.len());
                    assert!(progress.body.start <= progress.body.end && progress.body.end <= rest.len());
                    complete = progress.complete;
                    if consumed == 0 && !complete {
                        break;
                    }
                    rest = &rest[consumed..];
                }
                Err(_) => return,
            }
        }
    }
    if complete {
        assert!(reader.feed(b"x").is_err());
    } else {
        let _ = reader.finish_at_eof();
    }
});
