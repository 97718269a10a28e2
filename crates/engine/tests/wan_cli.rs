//! `sojourn-engine wan` at the binary level: help, and configuration errors that
//! name the bad input before any device is touched. (The emulator's behaviour in
//! a real network is measured by python/tests/test_testbed_net.py.)

use std::process::Command;

fn wan(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sojourn-engine")).arg("wan").args(args).output().expect("engine runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn config_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("sojourn-wan-cli-{}-{name}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn help_lists_the_options() {
    let (ok, stdout, _) = wan(&["--help"]);
    assert!(ok);
    for option in ["--config", "--counters", "--interval", "--summary", "--realtime"] {
        assert!(stdout.contains(option), "{option} missing from:\n{stdout}");
    }
}

#[test]
fn config_errors_name_the_input() {
    let cases = [
        ("syntax", "tun = ", "TOML parse error"),
        ("loss", r#"tun = "x"
groups = [{ name = "g", addrs = ["10.78.0.1"], up = { loss = 2 } }]"#, "group g direction up"),
        ("field", r#"tun = "x"
groups = [{ name = "g", addrs = ["10.78.0.1"], down = { delay = 5 } }]"#, "unknown field `delay`"),
        ("tun", r#"tun = "a-name-much-too-long"
groups = [{ name = "g", addrs = ["10.78.0.1"] }]"#, "1-15 characters"),
    ];
    for (name, text, expect) in cases {
        let path = config_file(name, text);
        let (ok, stdout, stderr) = wan(&["--config", path.to_str().unwrap()]);
        std::fs::remove_file(&path).unwrap();
        assert!(!ok, "{name}: accepted");
        assert!(stdout.is_empty(), "{name}: printed ready before failing");
        assert!(stderr.contains(expect) && stderr.contains(path.to_str().unwrap()), "{name}: {stderr}");
    }
    let (ok, _, stderr) = wan(&["--config", "/nonexistent/wan.toml"]);
    assert!(!ok && stderr.contains("/nonexistent/wan.toml"), "{stderr}");
    let (ok, _, stderr) = wan(&["--config", "x.toml", "--interval", "0"]);
    assert!(!ok && stderr.contains("between 0.01 and 3600"), "{stderr}");
}
