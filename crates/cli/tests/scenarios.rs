//! Whole-run scenario fixtures under `tests/scenarios/NAME/`:
//! - `input.yaml` (or an `input/` directory): the manifests;
//! - `args` (optional): extra command-line arguments, one per line (`$FIXTURE` is replaced
//!   by the fixture's directory);
//! - `expected.json`: the exact `lockstep schedule -o json` output. Scenarios run with
//!   `--strict`: a field the Kubernetes API does not define fails them.
//!
//! Bad-input fixtures under `tests/bad-input/NAME/`: `input.yaml` (or `input/`), optional
//! `args`, and `expected-error.txt` whose every non-empty line must appear in stderr; the run
//! must exit 2 with nothing on stdout.
//!
//! Set `LOCKSTEP_BLESS=1` to print the actual output of failing scenarios.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("tests").join(kind))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn run(dir: &Path, strict: bool) -> std::process::Output {
    let input = if dir.join("input").is_dir() {
        dir.join("input")
    } else {
        dir.join("input.yaml")
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockstep"));
    cmd.arg("schedule")
        .arg("-f")
        .arg(&input)
        .arg("-o")
        .arg("json");
    if strict {
        cmd.arg("--strict");
    }
    if let Ok(args) = std::fs::read_to_string(dir.join("args")) {
        for a in args.lines().map(str::trim).filter(|l| !l.is_empty()) {
            cmd.arg(a.replace("$FIXTURE", &dir.display().to_string()));
        }
    }
    cmd.output().expect("run lockstep")
}

#[test]
fn scenarios_match_expected_output() {
    let dirs = fixtures("scenarios");
    assert!(!dirs.is_empty(), "no scenario fixtures found");
    let mut failures = Vec::new();
    for dir in dirs {
        let out = run(&dir, true);
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if !out.status.success() {
            failures.push(format!(
                "{name}: exit {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        let actual: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("stdout is JSON");
        let expected_text = std::fs::read_to_string(dir.join("expected.json"))
            .unwrap_or_else(|_| panic!("{name}: missing expected.json"));
        let expected: serde_json::Value = serde_json::from_str(&expected_text)
            .unwrap_or_else(|e| panic!("{name}: expected.json is not JSON: {e}"));
        if actual != expected {
            let shown = if std::env::var_os("LOCKSTEP_BLESS").is_some() {
                serde_json::to_string_pretty(&actual).unwrap()
            } else {
                String::from("(set LOCKSTEP_BLESS=1 to print the actual output)")
            };
            failures.push(format!(
                "{name}: output differs from expected.json\n{shown}"
            ));
        }
        // Determinism: a second run prints the same bytes.
        let again = run(&dir, true);
        if again.stdout != out.stdout {
            failures.push(format!("{name}: second run printed different output"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn bad_input_exits_2_with_a_clear_message_and_no_stdout() {
    let dirs = fixtures("bad-input");
    assert!(!dirs.is_empty(), "no bad-input fixtures found");
    let mut failures = Vec::new();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let out = run(&dir, false);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(2) {
            failures.push(format!(
                "{name}: exit {:?}, want 2; stderr: {stderr}",
                out.status.code()
            ));
        }
        if !out.stdout.is_empty() {
            failures.push(format!("{name}: printed to stdout"));
        }
        let expected = std::fs::read_to_string(dir.join("expected-error.txt"))
            .unwrap_or_else(|_| panic!("{name}: missing expected-error.txt"));
        for line in expected.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if !stderr.contains(line) {
                failures.push(format!("{name}: stderr lacks {line:?}; stderr: {stderr}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
