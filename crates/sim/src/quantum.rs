//! Quantum-based scheduling: the server's own policy code in virtual time.
//!
//! The scheduling round is `sojourn_sched::Scheduler`, the type the server's
//! worker drives too: it grants the next response a slot (limited write
//! concurrency, 004 §3.3) and a quantum (004 §3.1); a write the kernel accepts
//! whole frees the slot at once and re-queues the response with its new `Progress`;
//! a write the kernel takes only in part, or not at all, keeps the slot until the
//! socket is writable again (the server's `write_quantum` returns `Blocked` on
//! the `EAGAIN` that follows a partial write).
//! This module only plays the kernel's part in virtual time, so the simulator
//! cannot drift from the server.
//!
//! The kernel: each socket holds the bytes written but not yet on the link, and
//! the link is shared equally among the sockets holding any (TCP flows sharing
//! the bottleneck). With `kernel_buffer` (TCP_NOTSENT_LOWAT; unlimited by default,
//! as with the kernel's large send buffers) a socket takes bytes while it holds
//! fewer than the mark, and about up to it: `tcp_sendmsg` checks
//! `sk_stream_memory_free` (unsent < lowat) before each new segment and returns the
//! partial count (so Linux can pass the mark by the segment it fills; the model
//! stops at the mark, rounded up to a byte, unless given `kernel_overshoot`: the bytes of the
//! segment buffer Linux fills past the mark, at least `tcp_min_tso_segs` (2) segments at the
//! low per-flow rates of a shared bottleneck, e.g. 2,896 for 1,448-byte segments). A
//! socket that refused a write turns writable when it holds less than half the
//! mark (`tcp_poll`: `(unsent << 1) < lowat`). Here "unsent" counts the bytes in
//! flight too (the link has no round trip). Taking whole quanta instead, and waking
//! at the full mark, freed every slot at once: bursts of first writes that ended
//! CoDel's dropping state and refused a third of what the testbed did
//! (docs/overload-control.md). A response is complete when its last byte leaves
//! the link. Sharing uses virtual time like [`crate::ps`], with stale heap entries
//! skipped by generation, so every event is `O(log n)`.
//!
//! With an admission policy (`serve --admission`, `sojourn_sched::admission`), the policy is
//! asked as the server's worker asks it: at a response's arrival, at its first grant (a
//! refusal then frees the grant's slot before any byte is written) and when its last byte
//! leaves; a refused response is reported finished at once and listed by [`Quantum::refused`].
//!
//! Guarantees: deterministic; a response's bytes go out in writes of at most
//! `quantum` bytes; at most `write_concurrency` responses are blocked in the
//! kernel at once, as in the server.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use std::time::Duration;

use sojourn_sched::{Admission, JobId, PolicyKind, Progress, Scheduler, Verdict};

use crate::fluid::Discipline;
use crate::ps::{Amount, JobIndex};

/// The server's scheduling options and the kernel's socket buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantumConfig {
    pub policy: PolicyKind,
    pub quantum: u64,
    pub write_concurrency: Option<usize>,
    /// Only responses with at least this many bytes left need a slot (`serve --write-concurrency-from`).
    pub write_concurrency_from: Option<u64>,
    /// TCP_NOTSENT_LOWAT: a socket takes bytes only up to this many unsent; `None` (or 0,
    /// which Linux reads as unset: the sysctl's default, unlimited) = unlimited.
    pub kernel_buffer: Option<u64>,
    /// Bytes a write may take past that mark (module notes); 0 stops at the mark.
    pub kernel_overshoot: u64,
}

/// What happens when the virtual time reaches a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The socket has drained to half of `kernel_buffer`: a blocked write may go on.
    Writable,
    /// The socket is empty.
    Drained,
}

