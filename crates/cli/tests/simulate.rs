//! `lockstep simulate` through the binary: the report is written, the same seed prints the
//! same metrics, and a bad trace row is bad input.

use std::process::Command;

fn lockstep() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-cli-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn embedded_scenario_writes_the_report_and_is_deterministic() {
    let out = temp_dir("report");
    let run = |dir: &std::path::Path| {
        lockstep()
            .args(["simulate", "--jobs", "40", "--quiet", "-o", "json", "--out"])
            .arg(dir)
            .output()
            .expect("run lockstep simulate")
    };
    let first = run(&out);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let metrics: serde_json::Value = serde_json::from_slice(&first.stdout).expect("json on stdout");
    assert_eq!(metrics["trace"]["jobs"], 40);
    for file in ["index.html", "metrics.json", "timing.json"] {
        assert!(out.join(file).is_file(), "{file} not written");
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("<svg"), "the report has charts");
    let second = run(&out);
    assert_eq!(first.stdout, second.stdout, "same seed, same metrics");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_bad_trace_row_is_bad_input_naming_file_and_line() {
    let dir = temp_dir("bad-row");
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("philly.csv");
    std::fs::write(
        &csv,
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,abc,1,66.0,x\n",
    )
    .unwrap();
    let out = lockstep()
        .args(["simulate", "--quiet", "--no-report", "--philly"])
        .arg(&csv)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("philly.csv:2"), "{stderr}");
    assert!(stderr.contains("duration"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
