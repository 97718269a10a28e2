//! `sojourn-engine stages` as a user runs it: the default study prints one row
//! per Table 2 assignment and per other policy; bad input is named.

use std::process::Command;

fn engine() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sojourn-engine"))
}

#[test]
fn default_study_runs_table2_then_the_other_policies() {
    let out = engine().args(["stages", "--duration", "2000"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut lines = stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["policy", "weights", "completed", "timed_out", "productivity", "aborted", "util"]);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    let labels: Vec<String> = rows.iter().map(|r| format!("{} {}", r[0], r[1])).collect();
    assert_eq!(
        labels,
        ["rr 1,1,1,1", "rr 5,1,1,1", "rr 1,5,1,1", "rr 1,1,5,1", "rr 1,1,1,5", "rr 5,1,5,1", "rr 1,5,1,5", "dwfs -", "fifo -", "edf -"]
    );
    for row in &rows {
        let number = |i: usize| row[i].parse::<i64>().unwrap();
        assert_eq!(number(4), number(2) - number(3), "{row:?}");
    }
}

#[test]
fn output_is_deterministic_for_a_seed() {
    let run = || engine().args(["stages", "--policy", "dwfs", "--seed", "7", "--duration", "1000"]).output().unwrap().stdout;
    assert_eq!(run(), run());
}

#[test]
fn bad_input_names_what_is_accepted() {
    let out = engine().args(["stages", "--policy", "lifo"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lifo") && err.contains("fifo, rr, edf, wfs, dwfs"), "{err}");
    let out = engine().args(["stages", "--policy", "wfs", "--weights", "1,0,1,1"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("weight of stage 1"));
    let out = engine().args(["stages", "--weights", "1,2,3"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("multiple of the number of stages (4)"));
}

#[test]
fn classes_get_their_own_bounds_and_counts() {
    // 003 §5.2's three classes at its 1/100 scale, k = 20 stage costs (experiments/003).
    let out = engine()
        .args(["stages", "--policy", "dwfs", "--json", "--clients", "60", "--duration", "100", "--session-length", "10"])
        .args(["--service-times", "0.00025,0.01,0.005,0.0025", "--timeout", "0.1,0.15,0.2"])
        .args(["--think-time", "0.1", "--exponential-think", "--deterministic-service"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_class = |key: &str| row[key].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect::<Vec<_>>();
    let (completed, timed_out) = (by_class("completed_by_class"), by_class("timed_out_by_class"));
    assert_eq!((completed.len(), timed_out.len()), (3, 3), "{row}");
    assert_eq!(completed.iter().sum::<u64>(), row["completed"].as_u64().unwrap());
    assert_eq!(timed_out.iter().sum::<u64>(), row["timed_out"].as_u64().unwrap());
    // 60 users thinking 0.1 s offer ~1.4 of the CPU: every class is served, some requests miss.
    assert!(completed.iter().all(|&c| c > 1000) && row["timed_out"].as_u64().unwrap() > 0, "{row}");
    let out = engine().args(["stages", "--timeout", "0.1,0"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("timeout"), "{err}");
}

#[test]
fn a_config_file_runs_as_its_options_and_options_after_it_replace_its_keys() {
    let path = std::env::temp_dir().join(format!("sojourn-stages-cli-{}.toml", std::process::id()));
    std::fs::write(&path, "policy = [\"dwfs\"]\nseed = 3\nduration = 1000\nservice-times = [0.5, 1, 1.5, 2]\n").unwrap();
    let from_file = engine().args(["stages", "--config", path.to_str().unwrap(), "--seed", "7"]).output().unwrap();
    let given = engine().args(["stages", "--policy", "dwfs", "--seed", "7", "--duration", "1000"]).output().unwrap();
    assert!(from_file.status.success(), "{}", String::from_utf8_lossy(&from_file.stderr));
    assert_eq!(from_file.stdout, given.stdout);
    std::fs::write(&path, "policy = [\"dwfs\"]\nservice_times = [1, 1, 1, 1]\n").unwrap();
    let out = engine().args(["stages", "--config", path.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("unknown field `service_times`") && err.contains(path.to_str().unwrap()), "{err}");
    std::fs::write(&path, "policy = [\"lifo\"]\n").unwrap();
    let out = engine().args(["stages", "--config", path.to_str().unwrap()]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("lifo"), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_closed_stdout_ends_printing_commands_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};

    // `sojourn-engine stages --json | head -1`: the reader leaves after one line.
    let mut child = Command::new(env!("CARGO_BIN_EXE_sojourn-engine"))
        .args(["stages", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with('{'), "{first}");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.signal(), Some(13), "{stderr}"); // SIGPIPE
}