/// Per response: the kernel side and the server side.
#[derive(Clone, Copy, Debug, Default)]
struct Socket {
    /// Virtual time at which the socket's bytes have all left (valid while `holding`).
    drained_at: f64,
    holding: bool,
    generation: u64,
    /// Bytes written to the socket so far (the server's view).
    progress: Progress,
    /// When the response arrived (seconds).
    arrived: f64,
    /// The admission policy was asked at the first grant; the response was refused.
    first_granted: bool,
    refused: bool,
    /// When its last write blocked (seconds; meaningful until the Writable event).
    blocked_at: f64,
}

/// The server's scheduler over per-socket kernel buffers sharing the link.
#[derive(Debug)]
pub struct Quantum {
    kernel_buffer: Option<f64>,
    kernel_overshoot: u64,
    scheduler: Scheduler,
    sockets: Vec<Socket>,
    /// Service each socket holding bytes has received since the kernel last emptied.
    virtual_time: f64,
    holding: usize,
    events: BinaryHeap<Reverse<(Amount, Event, JobIndex, u64)>>,
    /// Responses with nothing to send (size 0), finished as soon as they arrive.
    empty: Vec<JobIndex>,
    quanta: u64,
    admission: Option<Box<dyn Admission>>,
    /// The simulated time in seconds (see `Discipline::clock`).
    now: f64,
    slot_times: SlotTimes,
}

/// The write slots' measures, per whole second of simulated time so that they can be cut
/// where a testbed run stops: the server's `sojourn_write_slots_full_seconds_total` and
/// `sojourn_write_blocked_seconds`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SlotTimes {
    /// Seconds with a response ready and every write slot held.
    pub full_s: Vec<f64>,
    /// Blocked writes whose socket turned writable in the second, and the seconds each had
    /// held its slot since it blocked, summed.
    pub unblocked: Vec<u64>,
    pub blocked_s: Vec<f64>,
}

impl SlotTimes {
    fn second(&mut self, at: f64) -> usize {
        let index = at.max(0.0).floor() as usize;
        if self.full_s.len() <= index {
            self.full_s.resize(index + 1, 0.0);
            self.unblocked.resize(index + 1, 0);
            self.blocked_s.resize(index + 1, 0.0);
        }
        index
    }

    /// Adds `[from, to)` to `full_s`, split at whole seconds.
    fn slots_full(&mut self, from: f64, to: f64) {
        let mut start = from;
        while start < to {
            let end = to.min(start.floor() + 1.0);
            let index = self.second(start);
            self.full_s[index] += end - start;
            start = end;
        }
    }

    /// A blocked write's socket turned writable at `now`, `held` seconds after it blocked.
    fn unblocked(&mut self, now: f64, held: f64) {
        let index = self.second(now);
        self.unblocked[index] += 1;
        self.blocked_s[index] += held;
    }
}

fn at(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds.max(0.0))
}

impl Quantum {
    pub fn new(config: QuantumConfig) -> Self {
        Quantum {
            kernel_buffer: config.kernel_buffer.filter(|&b| b > 0).map(|b| b as f64),
            kernel_overshoot: config.kernel_overshoot,
            scheduler: Scheduler::new(config.policy, config.quantum, config.write_concurrency).slots_from(config.write_concurrency_from),
            sockets: Vec::new(),
            virtual_time: 0.0,
            holding: 0,
            events: BinaryHeap::new(),
            empty: Vec::new(),
            quanta: 0,
            admission: None,
            now: 0.0,
            slot_times: SlotTimes::default(),
        }
    }

