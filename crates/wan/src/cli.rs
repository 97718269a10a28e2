//! `sojourn-engine wan`.

/// Emulate wide-area links between TUN devices: loss, queue, rate and delay.
#[derive(Debug, clap::Args)]
pub struct WanArgs {}

pub fn run(_args: WanArgs) -> anyhow::Result<()> {
    anyhow::bail!("`wan` is not built yet")
}
