//! Segmentation offload on the TUN device (IFF_VNET_HDR + TUNSETOFFLOAD): each
//! packet read or written carries a `virtio_net_hdr` (include/uapi/linux/virtio_net.h,
//! the legacy 10-byte form, little-endian on the hosts we run on), and a TCP
//! sender's segments can arrive as one GSO packet of up to 64 KiB.
//!
//! A pipe that only delays keeps a GSO packet whole (it is released at one time,
//! as its segments would be); a pipe with loss or a rate must see each segment,
//! so `segment` cuts the packet the way the kernel's TSO would (RFC 9293 §3.4
//! sequence numbers, FIN and PSH on the last segment only, CWR on the first only
//! per RFC 3168 §6.1.2 as Linux's tcp_gso_segment does) and each segment gets
//! full IPv4 and TCP checksums.
//!
//! Guarantees: `Vnet::parse` and `segment` never panic on any bytes; the
//! segments' payloads concatenated are the original payload.

use etherparse::{Ipv4Header, TcpHeader};

/// Size of the legacy `struct virtio_net_hdr` (the TUN device's default vnet header size).
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the TCP checksum field holds only the
/// pseudo-header sum; the kernel completes it from `csum_start`.
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;

/// The fields of a `virtio_net_hdr` the emulator acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vnet {
    /// The TCP checksum is partial (completed by the kernel): MSS clamping must
    /// not adjust it.
    pub needs_csum: bool,
    /// Payload bytes per segment of a TCPv4 GSO packet; `None` for a single packet.
    pub gso_size: Option<u16>,
}

impl Vnet {
    /// A single packet with complete checksums (what `PLAIN_VNET_HDR` says).
    pub const PLAIN: Vnet = Vnet { needs_csum: false, gso_size: None };

    /// Read the header in front of a packet; `None` if too short or of a GSO
    /// type the device was not offered (only TCPv4 is).
    pub fn parse(bytes: &[u8]) -> Option<Vnet> {
        let header = bytes.get(..VNET_HDR_LEN)?;
        let gso_size = u16::from_le_bytes([header[4], header[5]]);
        let gso_size = match header[1] {
            GSO_NONE => None,
            GSO_TCPV4 if gso_size > 0 => Some(gso_size),
            _ => return None,
        };
        Some(Vnet { needs_csum: header[0] & F_NEEDS_CSUM != 0, gso_size })
    }
}

/// A plain packet's vnet header: no GSO, checksums complete.
pub const PLAIN_VNET_HDR: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

/// A TCPv4 GSO packet read apart: its headers (repeated in every segment) and
/// its payload, up to the IPv4 total length.
struct Tcp4<'a> {
    ip: Ipv4Header,
    tcp: TcpHeader,
    payload: &'a [u8],
}

