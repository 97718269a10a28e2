//! Maps keyed by the generator's own integer ids (request, connection, client, session ids).
//!
//! The keys are not attacker-controlled, so SipHash's flood resistance buys nothing and
//! costs a few per cent of a capacity run; Fibonacci hashing (Knuth, TAOCP 6.4: multiply by
//! 2^64/φ) spreads sequential ids over all bits, which hashbrown's control bytes need.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte) ^ self.0.rotate_left(8));
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.write_u64(u64::from(id));
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = (self.0 ^ id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_differ_in_the_top_bits() {
        let top = |id: u64| {
            let mut hasher = IdHasher::default();
            hasher.write_u64(id);
            hasher.finish() >> 57
        };
        let distinct: std::collections::HashSet<u64> = (0..1000).map(top).collect();
        assert!(distinct.len() > 100, "{}", distinct.len());
    }
}
