//! The set of responses that have bytes to send and may be given a quantum.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::policy::{Policy, Progress};

/// Identifies a response (in the server: a connection's current response; in
/// the simulator: a job).
pub type JobId = u64;

/// Responses ready for a write quantum, ordered by a [`Policy`].
///
/// `pop` hands out the ready response with the lowest key; ties go to the one
/// that became ready first, so with [`crate::Fair`]'s constant key popping a
/// response and pushing it back after its quantum is round robin.
#[derive(Debug)]
pub struct ReadyQueue {
    policy: Box<dyn Policy>,
    order: BTreeSet<(u64, u64, JobId)>,
    entries: HashMap<JobId, (u64, u64)>,
    next_seq: u64,
}

impl ReadyQueue {
    pub fn new(policy: Box<dyn Policy>) -> Self {
        ReadyQueue { policy, order: BTreeSet::new(), entries: HashMap::new(), next_seq: 0 }
    }

    pub fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }

    /// Marks `job` ready with this progress. A job already queued is re-keyed
    /// and goes behind the others of equal key.
    pub fn push(&mut self, job: JobId, progress: Progress) {
        let entry = (self.policy.key(progress), self.next_seq);
        self.next_seq += 1;
        // One hash operation per push on the server's hot path: the insert returns the
        // job's old position, if it had one, to take out of the order.
        if let Some((key, seq)) = self.entries.insert(job, entry) {
            self.order.remove(&(key, seq, job));
        }
        self.order.insert((entry.0, entry.1, job));
    }

    /// Takes the job that should be served next out of the queue.
    pub fn pop(&mut self) -> Option<JobId> {
        let (_, _, job) = self.order.pop_first()?;
        self.entries.remove(&job);
        Some(job)
    }

    /// The job `pop` would return, without taking it.
    pub fn peek(&self) -> Option<JobId> {
        self.order.first().map(|&(_, _, job)| job)
    }

    /// Takes `job` out of the queue (it closed, or blocked); false if it was not queued.
    pub fn remove(&mut self, job: JobId) -> bool {
        match self.entries.remove(&job) {
            Some((key, seq)) => self.order.remove(&(key, seq, job)),
            None => false,
        }
    }

    pub fn contains(&self, job: JobId) -> bool {
        self.entries.contains_key(&job)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Limited write concurrency (004 §3.3, §5.4): at most `limit` responses may
/// hold data in the kernel at once, so the application's order, not the
/// kernel's fair sharing among sockets, decides what reaches the wire.
#[derive(Debug)]
pub struct WriteSlots {
    limit: usize,
    held: HashSet<JobId>,
}

impl WriteSlots {
    /// `limit` of `None` means unlimited.
    pub fn new(limit: Option<usize>) -> Self {
        WriteSlots { limit: limit.unwrap_or(usize::MAX).max(1), held: HashSet::new() }
    }

    /// Whether `job` may be written to now: it already holds a slot, or one is free.
    pub fn may_write(&self, job: JobId) -> bool {
        self.held.contains(&job) || self.held.len() < self.limit
    }

    /// Gives `job` a slot; false (and nothing changes) if none is free.
    pub fn acquire(&mut self, job: JobId) -> bool {
        if !self.may_write(job) {
            return false;
        }
        self.held.insert(job);
        true
    }

    /// Frees `job`'s slot (its data left the kernel, or it closed).
    pub fn release(&mut self, job: JobId) -> bool {
        self.held.remove(&job)
    }

    pub fn held(&self) -> usize {
        self.held.len()
    }

    pub fn limit(&self) -> Option<usize> {
        (self.limit != usize::MAX).then_some(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Fair, Las, PolicyKind, Srpt};
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Serves `sizes` (all ready at once) in quanta of `quantum` bytes and
    /// returns the order of quanta as (job, bytes).
    fn serve(policy: Box<dyn Policy>, sizes: &[u64], quantum: u64) -> Vec<(JobId, u64)> {
        let mut q = ReadyQueue::new(policy);
        let mut progress: HashMap<JobId, Progress> = HashMap::new();
        for (i, &s) in sizes.iter().enumerate() {
            progress.insert(i as JobId, Progress::new(s));
            q.push(i as JobId, Progress::new(s));
        }
        let mut out = Vec::new();
        while let Some(job) = q.pop() {
            let p = progress[&job];
            let n = quantum.min(p.remaining);
            out.push((job, n));
            let p = p.after(n);
            progress.insert(job, p);
            if p.remaining > 0 {
                q.push(job, p);
            }
        }
        out
    }

    #[test]
    fn fair_is_round_robin() {
        let order: Vec<_> = serve(Box::new(Fair), &[3, 1, 2], 1).into_iter().map(|x| x.0).collect();
        assert_eq!(order, vec![0, 1, 2, 0, 2, 0]);
    }

    #[test]
    fn srpt_finishes_shortest_first() {
        let order: Vec<_> = serve(Box::new(Srpt), &[5, 1, 3], 2).into_iter().map(|x| x.0).collect();
        assert_eq!(order, vec![1, 2, 2, 0, 0, 0]);
    }

    #[test]
    fn las_serves_least_attained() {
        let order: Vec<_> = serve(Box::new(Las), &[4, 2], 1).into_iter().map(|x| x.0).collect();
        assert_eq!(order, vec![0, 1, 0, 1, 0, 0]);
    }

    #[test]
    fn remove_and_requeue() {
        let mut q = ReadyQueue::new(Box::new(Srpt));
        q.push(1, Progress::new(10));
        q.push(2, Progress::new(5));
        assert!(q.remove(2));
        assert!(!q.remove(2));
        assert_eq!(q.len(), 1);
        q.push(1, Progress::new(1)); // re-key, not duplicate
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop(), Some(1));
        assert!(q.is_empty());
    }

    #[test]
    fn write_slots_limit() {
        let mut s = WriteSlots::new(Some(2));
        assert!(s.acquire(1) && s.acquire(2));
        assert!(!s.acquire(3));
        assert!(s.acquire(1), "a holder may write again");
        assert!(s.release(1));
        assert!(s.acquire(3));
        assert_eq!(s.held(), 2);
        assert_eq!(WriteSlots::new(None).limit(), None);
    }

    proptest! {
        /// Whatever the sequence of pushes, pops and removals, SRPT pops a job
        /// of minimal remaining size and LAS one of minimal attained service.
        #[test]
        fn pop_is_minimal(ops in proptest::collection::vec((0u64..20, 0u64..1000, 0u64..1000, 0u8..3), 1..200)) {
            for kind in [PolicyKind::Srpt, PolicyKind::Las, PolicyKind::Fair] {
                let mut q = ReadyQueue::new(kind.build());
                let mut model: HashMap<JobId, (Progress, u64)> = HashMap::new();
                let mut seq = 0u64;
                for &(job, remaining, attained, op) in &ops {
                    match op {
                        0 | 1 => {
                            let p = Progress { remaining, attained };
                            q.push(job, p);
                            model.insert(job, (p, seq));
                            seq += 1;
                        }
                        _ => {
                            let popped = q.pop();
                            let expect = model.iter()
                                .min_by_key(|(&j, &(p, s))| (kind.build().key(p), s, j))
                                .map(|(&j, _)| j);
                            prop_assert_eq!(popped, expect);
                            if let Some(j) = popped { model.remove(&j); }
                        }
                    }
                    prop_assert_eq!(q.len(), model.len());
                }
            }
        }

        /// Fair starves nobody: with n jobs ready, each gets a quantum within
        /// every n consecutive quanta until it finishes.
        #[test]
        fn fair_starves_nobody(sizes in proptest::collection::vec(1u64..20, 1..12)) {
            let quanta = serve(Box::new(Fair), &sizes, 1);
            // job -> (index of its last quantum, jobs active at that moment)
            let mut last: HashMap<JobId, (usize, usize)> = HashMap::new();
            let mut left: HashMap<JobId, u64> = sizes.iter().enumerate().map(|(i, &s)| (i as JobId, s)).collect();
            for (t, &(job, n)) in quanta.iter().enumerate() {
                let active = left.values().filter(|&&r| r > 0).count();
                if let Some(&(prev, active_then)) = last.get(&job) {
                    prop_assert!(t - prev <= active_then, "job {} waited {} quanta with {} active", job, t - prev, active_then);
                }
                last.insert(job, (t, active));
                *left.get_mut(&job).unwrap() -= n;
            }
        }
    }
}
