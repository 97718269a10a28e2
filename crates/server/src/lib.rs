//! The sojourn web server (`sojourn-engine serve`) and its side of the kernel priority
//! bands ([`qdisc`]: the `SO_PRIORITY` of each band's class; the testbed builds the
//! classes). See docs/server.md.

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
