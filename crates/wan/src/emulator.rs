//! The emulator's core: packets to pipes by client address, MSS clamping,
//! release of due packets, counters. No I/O and no clock: `now` comes in.
//!
//! Guarantees: a packet whose destination is a group's address goes through
//! that group's `down` pipe, one whose source is a group's address through its
//! `up` pipe (a group address is never both ends: clients talk to the server);
//! other IPv4 packets and non-IPv4 packets pass through unchanged and are
//! counted as `unclassified`. Each pipe draws from its own generator seeded
//! from the config's seed and the pipe's position, so a run's losses depend
//! only on the seed and the packets each pipe sees.
//!
//! With vnet headers (`offload`), every buffer starts with a `virtio_net_hdr`
//! and may be a TCP GSO packet: a pipe that only delays holds it whole, a pipe
//! with loss or a rate gets its segments one by one, so losses and
//! serialization stay per packet exactly as without offload.

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::config::Config;
use crate::offload::{self, Vnet, PLAIN_VNET_HDR, VNET_HDR_LEN};
use crate::packet::{clamp_mss, inspect, FlowKey};
use crate::pipe::{Pipe, PipeCounters, Verdict, Wire};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Towards the group's clients (server -> clients).
    Down,
    /// From the group's clients.
    Up,
}

struct PipeSlot {
    group: String,
    direction: Direction,
    max_mss: u16,
    pipe: Pipe<FlowKey>,
    rng: SmallRng,
}

/// One pipe's counters, labelled.
#[derive(Debug, Clone, Serialize)]
pub struct PipeReport {
    pub group: String,
    pub direction: Direction,
    #[serde(flatten)]
    pub counters: PipeCounters,
}

/// Whether the TUN device may hand over GSO packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// On when some pipe only delays (so GSO packets can stay whole); a
    /// configuration where every pipe has loss or a rate reads single packets.
    Auto,
    Off,
}

pub struct Emulator {
    /// Pipes `2g` (down) and `2g + 1` (up) belong to group `g`.
    pipes: Vec<PipeSlot>,
    /// Buffers start with a `virtio_net_hdr` (the TUN device has IFF_VNET_HDR).
    vnet: bool,
    group_of: HashMap<Ipv4Addr, usize>,
    passthrough: VecDeque<Vec<u8>>,
    unclassified: u64,
    mss_clamped: u64,
    gso: GsoCounters,
}

/// GSO packets taken in (only with vnet headers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GsoCounters {
    /// Held whole by a pipe that only delays.
    pub whole: u64,
    /// Cut into segments for a pipe with loss or a rate.
    pub cut: u64,
}

impl Emulator {
    pub fn new(config: &Config, offload: Offload) -> anyhow::Result<Emulator> {
        config.validate()?;
        let mut pipes = Vec::new();
        let mut group_of = HashMap::new();
        for (g, group) in config.groups.iter().enumerate() {
            for (direction, d) in [(Direction::Down, &group.down), (Direction::Up, &group.up)] {
                let index = pipes.len() as u64;
                pipes.push(PipeSlot {
                    group: group.name.clone(),
                    direction,
                    max_mss: group.max_mss(),
                    pipe: Pipe::new(d.params(group.mtu)?),
                    rng: SmallRng::seed_from_u64(config.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(index)),
                });
            }
            for addr in &group.addrs {
                group_of.insert(*addr, g);
            }
        }
        let vnet = offload == Offload::Auto && pipes.iter().any(|slot| !slot.pipe.per_packet());
        let gso = GsoCounters::default();
        Ok(Emulator { pipes, vnet, group_of, passthrough: VecDeque::new(), unclassified: 0, mss_clamped: 0, gso })
    }

    /// Whether buffers carry a `virtio_net_hdr`: the TUN device must be opened with
    /// IFF_VNET_HDR and TCPv4 segmentation offload exactly when this is true.
    pub fn vnet_headers(&self) -> bool {
        self.vnet
    }

