//! `sojourn-wan`: the userspace WAN link emulator behind `sojourn-engine wan`.
//!
//! Layers (pure cores take `now`; only `cli` does I/O, through `sojourn_sys`: the TUN
//! device, timerfd, clock and signals):
//! - `loss`: Bernoulli and two-state per-connection loss (002 §3.4);
//! - `pipe`: one direction of a link: loss -> drop-tail queue -> rate -> delay;
//! - `offload`: vnet headers and cutting GSO packets into segments;
//! - `packet`: IPv4/TCP views (etherparse) for classification and MSS clamping;
//! - `config`: the TOML configuration (`wan --config`) the testbed writes;
//! - `emulator`: packets to pipes by client address, counters;
//! - `cli`: the `wan` subcommand's event loop.

pub mod cli;
pub mod config;
pub mod emulator;
pub mod loss;
pub mod offload;
pub mod packet;
pub mod pipe;
