//! The event loop and the fluid policies of a single bottleneck link.
//!
//! A job is a response of known size; the link serves `rate` bytes per second
//! and is work-conserving. A [`Discipline`] decides who gets the link between
//! events; [`simulate`] advances time from event to event (the next arrival or
//! the discipline's next internal event), so a run costs `O(log n)` per event
//! for PS, SRPT and LAS.
//!
//! The fluid policies:
//! - FCFS: the oldest job gets the whole link (the Pollaczek-Khinchine model);
//! - PS: every job present gets an equal share (FAIR, 000 §1), by virtual time;
//! - SRPT: the job with the least remaining work gets the whole link,
//!   preemptively (004 §6.1);
//! - LAS: the jobs with the least attained service share the link, kept as a
//!   stack of attained-level groups that merge when one catches up with the next;
//! - bands: strict priority among the size bands of `sojourn_sched::Bands` by
//!   remaining bytes, processor sharing inside a band, a job moving to the next
//!   band as it drains (the kernel approximation of SRPT, 000 §3). A job sits in
//!   band `b` while its remaining bytes are in `[cutoff(b-1), cutoff(b))` and
//!   moves up when it reaches the lower cutoff.
//!
//! Guarantees: deterministic (ties go to the lower job index); every job that is
//! admitted finishes; `start <= finish` and `arrival <= start` for every job.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use sojourn_sched::Bands;

use crate::ps::{Amount, JobIndex, PsQueue};

/// A request: when it arrives (seconds) and how many bytes it sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Job {
    pub arrival: f64,
    pub size: f64,
}

/// When a job first received service and when it finished (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Served {
    pub start: f64,
    pub finish: f64,
}

/// A work-conserving single-link discipline in fluid form, in units of bytes.
///
/// Methods that change who is served push every job that is being served from
/// now on onto `serving` (a job may be pushed again later; the loop keeps the
/// first time as its start of service).
pub trait Discipline {
    /// Admits `job`, which needs `size` bytes.
    fn admit(&mut self, job: JobIndex, size: f64, serving: &mut Vec<JobIndex>);
    /// Link bytes until the next internal event, `None` when idle.
    fn work_to_next_event(&self) -> Option<f64>;
    /// Spends `work` bytes of link service (at most `work_to_next_event`).
    fn serve(&mut self, work: f64);
    /// Handles the internal event that is due now; returns the job that finished, if one did.
    fn fire(&mut self, serving: &mut Vec<JobIndex>) -> Option<JobIndex>;
    /// The time in seconds, told before each `admit` and `fire`: for disciplines whose
    /// decisions depend on it (admission control in [`crate::quantum`]); the fluid ones ignore it.
    fn clock(&mut self, _now: f64) {}
}