    /// Asks `admission` about every response, as the server's worker does.
    pub fn with_admission(mut self, admission: Box<dyn Admission>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Whether each response (by job index) was refused by the admission policy.
    pub fn refused(&self) -> Vec<bool> {
        self.sockets.iter().map(|s| s.refused).collect()
    }

    /// Writes handed to the kernel so far.
    pub fn quanta(&self) -> u64 {
        self.quanta
    }

    /// The write slots' measures so far, per second of simulated time.
    pub fn slot_times(&self) -> &SlotTimes {
        &self.slot_times
    }

    fn unsent(&self, job: JobIndex) -> f64 {
        let s = &self.sockets[job as usize];
        if s.holding {
            (s.drained_at - self.virtual_time).max(0.0)
        } else {
            0.0
        }
    }

    /// Bytes of a `bytes` write the socket takes now: all of them without a mark, else
    /// what fits under it (rounded up: the kernel copies whole segments while below the
    /// mark); 0 when the socket holds the mark already (half a byte of slack absorbs
    /// rounding at the moment a blocked socket turns writable).
    fn room(&self, job: JobIndex, bytes: u64) -> u64 {
        match self.kernel_buffer {
            None => bytes,
            Some(limit) => {
                let free = limit - self.unsent(job);
                if free < 0.5 {
                    0
                } else {
                    bytes.min(free.ceil() as u64 + self.kernel_overshoot)
                }
            }
        }
    }

    fn schedule(&mut self, job: JobIndex, event: Event) {
        let s = &self.sockets[job as usize];
        let tag = match event {
            Event::Drained => s.drained_at,
            Event::Writable => s.drained_at - self.kernel_buffer.unwrap_or(0.0) / 2.0,
        };
        self.events.push(Reverse((Amount(tag.max(self.virtual_time)), event, job, s.generation)));
    }

    /// Drops heap entries that a later write made stale.
    fn skip_stale(&mut self) {
        while let Some(Reverse((_, _, job, generation))) = self.events.peek() {
            if self.sockets[*job as usize].generation == *generation {
                break;
            }
            self.events.pop();
        }
    }

    /// The scheduler's round, the kernel's part played here: grant, then write or block.
    fn dispatch(&mut self, serving: &mut Vec<JobIndex>) {
        while let Some(grant) = self.scheduler.grant() {
            let job = grant.job as JobIndex;
            let s = &mut self.sockets[job as usize];
            if let (Some(admission), false) = (self.admission.as_mut(), s.first_granted) {
                s.first_granted = true;
                if let Verdict::Refuse(_) = admission.first_write(at(self.now), grant.job, at(s.arrived)) {
                    admission.left(at(self.now), grant.job, at(s.arrived), false);
                    s.refused = true;
                    self.scheduler.closed(grant.job);
                    self.empty.push(job); // reported finished at once, as the server's 503
                    continue;
                }
            }
            self.quanta += 1;
            let taken = self.room(job, grant.bytes);
            if taken > 0 {
                let s = &mut self.sockets[job as usize];
                s.progress = s.progress.after(taken);
                if !s.holding {
                    if self.holding == 0 {
                        self.virtual_time = 0.0;
                    }
                    s.holding = true;
                    s.drained_at = self.virtual_time;
                    self.holding += 1;
                }
                s.drained_at += taken as f64;
                s.generation += 1;
                self.schedule(job, Event::Drained);
                serving.push(job);
            }
            if taken < grant.bytes {
                // Blocked, at once or after a partial write (whose next write gets EAGAIN in
                // the server): the slot stays taken until the Writable event.
                self.scheduler.blocked(grant.job);
                self.sockets[job as usize].blocked_at = self.now;
                self.schedule(job, Event::Writable);
                continue;
            }
            let s = &self.sockets[job as usize];
            let (progress, arrived) = (s.progress, s.arrived);
            if !self.scheduler.wrote(grant.job, progress) {
                // The last byte went to the kernel: where the server's worker finishes it.
                if let Some(admission) = self.admission.as_mut() {
                    admission.left(at(self.now), grant.job, at(arrived), true);
                }
            }
        }
        self.skip_stale();
    }
}

impl Discipline for Quantum {
    fn clock(&mut self, now: f64) {
        // The scheduler changes only at events, which come after their clock: its state now
        // is what held since the last event.
        if self.scheduler.waiting_for_a_slot() {
            self.slot_times.slots_full(self.now, now);
        }
        self.now = now;
    }

