//! One direction of one client group's link: loss -> bounded drop-tail queue
//! -> link rate -> propagation delay (+ jitter).
//!
//! A pure core: every call takes `now` (nanoseconds on the caller's monotonic
//! clock) and no call reads a clock or does I/O, so tests drive it in virtual
//! time. Guarantees:
//! - a packet accepted at `now` is released at or after
//!   `max(now, previous serialization end) + len * 8 / rate + delay (+ jitter)`;
//! - without `reorder`, packets are released in the order they were accepted
//!   (jitter is clamped so a packet never overtakes the one before it);
//! - the queue in front of the link never holds more than its byte and packet
//!   limits (the packet being serialized counts, as in a drop-tail router);
//! - every offered packet is counted exactly once: forwarded (when released),
//!   lost, or dropped by the queue.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::Hash;

use rand::Rng;
use serde::Serialize;

use crate::loss::{LossModel, LossStage};

pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Parameters of one pipe (validated by `config`).
#[derive(Debug, Clone, PartialEq)]
pub struct PipeParams {
    pub loss: LossModel,
    /// Link rate in bits per second; `None` sends without serialization delay.
    pub rate_bps: Option<u64>,
    pub queue_bytes: u64,
    pub queue_packets: u64,
    pub delay_ns: u64,
    /// Each packet's delay is `delay_ns` plus a uniform draw in `[-jitter_ns, jitter_ns]`, at least 0.
    pub jitter_ns: u64,
    pub reorder: bool,
}

impl PipeParams {
    /// The default queue limit: the bandwidth-delay product of the pipe's rate and
    /// the round trip `rtt_ns`, but never below 100 full-size packets, so a small
    /// product does not silently make a tiny buffer.
    pub fn default_queue_bytes(rate_bps: Option<u64>, rtt_ns: u64) -> u64 {
        let bdp = rate_bps.map_or(0, |rate| (rate as u128 * rtt_ns as u128 / 8 / NANOS_PER_SEC as u128) as u64);
        bdp.max(100 * 1500)
    }
}

/// Counters of one pipe.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PipeCounters {
    pub forwarded: u64,
    pub forwarded_bytes: u64,
    pub loss_drops: u64,
    pub queue_drops: u64,
    pub queue_peak_bytes: u64,
    pub queue_peak_packets: u64,
    /// Accepted but not yet released (in the queue or in propagation).
    pub in_flight: u64,
    /// The largest `in_flight` seen.
    pub in_flight_peak: u64,
}

/// What a held packet is on the wire: one packet, or the segments of a GSO
/// packet (`offload`) with their headers counted once each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wire {
    pub packets: u64,
    pub bytes: u64,
}

impl Wire {
    pub fn single(len: usize) -> Wire {
        Wire { packets: 1, bytes: len as u64 }
    }
}

/// What happened to an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accepted { release_at: u64 },
    Lost,
    QueueFull,
}

/// A packet in propagation, ordered by release time, then by acceptance (FIFO among equal times).
#[derive(Debug)]
struct Held {
    release_at: u64,
    seq: u64,
    packet: Vec<u8>,
    wire: Wire,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.release_at, self.seq) == (other.release_at, other.seq)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.release_at, self.seq).cmp(&(other.release_at, other.seq))
    }
}

#[derive(Debug)]
pub struct Pipe<F> {
    params: PipeParams,
    loss: LossStage<F>,
    /// Serialization end times and lengths of packets still in the queue.
    queue: VecDeque<(u64, u64)>,
    queue_bytes: u64,
    link_free_at: u64,
    last_release_at: u64,
    /// Packets in propagation, earliest release first.
    delay_line: BinaryHeap<Reverse<Held>>,
    seq: u64,
    counters: PipeCounters,
}

impl<F: Hash + Eq + Copy> Pipe<F> {
    pub fn new(params: PipeParams) -> Self {
        Pipe {
            loss: LossStage::new(params.loss),
            params,
            queue: VecDeque::new(),
            queue_bytes: 0,
            link_free_at: 0,
            last_release_at: 0,
            delay_line: BinaryHeap::new(),
            seq: 0,
            counters: PipeCounters::default(),
        }
    }

    pub fn counters(&self) -> &PipeCounters {
        &self.counters
    }

    /// Whether this pipe acts on each packet (loss draws, serialization at a
    /// rate), so a GSO packet must be cut into its segments before `offer_wire`;
    /// a pipe that only delays can hold it whole.
    pub fn per_packet(&self) -> bool {
        self.params.loss != LossModel::None || self.params.rate_bps.is_some()
    }

