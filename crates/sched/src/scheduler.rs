//! The scheduling round of the server and the simulator, written once: which response
//! gets the next write quantum (004 §3.1), under limited write concurrency (004 §3.3).
//!
//! A [`Scheduler`] owns the [`ReadyQueue`] (ordered by the policy: FAIR round robin, SRPT
//! by remaining bytes, 000 §3 / 004 §3.2, LAS by attained bytes), the [`WriteSlots`] and
//! the quantum. The caller does the I/O and reports what happened:
//!
//! - [`Scheduler::ready`]: a response has bytes to send (a new response, or one whose
//!   blocked socket became writable through [`Scheduler::writable`]);
//! - [`Scheduler::grant`]: the next response to write, with a slot taken for it and the
//!   most bytes to write (`quantum`, at most what remains), or `None` when nothing is
//!   ready or every slot is held by a blocked response;
//! - [`Scheduler::wrote`]: the kernel took the quantum: the slot is freed at once and the
//!   response re-queued with its new progress if bytes remain;
//! - [`Scheduler::blocked`]: the write would block: the slot stays taken until
//!   [`Scheduler::writable`], so at most `write_concurrency` responses hold data the
//!   application has not ordered (004 §3.3);
//! - [`Scheduler::closed`]: the connection is gone: out of the queue, slot freed.
//!
//! With [`Scheduler::slots_from`] only responses with at least that many bytes left need a
//! slot; smaller ones are granted without one. Under SRPT the queue's head has the fewest
//! bytes left, so while any small response is ready it is the head and goes at once, and
//! the large ones go `write_concurrency` at a time, shortest first: with kernel bands the
//! small ones are ordered by the kernel, the large ones (sharing the lowest band) by the
//! application. Only SRPT orders by remaining bytes, so the callers refuse the threshold
//! under another policy (a large head waiting for a slot would hold up the small ones
//! queued behind it).
//!
//! The server (crates/server, sockets) and the simulator (crates/sim/src/quantum.rs,
//! virtual time) are thin callers of these calls, so the simulator cannot model a
//! different server. No clock and no I/O here.

use crate::policy::{PolicyKind, Progress};
use crate::queue::{JobId, ReadyQueue, WriteSlots};

/// A write the caller should make now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub job: JobId,
    /// The most bytes to write: the quantum, or less when fewer remain.
    pub bytes: u64,
}

#[derive(Debug)]
pub struct Scheduler {
    queue: ReadyQueue,
    slots: WriteSlots,
    quantum: u64,
    /// Responses with fewer bytes left than this are granted without a slot (`None`: all need one).
    slots_from: Option<u64>,
    /// Progress of the queued responses, to size their next quantum.
    progress: std::collections::HashMap<JobId, Progress>,
}

impl Scheduler {
    /// `quantum` bytes per write (at least 1); `write_concurrency` responses at most
    /// blocked in the kernel at once (`None`: unlimited).
    pub fn new(policy: PolicyKind, quantum: u64, write_concurrency: Option<usize>) -> Self {
        Scheduler {
            queue: ReadyQueue::new(policy.build()),
            slots: WriteSlots::new(write_concurrency),
            quantum: quantum.max(1),
            slots_from: None,
            progress: Default::default(),
        }
    }

    /// Only responses with at least `from` bytes left need a write slot; smaller ones are
    /// granted without one (`None`: every response needs one, the default). Meant for
    /// SRPT, where the queue's head has the fewest bytes left (see the module notes).
    pub fn slots_from(mut self, from: Option<u64>) -> Self {
        self.slots_from = from;
        self
    }

    /// Whether a response with `remaining` bytes left needs a slot to be written.
    fn needs_slot(&self, remaining: u64) -> bool {
        self.slots_from.is_none_or(|from| remaining >= from)
    }

