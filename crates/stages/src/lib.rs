//! Dynamic CPU-bound stages and session-aware dispatch (003).
//!
//! - [`study`]: the four-queue productivity simulation of 003 §4.1 in virtual
//!   time, driving the dispatch policies of `sojourn_sched::dispatch`;
//! - [`cli`]: `sojourn-engine stages`.

pub mod cli;
pub mod study;
