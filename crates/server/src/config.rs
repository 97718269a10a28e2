//! `serve` options: every command-line option is also a key of the TOML `--config`
//! file (same name, e.g. `write-concurrency = 1`); the command line wins, then the
//! file, then the defaults below. [`Settings`] is the validated result.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use sojourn_http::{HeadFields, Limits};
use sojourn_sched::bands::parse_bytes;
use sojourn_sched::{AdmissionSpec, Bands, Order, PolicyKind, Scheduler};

/// Options of `sojourn-engine serve`; all optional so a config file can fill them.
#[derive(Debug, Default, Clone, clap::Args, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ServeOptions {
    /// Document root: only files under it (after resolving symlinks) are served.
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Address and port to listen on [default: 127.0.0.1:8080].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Which response gets the next write quantum: fair (round robin), srpt (fewest
    /// bytes left), las (fewest bytes sent) [default: fair].
    #[arg(long)]
    pub policy: Option<String>,
    /// Worker threads, each with its own event loop and SO_REUSEPORT listener [default: one per core].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Bytes written per scheduling decision [default: 128K: a 100 KiB file in one sendfile,
    /// 18-23% less server CPU per request than 32K; the testbed's experiments pass 004
    /// §3.1's 32K blocks].
    #[arg(long)]
    pub quantum: Option<String>,
    /// At most this many responses per worker may have unsent data stuck in the kernel
    /// (004 §3.3) [default: unlimited].
    #[arg(long)]
    pub write_concurrency: Option<usize>,
    /// --write-concurrency limits only responses with at least this many bytes left
    /// (e.g. 50K); smaller ones are written without waiting for a slot. Needs
    /// --policy srpt and --write-concurrency [default: every response needs a slot].
    #[arg(long)]
    pub write_concurrency_from: Option<String>,
    /// Set TCP_NOTSENT_LOWAT to this many bytes on every connection (e.g. 16K) [default: kernel's].
    #[arg(long)]
    pub notsent_lowat: Option<String>,
    /// Cap the retransmission timeout's exponential backoff at this many ms on every
    /// connection (TCP_RTO_MAX_MS, Linux 6.15; 1000 to 120000). With --kernel-bands a large
    /// response's segments can wait in a low band past their RTO, and each such firing
    /// doubles it (docs/testbed.md) [default: the kernel's, 120 s unless its sysctl says].
    #[arg(long)]
    pub rto_max_ms: Option<u32>,
    /// Response head fields: full (Server, Last-Modified, ETag, Accept-Ranges too) or
    /// minimal (only what the response needs: 96 bytes instead of 254 for a .bin file's 200;
    /// fewer bytes per request on a bottleneck uplink) [default: full].
    #[arg(long)]
    pub head_fields: Option<String>,
    /// Delayed ACK from the start (TCP_QUICKACK off on the listener, which its connections
    /// inherit): the request's ACK leaves with the response instead of in a packet of its own.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub delayed_ack: Option<bool>,
    /// Kernel-level SRPT (000 §3): set each socket's SO_PRIORITY to the HTB band of its
    /// remaining bytes; the egress device needs the HTB classes of python/sojourn/testbed/uplink.py
    /// (`sojourn testbed up --bands CUTOFFS` builds them).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub kernel_bands: Option<bool>,
    /// Band size cutoffs for --kernel-bands [default: 1K,2K,5K,50K].
    #[arg(long)]
    pub cutoffs: Option<String>,
    /// Open connections beyond which new ones get 503 and are closed [default: 20000].
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Open connections at which the server stops accepting: new ones wait in the kernel's
    /// accept queue (and beyond it their SYNs are dropped), as Apache 1.3's bounded process
    /// pool made them (000 §2: 350 processes) [default: no limit].
    #[arg(long)]
    pub accept_limit: Option<usize>,
    /// Lingering close (Apache 1.3's lingering_close): after the last response of a
    /// connection, shut down the sending side and keep reading until the client closes,
    /// so the connection is counted (and holds its place under --accept-limit) until then.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub linger_close: Option<bool>,
    /// Seconds a lingering connection is kept at most [default: 30, Apache 1.3's MAX_SECS_TO_LINGER].
    #[arg(long)]
    pub linger_timeout: Option<f64>,
    /// Seconds a lingering connection may stay silent before it is closed [default: 2, as Apache 1.3].
    #[arg(long)]
    pub linger_read_timeout: Option<f64>,
    /// Seconds a client may take to send a request head once it started (408 after) [default: 10].
    #[arg(long)]
    pub header_timeout: Option<f64>,
    /// Seconds an idle persistent connection is kept open [default: 15].
    #[arg(long)]
    pub keepalive_timeout: Option<f64>,
    /// Seconds a response may stay blocked on a client that reads nothing (its receive
    /// window closed) before the connection is closed; bytes waiting behind an open window
    /// (a higher --kernel-bands band, a full uplink) never time out [default: 60].
    #[arg(long)]
    pub send_timeout: Option<f64>,
    /// Largest request head in bytes (431 beyond) [default: 8K].
    #[arg(long)]
    pub max_head_bytes: Option<String>,
    /// Most header fields per request (431 beyond) [default: 64].
    #[arg(long)]
    pub max_headers: Option<usize>,
    /// Longest request target in bytes (414 beyond) [default: 4K].
    #[arg(long)]
    pub max_target_bytes: Option<String>,
    /// Files up to this size are kept in memory [default: 64K; 0 disables].
    #[arg(long)]
    pub cache_file_max: Option<String>,
    /// Seconds a cached file's metadata (and content) is trusted before a new stat [default: 1].
    #[arg(long)]
    pub cache_ttl: Option<f64>,
    /// Combined Log Format access log file ("-" for stdout) [default: none].
    #[arg(long)]
    pub access_log: Option<PathBuf>,
    /// Append the request's service time in microseconds to each access-log line.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub log_request_time: Option<bool>,
    /// When the access-log writer falls behind, make the event loop wait instead of
    /// dropping lines (dropped lines are counted in sojourn_access_log_lines_dropped_total).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub access_log_block: Option<bool>,
    /// Address of the admin listener serving Prometheus text on /metrics [default: none].
    #[arg(long)]
    pub admin: Option<SocketAddr>,
    /// Seconds to finish in-flight responses after SIGTERM/SIGINT [default: 10].
    #[arg(long)]
    pub shutdown_grace: Option<f64>,
    /// TOML file configuring the dynamic `/stage/<name>/` endpoints (003; docs/dwfs.md) [default: none].
    #[arg(long)]
    pub stages: Option<PathBuf>,
    /// Refuse requests early under overload with a 503, by a policy and its parameters,
    /// NAME[:KEY=VALUE,...]: gradient, codel, delay, size (e.g. `codel:target=5ms`,
    /// `size:rate=10mbit,deadline=10s`; docs/server.md lists the keys) [default: none].
    #[arg(long)]
    pub admission: Option<String>,
}

