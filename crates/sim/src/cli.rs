//! `sojourn-engine sim`.

/// Simulate a bottleneck link under a scheduling policy.
#[derive(Debug, clap::Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> anyhow::Result<()> {
    anyhow::bail!("`sim` is not built yet")
}
