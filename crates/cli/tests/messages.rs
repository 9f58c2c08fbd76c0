//! Messages for common slips, through the binary.

use std::process::Command;

#[test]
fn a_file_without_objects_is_named_in_a_warning() {
    let dir = std::env::temp_dir().join(format!("lockstep-messages-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.yaml");
    let comments = dir.join("comments.yaml");
    std::fs::write(&empty, "").unwrap();
    std::fs::write(&comments, "# TODO: nodes\n---\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .arg("schedule")
        .arg("-f")
        .arg(&empty)
        .arg("-f")
        .arg(&comments)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for file in [&empty, &comments] {
        assert!(
            stderr.contains(&format!(
                "warning: {} holds no Kubernetes objects",
                file.display()
            )),
            "{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
