//! `sojourn-engine wan`: the TUN shell around `emulator::Emulator`.
//!
//! The loop: write back every packet that is due, read up to a small batch of
//! waiting packets from the TUN device (each stamped with the clock as it is
//! read), write the counters when their interval is up, and, when nothing more
//! is waiting, arm the timerfd `SPIN_NS` before the earliest next deadline
//! (absolute CLOCK_MONOTONIC), poll the TUN device and the timer, and poll
//! without sleeping for the last `SPIN_NS`, so a timer wake-up's latency never
//! adds to a packet's delay (as the load generator paces, docs/load.md).
//! It prints `ready` on stdout once attached, and on SIGINT/SIGTERM writes the
//! final counters (and the summary) and exits 0.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::config::{Config, RunOptions};
use crate::emulator::{Direction, Emulator, GsoCounters, Offload, PipeReport};
use sojourn_sys::clock::monotonic_ns;
use sojourn_sys::fd::poll_readable;
use sojourn_sys::signals::{self, SecondSignal};
use sojourn_sys::thread;
use sojourn_sys::timer::Timer;
use sojourn_sys::tun::Tun;

/// Emulate wide-area links on a TUN device: per client group and direction,
/// loss (Bernoulli or two-state per connection, 002 §3.4) -> drop-tail queue ->
/// rate -> propagation delay (+ jitter). The testbed (`sojourn testbed`) creates
/// the device and routes through it; see docs/testbed.md for the config format.
#[derive(Debug, clap::Args)]
pub struct WanArgs {
    /// TOML config, kebab-case keys: tun = NAME, seed = N, any option below, and
    /// [[groups]] with name, addrs, mtu, down = {...}, up = {...} (docs/testbed.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Options given here replace the file's keys of the same name.
    #[command(flatten)]
    pub options: RunOptions,
}

/// The largest IP packet plus a vnet header.
const MAX_PACKET: usize = 65_536 + crate::offload::VNET_HDR_LEN;
/// Packets read per turn of the loop before due packets are released again.
const READ_BATCH: usize = 16;
/// Packets released per turn of the loop before arrivals are read again: writing one runs
/// the receiving hosts' stacks in this thread (10-20 µs a packet at 400 ms RTT, 002), so a
/// whole wave of thousands would hold arrivals unread, and unstamped, for tens of ms.
const RELEASE_BATCH: usize = 16;
/// How long before a deadline the loop stops sleeping and polls without waiting:
/// above the timer wake-up latency seen on these VMs (p99 ~50-100 µs under load
/// with SCHED_FIFO would otherwise be added to the delay), small enough to cost
/// little CPU at low packet rates.
const SPIN_NS: u64 = 50_000;

