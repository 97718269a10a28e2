//! `sojourn-sim`: a discrete-event simulator of one bottleneck link.
//!
//! Jobs are responses of known size arriving at known times (from a trace,
//! [`trace`], or a synthetic M/G/1 workload, [`workload`]); the link serves them
//! under a fluid policy ([`fluid`]: FCFS, PS, SRPT, LAS, size bands) or by write
//! quanta through the very `sojourn_sched` queue and write slots the server uses
//! ([`quantum`]). Results are per-job records in the load generator's format and
//! a summary ([`output`]). Everything is deterministic for a given input and seed.

pub mod cli;
pub mod fluid;
pub mod output;
pub mod ps;
pub mod quantum;
pub mod trace;
pub mod workload;
