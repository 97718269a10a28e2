//! `sojourn-engine load`.

/// Drive an HTTP/1.1 server from a trace or a load model and record every request.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {}

pub fn run(_args: LoadArgs) -> anyhow::Result<()> {
    anyhow::bail!("`load` is not built yet")
}
