//! The emulator's configuration: the TOML document of `wan --config` (written by
//! `sojourn.testbed.emulator`, python/sojourn/testbed/emulator.py), kebab-case keys as
//! every `sojourn-engine --config` file has them.
//!
//! ```toml
//! tun = "sjtbt"
//! seed = 1
//! counters = "wan_counters.csv"   # and the other options of the command line (RunOptions)
//! realtime = 50
//!
//! [[groups]]
//! name = "g0"
//! addrs = ["10.78.0.1"]
//! mtu = 1500
//! down = { delay-ms = 50, jitter-ms = 0, reorder = false, loss = 0.03, loss-model = "two-state", conditional-loss = 0.35 }
//! up = { delay-ms = 50 }   # rate-bps, queue-bytes, queue-packets left out: no rate, a queue from the BDP
//! ```
//! `down` is the direction towards the group's addresses (server -> clients),
//! `up` the direction from them. Guarantee: a `Config` that `validate`s builds
//! pipes whose parameters are all in range; errors name the group, direction
//! and field, and what is accepted.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::loss::LossModel;
use crate::pipe::PipeParams;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Config {
    /// Name of the (existing or new) TUN device to attach to.
    pub tun: String,
    #[serde(default)]
    pub seed: u64,
    pub groups: Vec<GroupConfig>,
    /// How the program runs (counters, summary, priority): keys here, or options on the
    /// command line, which win.
    #[serde(flatten)]
    pub run: RunOptions,
}

/// The options of `sojourn-engine wan` besides the links: each a key of the `--config`
/// file and a command-line option of the same name.
#[derive(Debug, Clone, Default, clap::Args, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RunOptions {
    /// Per-pipe counters CSV, one row per pipe per interval and a final one at exit.
    #[arg(long)]
    pub counters: Option<PathBuf>,
    /// Seconds between counter rows, 0.01-3600 [default: 1].
    #[arg(long, value_parser = parse_interval)]
    pub interval: Option<f64>,
    /// JSON summary written at exit: final counters and release lateness percentiles.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Run under SCHED_FIFO at this priority (1-99) so delays stay precise on a
    /// busy machine; the loop sleeps in poll, so it only uses the CPU it needs.
    #[arg(long, value_parser = clap::value_parser!(i32).range(REALTIME_PRIORITIES))]
    pub realtime: Option<i32>,
    /// Read single packets only. By default, when some pipe only delays, the TUN
    /// device hands over TCP GSO packets (up to 64 KiB) and those pipes hold them
    /// whole; pipes with loss or a rate always act on each segment.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub no_offload: Option<bool>,
}

/// SCHED_FIFO priorities (sched(7)).
const REALTIME_PRIORITIES: std::ops::RangeInclusive<i64> = 1..=99;
/// Seconds between counter rows when neither the file nor the command line says.
const DEFAULT_INTERVAL_S: f64 = 1.0;

fn parse_interval(text: &str) -> Result<f64, String> {
    text.parse::<f64>().map_err(|_| format!("{text:?}: expected seconds between 0.01 and 3600")).and_then(check_interval)
}

fn check_interval(seconds: f64) -> Result<f64, String> {
    if (0.01..=3600.0).contains(&seconds) {
        Ok(seconds)
    } else {
        Err(format!("interval {seconds}: expected seconds between 0.01 and 3600"))
    }
}

impl RunOptions {
    /// These options, with any left unset taken from `base` (the file's).
    pub fn over(self, base: RunOptions) -> RunOptions {
        RunOptions {
            counters: self.counters.or(base.counters),
            interval: self.interval.or(base.interval),
            summary: self.summary.or(base.summary),
            realtime: self.realtime.or(base.realtime),
            no_offload: self.no_offload.or(base.no_offload),
        }
    }

    /// Seconds between counter rows.
    pub fn interval_s(&self) -> f64 {
        self.interval.unwrap_or(DEFAULT_INTERVAL_S)
    }

