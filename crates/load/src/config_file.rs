//! `load --config FILE`: a run's options as one TOML file, so the runner hands the load
//! generator a typed document (sojourn.runner.loadfile.LoadFile) instead of an argv string.
//!
//! The file holds `mode` (open, closed, capacity or sessions) and any option of that mode
//! as a key of the same name (`requests-per-conn = 5`; `_` is read as `-`). Each key
//! becomes the command-line option it names, so the file accepts exactly what the command
//! line does and clap's checks and messages apply to both: `true` sets a flag, `false`
//! leaves it out, an array repeats the option (`source-addrs = ["10.0.0.1", "10.0.0.2"]`).
//! Options given after the file on the command line override its keys.

use anyhow::{bail, Context};
use std::ffi::OsString;
use std::path::Path;

/// The modes a file may name, as `load` spells its subcommands.
const MODES: [&str; 4] = ["open", "closed", "capacity", "sessions"];

/// The command-line words `FILE` stands for: the mode, then an option per key.
pub fn file_args(path: &Path) -> anyhow::Result<Vec<OsString>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading --config {}", path.display()))?;
    let mut table: toml::Table = toml::from_str(&text).with_context(|| format!("--config {} is not valid TOML", path.display()))?;
    let mode = match table.remove("mode") {
        Some(toml::Value::String(mode)) if MODES.contains(&mode.as_str()) => mode,
        Some(other) => bail!("--config {}: mode = {other}: expected one of {}", path.display(), MODES.join(", ")),
        None => bail!("--config {}: no `mode` key (one of {})", path.display(), MODES.join(", ")),
    };
    let mut args = vec![OsString::from(mode)];
    for (key, value) in table {
        let option = format!("--{}", key.replace('_', "-"));
        let values = match value {
            toml::Value::Boolean(true) => {
                args.push(option.into());
                continue;
            }
            toml::Value::Boolean(false) => continue,
            toml::Value::Array(items) => items,
            scalar => vec![scalar],
        };
        for item in values {
            let word = match item {
                toml::Value::String(text) => text,
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(x) => x.to_string(),
                other => bail!("--config {}: {key} = {other}: expected a string, number or boolean (or an array of them)", path.display()),
            };
            args.push(option.clone().into());
            args.push(word.into());
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(toml: &str) -> anyhow::Result<Vec<String>> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("sojourn-load-config-{}-{n}.toml", std::process::id()));
        std::fs::write(&path, toml).unwrap();
        let result = file_args(&path).map(|args| args.into_iter().map(|a| a.into_string().unwrap()).collect());
        std::fs::remove_file(&path).unwrap();
        result
    }

    #[test]
    fn keys_become_the_options_they_name() {
        let args = words(
            "mode = \"open\"\ntrace = \"t.csv\"\nrequests_per_conn = 5\ntimeout = 2.5\nquiet = true\n\
             verify-content = false\nsource-addrs = [\"10.0.0.1\", \"10.0.0.2\"]\n",
        )
        .unwrap();
        assert_eq!(args[0], "open");
        let rest = args[1..].join(" ");
        for expected in ["--trace t.csv", "--requests-per-conn 5", "--timeout 2.5", "--quiet", "--source-addrs 10.0.0.1 --source-addrs 10.0.0.2"] {
            assert!(rest.contains(expected), "{expected:?} in {rest:?}");
        }
        assert!(!rest.contains("verify"), "false leaves a flag out: {rest}");
    }

    #[test]
    fn a_missing_or_unknown_mode_and_a_table_value_are_named() {
        assert!(format!("{:#}", words("trace = \"t\"\n").unwrap_err()).contains("no `mode` key"));
        assert!(format!("{:#}", words("mode = \"burst\"\n").unwrap_err()).contains("mode = \"burst\": expected one of open"));
        let err = format!("{:#}", words("mode = \"open\"\n[trace]\nx = 1\n").unwrap_err());
        assert!(err.contains("trace = ") && err.contains("expected a string, number or boolean"), "{err}");
        assert!(format!("{:#}", words("mode = \"open\"\ntrace = \n").unwrap_err()).contains("not valid TOML"));
    }
}
