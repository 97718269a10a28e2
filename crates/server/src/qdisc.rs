//! `sojourn-engine bands`: the qdisc behind kernel-level SRPT (000 §3), one HTB class per
//! size band. ("Bands" are the size ranges, `sojourn_sched::Bands`; this module sets up
//! and reads the kernel classes that carry them.)
//!
//! This kernel has no `prio` qdisc, so strict priority comes from HTB (see
//! docs/architecture.md): a root class at the link rate and one leaf per band with
//! `prio i`, a tiny guaranteed rate and `ceil` equal to the link rate, so a leaf
//! borrows the whole link whenever no higher-priority leaf has packets. A default
//! leaf takes unclassified traffic (SYN/ACKs of listening sockets, other programs),
//! at priority 0 like the control band of 000 §3.2.
//!
//! A socket whose `SO_PRIORITY` is `(major << 16) | minor` of a class is classified
//! straight into it; [`so_priority`] is that mapping, used by `serve --kernel-bands`.
//!
//! Guarantees: the pure functions ([`setup_commands`], [`parse_class_stats`],
//! [`band_stats`], [`parse_rate`]) do no I/O; `run` only runs `tc` and reports any
//! failure with the exact command and tc's message.

use std::fmt;
use std::process::Command;

use anyhow::{bail, Context};
use sojourn_sched::Bands;

/// The qdisc handle (major number) of the root HTB qdisc.
pub const HTB_MAJOR: u16 = 1;
/// The root class `1:1` at the link rate; every band borrows from it.
const ROOT_MINOR: u16 = 1;
/// Band `i` is class `1:(BAND_MINOR_BASE + i)`, written in hex by tc (`1:10` ... `1:17`).
const BAND_MINOR_BASE: u16 = 0x10;
/// The default class for traffic whose priority names no band.
pub const DEFAULT_MINOR: u16 = 0x20;
/// Guaranteed rate of each leaf: tiny, so priority (not the rate) decides sharing.
const LEAF_RATE_BPS: u64 = 8_000;
/// HTB quantum of each leaf: one Ethernet frame (tc warns about tiny computed quanta).
const LEAF_QUANTUM: u32 = 1514;

/// An HTB class id `major:minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClassId {
    pub major: u16,
    pub minor: u16,
}

impl fmt::Display for ClassId {
    /// tc's notation: both numbers in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}:{:x}", self.major, self.minor)
    }
}

impl ClassId {
    /// Parses tc's `major:minor` (hex) notation.
    pub fn parse(s: &str) -> Option<ClassId> {
        let (major, minor) = s.split_once(':')?;
        Some(ClassId { major: u16::from_str_radix(major, 16).ok()?, minor: u16::from_str_radix(minor, 16).ok()? })
    }
}

/// The class of band `band` (0 = highest priority).
pub fn band_class(band: usize) -> ClassId {
    ClassId { major: HTB_MAJOR, minor: BAND_MINOR_BASE + band as u16 }
}

/// The `SO_PRIORITY` that classifies a socket into band `band`'s HTB class.
pub fn so_priority(band: usize) -> u32 {
    let class = band_class(band);
    (u32::from(class.major) << 16) | u32::from(class.minor)
}

/// Parses a link rate in whole bits per second ([`sojourn_sched::rate`]'s grammar: `10mbit`, `10M`, ...).
pub fn parse_rate(s: &str) -> anyhow::Result<u64> {
    let bps = sojourn_sched::rate::parse_rate(s)?;
    if bps < 1.0 {
        bail!("bad rate {s:?}: below 1 bit/s; expected bits per second such as 10mbit or 2000000");
    }
    Ok(bps.round() as u64)
}

/// Each band's queue limit. HTB's own default leaf queue holds the device's txqueuelen
/// (1000) packets; 000 §3.1's Linux 2.4 held 100 ("can get as long as 100 packets").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafQueue {
    Packets(u32),
    Bytes(u64),
}