    /// Take in a buffer read from the TUN device at `now`. The verdict is the
    /// packet's, or the last segment's when a GSO packet is cut.
    pub fn ingress(&mut self, now: u64, mut packet: Vec<u8>) -> Option<Verdict> {
        let (ip_at, vnet) = if self.vnet {
            match Vnet::parse(&packet) {
                Some(vnet) => (VNET_HDR_LEN, vnet),
                None => return self.pass(packet),
            }
        } else {
            (0, Vnet::PLAIN)
        };
        let Some(info) = inspect(&packet[ip_at..]) else {
            return self.pass(packet);
        };
        let slot = match (self.group_of.get(&info.dst), self.group_of.get(&info.src)) {
            (Some(&g), _) => 2 * g,
            (None, Some(&g)) => 2 * g + 1,
            (None, None) => return self.pass(packet),
        };
        let slot = &mut self.pipes[slot];
        if info.tcp_syn && clamp_mss(&mut packet[ip_at..], slot.max_mss, !vnet.needs_csum) {
            self.mss_clamped += 1;
        }
        let Some(gso_size) = vnet.gso_size else {
            let wire = Wire::single(packet.len() - ip_at);
            return Some(slot.pipe.offer_wire(now, info.flow, packet, wire, &mut slot.rng));
        };
        if !slot.pipe.per_packet() {
            let Some((packets, bytes)) = offload::wire_size(&packet[ip_at..], gso_size) else {
                return self.pass(packet);
            };
            self.gso.whole += 1;
            return Some(slot.pipe.offer_wire(now, info.flow, packet, Wire { packets, bytes }, &mut slot.rng));
        }
        let Some(segments) = offload::segment(&packet[ip_at..], gso_size, &PLAIN_VNET_HDR) else {
            return self.pass(packet);
        };
        self.gso.cut += 1;
        let mut verdict = None;
        for segment in segments {
            let wire = Wire::single(segment.len() - VNET_HDR_LEN);
            verdict = Some(slot.pipe.offer_wire(now, info.flow, segment, wire, &mut slot.rng));
        }
        verdict
    }

    fn pass(&mut self, packet: Vec<u8>) -> Option<Verdict> {
        self.unclassified += 1;
        self.passthrough.push_back(packet);
        None
    }

    /// The earliest time a held packet is due (`Some(0)` when one can go at once).
    pub fn next_release(&self) -> Option<u64> {
        if !self.passthrough.is_empty() {
            return Some(0);
        }
        self.pipes.iter().filter_map(|slot| slot.pipe.next_release()).min()
    }

    /// Hand up to `limit` packets due at `now` to `send(scheduled_release, packet)`, earliest
    /// due first across the pipes (unclassified packets before them); returns how many went.
    /// The caller reads arrivals between batches: a packet waiting in the TUN device is
    /// stamped only when read, so reading after a whole burst of releases would stamp
    /// everything sent meanwhile (replies the written packets drew at once) alike, and the
    /// burst would come back one delay later as compact, and larger.
    pub fn release(&mut self, now: u64, limit: usize, mut send: impl FnMut(u64, &[u8])) -> usize {
        let mut sent = 0;
        while sent < limit {
            if let Some(packet) = self.passthrough.pop_front() {
                send(now, &packet);
            } else {
                // The pipe holding the earliest packet; Pipe::release says whether it is due.
                let earliest = self.pipes.iter_mut().min_by_key(|slot| slot.pipe.next_release().unwrap_or(u64::MAX));
                let Some((at, packet)) = earliest.and_then(|slot| slot.pipe.release(now)) else { break };
                send(at, &packet);
            }
            sent += 1;
        }
        sent
    }

    pub fn reports(&self) -> Vec<PipeReport> {
        self.pipes
            .iter()
            .map(|slot| PipeReport { group: slot.group.clone(), direction: slot.direction, counters: slot.pipe.counters().clone() })
            .collect()
    }

    pub fn unclassified(&self) -> u64 {
        self.unclassified
    }

    pub fn mss_clamped(&self) -> u64 {
        self.mss_clamped
    }

    pub fn gso(&self) -> GsoCounters {
        self.gso
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    const CONFIG: &str = r#"
tun = "t"
seed = 5
groups = [{ name = "near", addrs = ["10.78.0.1"] },
          { name = "far", addrs = ["10.78.1.1"], mtu = 576, down = { delay-ms = 10 }, up = { delay-ms = 20 } }]
"#;

    fn tcp(src: [u8; 4], dst: [u8; 4], syn: bool) -> Vec<u8> {
        let mut builder = PacketBuilder::ipv4(src, dst, 64).tcp(1000, 80, 1, 1000);
        if syn {
            builder = builder.syn().options(&[etherparse::TcpOptionElement::MaximumSegmentSize(1460)]).unwrap();
        }
        let mut out = Vec::new();
        builder.write(&mut out, &[]).unwrap();
        out
    }

    fn released(emu: &mut Emulator, now: u64) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        emu.release(now, usize::MAX, |at, p| out.push((at, p.to_vec())));
        out
    }

    #[test]
    fn packets_take_their_groups_pipe_per_direction() {
        let mut emu = Emulator::new(&Config::from_toml(CONFIG).unwrap(), Offload::Off).unwrap();
        let server = [10, 77, 0, 1];
        assert_eq!(emu.ingress(0, tcp(server, [10, 78, 1, 1], false)), Some(Verdict::Accepted { release_at: 10_000_000 }));
        assert_eq!(emu.ingress(0, tcp([10, 78, 1, 1], server, false)), Some(Verdict::Accepted { release_at: 20_000_000 }));
        assert_eq!(emu.ingress(0, tcp(server, [10, 78, 0, 1], false)), Some(Verdict::Accepted { release_at: 0 }));
        assert_eq!(emu.ingress(0, tcp(server, [10, 99, 0, 1], false)), None);
        assert_eq!(emu.ingress(0, vec![0x60, 0, 0]), None, "non-IPv4 passes through");
        assert_eq!(emu.next_release(), Some(0));
        assert_eq!(released(&mut emu, 0).len(), 3);
        assert_eq!(emu.next_release(), Some(10_000_000));
        assert_eq!(released(&mut emu, 15_000_000).len(), 1);
        assert_eq!(released(&mut emu, 20_000_000).len(), 1);
        assert_eq!(emu.unclassified(), 2);
        let reports = emu.reports();
        assert_eq!((reports[2].group.as_str(), reports[2].direction), ("far", Direction::Down));
        assert_eq!(reports.iter().map(|r| r.counters.forwarded).collect::<Vec<_>>(), vec![1, 0, 1, 1]);
    }