    fn admit(&mut self, job: JobIndex, size: f64, serving: &mut Vec<JobIndex>) {
        let index = job as usize;
        if self.sockets.len() <= index {
            self.sockets.resize(index + 1, Socket::default());
        }
        let bytes = size.max(0.0).round() as u64;
        self.sockets[index].progress = Progress::new(bytes);
        self.sockets[index].arrived = self.now;
        if let Some(admission) = self.admission.as_mut() {
            if let Verdict::Refuse(_) = admission.arrive(at(self.now), job as JobId, at(self.now), Some(bytes)) {
                self.sockets[index].refused = true;
                serving.push(job);
                self.empty.push(job);
                return;
            }
        }
        if bytes == 0 {
            if let Some(admission) = self.admission.as_mut() {
                admission.left(at(self.now), job as JobId, at(self.now), true);
            }
            serving.push(job);
            self.empty.push(job);
            return;
        }
        self.scheduler.ready(job as JobId, self.sockets[index].progress);
        self.dispatch(serving);
    }

    fn work_to_next_event(&self) -> Option<f64> {
        if !self.empty.is_empty() {
            return Some(0.0);
        }
        let Reverse((tag, ..)) = self.events.peek()?;
        Some((tag.0 - self.virtual_time).max(0.0) * self.holding as f64)
    }

    fn serve(&mut self, work: f64) {
        if self.holding > 0 {
            self.virtual_time += work / self.holding as f64;
        }
    }

