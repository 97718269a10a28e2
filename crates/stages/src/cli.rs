//! `sojourn-engine stages`.

/// Simulate dispatch among CPU-bound stage queues (003 §4.1).
#[derive(Debug, clap::Args)]
pub struct StagesArgs {}

pub fn run(_args: StagesArgs) -> anyhow::Result<()> {
    anyhow::bail!("`stages` is not built yet (issue 8)")
}
