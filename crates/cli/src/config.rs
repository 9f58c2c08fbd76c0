//! `--config`: a KubeSchedulerConfiguration file read into the engine's profile, the same
//! way for every subcommand that takes one.

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use lockstep_engine::{KubeSchedulerConfiguration, Profile};

/// Reads `path` (within the manifest size and nesting limits) into its one profile.
pub(crate) fn load(path: &Path) -> Result<Profile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --config {}", path.display()))?;
    lockstep_manifests::check_yaml_limits(&format!("--config {}", path.display()), &text)
        .map_err(|e| anyhow!("{e}"))?;
    let cfg: KubeSchedulerConfiguration = serde_norway::from_str(&text).map_err(|e| {
        anyhow!(
            "--config {}: not a valid KubeSchedulerConfiguration: {e}",
            path.display()
        )
    })?;
    cfg.profile()
        .map_err(|e| anyhow!("--config {}: {e}", path.display()))
}
