//! Dynamic CPU-bound stages and session-aware dispatch (003).
//!
//! - [`study`]: the four-queue productivity simulation of 003 §4.1 in virtual
//!   time, driving the dispatch policies of `sojourn_sched::dispatch`;
//! - [`config`]: stages, classes by client address, policy (`serve --stages FILE`);
//! - [`pool`]: the worker pool doing real CPU work per stage request, with metrics;
//! - [`cli`]: `sojourn-engine stages`.

pub mod cli;
pub mod config;
pub mod pool;
pub mod study;

pub use config::{PoolSpec, StagesConfig};
pub use pool::{DropReason, Metrics, Outcome, Reply, StagePool};
