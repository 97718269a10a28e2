//! `sojourn-engine load`: the load generator (issue 3).
//!
//! Pure cores, each taking `now` from the caller: [`dispatch`] (requests to persistent
//! connections), [`response`] (HTTP/1.1 response framing), [`content`] (the deterministic
//! body rule), [`workload`] (when which request is due: open trace replay, Poisson, closed
//! users, capacity probes, sessions). The thin mio loop in [`engine`] drives them and
//! [`record`] streams one record per attempt.
pub mod cli;
pub mod config_file;
pub mod content;
pub mod dispatch;
pub mod response;
pub mod session;
pub mod think;
pub mod workload;
pub mod record;
pub mod engine;
pub mod ids;
