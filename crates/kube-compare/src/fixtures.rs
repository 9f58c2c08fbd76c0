//! The repository's scenario fixtures as comparison cases.

use std::path::{Path, PathBuf};

use crate::compare::Case;

/// The repository's `tests/scenarios`.
pub fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/scenarios")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out)?;
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
    Ok(())
}

/// Kinds lockstep expands into pods as their controllers would. The test control plane runs
/// no controllers (no Job controller, KubeRay, JobSet, ...), so their pods never exist there
/// and a fixture holding one cannot be compared.
const CONTROLLER_KINDS: &[&str] = &[
    "RayCluster",
    "RayJob",
    "Job",
    "JobSet",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "LeaderWorkerSet",
];

/// Every fixture under `dir` that runs with kube-scheduler's defaults (no `args`
/// file: no lockstep-only configuration or flags) and holds no object that a controller
/// would expand into pods (see [`CONTROLLER_KINDS`]), in name order.
pub fn load(dir: &Path) -> Result<Vec<Case>, String> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.join("args").exists())
        .collect();
    dirs.sort();
    let mut cases = Vec::new();
    for d in dirs {
        let mut files = Vec::new();
        if d.join("input").is_dir() {
            yaml_files(&d.join("input"), &mut files)
                .map_err(|e| format!("{}: {e}", d.display()))?;
        } else {
            files.push(d.join("input.yaml"));
        }
        let mut objects = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            objects.extend(
                lockstep_testenv::objects::parse_documents(&text)
                    .map_err(|e| format!("{}: {e}", f.display()))?,
            );
        }
        let expanded_by_controllers = objects.iter().any(|o| {
            o.get("kind")
                .and_then(|k| k.as_str())
                .is_some_and(|k| CONTROLLER_KINDS.contains(&k))
        });
        if expanded_by_controllers {
            continue;
        }
        let name = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        cases.push(Case { name, objects });
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_with_workload_objects_are_left_out() {
        let cases = load(&scenarios_dir()).expect("the scenario fixtures");
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert!(names.contains(&"gang-fits"), "{names:?}");
        for left_out in [
            "ray-per-group-gangs",
            "job-indexed-gang-rack",
            "statefulset-anti-affinity",
        ] {
            assert!(!names.contains(&left_out), "{left_out} is compared");
        }
    }
}