    #[test]
    fn a_limited_release_sends_the_earliest_due_across_pipes_first() {
        let mut emu = Emulator::new(&Config::from_toml(CONFIG).unwrap(), Offload::Off).unwrap();
        let server = [10, 77, 0, 1];
        emu.ingress(0, tcp([10, 78, 1, 1], server, false)); // far up: due at 20 ms
        emu.ingress(0, tcp(server, [10, 78, 1, 1], false)); // far down: due at 10 ms
        emu.ingress(5_000_000, tcp(server, [10, 78, 0, 1], false)); // near: due at 5 ms
        let mut due = Vec::new();
        assert_eq!(emu.release(25_000_000, 2, |at, _| due.push(at)), 2);
        assert_eq!(due, vec![5_000_000, 10_000_000]);
        assert_eq!(released(&mut emu, 25_000_000).iter().map(|(at, _)| *at).collect::<Vec<_>>(), vec![20_000_000]);
        assert_eq!(emu.release(25_000_000, 2, |_, _| ()), 0, "nothing left");
    }

    #[test]
    fn syns_are_clamped_to_the_groups_mtu() {
        let mut emu = Emulator::new(&Config::from_toml(CONFIG).unwrap(), Offload::Off).unwrap();
        emu.ingress(0, tcp([10, 78, 1, 1], [10, 77, 0, 1], true));
        emu.ingress(0, tcp([10, 78, 0, 1], [10, 77, 0, 1], true));
        assert_eq!(emu.mss_clamped(), 1, "only the 576-byte group clamps");
        let out = released(&mut emu, u64::MAX);
        let far_syn = &out.iter().find(|(_, p)| p[12..16] == [10, 78, 1, 1]).unwrap().1;
        assert_eq!(&far_syn[42..44], &536u16.to_be_bytes());
    }

    #[test]
    fn gso_packets_stay_whole_through_delay_and_are_cut_for_a_rate() {
        let config = r#"
tun = "t"
groups = [{ name = "delay", addrs = ["10.78.0.1"], down = { delay-ms = 10 } },
          { name = "rate", addrs = ["10.78.1.1"], down = { rate-bps = 12000000 } }]
"#;
        let mut emu = Emulator::new(&Config::from_toml(config).unwrap(), Offload::Auto).unwrap();
        assert!(emu.vnet_headers(), "a delay-only pipe turns offload on");
        let gso = |dst: [u8; 4]| {
            let mut ip = Vec::new();
            PacketBuilder::ipv4([10, 77, 0, 1], dst, 64).tcp(80, 40000, 1, 1000).write(&mut ip, &[7; 4000]).unwrap();
            let mut vnet = vec![1, 1, 52, 0];
            vnet.extend_from_slice(&1448u16.to_le_bytes());
            vnet.extend_from_slice(&[34, 0, 16, 0]);
            [vnet, ip].concat()
        };
        emu.ingress(0, gso([10, 78, 0, 1]));
        emu.ingress(0, gso([10, 78, 1, 1]));
        let out = released(&mut emu, u64::MAX);
        assert_eq!(out.len(), 1 + 3, "whole through the delay, three segments through the rate");
        assert_eq!(emu.gso(), GsoCounters { whole: 1, cut: 1 });
        assert_eq!(out.iter().filter(|(_, p)| p[1] == 1).count(), 1, "only the whole one keeps its GSO type");
        assert!(out.iter().filter(|(_, p)| p[1] == 0).all(|(_, p)| p.len() <= VNET_HDR_LEN + 1448 + 40));
        let reports = emu.reports();
        assert_eq!((reports[0].counters.forwarded, reports[0].counters.forwarded_bytes), (3, 4000 + 3 * 40));
        assert_eq!((reports[2].counters.forwarded, reports[2].counters.forwarded_bytes), (3, 4000 + 3 * 40));
        let only_rate = r#"
tun = "t"
groups = [{ name = "r", addrs = ["10.78.1.1"], down = { rate-bps = 1000000 }, up = { rate-bps = 1000000 } }]
"#;
        assert!(!Emulator::new(&Config::from_toml(only_rate).unwrap(), Offload::Auto).unwrap().vnet_headers());
    }
}
