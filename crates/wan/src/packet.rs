//! What the emulator needs to know about a packet, read with etherparse:
//! its IPv4 addresses, its connection (for per-connection loss state), and
//! whether it is a TCP SYN whose MSS option must be clamped to the pipe's MTU.
//!
//! Guarantees: `inspect` never panics on any byte string (non-IPv4 or
//! malformed packets are `None`); `clamp_mss` changes a packet only by lowering
//! the MSS option value of a SYN and keeps the TCP checksum valid.

use std::net::Ipv4Addr;

use etherparse::{IpNumber, Ipv4Slice, TcpSlice, UdpSlice};

/// A connection, in either direction: (protocol, lower endpoint, higher endpoint)
/// so both directions of one connection share a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    protocol: u8,
    a: (Ipv4Addr, u16),
    b: (Ipv4Addr, u16),
}

impl FlowKey {
    pub fn new(protocol: u8, src: (Ipv4Addr, u16), dst: (Ipv4Addr, u16)) -> Self {
        let (a, b) = if src <= dst { (src, dst) } else { (dst, src) };
        FlowKey { protocol, a, b }
    }
}

/// The fields of an IPv4 packet the emulator routes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub flow: FlowKey,
    pub tcp_syn: bool,
}

/// Read an IPv4 packet's addresses and connection; `None` for anything else.
pub fn inspect(packet: &[u8]) -> Option<PacketInfo> {
    let ip = Ipv4Slice::from_slice(packet).ok()?;
    let (src, dst) = (ip.header().source_addr(), ip.header().destination_addr());
    let payload = ip.payload();
    let protocol = payload.ip_number;
    let (ports, tcp_syn) = if payload.fragmented {
        ((0, 0), false)
    } else if protocol == IpNumber::TCP {
        let tcp = TcpSlice::from_slice(payload.payload).ok()?;
        ((tcp.source_port(), tcp.destination_port()), tcp.syn())
    } else if protocol == IpNumber::UDP {
        let udp = UdpSlice::from_slice(payload.payload).ok()?;
        ((udp.source_port(), udp.destination_port()), false)
    } else {
        ((0, 0), false)
    };
    Some(PacketInfo { src, dst, flow: FlowKey::new(protocol.0, (src, ports.0), (dst, ports.1)), tcp_syn })
}

const TCP_OPTION_END: u8 = 0;
const TCP_OPTION_NOP: u8 = 1;
const TCP_OPTION_MSS: u8 = 2;

/// Lower the MSS option of a TCP SYN to at most `max_mss` (RFC 9293 §3.7.1:
/// MSS is the largest segment the sender of the SYN can receive), so the
/// connection uses the pipe's MTU (000 Table 2 (I)). Returns whether the packet
/// changed. A complete TCP checksum is updated incrementally (RFC 1624 eq. 3);
/// a partial one (`checksum_complete` false: the kernel sums the segment later,
/// `offload`) is left as it is.
pub fn clamp_mss(packet: &mut [u8], max_mss: u16, checksum_complete: bool) -> bool {
    let Some((mss_at, checksum_at)) = mss_offsets(packet) else {
        return false;
    };
    let old = u16::from_be_bytes([packet[mss_at], packet[mss_at + 1]]);
    if old <= max_mss {
        return false;
    }
    packet[mss_at..mss_at + 2].copy_from_slice(&max_mss.to_be_bytes());
    if !checksum_complete {
        return true;
    }
    let checksum = u16::from_be_bytes([packet[checksum_at], packet[checksum_at + 1]]);
    // RFC 1624 eq. 3: HC' = ~(~HC + ~m + m')
    let mut sum = (!checksum as u32) + (!old as u32) + max_mss as u32;
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    packet[checksum_at..checksum_at + 2].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    true
}