/// How the bands are shaped: the link rate, the HTB burst and each band's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shaping {
    pub rate_bps: u64,
    /// Tokens of the root and leaf classes in bytes (`burst`/`cburst`); None = tc's default
    /// (one frame, 1.3 ms at 10 Mbit/s, which idles the link whenever the qdisc watchdog
    /// wakes later than that on a busy machine).
    pub burst_bytes: Option<u64>,
    pub leaf_queue: Option<LeafQueue>,
}

/// Burst of `ms` milliseconds at `rate_bps`, at least one frame (the testbed's plain uplink uses 5 ms).
pub fn burst_for(rate_bps: u64, ms: f64) -> u64 {
    ((rate_bps as f64 * ms / 1000.0 / 8.0) as u64).max(1600)
}

/// The `tc` invocations (arguments after `tc`) that set up `bands` on `dev`.
pub fn setup_commands(dev: &str, shaping: Shaping, bands: &Bands) -> anyhow::Result<Vec<Vec<String>>> {
    let rate_bps = shaping.rate_bps;
    let leaves = bands.count() as u64 + 1;
    if rate_bps < leaves * LEAF_RATE_BPS * 2 {
        bail!(
            "rate {rate_bps} bit/s is too low for {leaves} leaves of {LEAF_RATE_BPS} bit/s guaranteed each: use at least {} bit/s",
            leaves * LEAF_RATE_BPS * 2
        );
    }
    let rate = format!("{rate_bps}bit");
    let burst = shaping.burst_bytes.map(|b| format!(" burst {b} cburst {b}")).unwrap_or_default();
    let root = ClassId { major: HTB_MAJOR, minor: ROOT_MINOR };
    let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let leaf = |class: ClassId, prio: usize| {
        let mut commands = vec![args(&format!(
            "class add dev {dev} parent {root} classid {class} htb rate {LEAF_RATE_BPS}bit ceil {rate}{burst} prio {prio} quantum {LEAF_QUANTUM}"
        ))];
        // The leaf's queue gets handle (minor):, e.g. 10: under class 1:10.
        let handle = format!("{:x}:", class.minor);
        match shaping.leaf_queue {
            Some(LeafQueue::Packets(n)) => commands.push(args(&format!("qdisc add dev {dev} parent {class} handle {handle} pfifo limit {n}"))),
            Some(LeafQueue::Bytes(n)) => commands.push(args(&format!("qdisc add dev {dev} parent {class} handle {handle} bfifo limit {n}"))),
            None => {}
        }
        commands
    };
    let mut commands = vec![
        args(&format!("qdisc replace dev {dev} root handle {HTB_MAJOR:x}: htb default {DEFAULT_MINOR:x}")),
        args(&format!("class add dev {dev} parent {HTB_MAJOR:x}: classid {root} htb rate {rate} ceil {rate}{burst}")),
    ];
    commands.extend((0..bands.count()).flat_map(|band| leaf(band_class(band), band)));
    commands.extend(leaf(ClassId { major: HTB_MAJOR, minor: DEFAULT_MINOR }, 0));
    Ok(commands)
}

/// Counters of one class from `tc -s class show`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    pub class: Option<ClassId>,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub dropped: u64,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
}

/// Parses the text of `tc -s class show dev DEV` (iproute2 has no JSON for HTB
/// classes). Blocks start with `class <kind> <id>`; the counters come from the
/// `Sent N bytes M pkt (dropped D, ...)` and `backlog Nb Mp` lines.
pub fn parse_class_stats(text: &str) -> Vec<ClassStats> {
    let mut out: Vec<ClassStats> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let number = |at: usize, suffix: &str| -> u64 {
            let word = words.get(at).map_or("", |w| w.trim_end_matches(','));
            word.strip_suffix(suffix).unwrap_or(word).parse().unwrap_or(0)
        };
        match words.first() {
            Some(&"class") => out.push(ClassStats { class: words.get(2).and_then(|w| ClassId::parse(w)), ..Default::default() }),
            Some(&"Sent") => {
                if let Some(stats) = out.last_mut() {
                    stats.sent_bytes = number(1, "");
                    stats.sent_packets = number(3, "");
                    if let Some(at) = words.iter().position(|w| *w == "(dropped") {
                        stats.dropped = number(at + 1, "");
                    }
                }
            }
            Some(&"backlog") => {
                if let Some(stats) = out.last_mut() {
                    stats.backlog_bytes = number(1, "b");
                    stats.backlog_packets = number(2, "p");
                }
            }
            _ => {}
        }
    }
    out
}

