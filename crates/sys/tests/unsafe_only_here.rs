//! Every `unsafe` block of the workspace is in this crate, behind a safe function: a
//! system call written anywhere else fails this test.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            // Build output (fuzz/target) is generated code, not ours.
            if !path.ends_with("target") {
                rust_files(&path, found);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// Whether a line of code (not a comment) uses the `unsafe` keyword.
fn uses_unsafe(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or_default();
    code.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|word| word == "unsafe")
}

#[test]
fn no_unsafe_outside_sojourn_sys() {
    let this_crate = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = this_crate.parent().unwrap().parent().unwrap();
    let mut files = Vec::new();
    for dir in [workspace.join("crates"), workspace.join("fuzz")] {
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
    }
    assert!(files.len() > 50, "found only {} Rust files under {}", files.len(), workspace.display());
    let offenders: Vec<String> = files
        .iter()
        .filter(|path| !path.starts_with(this_crate))
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            let lines: Vec<String> =
                text.lines().enumerate().filter(|(_, line)| uses_unsafe(line)).map(|(n, line)| format!("{}:{}: {}", path.display(), n + 1, line.trim())).collect();
            lines
        })
        .collect();
    assert!(offenders.is_empty(), "unsafe outside crates/sys (add a safe wrapper there):\n{}", offenders.join("\n"));
}

#[test]
fn the_check_sees_code_and_not_comments() {
    assert!(uses_unsafe("    let fd = unsafe { libc::dup(0) };"));
    assert!(uses_unsafe("unsafe impl Send for X {}"));
    assert!(!uses_unsafe("// SAFETY: nothing unsafe here"));
    assert!(!uses_unsafe("let unsafe_count = 0;"));
}
