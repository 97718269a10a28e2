//! Processor sharing in virtual time: the building block of the fluid policies.
//!
//! Under processor sharing every job present receives an equal share of the
//! link. Instead of updating every job at every event, the queue keeps a
//! *virtual time* `V`: the service each present job has received since `V`
//! was zero. A job admitted with `w` bytes still to go leaves when `V` reaches
//! its tag `V_admit + w`, so only the smallest tag matters and every operation
//! is `O(log n)` on a binary heap.
//!
//! Guarantees: jobs leave in increasing tag order, ties by job index (the
//! earlier-arriving job first), so runs are deterministic; `V` restarts at zero
//! whenever the queue empties, which keeps tags small and precise.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Index of a job in the simulated input (its row in the trace).
pub type JobIndex = u32;

/// An `f64` ordered by `total_cmp`; simulated amounts are never NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Amount(pub f64);

impl Eq for Amount {}

impl PartialOrd for Amount {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Amount {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Jobs sharing one server equally, ordered by virtual finishing tag.
#[derive(Debug, Default)]
pub struct PsQueue {
    virtual_time: f64,
    tags: BinaryHeap<Reverse<(Amount, JobIndex)>>,
}

impl PsQueue {
    pub fn new() -> Self {
        PsQueue::default()
    }

    pub fn len(&self) -> usize {
        self.tags.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// Service each present job has received since the queue last emptied.
    pub fn virtual_time(&self) -> f64 {
        self.virtual_time
    }

    /// Admits `job` with `work` bytes to go before it leaves this queue.
    pub fn admit(&mut self, job: JobIndex, work: f64) {
        if self.tags.is_empty() {
            self.virtual_time = 0.0;
        }
        self.tags.push(Reverse((Amount(self.virtual_time + work), job)));
    }

    /// Bytes each present job still needs until the next one leaves.
    pub fn work_to_next_exit(&self) -> Option<f64> {
        self.tags.peek().map(|Reverse((tag, _))| (tag.0 - self.virtual_time).max(0.0))
    }

    /// Gives every present job `per_job` more bytes of service.
    pub fn serve(&mut self, per_job: f64) {
        self.virtual_time += per_job;
    }

    /// Removes the job with the smallest tag, which is due now: the virtual
    /// time is set to its tag so rounding never lets a job overshoot.
    pub fn exit(&mut self) -> Option<JobIndex> {
        let Reverse((tag, job)) = self.tags.pop()?;
        self.virtual_time = self.virtual_time.max(tag.0);
        Some(job)
    }

    /// Moves every job of `other` into `self`; both must be at the same virtual time.
    pub fn absorb(&mut self, other: &mut PsQueue) {
        self.tags.append(&mut other.tags);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_in_tag_order_with_virtual_time() {
        let mut q = PsQueue::new();
        q.admit(0, 3.0);
        q.admit(1, 1.0);
        assert_eq!(q.work_to_next_exit(), Some(1.0));
        q.serve(1.0);
        assert_eq!(q.exit(), Some(1));
        q.admit(2, 1.0); // tag 2.0, before job 0 (tag 3.0)
        assert_eq!(q.work_to_next_exit(), Some(1.0));
        q.serve(1.0);
        assert_eq!(q.exit(), Some(2));
        q.serve(1.0);
        assert_eq!(q.exit(), Some(0));
        assert!(q.is_empty());
        q.admit(3, 5.0);
        assert_eq!(q.virtual_time(), 0.0, "an empty queue restarts its virtual time");
    }

    #[test]
    fn ties_leave_in_index_order() {
        let mut q = PsQueue::new();
        for job in [4, 2, 9] {
            q.admit(job, 1.0);
        }
        let order: Vec<_> = std::iter::from_fn(|| q.exit()).collect();
        assert_eq!(order, vec![2, 4, 9]);
    }
}