/// Validated server settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub root: PathBuf,
    pub listen: SocketAddr,
    pub policy: PolicyKind,
    pub threads: usize,
    pub quantum: u64,
    pub write_concurrency: Option<usize>,
    /// Only responses with at least this many bytes left need a write slot.
    pub write_concurrency_from: Option<u64>,
    pub notsent_lowat: Option<u32>,
    pub rto_max_ms: Option<u32>,
    pub head_fields: HeadFields,
    pub delayed_ack: bool,
    pub kernel_bands: Option<Bands>,
    pub max_connections: usize,
    pub accept_limit: Option<usize>,
    /// Lingering close: (total, between reads) limits; None = close at once.
    pub linger: Option<(Duration, Duration)>,
    pub header_timeout: Duration,
    pub keepalive_timeout: Duration,
    pub send_timeout: Duration,
    pub limits: Limits,
    pub cache_file_max: u64,
    pub cache_ttl: Duration,
    /// Open files each worker's cache may hold (set from the descriptor limit at start).
    pub file_cache_entries: usize,
    pub access_log: Option<PathBuf>,
    pub log_request_time: bool,
    pub access_log_block: bool,
    pub admin: Option<SocketAddr>,
    pub shutdown_grace: Duration,
    pub stages: Option<sojourn_stages::PoolSpec>,
    /// The admission policy of each worker (`None`: every request is taken).
    pub admission: Option<AdmissionSpec>,
}

fn bytes(option: &str, value: Option<&str>, default: u64) -> anyhow::Result<u64> {
    value.map_or(Ok(default), |v| parse_bytes(v).map_err(|e| anyhow::anyhow!("--{option}: {e}")))
}

