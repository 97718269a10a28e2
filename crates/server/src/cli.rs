//! `sojourn-engine serve`.

/// Serve a directory over HTTP/1.1 with a chosen connection-scheduling policy.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("`serve` is not built yet (issue 2)")
}
