//! `--config FILE [OPTIONS...]`, the one way every `sojourn-engine` subcommand reads a
//! configuration file: a TOML document whose keys are the subcommand's long option names
//! (kebab-case, `requests-per-conn = 5`), deserialized straight into the struct clap
//! fills from the command line (serde, unknown keys are errors naming the key), and
//! options given after FILE put in place of the file's values.
//!
//! The options after FILE are parsed by that struct's own clap arguments, so they get
//! clap's value checks and messages; they are only relaxed so that nothing is required
//! and nothing has a default (an option left out keeps the file's value). A list option
//! given there replaces the file's list. Checks that span options (one needs another,
//! two contradict) are the subcommand's own, made on the merged options.

use std::ffi::OsString;
use std::path::Path;
use std::str::FromStr;

use anyhow::Context;
use clap::builder::{OsStr, Resettable};
use clap::{Arg, ArgAction, Args, Command, FromArgMatches, Id};
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::{Deserialize, Serialize};

/// The document in `path` given as `option` (`--config`, `--stages`), deserialized into
/// `T`; errors name the option and the file (and, from serde, the key and what was expected).
pub fn read<T: DeserializeOwned>(option: &str, path: &Path) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {option} {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{option} {}", path.display()))
}

/// `--config FILE [OPTIONS...]` taken as the values of one option (`num_args = 1..` with
/// hyphen values allowed, so the options after FILE are its values): FILE's options with
/// those after it in their place. `command` is the subcommand as messages show it.
pub fn file_then_options<T: DeserializeOwned + Args + FromArgMatches>(words: &[OsString], command: &str) -> anyhow::Result<T> {
    let (path, options) = words.split_first().context("--config needs a FILE")?;
    let path = Path::new(path);
    override_with(read("--config", path)?, &format!("{command} --config {}", path.display()), options)
}

/// The options given on the command line before `--config FILE` (`given`: every field
/// None but those given, as clap fills an all-`Option` struct) in place of `file`'s, so
/// `serve --listen ADDR --config FILE` works as `serve --config FILE --listen ADDR`.
pub fn given_over<T: Serialize + DeserializeOwned>(given: &T, file: T) -> anyhow::Result<T> {
    // None fields are left out of a TOML table, so only the given ones replace the file's.
    let mut merged = toml::Table::try_from(file).context("the --config options as a table")?;
    merged.extend(toml::Table::try_from(given).context("the command line's options as a table")?);
    Ok(merged.try_into()?)
}

/// `options` with every option given in `words` (command-line words such as
/// `["--seed", "2"]`) in place of its value; `name` is the command as messages show it.
pub fn override_with<T: Args + FromArgMatches>(mut options: T, name: &str, words: &[OsString]) -> anyhow::Result<T> {
    if words.is_empty() {
        return Ok(options);
    }
    let command = T::augment_args(Command::new("options")).bin_name(name.to_owned()).mut_args(only_as_given);
    let matches = command
        .try_get_matches_from(std::iter::once(OsString::from(name)).chain(words.iter().cloned()))
        .map_err(|err| anyhow::anyhow!("{}", err.render().to_string().trim_end()))?;
    options.update_from_arg_matches(&matches)?;
    Ok(options)
}

/// An argument as an override of the file: never required and without a default, so
/// clap reports it only when it is given (`update_from_arg_matches` then replaces the
/// field). A flag takes an optional `true`/`false`, as a boolean key does.
fn only_as_given(arg: Arg) -> Arg {
    let no_arg = || Resettable::<Id>::Reset;
    let arg = arg.required(false).required_unless_present(no_arg()).requires(no_arg()).default_value(Resettable::<OsStr>::Reset);
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        arg.action(ArgAction::Set).num_args(0..=1).default_missing_value("true").value_parser(clap::value_parser!(bool))
    } else {
        arg
    }
}

/// Deserializes a value written as the command line writes it (`think-time = "exp:1"`,
/// `cutoffs = "1K,2K"`) with its `FromStr`, the parser the command line uses.
pub fn from_text<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    parse(text(deserializer)?)
}

/// [`from_text`] for a list (`policy = ["rr", "dwfs"]`).
pub fn from_texts<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    Vec::<Text>::deserialize(deserializer)?.into_iter().map(|text| parse(text.0)).collect()
}

fn parse<T: FromStr, E: serde::de::Error>(text: String) -> Result<T, E>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|err| E::custom(format!("{text:?}: {err}")))
}

/// A scalar key's text: a string as written, a number as the command line would spell it
/// (`quantum = 32768` and `quantum = "32K"` both work), for a value the command line
/// parses with a function rather than `FromStr`.
pub fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Text::deserialize(deserializer).map(|text| text.0)
}

/// [`from_text`] for an optional value.
pub fn from_optional_text<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    from_text(deserializer).map(Some)
}