    /// Whether [`Scheduler::slots_from`] may be used with `policy`, else why not: the
    /// threshold relies on the queue's head having the fewest bytes left (module notes).
    pub fn slots_from_allowed(policy: PolicyKind) -> Result<(), &'static str> {
        match policy {
            PolicyKind::Srpt => Ok(()),
            _ => Err("only SRPT orders responses by the bytes they have left"),
        }
    }

    /// `job` has `progress.remaining` bytes to send (a response with none is granted once,
    /// for zero bytes, so its caller finishes it in order).
    pub fn ready(&mut self, job: JobId, progress: Progress) {
        self.progress.insert(job, progress);
        self.queue.push(job, progress);
    }

    /// Whether [`Scheduler::grant`] would hand out a write now.
    pub fn can_grant(&self) -> bool {
        let Some(head) = self.queue.peek() else { return false };
        let slot_free = self.slots.limit().is_none_or(|limit| self.slots.held() < limit);
        // Without a threshold every response needs a slot: no progress lookup then.
        slot_free || (self.slots_from.is_some() && !self.needs_slot(self.progress[&head].remaining))
    }

    /// The next write: the policy's choice among the ready responses, with a slot taken
    /// if it needs one.
    pub fn grant(&mut self) -> Option<Grant> {
        if !self.can_grant() {
            return None; // every slot is held by a blocked response (004 §3.3)
        }
        let job = self.queue.pop()?;
        let progress = self.progress.remove(&job).expect("queued jobs have their progress");
        if self.needs_slot(progress.remaining) {
            self.slots.acquire(job);
        }
        Some(Grant { job, bytes: self.quantum.min(progress.remaining) })
    }

    /// The kernel took the granted write; `progress` is the response's progress after it.
    /// Returns whether bytes remain (the response was re-queued).
    pub fn wrote(&mut self, job: JobId, progress: Progress) -> bool {
        self.slots.release(job);
        let more = progress.remaining > 0;
        if more {
            self.ready(job, progress);
        }
        more
    }

    /// The granted write would block: the slot (if it took one) stays taken until
    /// [`Scheduler::writable`].
    pub fn blocked(&mut self, _job: JobId) {}

    /// A blocked response's socket took its data: its slot is free and it is ready again.
    pub fn writable(&mut self, job: JobId, progress: Progress) {
        self.slots.release(job);
        self.ready(job, progress);
    }

    /// The response's connection is gone.
    pub fn closed(&mut self, job: JobId) {
        self.queue.remove(job);
        self.progress.remove(&job);
        self.slots.release(job);
    }

    /// Whether a response is ready but every write slot is held by a blocked response: the
    /// application's queue then waits on the kernel's sockets (004 §3.3). Server and
    /// simulator time this state, to compare where the wait before a first byte goes.
    pub fn waiting_for_a_slot(&self) -> bool {
        self.queue.peek().is_some() && !self.can_grant()
    }

    /// Responses waiting for a quantum.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Slots held (by granted or blocked writes).
    pub fn slots_held(&self) -> usize {
        self.slots.held()
    }

    pub fn write_concurrency(&self) -> Option<usize> {
        self.slots.limit()
    }

    /// The bytes left from which a response needs a slot (`None`: every response).
    pub fn write_slots_from(&self) -> Option<u64> {
        self.slots_from
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn srpt_grants_the_fewest_remaining_bytes_in_quanta() {
        let mut s = Scheduler::new(PolicyKind::Srpt, 1000, None);
        s.ready(1, Progress::new(5000));
        s.ready(2, Progress::new(1500));
        assert_eq!(s.grant(), Some(Grant { job: 2, bytes: 1000 }));
        assert!(s.wrote(2, Progress::new(1500).after(1000)));
        assert_eq!(s.grant(), Some(Grant { job: 2, bytes: 500 }));
        assert!(!s.wrote(2, Progress::new(1500).after(1500)));
        assert_eq!(s.grant(), Some(Grant { job: 1, bytes: 1000 }));
    }

    #[test]
    fn a_ready_response_waits_for_a_slot_only_while_every_slot_is_held() {
        let mut s = Scheduler::new(PolicyKind::Srpt, 1000, Some(1));
        assert!(!s.waiting_for_a_slot(), "nothing is ready");
        s.ready(1, Progress::new(5000));
        s.ready(2, Progress::new(3000));
        assert!(!s.waiting_for_a_slot(), "the slot is free");
        let first = s.grant().unwrap();
        s.blocked(first.job);
        assert!(s.waiting_for_a_slot(), "job 1 is ready, the only slot is held by job 2's blocked write");
        s.writable(first.job, Progress::new(3000).after(1000));
        assert!(!s.waiting_for_a_slot());
        let unlimited = {
            let mut u = Scheduler::new(PolicyKind::Srpt, 1000, None);
            u.ready(1, Progress::new(5000));
            u
        };
        assert!(!unlimited.waiting_for_a_slot(), "without a limit a slot is always free");
    }

    #[test]
    fn a_blocked_write_holds_its_slot_until_writable() {
        let mut s = Scheduler::new(PolicyKind::Fair, 100, Some(1));
        s.ready(1, Progress::new(300));
        s.ready(2, Progress::new(300));
        let first = s.grant().unwrap();
        s.blocked(first.job);
        assert_eq!(s.grant(), None, "the only slot is held by the blocked response");
        s.writable(first.job, Progress::new(300).after(100));
        assert_eq!(s.grant().map(|g| g.job), Some(2), "FAIR: the other response goes first now");
        s.closed(2);
        assert_eq!(s.grant().map(|g| g.job), Some(1));
    }

    #[test]
    fn below_the_threshold_a_response_needs_no_slot() {
        let mut s = Scheduler::new(PolicyKind::Srpt, 16_000, Some(1)).slots_from(Some(50_000));
        s.ready(1, Progress::new(400_000));
        s.ready(2, Progress::new(90_000));
        let large = s.grant().unwrap();
        assert_eq!(large.job, 2, "SRPT: the shorter large response takes the slot");
        s.blocked(2);
        assert_eq!(s.slots_held(), 1);
        assert!(!s.can_grant(), "the other large response waits for the slot");
        s.ready(3, Progress::new(3_000));
        s.ready(4, Progress::new(49_999));
        assert_eq!(s.grant(), Some(Grant { job: 3, bytes: 3_000 }), "a small response needs no slot");
        s.blocked(3);
        assert_eq!(s.grant(), Some(Grant { job: 4, bytes: 16_000 }), "nor one just below the threshold");
        assert!(s.wrote(4, Progress::new(49_999).after(16_000)));
        assert_eq!(s.slots_held(), 1, "only the large response holds a slot");
        s.writable(3, Progress::new(3_000).after(3_000));
        assert_eq!(s.grant().map(|g| g.job), Some(3));
        assert!(!s.wrote(3, Progress::new(3_000).after(3_000)));
        assert_eq!(s.grant().map(|g| g.job), Some(4));
        s.writable(2, Progress::new(90_000).after(16_000));
        // 4 is done after two more quanta; 2 (74,000 left) and 1 then share the slot in SRPT order.
        assert!(s.wrote(4, Progress::new(49_999).after(32_000)));
        assert_eq!(s.grant().map(|g| g.job), Some(4));
        assert!(!s.wrote(4, Progress::new(49_999).after(49_999)));
        assert_eq!(s.grant().map(|g| g.job), Some(2));
        s.blocked(2);
        assert_eq!(s.grant(), None, "1 (400,000 left) needs the slot 2 holds");
        s.closed(2);
        assert_eq!(s.grant().map(|g| g.job), Some(1));
        assert_eq!(s.write_slots_from(), Some(50_000));
    }

    /// What a caller may report about a granted write.
    #[derive(Clone, Debug)]
    enum Step {
        Ready(u8, u32),
        Grant { block: bool },
        Writable(u8),
        Close(u8),
    }

    fn steps() -> impl Strategy<Value = Vec<Step>> {
        prop::collection::vec(
            prop_oneof![
                (0u8..6, 1u32..5000).prop_map(|(j, b)| Step::Ready(j, b)),
                any::<bool>().prop_map(|block| Step::Grant { block }),
                (0u8..6).prop_map(Step::Writable),
                (0u8..6).prop_map(Step::Close),
            ],
            0..200,
        )
    }

    proptest! {
        /// Under any sequence of events, as the server and the simulator drive it: no more
        /// than `write_concurrency` slots are held; a grant is never more than the quantum
        /// nor more than the job's remaining bytes; under SRPT the granted job has the
        /// fewest remaining bytes of the ready ones; a closed job is never granted until it
        /// is ready again; and when writes stop blocking every ready job is granted until done.
        #[test]
        /// With a slot threshold, responses below it never take a slot, and nothing is
        /// granted only while every ready response needs a slot and none is free.
        #[test]
        fn the_round_keeps_its_invariants(events in steps(), limit in prop::option::of(1usize..4), quantum in 1u64..3000, from in prop::option::of(1u64..5000)) {
            let mut s = Scheduler::new(PolicyKind::Srpt, quantum, limit).slots_from(from);
            let mut remaining: std::collections::HashMap<JobId, Progress> = Default::default();
            let mut blocked: std::collections::HashSet<JobId> = Default::default();
            for event in events {
                match event {
                    Step::Ready(j, bytes) => {
                        let job = JobId::from(j);
                        if !blocked.contains(&job) && !remaining.contains_key(&job) {
                            remaining.insert(job, Progress::new(u64::from(bytes)));
                            s.ready(job, remaining[&job]);
                        }
                    }
                    Step::Grant { block } => {
                        let fewest = remaining.iter().filter(|(j, _)| !blocked.contains(j)).map(|(_, p)| p.remaining).min();
                        let held = s.slots_held();
                        let grant = s.grant();
                        if grant.is_none() {
                            if let Some(fewest) = fewest {
                                prop_assert!(from.is_none_or(|f| fewest >= f), "a response below the threshold was left waiting");
                                prop_assert!(limit.is_some_and(|l| held >= l), "nothing granted with a slot free");
                            }
                        }
                        if let Some(grant) = grant {
                            let progress = remaining[&grant.job];
                            if from.is_some_and(|f| progress.remaining < f) {
                                prop_assert_eq!(s.slots_held(), held, "a response below the threshold took a slot");
                            }
                            prop_assert!(!blocked.contains(&grant.job));
                            prop_assert_eq!(grant.bytes, quantum.min(progress.remaining));
                            prop_assert_eq!(Some(progress.remaining), fewest);
                            if block {
                                s.blocked(grant.job);
                                blocked.insert(grant.job);
                            } else {
                                let after = progress.after(grant.bytes);
                                if s.wrote(grant.job, after) { remaining.insert(grant.job, after); } else { remaining.remove(&grant.job); }
                            }
                        }
                    }
                    Step::Writable(j) => {
                        let job = JobId::from(j);
                        if blocked.remove(&job) {
                            s.writable(job, remaining[&job]);
                        }
                    }
                    Step::Close(j) => {
                        let job = JobId::from(j);
                        s.closed(job);
                        remaining.remove(&job);
                        blocked.remove(&job);
                    }
                }
                prop_assert!(limit.is_none_or(|l| s.slots_held() <= l));
            }
            for job in blocked.drain() {
                s.writable(job, remaining[&job]);
            }
            while let Some(grant) = s.grant() {
                let after = remaining[&grant.job].after(grant.bytes);
                if s.wrote(grant.job, after) { remaining.insert(grant.job, after); } else { remaining.remove(&grant.job); }
            }
            prop_assert!(remaining.is_empty(), "left unserved: {remaining:?}");
            prop_assert_eq!(s.slots_held(), 0);
        }
    }
}