    /// Range checks of what a file may hold (the command line's parsers make the same).
    fn validate(&self) -> anyhow::Result<()> {
        self.interval.map(check_interval).transpose().map_err(anyhow::Error::msg)?;
        if let Some(priority) = self.realtime.filter(|p| !REALTIME_PRIORITIES.contains(&i64::from(*p))) {
            bail!("realtime = {priority}: expected a SCHED_FIFO priority 1-99");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct GroupConfig {
    pub name: String,
    pub addrs: Vec<Ipv4Addr>,
    #[serde(default = "default_mtu")]
    pub mtu: u16,
    #[serde(default)]
    pub down: DirectionConfig,
    #[serde(default)]
    pub up: DirectionConfig,
}

fn default_mtu() -> u16 {
    1500
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DirectionConfig {
    #[serde(default)]
    pub delay_ms: f64,
    #[serde(default)]
    pub jitter_ms: f64,
    #[serde(default)]
    pub reorder: bool,
    #[serde(default)]
    pub loss: f64,
    #[serde(default)]
    pub loss_model: LossModelName,
    #[serde(default = "default_conditional_loss")]
    pub conditional_loss: f64,
    pub rate_bps: Option<u64>,
    pub queue_bytes: Option<u64>,
    pub queue_packets: Option<u64>,
}

/// 002 §3.4: conditional loss probability 35%, after Paxson.
fn default_conditional_loss() -> f64 {
    0.35
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossModelName {
    #[default]
    Bernoulli,
    TwoState,
}

impl Config {
    /// A document's text, parsed and validated (the program reads its file with
    /// `sojourn_config::read`, then validates).
    #[cfg(test)]
    pub(crate) fn from_toml(text: &str) -> anyhow::Result<Config> {
        let config: Config = toml::from_str(text).context("emulator config is not valid")?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        self.run.validate()?;
        if self.tun.is_empty() || self.tun.len() > 15 {
            bail!("tun {:?}: a device name of 1-15 characters is accepted", self.tun);
        }
        if self.groups.is_empty() {
            bail!("groups: at least one group is needed");
        }
        let mut seen = std::collections::HashSet::new();
        for group in &self.groups {
            if !(536..=9000).contains(&group.mtu) {
                bail!("group {}: mtu {} outside 536..9000", group.name, group.mtu);
            }
            if group.addrs.is_empty() {
                bail!("group {}: addrs is empty; list the group's client addresses", group.name);
            }
            for addr in &group.addrs {
                if !seen.insert(*addr) {
                    bail!("group {}: address {addr} already belongs to another group", group.name);
                }
            }
            for (direction, d) in [("down", &group.down), ("up", &group.up)] {
                d.params(group.mtu).with_context(|| format!("group {} direction {direction}", group.name))?;
            }
        }
        Ok(())
    }
}

impl GroupConfig {
    /// The largest TCP MSS that fits the group's MTU (20-byte IPv4 and TCP headers).
    pub fn max_mss(&self) -> u16 {
        self.mtu - 40
    }
}

impl DirectionConfig {
    /// Pipe parameters of this direction; the default queue holds the
    /// bandwidth-delay product of the rate and the round trip (twice this
    /// direction's delay), at least 100 full-size packets.
    pub fn params(&self, mtu: u16) -> anyhow::Result<PipeParams> {
        let ms = |name: &str, value: f64| -> anyhow::Result<u64> {
            if !(0.0..=100_000.0).contains(&value) {
                bail!("{name} = {value}: accepted 0..100000 ms");
            }
            Ok((value * 1e6).round() as u64)
        };
        let delay_ns = ms("delay-ms", self.delay_ms)?;
        let jitter_ns = ms("jitter-ms", self.jitter_ms)?;
        if !(0.0..1.0).contains(&self.loss) {
            bail!("loss = {}: accepted 0 <= loss < 1", self.loss);
        }
        let loss = match self.loss_model {
            _ if self.loss == 0.0 => LossModel::None,
            LossModelName::Bernoulli => LossModel::Bernoulli { p: self.loss },
            LossModelName::TwoState => {
                if !(self.loss..1.0).contains(&self.conditional_loss) {
                    bail!(
                        "conditional-loss = {}: accepted loss ({}) <= conditional-loss < 1",
                        self.conditional_loss,
                        self.loss
                    );
                }
                LossModel::two_state(self.loss, self.conditional_loss)
            }
        };
        if let Some(rate) = self.rate_bps {
            if !(8_000..=1_000_000_000_000).contains(&rate) {
                bail!("rate-bps = {rate}: accepted 8000..1e12, or leave it out (unlimited)");
            }
        }
        let queue_bytes = match self.queue_bytes {
            Some(bytes) if bytes < mtu as u64 => bail!("queue-bytes = {bytes}: must hold one packet (mtu {mtu})"),
            Some(bytes) => bytes,
            None => PipeParams::default_queue_bytes(self.rate_bps, 2 * delay_ns),
        };
        let queue_packets = match self.queue_packets {
            Some(0) => bail!("queue-packets = 0: accepted >= 1, or leave it out"),
            Some(packets) => packets,
            None => u64::MAX,
        };
        Ok(PipeParams { loss, rate_bps: self.rate_bps, queue_bytes, queue_packets, delay_ns, jitter_ns, reorder: self.reorder })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
tun = "sjtbt"
seed = 3
[[groups]]
name = "near"
addrs = ["10.78.0.1", "10.78.0.2"]
down = { delay-ms = 0 }
[[groups]]
name = "far"
addrs = ["10.78.1.1"]
mtu = 576
down = { delay-ms = 75, loss = 0.06, loss-model = "two-state", rate-bps = 2000000 }
up = { delay-ms = 75, loss = 0.01 }
"#;

    #[test]
    fn example_config_builds_the_expected_pipes() {
        let config = Config::from_toml(EXAMPLE).unwrap();
        let far = &config.groups[1];
        assert_eq!(far.max_mss(), 536);
        let down = far.down.params(far.mtu).unwrap();
        assert_eq!(down.delay_ns, 75_000_000);
        assert_eq!(down.loss, LossModel::two_state(0.06, 0.35));
        assert_eq!(down.queue_bytes, 150_000, "BDP 37.5 KB is below the 100-packet floor");
        assert_eq!(far.up.params(far.mtu).unwrap().loss, LossModel::Bernoulli { p: 0.01 });
        assert_eq!(config.groups[0].up.params(1500).unwrap().loss, LossModel::None);
    }

    #[test]
    fn the_command_line_wins_over_the_files_run_options() {
        let file = Config::from_toml(&format!("counters = \"c.csv\"\nrealtime = 50\nno-offload = true\n{EXAMPLE}")).unwrap().run;
        assert_eq!(file.interval_s(), 1.0);
        let given = RunOptions { realtime: Some(10), interval: Some(0.5), ..RunOptions::default() };
        let run = given.over(file);
        assert_eq!((run.realtime, run.interval_s(), run.no_offload), (Some(10), 0.5, Some(true)));
        assert_eq!(run.counters, Some(PathBuf::from("c.csv")));
    }

    #[test]
    fn bad_values_are_named() {
        let group = "tun = \"t\"\n[[groups]]\nname = \"g\"\naddrs = [\"10.0.0.1\"]\n";
        let cases = [
            ("tun = \"t\"\ngroups = []\n".to_string(), "at least one group"),
            (format!("{group}down = {{ loss = 1.5 }}\n"), "loss = 1.5"),
            (format!("{group}mtu = 100\n"), "mtu 100"),
            (format!("{group}up = {{ delay = 3 }}\n"), "unknown field `delay`"),
            (format!("{group}[[groups]]\nname = \"h\"\naddrs = [\"10.0.0.1\"]\n"), "already belongs"),
            (format!("{group}down = {{ loss = 0.1, loss-model = \"gilbert\" }}\n"), "gilbert"),
            (format!("{group}down = {{ delay_ms = 5 }}\n"), "unknown field `delay_ms`"),
            (format!("counter = \"c.csv\"\n{group}"), "unknown field `counter`"),
            (format!("interval = 0\n{group}"), "interval 0"),
            (format!("realtime = 100\n{group}"), "realtime = 100"),
        ];
        for (text, expect) in cases {
            let err = format!("{:#}", Config::from_toml(&text).unwrap_err());
            assert!(err.contains(expect), "{text}: {err}");
        }
    }
}
