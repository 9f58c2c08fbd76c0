//! Command-line conventions: `--version`, shell completions and the man page.

use std::process::{Command, Output};

fn lockstep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .expect("run lockstep")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8")
}

#[test]
fn version_names_the_commit_and_the_kubernetes_api() {
    let text = stdout(&lockstep(&["--version"]));
    let prefix = format!("lockstep {} (commit ", env!("CARGO_PKG_VERSION"));
    let rest = text
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{text}"));
    let (commit, rest) = rest.split_once(", ").unwrap_or_else(|| panic!("{text}"));
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
    assert_eq!(rest.trim_end(), "Kubernetes API 1.37)");
    // Built from a git checkout, the commit is that checkout's.
    if let Ok(head) = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        && head.status.success()
    {
        let head = String::from_utf8_lossy(&head.stdout);
        assert!(head.starts_with(commit), "{commit} vs {head}");
    }
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "_lockstep()"),
        ("zsh", "#compdef lockstep"),
        ("fish", "complete -c lockstep"),
    ] {
        let text = stdout(&lockstep(&["completions", shell]));
        assert!(text.contains(marker), "{shell}: {text}");
        assert!(
            text.contains("simulate") && text.contains("estimate"),
            "{shell}"
        );
    }
    let out = lockstep(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn man_prints_a_man_page() {
    let text = stdout(&lockstep(&["man"]));
    assert!(text.contains(".TH lockstep 1"), "{text}");
    assert!(text.contains("Kubernetes API 1.37"));
    assert!(text.contains("schedule") && text.contains("simulate"));
}
