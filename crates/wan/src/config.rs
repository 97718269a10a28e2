//! The emulator's configuration: a JSON document (written by
//! `sojourn.testbed.emulator`, python/sojourn/testbed/emulator.py).
//!
//! ```json
//! {"tun": "sjtbt", "seed": 1,
//!  "groups": [{"name": "g0", "addrs": ["10.78.0.1"], "mtu": 1500,
//!              "down": {"delay_ms": 50, "jitter_ms": 0, "reorder": false,
//!                       "loss": 0.03, "loss_model": "two-state", "conditional_loss": 0.35,
//!                       "rate_bps": null, "queue_bytes": null, "queue_packets": null},
//!              "up": { ...same keys... }}]}
//! ```
//! `down` is the direction towards the group's addresses (server -> clients),
//! `up` the direction from them. Guarantee: a `Config` that `validate`s builds
//! pipes whose parameters are all in range; errors name the group, direction
//! and field, and what is accepted.

use std::net::Ipv4Addr;

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::loss::LossModel;
use crate::pipe::PipeParams;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Name of the (existing or new) TUN device to attach to.
    pub tun: String,
    #[serde(default)]
    pub seed: u64,
    pub groups: Vec<GroupConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
    pub fn from_toml(text: &str) -> anyhow::Result<Config> {
        let config: Config = toml::from_str(text).context("emulator config is not valid")?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> anyhow::Result<()> {
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
        let delay_ns = ms("delay_ms", self.delay_ms)?;
        let jitter_ns = ms("jitter_ms", self.jitter_ms)?;
        if !(0.0..1.0).contains(&self.loss) {
            bail!("loss = {}: accepted 0 <= loss < 1", self.loss);
        }
        let loss = match self.loss_model {
            _ if self.loss == 0.0 => LossModel::None,
            LossModelName::Bernoulli => LossModel::Bernoulli { p: self.loss },
            LossModelName::TwoState => {
                if !(self.loss..1.0).contains(&self.conditional_loss) {
                    bail!(
                        "conditional_loss = {}: accepted loss ({}) <= conditional_loss < 1",
                        self.conditional_loss,
                        self.loss
                    );
                }
                LossModel::two_state(self.loss, self.conditional_loss)
            }
        };
        if let Some(rate) = self.rate_bps {
            if !(8_000..=1_000_000_000_000).contains(&rate) {
                bail!("rate_bps = {rate}: accepted 8000..1e12 or null (unlimited)");
            }
        }
        let queue_bytes = match self.queue_bytes {
            Some(bytes) if bytes < mtu as u64 => bail!("queue_bytes = {bytes}: must hold one packet (mtu {mtu})"),
            Some(bytes) => bytes,
            None => PipeParams::default_queue_bytes(self.rate_bps, 2 * delay_ns),
        };
        let queue_packets = match self.queue_packets {
            Some(0) => bail!("queue_packets = 0: accepted >= 1 or null"),
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
down = { delay_ms = 0 }
[[groups]]
name = "far"
addrs = ["10.78.1.1"]
mtu = 576
down = { delay_ms = 75, loss = 0.06, loss_model = "two-state", rate_bps = 2000000 }
up = { delay_ms = 75, loss = 0.01 }
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
    fn bad_values_are_named() {
        let group = "tun = \"t\"\n[[groups]]\nname = \"g\"\naddrs = [\"10.0.0.1\"]\n";
        let cases = [
            ("tun = \"t\"\ngroups = []\n".to_string(), "at least one group"),
            (format!("{group}down = {{ loss = 1.5 }}\n"), "loss = 1.5"),
            (format!("{group}mtu = 100\n"), "mtu 100"),
            (format!("{group}up = {{ delay = 3 }}\n"), "unknown field `delay`"),
            (format!("{group}[[groups]]\nname = \"h\"\naddrs = [\"10.0.0.1\"]\n"), "already belongs"),
            (format!("{group}down = {{ loss = 0.1, loss_model = \"gilbert\" }}\n"), "gilbert"),
        ];
        for (text, expect) in cases {
            let err = format!("{:#}", Config::from_toml(&text).unwrap_err());
            assert!(err.contains(expect), "{text}: {err}");
        }
    }
}
