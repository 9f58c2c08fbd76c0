//! The fuzz targets' corpora (`fuzz/corpus/TARGET/`), replayed on the stable toolchain: each
//! input goes through the same function its libFuzzer target calls (`fuzz/src/lib.rs`,
//! included here), which must return normally, and each manifest input also through the
//! binary, which must exit 0, or 2 with a message and nothing on stdout. Crashes the fuzzers
//! found are in the corpora too, so they stay fixed.

#[allow(dead_code, unused_imports)]
#[path = "../../../fuzz/src/lib.rs"]
mod targets;

use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", dir.display());
    files
}

/// Runs `run` on every input of the target's corpus; a panic fails the test, naming the
/// inputs that panicked.
fn replay(target: &str, run: fn(&[u8])) {
    let mut failed = Vec::new();
    let files = corpus(target);
    for file in &files {
        let data = std::fs::read(file).expect("read corpus input");
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            failed.push(file.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} {target} inputs panicked: {failed:#?}",
        failed.len(),
        files.len()
    );
}

#[test]
fn manifests_corpus() {
    replay("manifests", targets::manifests);
}

#[test]
fn manifests_corpus_through_the_binary_exits_0_or_2() {
    for file in corpus("manifests") {
        let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(["schedule", "-o", "json", "-f"])
            .arg(&file)
            .output()
            .expect("run lockstep");
        match out.status.code() {
            Some(0) => {}
            Some(2) => {
                assert!(
                    out.stdout.is_empty(),
                    "{}: exit 2 with output",
                    file.display()
                );
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains("error: "),
                    "{}: exit 2 without a message",
                    file.display()
                );
            }
            other => panic!(
                "{}: exit {other:?}\n{}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

#[test]
fn cel_corpus() {
    replay("cel", targets::cel);
}

#[test]
fn philly_corpus() {
    replay("philly", targets::philly);
}

#[test]
fn tiresias_corpus() {
    replay("tiresias", targets::tiresias);
}

#[test]
fn openb_corpus() {
    replay("openb", targets::openb);
}

#[test]
fn annotated_manifests_corpus() {
    replay("annotated_manifests", targets::annotated_manifests);
}

#[test]
fn engine_corpus() {
    replay("engine", targets::engine);
}

#[test]
fn federation_corpus() {
    replay("federation", targets::federation);
}

#[test]
fn estimator_corpus() {
    replay("estimator", targets::estimator);
}

/// The estimator's seed inputs are protobuf made by `estimator_seeds`: the corpus holds each
/// request as generated (compared decoded: map entries may come in any order) (`LOCKSTEP_WRITE_FUZZ_SEEDS=1` writes them after a change of the messages or
/// the generator).
#[test]
fn estimator_seeds_are_in_the_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/estimator");
    let write = std::env::var_os("LOCKSTEP_WRITE_FUZZ_SEEDS").is_some();
    for (name, bytes) in targets::estimator_seeds() {
        let path = dir.join(format!("seed-{name}"));
        if write {
            std::fs::create_dir_all(&dir).expect("create the corpus directory");
            std::fs::write(&path, &bytes).expect("write a seed");
        }
        let stored = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run with LOCKSTEP_WRITE_FUZZ_SEEDS=1",
                path.display()
            )
        });
        let decoded = targets::EstimatorRequest::decode(&stored);
        assert!(decoded.is_some(), "{} does not decode", path.display());
        assert!(
            decoded == targets::EstimatorRequest::decode(&bytes),
            "{} differs from what estimator_seeds makes; run with LOCKSTEP_WRITE_FUZZ_SEEDS=1",
            path.display()
        );
    }
}
