//! Quantum-based scheduling: the server's own policy code in virtual time.
//!
//! The server (crates/server) keeps every response with bytes to send in a
//! `sojourn_sched::ReadyQueue`, gives the head a write quantum (004 §3.1) when a
//! `WriteSlots` slot is free (limited write concurrency, 004 §3.3), and when that
//! quantum's data has left the kernel frees the slot and re-queues the response
//! with its new `Progress`. This module makes exactly those calls, in the same
//! order, so the simulator cannot drift from the server's policy.
//!
//! The kernel is modelled as processor sharing among the quanta it holds (TCP
//! flows sharing the bottleneck fairly); with a write concurrency of one the
//! application's order alone decides what reaches the link.
//!
//! Guarantees: deterministic; a response's bytes go out in quanta of at most
//! `quantum` bytes; at most `write_concurrency` responses hold data in the kernel.

use sojourn_sched::{JobId, PolicyKind, Progress, ReadyQueue, WriteSlots};

use crate::fluid::Discipline;
use crate::fluid::Ps;
use crate::ps::JobIndex;

/// Write quantum, policy and write concurrency: the server's scheduling options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantumConfig {
    pub policy: PolicyKind,
    pub quantum: u64,
    pub write_concurrency: Option<usize>,
}

/// The server's scheduler over a processor-sharing kernel.
#[derive(Debug)]
pub struct Quantum {
    quantum: u64,
    ready: ReadyQueue,
    slots: WriteSlots,
    kernel: Ps,
    progress: Vec<Progress>,
    in_kernel: Vec<u64>,
    /// Responses with nothing to send (size 0), finished as soon as they arrive.
    empty: Vec<JobIndex>,
    quanta: u64,
}

impl Quantum {
    pub fn new(config: QuantumConfig) -> Self {
        Quantum {
            quantum: config.quantum.max(1),
            ready: ReadyQueue::new(config.policy.build()),
            slots: WriteSlots::new(config.write_concurrency),
            kernel: Ps::default(),
            progress: Vec::new(),
            in_kernel: Vec::new(),
            empty: Vec::new(),
            quanta: 0,
        }
    }

    /// Write quanta handed to the kernel so far.
    pub fn quanta(&self) -> u64 {
        self.quanta
    }

    /// Hands quanta to the kernel while the head of the queue may write.
    fn dispatch(&mut self, serving: &mut Vec<JobIndex>) {
        while let Some(id) = self.ready.peek() {
            if !self.slots.may_write(id) {
                break;
            }
            self.ready.pop();
            self.slots.acquire(id);
            let job = id as usize;
            let bytes = self.quantum.min(self.progress[job].remaining);
            self.in_kernel[job] = bytes;
            self.quanta += 1;
            self.kernel.admit(id as JobIndex, bytes as f64, serving);
        }
    }
}

impl Discipline for Quantum {
    fn admit(&mut self, job: JobIndex, size: f64, serving: &mut Vec<JobIndex>) {
        let index = job as usize;
        if self.progress.len() <= index {
            self.progress.resize(index + 1, Progress::default());
            self.in_kernel.resize(index + 1, 0);
        }
        let bytes = size.max(0.0).round() as u64;
        self.progress[index] = Progress::new(bytes);
        if bytes == 0 {
            serving.push(job);
            self.empty.push(job);
            return;
        }
        self.ready.push(job as JobId, self.progress[index]);
        self.dispatch(serving);
    }

    fn work_to_next_event(&self) -> Option<f64> {
        if self.empty.is_empty() {
            self.kernel.work_to_next_event()
        } else {
            Some(0.0)
        }
    }

    fn serve(&mut self, work: f64) {
        self.kernel.serve(work);
    }

