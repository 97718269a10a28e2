//! The deterministic docroot content rule of docs/formats.md ("Trace"): with
//! `h = FNV-1a-64(path bytes)`, byte `i` of the object at `path` is
//! `((h mod 251) + (i mod 251)) mod 251`. The load generator checks bodies against it
//! without reading the docroot; `sojourn.workloads.docroot` writes files by the same rule.

/// FNV-1a, 64 bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Checks a body arriving in pieces against the content rule for one path.
/// Guarantee: `feed` over any split of a body gives the same verdict as over the whole.
#[derive(Debug, Clone)]
pub struct ContentCheck {
    base: u8,
    offset: u64,
    first_mismatch: Option<u64>,
}

impl ContentCheck {
    pub fn new(path: &str) -> Self {
        ContentCheck { base: (fnv1a64(path.as_bytes()) % 251) as u8, offset: 0, first_mismatch: None }
    }

    /// The byte the rule puts at `index` of this object.
    pub fn expected_byte(&self, index: u64) -> u8 {
        ((u64::from(self.base) + index % 251) % 251) as u8
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        if self.first_mismatch.is_none() {
            let mut phase = self.offset % 251;
            for (i, &byte) in chunk.iter().enumerate() {
                let expected = ((u64::from(self.base) + phase) % 251) as u8;
                if byte != expected {
                    self.first_mismatch = Some(self.offset + i as u64);
                    break;
                }
                phase = if phase == 250 { 0 } else { phase + 1 };
            }
        }
        self.offset += chunk.len() as u64;
    }

    /// Offset of the first byte that breaks the rule, if any.
    pub fn first_mismatch(&self) -> Option<u64> {
        self.first_mismatch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn test_vector_from_formats_md() {
        // docs/formats.md: path `/a` gives h mod 251 = 246, the object starts f6 f7 f8, byte 5 is 00.
        assert_eq!(fnv1a64(b"/a") % 251, 246);
        let check = ContentCheck::new("/a");
        assert_eq!([check.expected_byte(0), check.expected_byte(1), check.expected_byte(2)], [0xf6, 0xf7, 0xf8]);
        assert_eq!(check.expected_byte(5), 0x00);
    }

    #[test]
    fn detects_the_first_wrong_byte() {
        let reference = ContentCheck::new("/o/1.bin");
        let mut body: Vec<u8> = (0..1000).map(|i| reference.expected_byte(i)).collect();
        let mut check = ContentCheck::new("/o/1.bin");
        check.feed(&body);
        assert_eq!(check.first_mismatch(), None);
        body[700] ^= 1;
        let mut check = ContentCheck::new("/o/1.bin");
        check.feed(&body);
        assert_eq!(check.first_mismatch(), Some(700));
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_verdict(len in 0usize..2000, cut in 0usize..2000, flip in proptest::option::of(0usize..2000)) {
            let reference = ContentCheck::new("/x");
            let mut body: Vec<u8> = (0..len as u64).map(|i| reference.expected_byte(i)).collect();
            if let Some(at) = flip.filter(|&at| at < len) { body[at] ^= 0x80; }
            let cut = cut.min(len);
            let mut whole = ContentCheck::new("/x");
            whole.feed(&body);
            let mut split = ContentCheck::new("/x");
            split.feed(&body[..cut]);
            split.feed(&body[cut..]);
            prop_assert_eq!(whole.first_mismatch(), split.first_mismatch());
            prop_assert_eq!(whole.first_mismatch(), flip.filter(|&at| at < len).map(|at| at as u64));
        }
    }
}
