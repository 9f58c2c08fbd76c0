//! `lockstep federate` fixtures under `tests/federation/NAME/`:
//! - `input.yaml` (or an `input/` directory): Karmada Clusters and bindings; without
//!   either, `args` names the inputs (paths from the repository's root, e.g. an example);
//! - `args` (optional): extra arguments, one per line (`$FIXTURE` is replaced by the
//!   fixture's directory), e.g. `--member` flags;
//! - `expected.json`: the exact `lockstep federate -o json` output;
//!   or, for bad input, `expected-error.txt`, whose every non-empty line must appear in
//!   stderr; the run must then exit 2 with nothing on stdout.
//!
//! Set `LOCKSTEP_BLESS=1` to print the actual output of failing fixtures.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/federation");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
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

fn run(dir: &Path, format: &str) -> std::process::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockstep"));
    cmd.current_dir(&root).arg("federate").arg("-o").arg(format);
    if dir.join("input").is_dir() {
        cmd.arg("-f").arg(dir.join("input"));
    } else if dir.join("input.yaml").is_file() {
        cmd.arg("-f").arg(dir.join("input.yaml"));
    }
    if let Ok(args) = std::fs::read_to_string(dir.join("args")) {
        for a in args.lines().map(str::trim).filter(|l| !l.is_empty()) {
            cmd.arg(a.replace("$FIXTURE", &dir.display().to_string()));
        }
    }
    cmd.output().expect("run lockstep")
}

#[test]
fn federation_fixtures_match_expected_output() {
    let dirs = fixtures();
    assert!(dirs.len() >= 5, "federation fixtures missing");
    let mut failures = Vec::new();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let out = run(&dir, "json");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if let Ok(expected) = std::fs::read_to_string(dir.join("expected-error.txt")) {
            if out.status.code() != Some(2) || !out.stdout.is_empty() {
                failures.push(format!(
                    "{name}: expected exit 2 and no stdout, got {:?}: {}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout)
                ));
            }
            for line in expected.lines().map(str::trim).filter(|l| !l.is_empty()) {
                if !stderr.contains(line) {
                    failures.push(format!("{name}: stderr lacks {line:?}:\n{stderr}"));
                }
            }
            continue;
        }
        if !out.status.success() {
            failures.push(format!("{name}: exit {:?}: {stderr}", out.status.code()));
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
                String::from_utf8_lossy(&out.stdout).to_string()
            } else {
                String::new()
            };
            failures.push(format!(
                "{name}: output differs from expected.json\n{shown}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn table_and_yaml_say_the_same_as_json() {
    for dir in fixtures() {
        if dir.join("expected-error.txt").exists() {
            continue;
        }
        let json: serde_json::Value =
            serde_json::from_slice(&run(&dir, "json").stdout).expect("JSON");
        let yaml: serde_json::Value =
            serde_norway::from_slice(&run(&dir, "yaml").stdout).expect("YAML");
        assert_eq!(json, yaml, "{}", dir.display());
        let table = String::from_utf8(run(&dir, "table").stdout).expect("UTF-8");
        let placed = json["placements"].as_array().map_or(0, Vec::len);
        assert!(
            table.contains(&format!("{placed} placed,")),
            "{}: {table}",
            dir.display()
        );
        for p in json["preemptions"].as_array().into_iter().flatten() {
            assert!(table.contains(p["binding"].as_str().unwrap()));
        }
    }
}
