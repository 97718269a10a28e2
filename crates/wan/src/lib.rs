//! `sojourn-wan`: the userspace WAN link emulator behind `sojourn-engine wan`.
//!
//! Layers (pure cores take `now`; only `sys` and `cli` do I/O):
//! - `loss`: Bernoulli and two-state per-connection loss (002 §3.4);
//! - `pipe`: one direction of a link: loss -> drop-tail queue -> rate -> delay;
//! - `offload`: vnet headers and cutting GSO packets into segments;
//! - `packet`: IPv4/TCP views (etherparse) for classification and MSS clamping;
//! - `config`: the TOML configuration (`wan --config`) the testbed writes;
//! - `emulator`: packets to pipes by client address, counters;
//! - `sys`: TUN device, timerfd, clock, signals (Linux);
//! - `cli`: the `wan` subcommand's event loop.

pub mod cli;
pub mod config;
pub mod emulator;
pub mod loss;
pub mod offload;
pub mod packet;
pub mod pipe;
pub mod sys;
