//! The sojourn web server (`sojourn-engine serve`) and the kernel priority bands
//! it uses (`sojourn-engine bands`, set up by [`qdisc`]). See docs/server.md.

pub mod access_log;
pub mod admin;
pub mod qdisc;
pub mod cli;
pub mod config;
pub mod files;
pub mod metrics;
pub mod opener;
pub mod stage_route;
pub mod worker;
