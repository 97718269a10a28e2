//! `sojourn-engine bands`: the HTB strict-priority bands behind kernel-level SRPT.

/// Set up or show the priority qdisc bands used by `serve --kernel-bands`.
#[derive(Debug, clap::Args)]
pub struct BandsArgs {}

pub fn run(_args: BandsArgs) -> anyhow::Result<()> {
    anyhow::bail!("`bands` is not built yet (issue 2)")
}