/// Per-band counters (and the default class) picked out of all classes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BandRow {
    /// `Some(i)` for band `i`, `None` for the default class.
    pub band: Option<usize>,
    pub stats: ClassStats,
}

/// The rows for bands `0..count` and the default class, in that order; a class
/// missing from `classes` (bands not set up) is left out.
pub fn band_stats(classes: &[ClassStats], count: usize) -> Vec<BandRow> {
    let find = |id: ClassId| classes.iter().find(|c| c.class == Some(id)).copied();
    let mut rows: Vec<BandRow> =
        (0..count).filter_map(|band| find(band_class(band)).map(|stats| BandRow { band: Some(band), stats })).collect();
    if let Some(stats) = find(ClassId { major: HTB_MAJOR, minor: DEFAULT_MINOR }) {
        rows.push(BandRow { band: None, stats });
    }
    rows
}

/// Set up or show the strict-priority HTB bands used by `serve --kernel-bands` (000 §3).
#[derive(Debug, clap::Args)]
pub struct BandsArgs {
    #[command(subcommand)]
    action: BandsAction,
}

#[derive(Debug, clap::Subcommand)]
enum BandsAction {
    /// Replace DEV's root qdisc with an HTB root at RATE and one strict-priority leaf per band.
    Setup {
        /// Network device whose egress carries the responses (e.g. the server side of a veth pair).
        #[arg(long)]
        dev: String,
        /// Link rate in bit/s: NUMBER[k|m|g][bit], e.g. 10mbit, 10M, 500kbit, 1gbit (docs/formats.md "Rates").
        #[arg(long)]
        rate: String,
        /// Size cutoffs between bands (bytes, K/M suffixes); n cutoffs make n+1 bands (000 §3.2).
        #[arg(long, default_value = "1K,2K,5K,50K")]
        cutoffs: Bands,
        /// Packets each band's queue holds (pfifo) [default: HTB's, the device's txqueuelen];
        /// 000 §3.1's kernel held 100.
        #[arg(long, conflicts_with = "queue_bytes")]
        queue_packets: Option<u32>,
        /// Bytes each band's queue holds (bfifo), instead of --queue-packets.
        #[arg(long)]
        queue_bytes: Option<u64>,
        /// Milliseconds of tokens (HTB burst/cburst) of every class; 0 = tc's default of one frame.
        #[arg(long, default_value_t = 5.0)]
        burst_ms: f64,
        /// Print the tc commands instead of running them.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print per-band sent bytes/packets, drops and backlog from `tc -s class show`.
    Show {
        #[arg(long)]
        dev: String,
        /// Number of bands to look for (cutoffs + 1).
        #[arg(long, default_value_t = 5)]
        bands: usize,
        /// Print JSON (one object per band) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Remove the root qdisc from DEV (back to the kernel default).
    Clear {
        #[arg(long)]
        dev: String,
    },
}

fn tc(args: &[String]) -> anyhow::Result<String> {
    let output = Command::new("tc").args(args).output().with_context(|| "could not run `tc` (is iproute2 installed?)")?;
    if !output.status.success() {
        bail!("`tc {}` failed: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

pub fn run(args: BandsArgs) -> anyhow::Result<()> {
    match args.action {
        BandsAction::Setup { dev, rate, cutoffs, queue_packets, queue_bytes, burst_ms, dry_run } => {
            let rate_bps = parse_rate(&rate)?;
            if !(burst_ms.is_finite() && burst_ms >= 0.0) {
                bail!("--burst-ms {burst_ms}: expected milliseconds >= 0 (0 = tc's default)");
            }
            let leaf_queue = match (queue_packets, queue_bytes) {
                (Some(0), _) | (_, Some(0)) => bail!("--queue-packets/--queue-bytes must be at least 1"),
                (Some(n), _) => Some(LeafQueue::Packets(n)),
                (_, Some(n)) => Some(LeafQueue::Bytes(n)),
                _ => None,
            };
            let burst_bytes = (burst_ms > 0.0).then(|| burst_for(rate_bps, burst_ms));
            let commands = setup_commands(&dev, Shaping { rate_bps, burst_bytes, leaf_queue }, &cutoffs)?;
            for command in &commands {
                if dry_run {
                    println!("tc {}", command.join(" "));
                } else {
                    tc(command)?;
                }
            }
            if !dry_run {
                for band in 0..cutoffs.count() {
                    println!("band {band}: class {} so_priority {}", band_class(band), so_priority(band));
                }
            }
            Ok(())
        }
        BandsAction::Show { dev, bands, json } => {
            if bands == 0 || bands > sojourn_sched::bands::MAX_BANDS {
                bail!("--bands {bands}: expected 1..={}", sojourn_sched::bands::MAX_BANDS);
            }
            let text = tc(&["-s", "class", "show", "dev", &dev].map(String::from))?;
            let rows = band_stats(&parse_class_stats(&text), bands);
            if rows.is_empty() {
                bail!("no sojourn bands on {dev}: run `sojourn-engine bands setup --dev {dev} --rate RATE` first");
            }
            for row in &rows {
                let name = row.band.map_or("default".to_string(), |b| b.to_string());
                let s = row.stats;
                if json {
                    println!(
                        "{}",
                        serde_json::json!({"band": row.band, "class": s.class.map(|c| c.to_string()), "sent_bytes": s.sent_bytes,
                            "sent_packets": s.sent_packets, "dropped": s.dropped, "backlog_bytes": s.backlog_bytes, "backlog_packets": s.backlog_packets})
                    );
                } else {
                    println!(
                        "band {name:>7}  class {:>5}  sent {:>12} B {:>9} pkt  dropped {:>7}  backlog {:>8} B {:>5} pkt",
                        s.class.map(|c| c.to_string()).unwrap_or_default(),
                        s.sent_bytes,
                        s.sent_packets,
                        s.dropped,
                        s.backlog_bytes,
                        s.backlog_packets
                    );
                }
            }
            Ok(())
        }
        BandsAction::Clear { dev } => tc(&["qdisc", "del", "dev", &dev, "root"].map(String::from)).map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn so_priority_is_the_class_id() {
        assert_eq!(so_priority(0), 0x0001_0010);
        assert_eq!(so_priority(4), 0x0001_0014);
        assert_eq!(band_class(4).to_string(), "1:14");
        assert_eq!(ClassId::parse("1:14"), Some(band_class(4)));
        assert_eq!(ClassId::parse("1:zz"), None);
    }

    #[test]
    fn rates() {
        for (text, bps) in [("10mbit", 10_000_000), ("10Mbit", 10_000_000), ("1.5kbit", 1500), ("1gbit", 1_000_000_000), ("2000000", 2_000_000)] {
            assert_eq!(parse_rate(text).unwrap(), bps, "{text}");
        }
        for bad in ["", "fast", "-1mbit", "10mbps", "0"] {
            let err = parse_rate(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")) && err.contains("10mbit"), "{err}");
        }
    }

    #[test]
    fn setup_plan() {
        let plain = Shaping { rate_bps: 10_000_000, burst_bytes: None, leaf_queue: None };
        let plan = setup_commands("eth9", plain, &Bands::default()).unwrap();
        let lines: Vec<String> = plan.iter().map(|c| c.join(" ")).collect();
        assert_eq!(lines[0], "qdisc replace dev eth9 root handle 1: htb default 20");
        assert_eq!(lines[1], "class add dev eth9 parent 1: classid 1:1 htb rate 10000000bit ceil 10000000bit");
        assert_eq!(lines[2], "class add dev eth9 parent 1:1 classid 1:10 htb rate 8000bit ceil 10000000bit prio 0 quantum 1514");
        assert_eq!(lines[6], "class add dev eth9 parent 1:1 classid 1:14 htb rate 8000bit ceil 10000000bit prio 4 quantum 1514");
        assert_eq!(lines[7], "class add dev eth9 parent 1:1 classid 1:20 htb rate 8000bit ceil 10000000bit prio 0 quantum 1514");
        assert_eq!(lines.len(), 8);
        let slow = Shaping { rate_bps: 50_000, ..plain };
        assert!(setup_commands("eth9", slow, &Bands::default()).unwrap_err().to_string().contains("too low"));
    }

    #[test]
    fn setup_plan_with_leaf_queues_and_burst() {
        let shaping = Shaping { rate_bps: 10_000_000, burst_bytes: Some(burst_for(10_000_000, 5.0)), leaf_queue: Some(LeafQueue::Packets(100)) };
        let lines: Vec<String> = setup_commands("eth9", shaping, &Bands::default()).unwrap().iter().map(|c| c.join(" ")).collect();
        assert_eq!(lines[1], "class add dev eth9 parent 1: classid 1:1 htb rate 10000000bit ceil 10000000bit burst 6250 cburst 6250");
        assert_eq!(lines[2], "class add dev eth9 parent 1:1 classid 1:10 htb rate 8000bit ceil 10000000bit burst 6250 cburst 6250 prio 0 quantum 1514");
        assert_eq!(lines[3], "qdisc add dev eth9 parent 1:10 handle 10: pfifo limit 100");
        assert_eq!(lines.last().unwrap(), "qdisc add dev eth9 parent 1:20 handle 20: pfifo limit 100");
        assert_eq!(lines.len(), 2 + 6 * 2);
        let bytes = Shaping { leaf_queue: Some(LeafQueue::Bytes(30_000)), ..shaping };
        let lines: Vec<String> = setup_commands("eth9", bytes, &Bands::default()).unwrap().iter().map(|c| c.join(" ")).collect();
        assert_eq!(lines[3], "qdisc add dev eth9 parent 1:10 handle 10: bfifo limit 30000");
        assert_eq!(burst_for(1_000_000, 5.0), 1600);
    }

    const SHOW: &str = "class htb 1:11 parent 1:1 prio 1 rate 8Kbit ceil 10Mbit burst 1600b cburst 1600b 
 Sent 1234 bytes 5 pkt (dropped 2, overlimits 0 requeues 0) 
 backlog 300b 3p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 25000000 ctokens: 20000

class htb 1:10 parent 1:1 prio 0 rate 8Kbit ceil 10Mbit burst 1600b cburst 1600b 
 Sent 99 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0

class htb 1:1 root rate 10Mbit ceil 10Mbit burst 1600b cburst 1600b 
 Sent 1333 bytes 6 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0

class htb 1:20 parent 1:1 prio 0 rate 8Kbit ceil 10Mbit burst 1600b cburst 1600b 
 Sent 7 bytes 1 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
";

    #[test]
    fn show_parsing() {
        let classes = parse_class_stats(SHOW);
        assert_eq!(classes.len(), 4);
        let rows = band_stats(&classes, 5);
        assert_eq!(rows.len(), 3, "bands 0, 1 and the default");
        assert_eq!(rows[0].band, Some(0));
        assert_eq!(rows[0].stats.sent_bytes, 99);
        assert_eq!(rows[1].band, Some(1));
        assert_eq!(
            rows[1].stats,
            ClassStats { class: Some(band_class(1)), sent_bytes: 1234, sent_packets: 5, dropped: 2, backlog_bytes: 300, backlog_packets: 3 }
        );
        assert_eq!(rows[2].band, None);
        assert_eq!(rows[2].stats.sent_bytes, 7);
        assert!(parse_class_stats("garbage\nSent x\n").is_empty());
    }
}