    /// Offer a buffer of connection `flow` at `now` that is `wire` on the link
    /// (several packets only when `!per_packet()`; the buffer may also hold a vnet
    /// header): the rate, queue limits and counters use `wire`.
    pub fn offer_wire<R: Rng>(&mut self, now: u64, flow: F, packet: Vec<u8>, wire: Wire, rng: &mut R) -> Verdict {
        if self.loss.lose(flow, rng) {
            self.counters.loss_drops += 1;
            return Verdict::Lost;
        }
        let len = wire.bytes;
        let sent_at = match self.params.rate_bps {
            None => now,
            Some(rate) => {
                self.drain_queue(now);
                if self.queue_bytes + len > self.params.queue_bytes
                    || self.queue.len() as u64 + 1 > self.params.queue_packets
                {
                    self.counters.queue_drops += 1;
                    return Verdict::QueueFull;
                }
                let start = self.link_free_at.max(now);
                let end = start + (len * 8 * NANOS_PER_SEC).div_ceil(rate);
                self.link_free_at = end;
                self.queue.push_back((end, len));
                self.queue_bytes += len;
                self.counters.queue_peak_bytes = self.counters.queue_peak_bytes.max(self.queue_bytes);
                self.counters.queue_peak_packets = self.counters.queue_peak_packets.max(self.queue.len() as u64);
                end
            }
        };
        let mut release_at = sent_at + self.params.delay_ns;
        if self.params.jitter_ns > 0 {
            let j = self.params.jitter_ns as i64;
            release_at = (release_at as i64 + rng.gen_range(-j..=j)).max(sent_at as i64) as u64;
        }
        if !self.params.reorder {
            release_at = release_at.max(self.last_release_at);
        }
        self.last_release_at = self.last_release_at.max(release_at);
        self.delay_line.push(Reverse(Held { release_at, seq: self.seq, packet, wire }));
        self.seq += 1;
        self.counters.in_flight += wire.packets;
        self.counters.in_flight_peak = self.counters.in_flight_peak.max(self.counters.in_flight);
        Verdict::Accepted { release_at }
    }

    fn drain_queue(&mut self, now: u64) {
        while let Some(&(end, len)) = self.queue.front() {
            if end > now {
                break;
            }
            self.queue.pop_front();
            self.queue_bytes -= len;
        }
    }

    /// When the next packet is due, if any is held.
    pub fn next_release(&self) -> Option<u64> {
        self.delay_line.peek().map(|Reverse(held)| held.release_at)
    }

    /// The next packet due at or before `now`, with its scheduled release time.
    pub fn release(&mut self, now: u64) -> Option<(u64, Vec<u8>)> {
        if self.next_release()? > now {
            return None;
        }
        let Reverse(Held { release_at, packet, wire, .. }) = self.delay_line.pop()?;
        self.counters.forwarded += wire.packets;
        self.counters.forwarded_bytes += wire.bytes;
        self.counters.in_flight -= wire.packets;
        Some((release_at, packet))
    }
}