pub fn run(args: WanArgs) -> anyhow::Result<()> {
    let config: Config = sojourn_config::read("--config", &args.config)?;
    config.validate().with_context(|| format!("--config {}", args.config.display()))?;
    let options = args.options.over(config.run.clone());
    let offload = if options.no_offload == Some(true) { Offload::Off } else { Offload::Auto };
    let mut emulator = Emulator::new(&config, offload)?;
    let mut counters = options.counters.as_ref().map(CounterWriter::create).transpose()?;
    let tun = Tun::open(&config.tun, emulator.vnet_headers()).with_context(|| format!("attaching to TUN device {} (needs CAP_NET_ADMIN)", config.tun))?;
    let mut timer = Timer::new().context("timerfd_create")?;
    signals::stop_on_sigint_sigterm(SecondSignal::KeepsStopping).context("installing SIGINT/SIGTERM handlers")?;
    // Without this the kernel may fire our timer up to 50 µs late.
    let _ = thread::set_timer_slack(Duration::from_nanos(1));
    if let Some(priority) = options.realtime {
        if let Err(err) = thread::set_realtime_priority(priority) {
            eprintln!("sojourn-engine wan: SCHED_FIFO {priority} refused ({err}); running at normal priority");
        }
    }
    println!("ready");
    io::stdout().flush()?;

    let interval_ns = (options.interval_s() * 1e9) as u64;
    let start = monotonic_ns();
    let mut next_counters = start + interval_ns;
    // The whole run's lateness: each interval's, added in as its counters are written.
    let mut lateness = lateness_histogram();
    let mut interval = IntervalStats::new();
    let mut write_errors = 0u64;
    let mut buf = vec![0u8; MAX_PACKET];
    // Packets released back to back: over consecutive turns while more stay due.
    let mut burst = 0u64;
    while !signals::stop_requested() {
        // Release first, so a burst of arrivals never delays packets already due; a batch at a
        // time, so arrivals are read, and stamped, between batches (Emulator::release).
        let now = monotonic_ns();
        let released = emulator.release(now, RELEASE_BATCH, |scheduled, packet| {
            let _ = interval.lateness.record(monotonic_ns().saturating_sub(scheduled).max(1));
            if tun.send(packet).is_err() {
                write_errors += 1;
            }
        });
        burst += released as u64;
        interval.burst_max = interval.burst_max.max(burst);
        let more_due = emulator.next_release().is_some_and(|at| at <= now);
        if !more_due {
            burst = 0;
        }
        let mut more_waiting = false;
        for _ in 0..READ_BATCH {
            match tun.recv(&mut buf) {
                Ok(Some(len)) => {
                    emulator.ingress(monotonic_ns(), buf[..len].to_vec());
                    more_waiting = true;
                }
                Ok(None) => {
                    more_waiting = false;
                    break;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => break,
                Err(err) => return Err(err).context("reading the TUN device"),
            }
        }
        let now = monotonic_ns();
        if now >= next_counters {
            if let Some(writer) = counters.as_mut() {
                writer.write(now - start, &emulator.reports(), &interval)?;
            }
            let _ = lateness.add(&interval.lateness);
            interval = IntervalStats::new();
            next_counters += interval_ns * ((now - next_counters) / interval_ns + 1);
        }
        if more_waiting || more_due {
            continue;
        }
        let wake = emulator.next_release().map_or(next_counters, |at| at.min(next_counters));
        if wake > monotonic_ns() + SPIN_NS {
            timer.arm(wake - SPIN_NS)?;
            let [_, timer_fired] = poll_readable([tun.as_raw_fd(), timer.as_raw_fd()], true)?;
            if timer_fired {
                timer.clear();
            }
        } else {
            poll_readable([tun.as_raw_fd()], false)?;
        }
    }
    let end = monotonic_ns();
    if let Some(writer) = counters.as_mut() {
        writer.write(end - start, &emulator.reports(), &interval)?;
    }
    let _ = lateness.add(&interval.lateness);
    if let Some(path) = &options.summary {
        let summary = Summary {
            elapsed_s: (end - start) as f64 / 1e9,
            pipes: emulator.reports(),
            unclassified: emulator.unclassified(),
            mss_clamped: emulator.mss_clamped(),
            vnet_headers: emulator.vnet_headers(),
            gso: emulator.gso(),
            write_errors,
            lateness_us: Lateness::from(&lateness),
        };
        std::fs::write(path, serde_json::to_string_pretty(&summary)?).with_context(|| format!("writing --summary {}", path.display()))?;
    }
    Ok(())
}

/// How late packets left relative to their scheduled release (the delay error). The mean
/// bounds what the error adds to a closed user's cycle: passes per request times the mean.
#[derive(Serialize)]
struct Lateness {
    count: u64,
    mean: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

impl From<&Histogram<u64>> for Lateness {
    fn from(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1e3;
        Lateness {
            count: h.len(),
            mean: h.mean() / 1e3,
            p50: us(h.value_at_quantile(0.5)),
            p99: us(h.value_at_quantile(0.99)),
            max: us(h.max()),
        }
    }
}

#[derive(Serialize)]
struct Summary {
    elapsed_s: f64,
    pipes: Vec<PipeReport>,
    unclassified: u64,
    mss_clamped: u64,
    /// Whether the TUN device handed over GSO packets (offload on).
    vnet_headers: bool,
    gso: GsoCounters,
    write_errors: u64,
    lateness_us: Lateness,
}

/// The loop's own figures over one counters interval: how late the packets it released then
/// left (the delay error, as the summary's `lateness_us` over the whole run) and the most it
/// released back to back (over turns while more stayed due), so a late interval shows whether
/// a burst of packets due together (closed-loop users in step) or a stall of the loop made it late.
struct IntervalStats {
    lateness: Histogram<u64>,
    burst_max: u64,
}

impl IntervalStats {
    fn new() -> Self {
        IntervalStats { lateness: lateness_histogram(), burst_max: 0 }
    }
}

/// Release lateness in ns, 1 ns to 60 s at 3 significant digits.
fn lateness_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// Per-pipe rows: `t_s,group,direction,forwarded,forwarded_bytes,loss_drops,
/// queue_drops,queue_peak_bytes,queue_peak_packets,in_flight,in_flight_peak`
/// (counters and peaks since start; `in_flight` is a gauge), then the loop's
/// `late_p99_us,late_max_us,release_burst_max` over the interval (`IntervalStats`, the
/// same on each pipe's row; 0 when nothing was released).
struct CounterWriter {
    writer: csv::Writer<File>,
}

const COUNTER_COLUMNS: [&str; 14] = [
    "t_s", "group", "direction", "forwarded", "forwarded_bytes", "loss_drops",
    "queue_drops", "queue_peak_bytes", "queue_peak_packets", "in_flight", "in_flight_peak",
    "late_p99_us", "late_max_us", "release_burst_max",
];

impl CounterWriter {
    fn create(path: &PathBuf) -> anyhow::Result<CounterWriter> {
        let file = File::create(path).with_context(|| format!("creating --counters {}", path.display()))?;
        let mut writer = csv::Writer::from_writer(file);
        writer.write_record(COUNTER_COLUMNS)?;
        Ok(CounterWriter { writer })
    }

    fn write(&mut self, elapsed_ns: u64, reports: &[PipeReport], interval: &IntervalStats) -> anyhow::Result<()> {
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1e3);
        let (late_p99, late_max) = if interval.lateness.is_empty() {
            (us(0), us(0))
        } else {
            (us(interval.lateness.value_at_quantile(0.99)), us(interval.lateness.max()))
        };
        for r in reports {
            let c = &r.counters;
            let direction = match r.direction {
                Direction::Down => "down",
                Direction::Up => "up",
            };
            self.writer.write_record([
                format!("{:.6}", elapsed_ns as f64 / 1e9),
                r.group.clone(),
                direction.to_string(),
                c.forwarded.to_string(),
                c.forwarded_bytes.to_string(),
                c.loss_drops.to_string(),
                c.queue_drops.to_string(),
                c.queue_peak_bytes.to_string(),
                c.queue_peak_packets.to_string(),
                c.in_flight.to_string(),
                c.in_flight_peak.to_string(),
                late_p99.clone(),
                late_max.clone(),
                interval.burst_max.to_string(),
            ])?;
        }
        self.writer.flush()?;
        Ok(())
    }
}