impl<'a> Tcp4<'a> {
    fn split(ip_packet: &'a [u8]) -> Option<Tcp4<'a>> {
        let (ip, rest) = Ipv4Header::from_slice(ip_packet).ok()?;
        let (tcp, _) = TcpHeader::from_slice(rest).ok()?;
        let end = usize::from(ip.total_len).min(ip_packet.len());
        let payload = ip_packet.get(ip.header_len() + tcp.header_len()..end)?;
        Some(Tcp4 { ip, tcp, payload })
    }

    fn headers_len(&self) -> usize {
        self.ip.header_len() + self.tcp.header_len()
    }

    /// Segments of at most `gso_size` payload bytes (one, even without payload).
    fn segments(&self, gso_size: u16) -> usize {
        self.payload.len().div_ceil(usize::from(gso_size)).max(1)
    }
}

/// How a GSO packet appears on the wire: the number of segments and their total
/// bytes (each repeats the IPv4 and TCP headers). `None` if it is not TCPv4.
pub fn wire_size(ip_packet: &[u8], gso_size: u16) -> Option<(u64, u64)> {
    let packet = Tcp4::split(ip_packet)?;
    let segments = packet.segments(gso_size);
    Some((segments as u64, (packet.payload.len() + segments * packet.headers_len()) as u64))
}

/// Cut a TCPv4 GSO packet (without its vnet header) into packets of at most
/// `gso_size` payload bytes, each with complete checksums and starting with
/// `prefix` (the vnet header the TUN device expects back, or nothing). `None`
/// if it is not a well-formed TCPv4 packet.
pub fn segment(ip_packet: &[u8], gso_size: u16, prefix: &[u8]) -> Option<Vec<Vec<u8>>> {
    let packet = Tcp4::split(ip_packet)?;
    let (headers, count, size) = (packet.headers_len(), packet.segments(gso_size), usize::from(gso_size));
    let Tcp4 { ip, tcp, payload } = packet;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let chunk = &payload[(i * size).min(payload.len())..((i + 1) * size).min(payload.len())];
        let mut seg_ip = ip.clone();
        seg_ip.total_len = u16::try_from(headers + chunk.len()).ok()?;
        seg_ip.identification = ip.identification.wrapping_add(i as u16);
        let mut seg_tcp = tcp.clone();
        // The payload fits the 16-bit IPv4 length, so the offset fits a u32.
        seg_tcp.sequence_number = tcp.sequence_number.wrapping_add((i * size) as u32);
        seg_tcp.fin &= i == count - 1;
        seg_tcp.psh &= i == count - 1;
        seg_tcp.cwr &= i == 0;
        seg_tcp.checksum = seg_tcp.calc_checksum_ipv4(&seg_ip, chunk).ok()?;
        let mut bytes = Vec::with_capacity(prefix.len() + headers + chunk.len());
        bytes.extend_from_slice(prefix);
        seg_ip.write(&mut bytes).ok()?;
        seg_tcp.write(&mut bytes).ok()?;
        bytes.extend_from_slice(chunk);
        out.push(bytes);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{Ipv4Slice, PacketBuilder, TcpSlice};
    use proptest::prelude::*;

    fn gso_packet(payload: &[u8], fin: bool, cwr: bool) -> Vec<u8> {
        let mut builder = PacketBuilder::ipv4([10, 77, 0, 1], [10, 78, 0, 1], 64)
            .tcp(80, 40000, 4_294_967_000, 500)
            .psh();
        if fin {
            builder = builder.fin();
        }
        if cwr {
            builder = builder.cwr();
        }
        let mut out = Vec::new();
        builder.write(&mut out, payload).unwrap();
        out
    }

    fn vnet(flags: u8, gso_type: u8, gso_size: u16) -> Vec<u8> {
        let mut header = vec![flags, gso_type, 52, 0];
        header.extend_from_slice(&gso_size.to_le_bytes());
        header.extend_from_slice(&[34, 0, 16, 0]);
        header
    }

    #[test]
    fn vnet_headers_are_read_and_unknown_gso_types_refused() {
        assert_eq!(
            Vnet::parse(&vnet(1, 1, 1448)),
            Some(Vnet {
                needs_csum: true,
                gso_size: Some(1448)
            })
        );
        assert_eq!(
            Vnet::parse(&vnet(0, 0, 0)),
            Some(Vnet {
                needs_csum: false,
                gso_size: None
            })
        );
        assert_eq!(
            Vnet::parse(&vnet(1, 4, 1448)),
            None,
            "TCPv6 GSO is not offered"
        );
        assert_eq!(
            Vnet::parse(&vnet(1, 1, 0)),
            None,
            "a GSO packet needs a segment size"
        );
        assert_eq!(Vnet::parse(&[0; 9]), None);
    }

    #[test]
    fn segments_carry_consecutive_sequence_numbers_and_flags_at_the_ends() {
        let payload: Vec<u8> = (0..4000u32).map(|i| i as u8).collect();
        let packet = gso_packet(&payload, true, true);
        assert_eq!(wire_size(&packet, 1448), Some((3, 4000 + 3 * 40)));
        let segments = segment(&packet, 1448, &[]).unwrap();
        assert_eq!(segments.len(), 3);
        let first_id = Ipv4Slice::from_slice(&packet)
            .unwrap()
            .header()
            .identification();
        let mut seen = Vec::new();
        for (i, seg) in segments.iter().enumerate() {
            let ip = Ipv4Slice::from_slice(seg).unwrap();
            let tcp = TcpSlice::from_slice(ip.payload().payload).unwrap();
            assert_eq!(
                tcp.sequence_number(),
                4_294_967_000u32.wrapping_add(1448 * i as u32),
                "wraps past 2^32"
            );
            assert_eq!((tcp.fin(), tcp.psh(), tcp.cwr()), (i == 2, i == 2, i == 0));
            assert_eq!(usize::from(ip.header().total_len()), seg.len());
            assert_eq!(
                ip.header().identification(),
                first_id.wrapping_add(i as u16)
            );
            let src = ip.header().source_addr().octets();
            let dst = ip.header().destination_addr().octets();
            assert_eq!(tcp.calc_checksum_ipv4(src, dst).unwrap(), tcp.checksum());
            assert_eq!(
                ip.header().to_header().calc_header_checksum(),
                ip.header().header_checksum()
            );
            seen.extend_from_slice(tcp.payload());
        }
        assert_eq!(seen, payload);
    }

    proptest! {
        #[test]
        fn segmentation_keeps_every_payload_byte_in_order(len in 0usize..20_000, gso_size in 1u16..3000) {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let segments = segment(&gso_packet(&payload, false, false), gso_size, &[]).unwrap();
            let (count, wire) = wire_size(&gso_packet(&payload, false, false), gso_size).unwrap();
            prop_assert_eq!(segments.len() as u64, count);
            prop_assert_eq!(segments.iter().map(|s| s.len() as u64).sum::<u64>(), wire);
            let joined: Vec<u8> = segments.iter().flat_map(|s| s[40..].to_vec()).collect();
            prop_assert_eq!(joined, payload);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), gso_size in 1u16..2000) {
            let _ = Vnet::parse(&bytes);
            let _ = wire_size(&bytes, gso_size);
            let _ = segment(&bytes, gso_size, &PLAIN_VNET_HDR);
        }
    }
}