#[cfg(test)]
impl<F: Hash + Eq + Copy> Pipe<F> {
    /// Offer one IP packet, nothing else in the buffer.
    fn offer<R: Rng>(&mut self, now: u64, flow: F, packet: Vec<u8>, rng: &mut R) -> Verdict {
        let wire = Wire::single(packet.len());
        self.offer_wire(now, flow, packet, wire, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    const MS: u64 = 1_000_000;

    fn params() -> PipeParams {
        PipeParams {
            loss: LossModel::None,
            rate_bps: None,
            queue_bytes: 150_000,
            queue_packets: 1000,
            delay_ns: 0,
            jitter_ns: 0,
            reorder: false,
        }
    }

    fn drain(pipe: &mut Pipe<u32>, now: u64) -> Vec<(u64, Vec<u8>)> {
        std::iter::from_fn(|| pipe.release(now)).collect()
    }

    #[test]
    fn delay_only_releases_exactly_after_the_delay() {
        let mut pipe = Pipe::new(PipeParams { delay_ns: 50 * MS, ..params() });
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(pipe.offer(10, 0u32, vec![1; 100], &mut rng), Verdict::Accepted { release_at: 10 + 50 * MS });
        assert!(pipe.release(10 + 50 * MS - 1).is_none());
        assert_eq!(pipe.next_release(), Some(10 + 50 * MS));
        let out = drain(&mut pipe, 10 + 50 * MS);
        assert_eq!(out.len(), 1);
        assert_eq!(pipe.counters().forwarded, 1);
        assert_eq!(pipe.counters().in_flight, 0);
    }

    #[test]
    fn rate_serializes_back_to_back_packets() {
        // 1500 bytes at 12 Mbit/s take exactly 1 ms.
        let mut pipe = Pipe::new(PipeParams { rate_bps: Some(12_000_000), ..params() });
        let mut rng = SmallRng::seed_from_u64(1);
        let releases: Vec<Verdict> = (0..3).map(|_| pipe.offer(0, 0u32, vec![0; 1500], &mut rng)).collect();
        assert_eq!(
            releases,
            vec![
                Verdict::Accepted { release_at: MS },
                Verdict::Accepted { release_at: 2 * MS },
                Verdict::Accepted { release_at: 3 * MS }
            ]
        );
        assert_eq!(pipe.counters().queue_peak_packets, 3);
        // An idle link starts serializing at arrival.
        assert_eq!(pipe.offer(10 * MS, 0, vec![0; 1500], &mut rng), Verdict::Accepted { release_at: 11 * MS });
    }

    #[test]
    fn full_queue_drops_the_tail() {
        let mut pipe = Pipe::new(PipeParams { rate_bps: Some(12_000_000), queue_packets: 2, ..params() });
        let mut rng = SmallRng::seed_from_u64(1);
        assert!(matches!(pipe.offer(0, 0u32, vec![0; 1500], &mut rng), Verdict::Accepted { .. }));
        assert!(matches!(pipe.offer(0, 0, vec![0; 1500], &mut rng), Verdict::Accepted { .. }));
        assert_eq!(pipe.offer(0, 0, vec![0; 1500], &mut rng), Verdict::QueueFull);
        // After the first packet is serialized there is room again.
        assert!(matches!(pipe.offer(MS, 0, vec![0; 1500], &mut rng), Verdict::Accepted { .. }));
        assert_eq!(pipe.counters().queue_drops, 1);
        assert_eq!(pipe.counters().queue_peak_packets, 2);
    }

    #[test]
    fn byte_limit_counts_bytes() {
        let mut pipe = Pipe::new(PipeParams { rate_bps: Some(8_000), queue_bytes: 2000, ..params() });
        let mut rng = SmallRng::seed_from_u64(1);
        assert!(matches!(pipe.offer(0, 0u32, vec![0; 1500], &mut rng), Verdict::Accepted { .. }));
        assert_eq!(pipe.offer(0, 0, vec![0; 600], &mut rng), Verdict::QueueFull);
        assert!(matches!(pipe.offer(0, 0, vec![0; 500], &mut rng), Verdict::Accepted { .. }));
        assert_eq!(pipe.counters().queue_peak_bytes, 2000);
    }

    #[test]
    fn default_queue_is_the_bdp_but_never_small() {
        assert_eq!(PipeParams::default_queue_bytes(None, 100 * MS), 150_000);
        assert_eq!(PipeParams::default_queue_bytes(Some(1_000_000), 100 * MS), 150_000);
        assert_eq!(PipeParams::default_queue_bytes(Some(100_000_000), 100 * MS), 1_250_000);
    }

    #[test]
    fn reorder_lets_jitter_overtake() {
        let mut pipe = Pipe::new(PipeParams { delay_ns: 20 * MS, jitter_ns: 10 * MS, reorder: true, ..params() });
        let mut rng = SmallRng::seed_from_u64(9);
        for i in 0..200u32 {
            pipe.offer(u64::from(i) * MS / 10, 0u32, i.to_be_bytes().to_vec(), &mut rng);
        }
        let ids: Vec<u32> =
            drain(&mut pipe, u64::MAX).iter().map(|(_, p)| u32::from_be_bytes(p[..4].try_into().unwrap())).collect();
        assert_eq!(ids.len(), 200);
        assert!(ids.windows(2).any(|w| w[0] > w[1]), "jitter of 10 ms over 0.1 ms gaps must reorder");
    }

    proptest! {
        /// With jitter and no reordering, packets leave in arrival order, each no
        /// earlier than its serialization end, and every packet is accounted for.
        #[test]
        fn jitter_keeps_order_and_accounts_for_every_packet(
            seed in 0u64..1000,
            gaps in proptest::collection::vec(0u64..2 * MS, 1..200),
            rate in proptest::option::of(1_000_000u64..100_000_000),
        ) {
            let mut pipe = Pipe::new(PipeParams {
                rate_bps: rate,
                queue_packets: 50,
                delay_ns: 20 * MS,
                jitter_ns: 5 * MS,
                loss: LossModel::Bernoulli { p: 0.1 },
                ..params()
            });
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut now = 0;
            let mut released = Vec::new();
            for (i, gap) in gaps.iter().enumerate() {
                now += gap;
                released.extend(drain(&mut pipe, now));
                if let Verdict::Accepted { release_at } = pipe.offer(now, 0u32, (i as u32).to_be_bytes().to_vec(), &mut rng) {
                    prop_assert!(release_at >= now + 15 * MS);
                }
            }
            released.extend(drain(&mut pipe, u64::MAX));
            let ids: Vec<u32> = released.iter().map(|(_, p)| u32::from_be_bytes(p[..4].try_into().unwrap())).collect();
            prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "order: {:?}", ids);
            prop_assert!(released.windows(2).all(|w| w[0].0 <= w[1].0));
            let c = pipe.counters();
            prop_assert_eq!(c.forwarded + c.loss_drops + c.queue_drops, gaps.len() as u64);
            prop_assert_eq!(c.in_flight, 0);
        }
    }
}
