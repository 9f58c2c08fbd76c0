//! The trace data shipped with lockstep (`crates/sim/data/`, each folder with its README and
//! attribution), compiled into the binary gzip-compressed (`build.rs`) and decompressed when a
//! run asks for it, so a copied or installed binary needs no source tree. A directory laid
//! out as `crates/sim/data/` (`--data-dir`, or the [`DATA_DIR_ENV`] variable) replaces the
//! built-in copy, e.g. with a newer download of a trace.

use std::io::Read;
use std::path::Path;

use crate::trace::TraceError;

/// The environment variable naming a data directory that replaces the built-in data.
pub const DATA_DIR_ENV: &str = "LOCKSTEP_DATA_DIR";

/// One file of the shipped trace data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dataset {
    /// The Philly-derived job trace of the Pollux artifact.
    Philly,
    /// The Tiresias example job trace.
    TiresiasJobs,
    /// The Tiresias example's cluster spec.
    TiresiasCluster,
    /// The Alibaba openb node list (all 1523 nodes).
    OpenbNodes,
    /// The openb node list with GPU nodes only (the FGD paper's cluster, 6212 GPUs).
    OpenbGpuNodes,
    /// The openb default pod list.
    OpenbPods,
    /// The FGD paper's published allocation results (see its README).
    FgdAllocation,
    /// The arrival order of the FGD paper's seed-42 run on the default pod list.
    FgdArrivalOrder,
    /// The FGD paper simulator's tie-break rank of each GPU node.
    FgdNodeRank,
}

macro_rules! embedded {
    ($file:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $file, ".gz"))
    };
}

impl Dataset {
    pub const ALL: [Dataset; 9] = [
        Dataset::Philly,
        Dataset::TiresiasJobs,
        Dataset::TiresiasCluster,
        Dataset::OpenbNodes,
        Dataset::OpenbGpuNodes,
        Dataset::OpenbPods,
        Dataset::FgdAllocation,
        Dataset::FgdArrivalOrder,
        Dataset::FgdNodeRank,
    ];

    /// The file's path inside a data directory (`crates/sim/data/` in the source tree).
    pub fn path(self) -> &'static str {
        match self {
            Dataset::Philly => "pollux-philly/philly.csv",
            Dataset::TiresiasJobs => "tiresias/60_job.csv",
            Dataset::TiresiasCluster => "tiresias/cluster_spec.csv",
            Dataset::OpenbNodes => "openb/openb_node_list_all_node.csv",
            Dataset::OpenbGpuNodes => "openb/openb_node_list_gpu_node.csv",
            Dataset::OpenbPods => "openb/openb_pod_list_default.csv",
            Dataset::FgdAllocation => "fgd-expected-results/analysis_allo_discrete.csv",
            Dataset::FgdArrivalOrder => "fgd-seed42/arrival_order.csv",
            Dataset::FgdNodeRank => "fgd-seed42/node_prefix.csv",
        }
    }

    /// The file name without its folder.
    pub fn file_name(self) -> &'static str {
        let path = self.path();
        path.rsplit('/').next().unwrap_or(path)
    }

    /// The gzip-compressed copy in the binary.
    pub fn compressed(self) -> &'static [u8] {
        match self {
            Dataset::Philly => embedded!("pollux-philly__philly.csv"),
            Dataset::TiresiasJobs => embedded!("tiresias__60_job.csv"),
            Dataset::TiresiasCluster => embedded!("tiresias__cluster_spec.csv"),
            Dataset::OpenbNodes => embedded!("openb__openb_node_list_all_node.csv"),
            Dataset::OpenbGpuNodes => embedded!("openb__openb_node_list_gpu_node.csv"),
            Dataset::OpenbPods => embedded!("openb__openb_pod_list_default.csv"),
            Dataset::FgdAllocation => {
                embedded!("fgd-expected-results__analysis_allo_discrete.csv")
            }
            Dataset::FgdArrivalOrder => embedded!("fgd-seed42__arrival_order.csv"),
            Dataset::FgdNodeRank => embedded!("fgd-seed42__node_prefix.csv"),
        }
    }

    /// The built-in copy, decompressed.
    pub fn builtin(self) -> String {
        let mut text = String::new();
        flate2::read::GzDecoder::new(self.compressed())
            .read_to_string(&mut text)
            .expect("the built-in data is gzip-compressed UTF-8, written by build.rs");
        text
    }

    /// The file's name in messages and its text: from `dir` when one is given (`DIR/<path>`),
    /// else the built-in copy (named `built-in <path>`).
    pub fn read(self, dir: Option<&Path>) -> Result<(String, String), TraceError> {
        match dir {
            Some(dir) => {
                let path = dir.join(self.path());
                let text = crate::readers::table::read_file(&path)?;
                Ok((path.display().to_string(), text))
            }
            None => Ok((format!("built-in {}", self.path()), self.builtin())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_copy_is_the_shipped_file() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
        for d in Dataset::ALL {
            let on_disk = std::fs::read_to_string(data.join(d.path())).expect("shipped");
            assert_eq!(d.builtin(), on_disk, "{}", d.path());
            let (name, text) = d.read(Some(&data)).expect("reads the directory");
            assert_eq!(text, on_disk);
            assert!(name.ends_with(d.path()), "{name}");
            let (name, _) = d.read(None).expect("built-in");
            assert_eq!(name, format!("built-in {}", d.path()));
            assert!(
                d.compressed().len() < on_disk.len(),
                "{} compresses",
                d.path()
            );
        }
    }

    #[test]
    fn a_data_dir_without_the_file_names_the_path() {
        let err = Dataset::OpenbPods
            .read(Some(Path::new("/nonexistent-lockstep-data")))
            .expect_err("missing");
        assert!(
            err.to_string().starts_with(
                "/nonexistent-lockstep-data/openb/openb_pod_list_default.csv: cannot read"
            ),
            "{err}"
        );
    }
}