    fn fire(&mut self, serving: &mut Vec<JobIndex>) -> Option<JobIndex> {
        if let Some(job) = self.empty.pop() {
            return Some(job);
        }
        let Reverse((tag, event, job, _)) = self.events.pop()?;
        self.virtual_time = self.virtual_time.max(tag.0);
        let s = &mut self.sockets[job as usize];
        let finished = match event {
            Event::Drained => {
                s.holding = false;
                s.generation += 1;
                self.holding -= 1;
                (s.progress.remaining == 0).then_some(job)
            }
            Event::Writable => {
                // The kernel took the data below the mark: the slot is free again (worker.rs `on_writable`).
                let (progress, held) = (s.progress, self.now - s.blocked_at);
                self.scheduler.writable(job as JobId, progress);
                self.slot_times.unblocked(self.now, held);
                None
            }
        };
        self.dispatch(serving);
        finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fluid::{simulate, FluidPolicy, Job};

    fn run(policy: PolicyKind, quantum: u64, concurrency: Option<usize>, buffer: Option<u64>, list: &[(f64, f64)]) -> Vec<f64> {
        run_from(policy, quantum, concurrency, None, buffer, list)
    }

    fn run_from(policy: PolicyKind, quantum: u64, concurrency: Option<usize>, from: Option<u64>, buffer: Option<u64>, list: &[(f64, f64)]) -> Vec<f64> {
        let jobs: Vec<Job> = list.iter().map(|&(arrival, size)| Job { arrival, size }).collect();
        let config = QuantumConfig { policy, quantum, write_concurrency: concurrency, write_concurrency_from: from, kernel_buffer: buffer, kernel_overshoot: 0 };
        simulate(&mut Quantum::new(config), &jobs, 1.0).iter().map(|s| s.finish).collect()
    }

    fn ps(list: &[(f64, f64)]) -> Vec<f64> {
        let jobs: Vec<Job> = list.iter().map(|&(a, s)| Job { arrival: a, size: s }).collect();
        FluidPolicy::Ps.run(&jobs, 1.0).iter().map(|s| s.finish).collect()
    }

    #[test]
    fn one_slot_srpt_by_hand() {
        // Quantum 2, mark 2, one slot, 1 byte/s. t=0: job 0 (5) writes 2 (taken whole), is
        // granted again and blocks, holding the slot, until its socket is under half the mark
        // (t=1); then it takes 1 of its 2 (up to the mark): a partial write, the slot stays
        // taken until t=2. Job 1 (1) arrived at t=1 and waited. t=2: job 1 (1 left) beats
        // job 0 (2 left) and writes its byte; job 0 writes 1 (partial, socket at the mark
        // again). The two share the link: job 1 done at t=4, when job 0 holds 1 byte and
        // takes its last one: t=6.
        assert_eq!(run(PolicyKind::Srpt, 2, Some(1), Some(2), &[(0.0, 5.0), (1.0, 1.0)]), vec![6.0, 4.0]);
    }

    #[test]
    fn one_slot_from_a_threshold_by_hand() {
        // As one_slot_srpt_by_hand, but only responses with 3 bytes or more left need the
        // slot: at t=1 job 0 takes 1 of its 3 left (partial, slot held) and job 1 (1 byte)
        // is written at once, without a slot. The sockets share the link (2 and 1 unsent):
        // job 1 done at t=3, when job 0 is under half the mark again and takes 1 more
        // (partial), then at t=4 its last byte: t=6.
        assert_eq!(run_from(PolicyKind::Srpt, 2, Some(1), Some(3), Some(2), &[(0.0, 5.0), (1.0, 1.0)]), vec![6.0, 3.0]);
    }

    #[test]
    fn one_slot_fair_by_hand() {
        // Quantum 1, mark 1, one slot, both at t=0. Job 0 writes 1 and then blocks, holding
        // the slot, until half its byte left (t=0.5). Round robin: job 1 writes 1, job 0
        // writes 1 (its socket 1.5), job 1 blocks at the mark (holding 1). Sharing the link,
        // job 1 is under half the mark at t=1.5, but job 0, first in the round, holds 1 byte
        // and blocks until t=2.5, when job 1's socket is empty: both write their last byte
        // (1.5 and 1 unsent) and job 1 is done at t=4.5, job 0 at t=5.
        assert_eq!(run(PolicyKind::Fair, 1, Some(1), Some(1), &[(0.0, 3.0), (0.0, 2.0)]), vec![5.0, 4.5]);
    }

    #[test]
    fn a_mark_of_zero_is_unset_as_in_linux() {
        let list = [(0.0, 4.0), (1.0, 1.0), (2.0, 2.0)];
        assert_eq!(run(PolicyKind::Srpt, 1, Some(1), Some(0), &list), run(PolicyKind::Srpt, 1, Some(1), None, &list));
    }

    #[test]
    fn unlimited_buffers_share_like_ps() {
        // Every write accepted: the kernel holds whole responses, so the policy no longer
        // matters (004 §3.3) - processor sharing, whatever the concurrency.
        let list = [(0.0, 4.0), (1.0, 1.0), (2.0, 2.0)];
        for policy in PolicyKind::ALL {
            for concurrency in [None, Some(1)] {
                assert_eq!(run(policy, 1, concurrency, None, &list), ps(&list), "{policy} {concurrency:?}");
            }
        }
    }

    #[test]
    fn small_quanta_approach_fluid_srpt() {
        let list = [(0.0, 400.0), (100.0, 100.0), (200.0, 200.0)];
        let jobs: Vec<Job> = list.iter().map(|&(a, s)| Job { arrival: a, size: s }).collect();
        let fluid = FluidPolicy::Srpt.run(&jobs, 1.0);
        let q = run(PolicyKind::Srpt, 1, Some(1), Some(1), &list);
        // Whenever a response writes its last byte the next one writes too and they share
        // the link while the first still holds up to the mark plus a partial write's rounding
        // up (under two bytes here), so each completion can shift others by two quanta.
        for (a, b) in q.iter().zip(&fluid) {
            assert!((a - b.finish).abs() <= 2.0 * list.len() as f64, "{a} vs {}", b.finish);
        }
    }

    #[test]
    fn the_wait_for_a_slot_is_timed_until_the_slot_frees() {
        // Two 3-byte responses at t=0, one slot, 1 byte/s, a 1-byte mark: the second waits
        // for the slot, which the first holds blocked until its last byte is written; from
        // then on nothing waits for a slot.
        let jobs = [Job { arrival: 0.0, size: 3.0 }, Job { arrival: 0.0, size: 3.0 }];
        let config = QuantumConfig { policy: PolicyKind::Srpt, quantum: 1, write_concurrency: Some(1), write_concurrency_from: None, kernel_buffer: Some(1), kernel_overshoot: 0 };
        let mut q = Quantum::new(config);
        let served = simulate(&mut q, &jobs, 1.0);
        let times = q.slot_times();
        let waited: f64 = times.full_s.iter().sum();
        assert!(served[1].start > 1.0, "{served:?}");
        assert!((waited - served[1].start).abs() < 1e-9, "{waited} against the second's first write at {}", served[1].start);
        assert!(times.full_s.iter().all(|&s| (0.0..=1.0).contains(&s)), "{times:?}");
        // Each blocked write waits for its socket to drain below half the 1-byte mark: half a
        // second at least, at the link's whole 1 byte/s, longer while another socket shares it.
        let unblocked: u64 = times.unblocked.iter().sum();
        let held: f64 = times.blocked_s.iter().sum();
        assert!(unblocked >= 2, "{times:?}");
        assert!(held >= 0.5 * unblocked as f64 - 1e-9, "{times:?}");
        assert!(held <= served.iter().map(|s| s.finish).fold(0.0, f64::max) * 2.0, "at most both sockets' whole lives: {times:?}");
        let mut unlimited = Quantum::new(QuantumConfig { write_concurrency: None, ..config });
        simulate(&mut unlimited, &jobs, 1.0);
        assert_eq!(unlimited.slot_times().full_s.iter().sum::<f64>(), 0.0, "without a limit no response waits for a slot");
    }

    #[test]
    fn an_overshoot_past_the_mark_makes_fewer_longer_holds() {
        // One 30-byte response, 10-byte writes, a 4-byte mark, 1 byte/s: each blocked episode
        // moves what drained below half the mark plus up to the mark again; 2 bytes of
        // overshoot make each move more, so there are fewer episodes, each longer, and the
        // link, busy throughout, still ends at 30 s.
        let jobs = [Job { arrival: 0.0, size: 30.0 }];
        let holds = |overshoot| {
            let config = QuantumConfig { policy: PolicyKind::Srpt, quantum: 10, write_concurrency: Some(1), write_concurrency_from: None, kernel_buffer: Some(4), kernel_overshoot: overshoot };
            let mut q = Quantum::new(config);
            let served = simulate(&mut q, &jobs, 1.0);
            assert!((served[0].finish - 30.0).abs() < 1e-9, "{served:?}");
            let times = q.slot_times();
            (times.unblocked.iter().sum::<u64>(), times.blocked_s.iter().sum::<f64>())
        };
        let (at_mark, held_at_mark) = holds(0);
        let (past_mark, held_past_mark) = holds(2);
        assert!(past_mark < at_mark, "{past_mark} episodes against {at_mark}");
        assert!(held_past_mark / past_mark as f64 > held_at_mark / at_mark as f64);
    }

    /// Runs `list` under SRPT with one slot, a quantum of 1 and a mark of 1 byte, asking `admission`.
    fn with_admission(admission: &str, list: &[(f64, f64)]) -> (Vec<f64>, Vec<bool>) {
        let jobs: Vec<Job> = list.iter().map(|&(arrival, size)| Job { arrival, size }).collect();
        let config = QuantumConfig { policy: PolicyKind::Srpt, quantum: 1, write_concurrency: Some(1), write_concurrency_from: None, kernel_buffer: Some(1), kernel_overshoot: 0 };
        let spec: sojourn_sched::AdmissionSpec = admission.parse().unwrap();
        let mut q = Quantum::new(config).with_admission(spec.build(sojourn_sched::Order::ShortestFirst));
        let finish = simulate(&mut q, &jobs, 1.0).iter().map(|s| s.finish).collect();
        (finish, q.refused())
    }

    #[test]
    fn size_refuses_at_arrival_what_would_miss_the_deadline() {
        // 1 byte/s, deadline 10 s (size.rs's hand example): at t=0, 6 and 3 bytes are taken,
        // 7 would complete after 3 + 6 + 7 = 16 s and is refused at once, 1 byte is taken.
        let (finish, refused) = with_admission("size:rate=8bit,deadline=10s", &[(0.0, 6.0), (0.0, 3.0), (0.0, 7.0), (0.0, 1.0)]);
        assert_eq!(refused, vec![false, false, true, false]);
        assert_eq!(finish[2], 0.0, "refused at its arrival");
        // The others go as SRPT with one slot: 1 byte, then 3, then 6 (plus the quantum's shifts).
        assert!(finish[3] < finish[1] && finish[1] < finish[0], "{finish:?}");
        assert!((finish[0] - 10.0).abs() <= 2.0, "{finish:?}");
    }

    #[test]
    fn codel_refuses_at_the_first_grant_only() {
        // Ten 3-byte responses at t=0, one slot, 1 byte/s: a response holds the slot, blocked at
        // the 1-byte mark, until its last byte is written, so the next one's first grant waits
        // 1.5-2 s. The second's wait starts CoDel's interval; the third, later again, is refused at
        // its grant, which frees the slot at once for the fourth (its next drop is 100 ms later).
        // When the fourth has written its bytes, seconds on, the next drop times (100 ms / sqrt(count) apart, RFC 8289 §3.2) are long past, so the
        // rest are refused one grant after the other, as the RFC's dequeue loop would.
        let list: Vec<(f64, f64)> = (0..10).map(|_| (0.0, 3.0)).collect();
        let (finish, refused) = with_admission("codel", &list);
        let expected: Vec<bool> = (0..10).map(|k| k == 2 || k >= 4).collect();
        assert_eq!(refused, expected, "{finish:?}");
        for (f, r) in finish.iter().zip(&refused) {
            assert!(!f.is_nan(), "every response ends: {finish:?}");
            assert!(*r || *f >= 3.0, "a served response took its bytes' seconds");
        }
    }

    proptest::proptest! {
        /// Whatever the admission policy: every job ends once, refused or served; the served
        /// ones no sooner than their bytes allow; no more quanta than bytes of the served ones.
        #[test]
        fn admitted_or_refused(sizes in proptest::collection::vec((0u32..3, 1u32..20), 1..40), kind in 0usize..4) {
            let admission = ["gradient:min_rtt_requests=3", "codel:target=1s,interval=2s", "delay:threshold=1s", "size:rate=8bit,deadline=15s"][kind];
            let mut t = 0.0;
            let list: Vec<(f64, f64)> = sizes.iter().map(|&(gap, size)| { t += gap as f64; (t, size as f64) }).collect();
            let (finish, refused) = with_admission(admission, &list);
            proptest::prop_assert_eq!(refused.len(), list.len());
            for ((f, r), &(arrival, size)) in finish.iter().zip(&refused).zip(&list) {
                proptest::prop_assert!(!f.is_nan());
                if !r {
                    proptest::prop_assert!(*f >= arrival + size - 1e-6);
                }
            }
        }
    }

    proptest::proptest! {
        /// Whatever the policy, quantum, concurrency and buffer, the link stays busy while
        /// any response has bytes left: the last completion matches fluid PS.
        #[test]
        fn work_conserving(sizes in proptest::collection::vec((0u32..5, 0u32..40), 1..30),
                           quantum in 1u64..16, concurrency in proptest::option::of(1usize..4),
                           buffer in proptest::option::of(0u64..20), kind in 0usize..3) {
            let mut t = 0.0;
            let list: Vec<(f64, f64)> = sizes.iter().map(|&(gap, size)| { t += gap as f64; (t, size as f64) }).collect();
            let fluid_last = ps(&list).into_iter().fold(0.0, f64::max);
            let q = run(PolicyKind::ALL[kind], quantum, concurrency, buffer, &list);
            let last = q.iter().copied().fold(0.0, f64::max);
            proptest::prop_assert!((last - fluid_last).abs() < 1e-6, "{} vs {}", last, fluid_last);
            for (f, &(arrival, size)) in q.iter().zip(&list) {
                proptest::prop_assert!(*f >= arrival + size - 1e-6);
            }
        }
    }
}