/// Runs `jobs` (sorted by arrival) through `discipline` on a link of `rate` bytes/s.
pub fn simulate<D: Discipline>(discipline: &mut D, jobs: &[Job], rate: f64) -> Vec<Served> {
    let mut served = vec![Served { start: f64::NAN, finish: f64::NAN }; jobs.len()];
    let mut serving = Vec::new();
    let mut now = 0.0f64;
    let mut next = 0usize;
    loop {
        let work = discipline.work_to_next_event();
        let arrival = jobs.get(next).map(|j| j.arrival);
        let event_first = match (work, arrival) {
            (Some(w), Some(a)) => now + w / rate <= a,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if let (true, Some(w)) = (event_first, work) {
            discipline.serve(w);
            now += w / rate;
            discipline.clock(now);
            if let Some(job) = discipline.fire(&mut serving) {
                served[job as usize].finish = now;
            }
        } else if let Some(a) = arrival {
            let a = a.max(now);
            if let Some(w) = work {
                discipline.serve(((a - now) * rate).min(w));
            }
            now = a;
            discipline.clock(now);
            discipline.admit(next as JobIndex, jobs[next].size, &mut serving);
            next += 1;
        }
        for job in serving.drain(..) {
            let s = &mut served[job as usize];
            if s.start.is_nan() {
                s.start = now;
            }
        }
    }
    served
}

/// First come, first served.
#[derive(Debug, Default)]
pub struct Fcfs {
    queue: VecDeque<(JobIndex, f64)>,
}

impl Discipline for Fcfs {
    fn admit(&mut self, job: JobIndex, size: f64, serving: &mut Vec<JobIndex>) {
        if self.queue.is_empty() {
            serving.push(job);
        }
        self.queue.push_back((job, size));
    }
    fn work_to_next_event(&self) -> Option<f64> {
        self.queue.front().map(|&(_, left)| left)
    }
    fn serve(&mut self, work: f64) {
        if let Some((_, left)) = self.queue.front_mut() {
            *left = (*left - work).max(0.0);
        }
    }
    fn fire(&mut self, serving: &mut Vec<JobIndex>) -> Option<JobIndex> {
        let (job, _) = self.queue.pop_front()?;
        serving.extend(self.queue.front().map(|&(j, _)| j));
        Some(job)
    }
}

/// Processor sharing (FAIR).
#[derive(Debug, Default)]
pub struct Ps {
    queue: PsQueue,
}

impl Discipline for Ps {
    fn admit(&mut self, job: JobIndex, size: f64, serving: &mut Vec<JobIndex>) {
        serving.push(job);
        self.queue.admit(job, size);
    }
    fn work_to_next_event(&self) -> Option<f64> {
        self.queue.work_to_next_exit().map(|w| w * self.queue.len() as f64)
    }
    fn serve(&mut self, work: f64) {
        if !self.queue.is_empty() {
            self.queue.serve(work / self.queue.len() as f64);
        }
    }
    fn fire(&mut self, _serving: &mut Vec<JobIndex>) -> Option<JobIndex> {
        self.queue.exit()
    }
}

/// Preemptive shortest remaining processing time.
#[derive(Debug, Default)]
pub struct Srpt {
    remaining: BinaryHeap<Reverse<(Amount, JobIndex)>>,
}

impl Srpt {
    fn top(&self) -> Option<JobIndex> {
        self.remaining.peek().map(|Reverse((_, job))| *job)
    }
}

impl Discipline for Srpt {
    fn admit(&mut self, job: JobIndex, size: f64, serving: &mut Vec<JobIndex>) {
        self.remaining.push(Reverse((Amount(size), job)));
        serving.extend(self.top());
    }
    fn work_to_next_event(&self) -> Option<f64> {
        self.remaining.peek().map(|Reverse((left, _))| left.0)
    }
    fn serve(&mut self, work: f64) {
        // Lowering the smallest key keeps it the smallest: the heap stays valid.
        if let Some(mut top) = self.remaining.peek_mut() {
            top.0 .0 = Amount((top.0 .0 .0 - work).max(0.0));
        }
    }
    fn fire(&mut self, serving: &mut Vec<JobIndex>) -> Option<JobIndex> {
        let Reverse((_, job)) = self.remaining.pop()?;
        serving.extend(self.top());
        Some(job)
    }
}

/// Least attained service: a stack of groups of equal attained service, the
/// last (lowest level) being served; a group's virtual time is its level.
#[derive(Debug, Default)]
pub struct Las {
    groups: Vec<PsQueue>,
    spare: Vec<PsQueue>,
}

impl Las {
    /// Link bytes until the served group's next job finishes, and until it
    /// reaches the level of the group below it.
    fn next_events(&self) -> Option<(f64, Option<f64>)> {
        let (active, rest) = self.groups.split_last()?;
        let n = active.len() as f64;
        let exit = active.work_to_next_exit().unwrap_or(f64::INFINITY) * n;
        let merge = rest.last().map(|below| (below.virtual_time() - active.virtual_time()).max(0.0) * n);
        Some((exit, merge))
    }
}

impl Discipline for Las {
    fn admit(&mut self, job: JobIndex, size: f64, serving: &mut Vec<JobIndex>) {
        serving.push(job);
        match self.groups.last_mut() {
            Some(active) if active.virtual_time() == 0.0 => active.admit(job, size),
            _ => {
                let mut group = self.spare.pop().unwrap_or_default();
                group.admit(job, size);
                self.groups.push(group);
            }
        }
    }
    fn work_to_next_event(&self) -> Option<f64> {
        self.next_events().map(|(exit, merge)| merge.map_or(exit, |m| m.min(exit)))
    }
    fn serve(&mut self, work: f64) {
        if let Some(active) = self.groups.last_mut() {
            let n = active.len() as f64;
            active.serve(work / n);
        }
    }
    fn fire(&mut self, _serving: &mut Vec<JobIndex>) -> Option<JobIndex> {
        let (exit, merge) = self.next_events()?;
        let mut active = self.groups.pop()?;
        if !merge.is_some_and(|m| exit > m) {
            let job = active.exit();
            if active.is_empty() {
                self.spare.push(active);
            } else {
                self.groups.push(active);
            }
            job
        } else {
            let below = self.groups.last_mut().expect("a merge needs a group below");
            below.absorb(&mut active);
            self.spare.push(active);
            None
        }
    }
}

/// Strict priority among size bands by remaining bytes, PS inside a band (000 §3).
#[derive(Debug)]
pub struct Banded {
    cutoffs: Vec<f64>,
    bands: Bands,
    queues: Vec<PsQueue>,
    waiting: Vec<Vec<JobIndex>>,
}

impl Banded {
    pub fn new(bands: Bands) -> Self {
        let count = bands.count();
        Banded {
            cutoffs: bands.cutoffs().iter().map(|&c| c as f64).collect(),
            bands,
            queues: (0..count).map(|_| PsQueue::new()).collect(),
            waiting: vec![Vec::new(); count],
        }
    }

    /// Remaining bytes at which a job leaves band `band` for the one above it.
    fn floor(&self, band: usize) -> f64 {
        if band == 0 {
            0.0
        } else {
            self.cutoffs[band - 1]
        }
    }

    fn served_band(&self) -> Option<usize> {
        self.queues.iter().position(|q| !q.is_empty())
    }

    /// Reports the jobs of the served band that had not been served yet.
    fn note_serving(&mut self, serving: &mut Vec<JobIndex>) {
        if let Some(band) = self.served_band() {
            serving.append(&mut self.waiting[band]);
        }
    }
}

impl Discipline for Banded {
    fn admit(&mut self, job: JobIndex, size: f64, serving: &mut Vec<JobIndex>) {
        let band = self.bands.band(size.max(0.0).floor() as u64);
        let work = size - self.floor(band);
        self.queues[band].admit(job, work);
        self.waiting[band].push(job);
        self.note_serving(serving);
    }
    fn work_to_next_event(&self) -> Option<f64> {
        let q = &self.queues[self.served_band()?];
        q.work_to_next_exit().map(|w| w * q.len() as f64)
    }
    fn serve(&mut self, work: f64) {
        if let Some(band) = self.served_band() {
            let q = &mut self.queues[band];
            let n = q.len() as f64;
            q.serve(work / n);
        }
    }
    fn fire(&mut self, serving: &mut Vec<JobIndex>) -> Option<JobIndex> {
        let band = self.served_band()?;
        let job = self.queues[band].exit()?;
        let finished = if band == 0 {
            Some(job)
        } else {
            let work = self.floor(band) - self.floor(band - 1);
            self.queues[band - 1].admit(job, work);
            None
        };
        self.note_serving(serving);
        finished
    }
}

/// The fluid policies by name.
#[derive(Clone, Debug, PartialEq)]
pub enum FluidPolicy {
    Fcfs,
    Ps,
    Srpt,
    Las,
    Bands(Bands),
}

impl FluidPolicy {
    pub fn name(&self) -> &'static str {
        match self {
            FluidPolicy::Fcfs => "fcfs",
            FluidPolicy::Ps => "ps",
            FluidPolicy::Srpt => "srpt",
            FluidPolicy::Las => "las",
            FluidPolicy::Bands(_) => "bands",
        }
    }

    /// Simulates `jobs` (sorted by arrival) on a link of `rate` bytes/s.
    pub fn run(&self, jobs: &[Job], rate: f64) -> Vec<Served> {
        match self {
            FluidPolicy::Fcfs => simulate(&mut Fcfs::default(), jobs, rate),
            FluidPolicy::Ps => simulate(&mut Ps::default(), jobs, rate),
            FluidPolicy::Srpt => simulate(&mut Srpt::default(), jobs, rate),
            FluidPolicy::Las => simulate(&mut Las::default(), jobs, rate),
            FluidPolicy::Bands(bands) => simulate(&mut Banded::new(bands.clone()), jobs, rate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn jobs(list: &[(f64, f64)]) -> Vec<Job> {
        list.iter().map(|&(arrival, size)| Job { arrival, size }).collect()
    }

    fn finishes(policy: FluidPolicy, list: &[(f64, f64)]) -> Vec<f64> {
        policy.run(&jobs(list), 1.0).iter().map(|s| s.finish).collect()
    }

    fn starts(policy: FluidPolicy, list: &[(f64, f64)]) -> Vec<f64> {
        policy.run(&jobs(list), 1.0).iter().map(|s| s.start).collect()
    }

    // Hand-worked cases on a 1 byte/s link: sizes 4 at t=0, 1 at t=1, 2 at t=2.
    const CASE: [(f64, f64); 3] = [(0.0, 4.0), (1.0, 1.0), (2.0, 2.0)];

    #[test]
    fn fcfs_by_hand() {
        assert_eq!(finishes(FluidPolicy::Fcfs, &CASE), vec![4.0, 5.0, 7.0]);
        assert_eq!(starts(FluidPolicy::Fcfs, &CASE), vec![0.0, 4.0, 5.0]);
    }

    #[test]
    fn srpt_by_hand() {
        // t=1: job 1 (1 left) preempts job 0 (3 left), done at 2; t=2: job 2 (2) beats job 0 (3): done 4; job 0 at 7.
        assert_eq!(finishes(FluidPolicy::Srpt, &CASE), vec![7.0, 2.0, 4.0]);
        assert_eq!(starts(FluidPolicy::Srpt, &CASE), vec![0.0, 1.0, 2.0]);
    }

    #[test]
    fn ps_by_hand() {
        // [0,1): job 0 alone, 3 left. [1,2): two share, job 1 gets 0.5, job 0 2.5 left.
        // t=2: three share; job 1 needs 0.5 -> 1.5 s, t=3.5 (job 0 2 left, job 2 1.5 left).
        // two share: job 2 needs 1.5 -> 3 s, t=6.5; job 0 has 0.5 left -> 7.
        assert_eq!(finishes(FluidPolicy::Ps, &CASE), vec![7.0, 3.5, 6.5]);
        assert_eq!(starts(FluidPolicy::Ps, &CASE), vec![0.0, 1.0, 2.0]);
    }

    #[test]
    fn las_by_hand() {
        // t=1: job 0 attained 1, job 1 (0) served alone, done at 2. t=2: job 2 (0) served
        // alone until it reaches 1 at t=3, then shares with job 0: job 2 needs 1 more -> t=5.
        // Job 0 attained 2 at t=5, needs 2 more -> 7.
        assert_eq!(finishes(FluidPolicy::Las, &CASE), vec![7.0, 2.0, 5.0]);
    }

    #[test]
    fn bands_by_hand() {
        // Cutoffs 2 and 3 bytes: bands [0,2), [2,3), [3,inf).
        let bands = FluidPolicy::Bands(Bands::new(vec![2, 3]).unwrap());
        // t=0 job 0 (4) in band 2; t=1 job 1 (1) band 0 takes the link, done t=2 (job 0 at 3 left,
        // still band 2). t=2 job 2 (2) band 1 served alone; reaches 0 left in band 0 at t=4.
        // Job 0 then drains: 3 left -> t=7.
        assert_eq!(finishes(bands.clone(), &CASE), vec![7.0, 2.0, 4.0]);
        // One band is processor sharing.
        let one = FluidPolicy::Bands(Bands::new(vec![1 << 40]).unwrap());
        assert_eq!(finishes(one, &CASE), finishes(FluidPolicy::Ps, &CASE));
    }

    fn all_policies() -> Vec<FluidPolicy> {
        vec![
            FluidPolicy::Fcfs,
            FluidPolicy::Ps,
            FluidPolicy::Srpt,
            FluidPolicy::Las,
            FluidPolicy::Bands(Bands::new(vec![2, 5, 20]).unwrap()),
        ]
    }

    /// Random jobs on a 1 byte/s link: integer arrivals and sizes keep the
    /// arithmetic exact enough to compare policies tightly.
    fn job_sets() -> impl Strategy<Value = Vec<Job>> {
        proptest::collection::vec((0u32..6, 0u32..30), 1..40).prop_map(|gaps| {
            let mut t = 0.0;
            gaps.into_iter()
                .map(|(gap, size)| {
                    t += gap as f64;
                    Job { arrival: t, size: size as f64 }
                })
                .collect()
        })
    }

    proptest! {
        /// Every policy is work-conserving: the link is busy exactly when work is
        /// present, so the last completion (and the makespan) is the same for all.
        #[test]
        fn work_conserving_and_causal(jobs in job_sets()) {
            let mut last = Vec::new();
            for policy in all_policies() {
                let served = policy.run(&jobs, 1.0);
                for (job, s) in jobs.iter().zip(&served) {
                    prop_assert!(s.start >= job.arrival - 1e-9 && s.finish >= s.start - 1e-9, "{policy:?} {job:?} {s:?}");
                    prop_assert!(s.finish >= job.arrival + job.size - 1e-6, "{policy:?}: served faster than the link");
                }
                last.push(served.iter().map(|s| s.finish).fold(0.0, f64::max));
            }
            for l in &last {
                prop_assert!((l - last[0]).abs() < 1e-6, "{last:?}");
            }
        }

        /// SRPT minimizes the mean response time on one link; FCFS finishes in arrival order.
        #[test]
        fn srpt_is_optimal_fcfs_is_ordered(jobs in job_sets()) {
            let total = |policy: &FluidPolicy| -> f64 {
                policy.run(&jobs, 1.0).iter().zip(&jobs).map(|(s, j)| s.finish - j.arrival).sum()
            };
            let srpt = total(&FluidPolicy::Srpt);
            for policy in all_policies() {
                prop_assert!(srpt <= total(&policy) + 1e-6, "{policy:?}");
            }
            let fcfs = FluidPolicy::Fcfs.run(&jobs, 1.0);
            prop_assert!(fcfs.windows(2).all(|w| w[0].finish <= w[1].finish));
        }

        /// Under PS and LAS, of two jobs arriving together the smaller never finishes later.
        #[test]
        fn size_order_under_ps_and_las(jobs in job_sets()) {
            for policy in [FluidPolicy::Ps, FluidPolicy::Las] {
                let served = policy.run(&jobs, 1.0);
                for i in 0..jobs.len() {
                    for k in 0..jobs.len() {
                        if jobs[i].arrival == jobs[k].arrival && jobs[i].size < jobs[k].size {
                            prop_assert!(served[i].finish <= served[k].finish + 1e-9, "{policy:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn zero_sizes_and_idle_gaps() {
        for policy in [FluidPolicy::Fcfs, FluidPolicy::Ps, FluidPolicy::Srpt, FluidPolicy::Las] {
            let f = finishes(policy.clone(), &[(1.0, 0.0), (5.0, 2.0), (5.0, 0.0)]);
            assert_eq!(f[0], 1.0, "{policy:?}");
            assert_eq!(f[1], 7.0, "{policy:?}");
        }
    }
}