/// Offsets of the MSS option's value and of the TCP checksum in a SYN, if both exist.
fn mss_offsets(packet: &[u8]) -> Option<(usize, usize)> {
    let ip = Ipv4Slice::from_slice(packet).ok()?;
    if ip.payload().ip_number != IpNumber::TCP || ip.payload().fragmented {
        return None;
    }
    let tcp_at = ip.header().slice().len();
    let tcp = TcpSlice::from_slice(ip.payload().payload).ok()?;
    if !tcp.syn() {
        return None;
    }
    let options_at = tcp_at + 20;
    let options = tcp.options();
    // RFC 9293 §3.1: options are kind, or kind + length + data.
    let mut i = 0;
    while i < options.len() {
        match options[i] {
            TCP_OPTION_END => return None,
            TCP_OPTION_NOP => i += 1,
            kind => {
                let len = *options.get(i + 1)? as usize;
                if len < 2 || i + len > options.len() {
                    return None;
                }
                if kind == TCP_OPTION_MSS && len == 4 {
                    return Some((options_at + i + 2, tcp_at + 16));
                }
                i += len;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;
    use proptest::prelude::*;

    fn syn(mss: u16) -> Vec<u8> {
        let builder = PacketBuilder::ipv4([10, 78, 0, 1], [10, 77, 0, 1], 64)
            .tcp(40000, 80, 12345, 64240)
            .syn()
            .options(&[
                etherparse::TcpOptionElement::MaximumSegmentSize(mss),
                etherparse::TcpOptionElement::SelectiveAcknowledgementPermitted,
                etherparse::TcpOptionElement::Noop,
                etherparse::TcpOptionElement::WindowScale(7),
            ])
            .unwrap();
        let mut out = Vec::new();
        builder.write(&mut out, &[]).unwrap();
        out
    }

    fn tcp_checksum_ok(packet: &[u8]) -> bool {
        let ip = Ipv4Slice::from_slice(packet).unwrap();
        let tcp = TcpSlice::from_slice(ip.payload().payload).unwrap();
        tcp.calc_checksum_ipv4(ip.header().source_addr().octets(), ip.header().destination_addr().octets())
            .unwrap()
            == tcp.checksum()
    }

    fn mss_of(packet: &[u8]) -> u16 {
        let (at, _) = mss_offsets(packet).unwrap();
        u16::from_be_bytes([packet[at], packet[at + 1]])
    }

    #[test]
    fn inspect_reads_addresses_ports_and_syn() {
        let info = inspect(&syn(1460)).unwrap();
        assert_eq!(info.src, Ipv4Addr::new(10, 78, 0, 1));
        assert_eq!(info.dst, Ipv4Addr::new(10, 77, 0, 1));
        assert!(info.tcp_syn);
        let reverse = FlowKey::new(6, (info.dst, 80), (info.src, 40000));
        assert_eq!(info.flow, reverse, "both directions share a flow key");
    }

    #[test]
    fn clamp_lowers_mss_and_keeps_the_checksum_valid() {
        for (mss, clamp, expect) in [(1460, 496, 496), (1460, 1460, 1460), (536, 1000, 536)] {
            let mut packet = syn(mss);
            assert!(tcp_checksum_ok(&packet));
            assert_eq!(clamp_mss(&mut packet, clamp, true), mss > clamp);
            assert_eq!(mss_of(&packet), expect);
            assert!(tcp_checksum_ok(&packet));
        }
    }

    #[test]
    fn non_syn_and_non_tcp_are_untouched() {
        let builder = PacketBuilder::ipv4([10, 78, 0, 1], [10, 77, 0, 1], 64).udp(1, 2);
        let mut udp = Vec::new();
        builder.write(&mut udp, &[1, 2, 3]).unwrap();
        let before = udp.clone();
        assert!(!clamp_mss(&mut udp, 500, true));
        assert_eq!(udp, before);
        assert!(!inspect(&udp).unwrap().tcp_syn);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = inspect(&bytes);
            let _ = clamp_mss(&mut bytes, 500, true);
        }

        #[test]
        fn truncated_syns_never_panic(cut in 0usize..44) {
            let mut packet = syn(1460);
            packet.truncate(cut);
            let _ = inspect(&packet);
            prop_assert!(!clamp_mss(&mut packet, 500, true));
        }
    }
}