    fn fire(&mut self, serving: &mut Vec<JobIndex>) -> Option<JobIndex> {
        if let Some(job) = self.empty.pop() {
            return Some(job);
        }
        let job = self.kernel.fire(serving)?;
        let index = job as usize;
        self.slots.release(job as JobId);
        self.progress[index] = self.progress[index].after(self.in_kernel[index]);
        self.in_kernel[index] = 0;
        let finished = self.progress[index].remaining == 0;
        if !finished {
            self.ready.push(job as JobId, self.progress[index]);
        }
        self.dispatch(serving);
        finished.then_some(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fluid::{simulate, FluidPolicy, Job};

    fn run(policy: PolicyKind, quantum: u64, concurrency: Option<usize>, list: &[(f64, f64)]) -> Vec<f64> {
        let jobs: Vec<Job> = list.iter().map(|&(arrival, size)| Job { arrival, size }).collect();
        let mut q = Quantum::new(QuantumConfig { policy, quantum, write_concurrency: concurrency });
        simulate(&mut q, &jobs, 1.0).iter().map(|s| s.finish).collect()
    }

    #[test]
    fn one_slot_srpt_by_hand() {
        // Quantum 2, one slot, 1 byte/s. t=0 job 0 (5) writes 2 (done t=2). t=1 job 1 (1) waits.
        // t=2: job 1 (1 left) beats job 0 (3 left): t=3. Then job 0: 2 -> t=5, 1 -> t=6.
        assert_eq!(run(PolicyKind::Srpt, 2, Some(1), &[(0.0, 5.0), (1.0, 1.0)]), vec![6.0, 3.0]);
    }

    #[test]
    fn one_slot_fair_is_round_robin() {
        // Quantum 1, both at t=0: 0,1,0,1,0 -> job 1 done at 4, job 0 at 5.
        assert_eq!(run(PolicyKind::Fair, 1, Some(1), &[(0.0, 3.0), (0.0, 2.0)]), vec![5.0, 4.0]);
    }

    #[test]
    fn unlimited_slots_share_like_ps() {
        // With every response in the kernel, the policy no longer matters: processor sharing.
        let list = [(0.0, 4.0), (1.0, 1.0), (2.0, 2.0)];
        let ps = FluidPolicy::Ps.run(&list.iter().map(|&(a, s)| Job { arrival: a, size: s }).collect::<Vec<_>>(), 1.0);
        for policy in PolicyKind::ALL {
            let f = run(policy, 1 << 20, None, &list);
            assert_eq!(f, ps.iter().map(|s| s.finish).collect::<Vec<_>>(), "{policy}");
        }
    }

    proptest::proptest! {
        /// Whatever the policy, quantum and concurrency, the scheduler keeps the link
        /// busy while any response has bytes left: the last completion matches fluid PS.
        #[test]
        fn work_conserving(sizes in proptest::collection::vec((0u32..5, 0u32..40), 1..30),
                           quantum in 1u64..16, concurrency in proptest::option::of(1usize..4), kind in 0usize..3) {
            let mut t = 0.0;
            let list: Vec<(f64, f64)> = sizes.iter().map(|&(gap, size)| { t += gap as f64; (t, size as f64) }).collect();
            let jobs: Vec<Job> = list.iter().map(|&(a, s)| Job { arrival: a, size: s }).collect();
            let fluid_last = FluidPolicy::Ps.run(&jobs, 1.0).iter().map(|s| s.finish).fold(0.0, f64::max);
            let q = run(PolicyKind::ALL[kind], quantum, concurrency, &list);
            let last = q.iter().copied().fold(0.0, f64::max);
            proptest::prop_assert!((last - fluid_last).abs() < 1e-6, "{} vs {}", last, fluid_last);
            for (f, job) in q.iter().zip(&jobs) {
                proptest::prop_assert!(*f >= job.arrival + job.size - 1e-6);
            }
        }
    }

    #[test]
    fn small_quanta_approach_fluid_srpt() {
        let list = [(0.0, 400.0), (100.0, 100.0), (200.0, 200.0)];
        let fluid = FluidPolicy::Srpt.run(&list.iter().map(|&(a, s)| Job { arrival: a, size: s }).collect::<Vec<_>>(), 1.0);
        let q = run(PolicyKind::Srpt, 1, Some(1), &list);
        for (a, b) in q.iter().zip(&fluid) {
            assert!((a - b.finish).abs() <= 1.0, "{a} vs {}", b.finish);
        }
    }
}
