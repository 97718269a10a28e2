//! Scheduling policies as pure data structures.
//!
//! Nothing in this crate performs I/O or reads a clock: callers pass in what
//! happened (a response became ready, a quantum was written) and ask what to do
//! next. That is what lets the server (`crates/server`) and the simulator
//! (`crates/sim`) run the very same policy code, one against sockets and one in
//! virtual time.
//!
//! Guarantees:
//! - every operation is deterministic: the same sequence of calls gives the same
//!   answers (ties are broken by order of insertion, never by hashing);
//! - `ReadyQueue::pop` is `O(log n)`, as are `push` and `remove`.

pub mod admission;
pub mod bands;
pub mod dispatch;
pub mod dwfs;
pub mod policy;
pub mod queue;
pub mod rate;
pub mod scheduler;

pub use admission::{Admission, AdmissionSpec, Order, Reason, Verdict};
pub use bands::Bands;
pub use policy::{Fair, Las, Policy, PolicyKind, Progress, Srpt};
pub use queue::{JobId, ReadyQueue, WriteSlots};
pub use scheduler::{Grant, Scheduler};
