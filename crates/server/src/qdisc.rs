//! The server's side of kernel-level SRPT (000 §3): which HTB class a socket's
//! `SO_PRIORITY` names, so `serve --kernel-bands` can put each response in the band of
//! its remaining bytes. ("Bands" are the size ranges, `sojourn_sched::Bands`; the
//! classes that carry them are built by the testbed.)
//!
//! The contract with the qdisc's one builder, python/sojourn/testbed/uplink.py
//! (`uplink_commands`): an HTB root qdisc `1:` whose band `i` is the leaf class
//! `1:(0x10 + i)` (`1:10` ... `1:17` in tc's hex), at priority `i`, and whose default
//! class `1:20` takes traffic that names no band. A socket whose `SO_PRIORITY` is
//! `(major << 16) | minor` of a class is classified straight into it (tc-htb(8),
//! "CLASSIFICATION": skb->priority naming a class); [`so_priority`] is that number.

/// The qdisc handle (major number) of the uplink's root HTB qdisc.
const HTB_MAJOR: u16 = 1;
/// Band `i` is class `1:(BAND_MINOR_BASE + i)`.
const BAND_MINOR_BASE: u16 = 0x10;

/// The `SO_PRIORITY` that classifies a socket into band `band`'s HTB class (0 = highest priority).
pub fn so_priority(band: usize) -> u32 {
    (u32::from(HTB_MAJOR) << 16) | u32::from(BAND_MINOR_BASE + band as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn so_priority_names_the_band_class_the_testbed_builds() {
        // uplink.py's band_class(0) is "1:10", band_class(4) "1:14".
        assert_eq!(so_priority(0), 0x0001_0010);
        assert_eq!(so_priority(4), 0x0001_0014);
    }
}
