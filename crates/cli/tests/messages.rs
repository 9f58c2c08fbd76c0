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

/// The README shows `lockstep schedule -f examples/quickstart` with kube-scheduler's
/// FailedScheduling message; the binary prints exactly that.
#[test]
fn the_readme_quickstart_output_is_what_the_binary_prints() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let prompt = "$ lockstep schedule -f examples/quickstart\n";
    let start = readme
        .find(prompt)
        .expect("README shows the quickstart run")
        + prompt.len();
    let end = start + readme[start..].find("```").expect("end of the code block");
    let shown = &readme[start..end];
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["schedule", "-f", "examples/quickstart"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), shown);
    assert!(shown.contains(
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    ));
}