/// See [`text`].
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Scalar {
            Text(String),
            Integer(i64),
            Float(f64),
        }
        Ok(Text(match Scalar::deserialize(deserializer).map_err(|_| D::Error::custom("expected a string or a number"))? {
            Scalar::Text(text) => text,
            Scalar::Integer(n) => n.to_string(),
            Scalar::Float(x) => x.to_string(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser, Deserialize, PartialEq)]
    #[serde(rename_all = "kebab-case", deny_unknown_fields)]
    struct Demo {
        #[arg(long)]
        target: String,
        #[arg(long, default_value_t = 1)]
        #[serde(default = "one")]
        seed: u64,
        #[arg(long)]
        #[serde(default)]
        quiet: bool,
        #[arg(long = "path")]
        #[serde(default, rename = "path")]
        paths: Vec<String>,
        #[arg(long, requires = "seed")]
        retries: Option<u32>,
        #[arg(long, value_parser = |s: &str| s.parse::<u64>().map_err(|e| e.to_string()))]
        #[serde(default, deserialize_with = "from_optional_text")]
        quantum: Option<u64>,
    }

    fn one() -> u64 {
        1
    }

    fn demo_file(text: &str) -> anyhow::Result<Demo> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("sojourn-config-{}-{n}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let result = read("--config", &path);
        std::fs::remove_file(&path).unwrap();
        result
    }

    fn words(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn the_file_gives_typed_options_and_defaults_fill_the_rest() {
        let demo = demo_file("target = \"h:1\"\nquiet = true\npath = [\"/a\", \"/b\"]\nquantum = \"7\"\n").unwrap();
        assert_eq!(demo, Demo { target: "h:1".into(), seed: 1, quiet: true, paths: vec!["/a".into(), "/b".into()], retries: None, quantum: Some(7) });
        assert_eq!(demo_file("target = \"h\"\nquantum = 9\n").unwrap().quantum, Some(9), "a number where the command line takes text");
    }

    #[test]
    fn an_unknown_key_or_a_wrong_type_is_named() {
        let err = format!("{:#}", demo_file("target = \"h\"\nsede = 2\n").unwrap_err());
        assert!(err.contains("unknown field `sede`") && err.contains("--config"), "{err}");
        let err = format!("{:#}", demo_file("target = \"h\"\nseed = \"two\"\n").unwrap_err());
        assert!(err.contains("seed") && err.contains("invalid type"), "{err}");
        let err = format!("{:#}", demo_file("target = \"h\"\nquantum = \"x\"\n").unwrap_err());
        assert!(err.contains("\"x\"") && err.contains("invalid digit"), "{err}");
        assert!(format!("{:#}", demo_file("seed = 2\n").unwrap_err()).contains("missing field `target`"));
    }

    #[test]
    fn the_command_line_replaces_only_what_it_gives() {
        let file = demo_file("target = \"h\"\nseed = 5\nquiet = true\npath = [\"/a\"]\n").unwrap();
        let same = override_with(demo_file("target = \"h\"\nseed = 5\nquiet = true\npath = [\"/a\"]\n").unwrap(), "demo", &[]).unwrap();
        assert_eq!(same, file);
        let merged = override_with(file, "demo", &words("--seed 7 --path /b --retries 2 --quiet false")).unwrap();
        assert_eq!(merged, Demo { target: "h".into(), seed: 7, quiet: false, paths: vec!["/b".into()], retries: Some(2), quantum: None });
        let flag = override_with(demo_file("target = \"h\"\n").unwrap(), "demo", &words("--quiet")).unwrap();
        assert!(flag.quiet);
    }

    #[test]
    fn a_bad_command_line_option_gets_claps_message() {
        let file = demo_file("target = \"h\"\n").unwrap();
        let err = override_with(file, "demo", &words("--sede 2")).unwrap_err().to_string();
        assert!(err.contains("unexpected argument '--sede'"), "{err}");
        let file = demo_file("target = \"h\"\n").unwrap();
        let err = override_with(file, "demo", &words("--seed x")).unwrap_err().to_string();
        assert!(err.contains("invalid value 'x' for '--seed"), "{err}");
    }

    #[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
    #[serde(rename_all = "kebab-case")]
    struct Given {
        listen: Option<String>,
        threads: Option<u32>,
        policy: Option<String>,
    }

    #[test]
    fn options_given_before_the_file_replace_only_its_keys_they_name() {
        let file = Given { listen: Some("a:1".into()), threads: Some(2), policy: None };
        let given = Given { threads: Some(4), policy: Some("las".into()), ..Default::default() };
        let merged = given_over(&given, file).unwrap();
        assert_eq!(merged, Given { listen: Some("a:1".into()), threads: Some(4), policy: Some("las".into()) });
        assert_eq!(given_over(&Given::default(), Given { threads: Some(2), ..Default::default() }).unwrap().threads, Some(2));
    }
}
