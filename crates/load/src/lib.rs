//! `sojourn-engine load`: the load generator (issue 3).
//!
//! Pure cores, each taking `now` from the caller: [`conn_pool`] (requests to persistent
//! connections), [`response`] (HTTP/1.1 response framing), [`content`] (the deterministic
//! body rule), [`workload`] (when which request is due: open trace replay, Poisson, closed
//! users, capacity probes, sessions). The thin mio loop in [`event_loop`] drives them and
//! [`record`] streams one record per attempt.
pub mod cli;
pub mod content;
pub mod conn_pool;
pub mod response;
pub mod session;
pub mod think;
pub mod workload;
pub mod record;
pub mod event_loop;
pub mod ids;