fn seconds(option: &str, value: Option<f64>, default: f64) -> anyhow::Result<Duration> {
    let value = value.unwrap_or(default);
    if !(value.is_finite() && value > 0.0 && value < 1e6) {
        bail!("--{option} {value}: expected a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(value))
}

impl Settings {
    /// The order the size-aware admission policy predicts with: fewest bytes left first under
    /// SRPT, in the application or by the kernel's bands (000 §3), equal shares otherwise.
    pub fn order(&self) -> Order {
        if self.policy == PolicyKind::Srpt || self.kernel_bands.is_some() {
            Order::ShortestFirst
        } else {
            Order::Shared
        }
    }

    pub fn from_options(o: ServeOptions) -> anyhow::Result<Settings> {
        let Some(root) = o.root else { bail!("--root DIR is required (or `root = \"DIR\"` in the config file)") };
        let root = root.canonicalize().with_context(|| format!("--root {}: not an accessible directory", root.display()))?;
        if !root.is_dir() {
            bail!("--root {}: not a directory", root.display());
        }
        let policy: PolicyKind = o.policy.as_deref().unwrap_or("fair").parse().map_err(|e| anyhow::anyhow!("--policy: {e}"))?;
        let threads = o.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        if threads == 0 || threads > 1024 {
            bail!("--threads {threads}: expected 1..=1024");
        }
        let quantum = bytes("quantum", o.quantum.as_deref(), 128 * 1024)?;
        if quantum == 0 {
            bail!("--quantum 0: expected at least one byte");
        }
        if o.write_concurrency == Some(0) {
            bail!("--write-concurrency 0: expected at least 1 (leave it out for unlimited)");
        }
        let write_concurrency_from = match o.write_concurrency_from.as_deref() {
            None => None,
            Some(v) => {
                let from = bytes("write-concurrency-from", Some(v), 0)?;
                if let Err(why) = Scheduler::slots_from_allowed(policy) {
                    bail!("--write-concurrency-from {v}: needs --policy srpt ({why})");
                }
                if o.write_concurrency.is_none() {
                    bail!("--write-concurrency-from {v}: needs --write-concurrency N (without it no response waits for a slot)");
                }
                Some(from)
            }
        };
        let notsent_lowat = match o.notsent_lowat.as_deref() {
            None => None,
            Some(v) => Some(u32::try_from(bytes("notsent-lowat", Some(v), 0)?).map_err(|_| anyhow::anyhow!("--notsent-lowat {v}: at most 4G"))?),
        };
        if let Some(ms) = o.rto_max_ms {
            // The kernel's own range for TCP_RTO_MAX_MS (and net.ipv4.tcp_rto_max_ms).
            if !(1000..=120_000).contains(&ms) {
                bail!("--rto-max-ms {ms}: expected 1000 to 120000 (leave it out for the kernel's)");
            }
        }
        let cutoffs: Bands = o.cutoffs.as_deref().unwrap_or("1K,2K,5K,50K").parse().map_err(|e| anyhow::anyhow!("--cutoffs: {e}"))?;
        let max_headers = o.max_headers.unwrap_or(64);
        if max_headers == 0 || max_headers > sojourn_http::request::MAX_HEADERS_CAP {
            bail!("--max-headers {max_headers}: expected 1..={}", sojourn_http::request::MAX_HEADERS_CAP);
        }
        let limits = Limits {
            max_head_bytes: bytes("max-head-bytes", o.max_head_bytes.as_deref(), 8 * 1024)? as usize,
            max_headers,
            max_target_bytes: bytes("max-target-bytes", o.max_target_bytes.as_deref(), 4 * 1024)? as usize,
        };
        if limits.max_head_bytes < 64 || limits.max_head_bytes > 1 << 20 {
            bail!("--max-head-bytes {}: expected 64 bytes to 1M", limits.max_head_bytes);
        }
        Ok(Settings {
            root,
            listen: o.listen.unwrap_or_else(|| "127.0.0.1:8080".parse().expect("a valid literal address")),
            policy,
            threads,
            quantum,
            write_concurrency: o.write_concurrency,
            write_concurrency_from,
            notsent_lowat,
            rto_max_ms: o.rto_max_ms,
            head_fields: o.head_fields.as_deref().unwrap_or("full").parse().map_err(|e| anyhow::anyhow!("--head-fields {e}"))?,
            delayed_ack: o.delayed_ack.unwrap_or(false),
            kernel_bands: o.kernel_bands.unwrap_or(false).then_some(cutoffs),
            max_connections: o.max_connections.unwrap_or(20_000).max(1),
            accept_limit: match o.accept_limit {
                Some(0) => bail!("--accept-limit 0: expected at least 1 (leave it out for no limit)"),
                limit => limit,
            },
            linger: match o.linger_close.unwrap_or(false) {
                true => Some((seconds("linger-timeout", o.linger_timeout, 30.0)?, seconds("linger-read-timeout", o.linger_read_timeout, 2.0)?)),
                false => None,
            },
            header_timeout: seconds("header-timeout", o.header_timeout, 10.0)?,
            keepalive_timeout: seconds("keepalive-timeout", o.keepalive_timeout, 15.0)?,
            send_timeout: seconds("send-timeout", o.send_timeout, 60.0)?,
            limits,
            cache_file_max: bytes("cache-file-max", o.cache_file_max.as_deref(), 64 * 1024)?,
            cache_ttl: seconds("cache-ttl", o.cache_ttl, 1.0)?,
            file_cache_entries: 50_000,
            access_log: o.access_log,
            log_request_time: o.log_request_time.unwrap_or(false),
            access_log_block: o.access_log_block.unwrap_or(false),
            admin: o.admin,
            shutdown_grace: seconds("shutdown-grace", o.shutdown_grace, 10.0)?,
            admission: match o.admission.as_deref().map(str::trim) {
                None | Some("none") => None,
                Some(text) => Some(text.parse().map_err(|e| anyhow::anyhow!("--admission: {e}"))?),
            },
            stages: match &o.stages {
                Some(path) => Some(sojourn_config::read::<sojourn_stages::StagesConfig>("--stages", path)?.validate().map_err(|e| anyhow::anyhow!("--stages {}: {e}", path.display()))?),
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_wins_over_file() {
        let file: ServeOptions = toml::from_str("root = \"/\"\npolicy = \"srpt\"\nwrite-concurrency = 2\nquantum = \"16K\"\nkernel-bands = true\naccess-log-block = true").unwrap();
        let s = Settings::from_options(sojourn_config::override_with(file, "serve", &["--policy".into(), "las".into()]).unwrap()).unwrap();
        assert_eq!(s.policy, PolicyKind::Las);
        assert_eq!(s.write_concurrency, Some(2));
        assert_eq!(s.quantum, 16 * 1024);
        assert_eq!(s.kernel_bands, Some(Bands::default()));
        assert!(s.access_log_block);
        assert_eq!(s.listen.to_string(), "127.0.0.1:8080");
        assert!(s.admission.is_none());
        let file: ServeOptions = toml::from_str("root = \"/\"\nadmission = \"size:rate=10mbit\"\nkernel-bands = true").unwrap();
        let s = Settings::from_options(file).unwrap();
        assert_eq!(s.admission.as_ref().map(|a| a.name()), Some("size"));
        assert_eq!(s.order(), Order::ShortestFirst, "the kernel's bands order by bytes left");
        let s = Settings::from_options(ServeOptions { root: Some("/".into()), admission: Some("none".into()), ..Default::default() }).unwrap();
        assert!(s.admission.is_none());
        assert_eq!(s.order(), Order::Shared);
    }

    #[test]
    fn errors_name_the_input() {
        let err = toml::from_str::<ServeOptions>("polcy = \"srpt\"").unwrap_err().to_string();
        assert!(err.contains("polcy"), "{err}");
        let with = |o: ServeOptions| Settings::from_options(ServeOptions { root: Some("/".into()), ..o }).unwrap_err().to_string();
        assert!(with(ServeOptions { policy: Some("sjf".into()), ..Default::default() }).contains("\"sjf\""));
        assert!(with(ServeOptions { quantum: Some("lots".into()), ..Default::default() }).contains("--quantum"));
        assert!(with(ServeOptions { head_fields: Some("lean".into()), ..Default::default() }).contains("--head-fields \"lean\": expected full or minimal"));
        assert!(with(ServeOptions { header_timeout: Some(-1.0), ..Default::default() }).contains("--header-timeout"));
        assert!(with(ServeOptions { rto_max_ms: Some(999), ..Default::default() }).contains("--rto-max-ms 999: expected 1000 to 120000"));
        let from = |policy: &str, concurrency: Option<usize>, from: &str| {
            Settings::from_options(ServeOptions {
                root: Some("/".into()),
                policy: Some(policy.into()),
                write_concurrency: concurrency,
                write_concurrency_from: Some(from.into()),
                ..Default::default()
            })
        };
        assert_eq!(from("srpt", Some(1), "50K").unwrap().write_concurrency_from, Some(50 * 1024));
        assert!(from("srpt", Some(1), "big").unwrap_err().to_string().contains("--write-concurrency-from"));
        assert!(from("fair", Some(1), "50K").unwrap_err().to_string().contains("--policy srpt"));
        assert!(from("srpt", None, "50K").unwrap_err().to_string().contains("needs --write-concurrency"));
        let file: ServeOptions = toml::from_str("write-concurrency-from = \"5K\"").unwrap();
        assert_eq!(file.write_concurrency_from.as_deref(), Some("5K"));
        assert!(Settings::from_options(ServeOptions::default()).unwrap_err().to_string().contains("--root"));
        assert!(with(ServeOptions { admission: Some("lifo".into()), ..Default::default() }).contains("--admission: unknown admission policy \"lifo\""));
        assert!(with(ServeOptions { admission: Some("size".into()), ..Default::default() }).contains("rate=RATE"));
        let missing = Settings::from_options(ServeOptions { root: Some("/no/such/dir".into()), ..Default::default() });
        assert!(missing.unwrap_err().to_string().contains("/no/such/dir"));
    }
}
