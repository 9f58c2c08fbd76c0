//! Paths of the trace data copied into this crate (`crates/sim/data/`, each folder with its
//! README and attribution). They point into the source tree, so they work from a clone
//! (`cargo run`), not from an installed binary: pass paths explicitly there.

/// The Philly-derived job trace of the Pollux artifact.
pub const PHILLY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/pollux-philly/philly.csv");
/// The Tiresias example job trace and its cluster spec.
pub const TIRESIAS_JOBS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/tiresias/60_job.csv");
pub const TIRESIAS_CLUSTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/tiresias/cluster_spec.csv"
);
/// The Alibaba openb node list (all 1523 nodes) and default pod list.
pub const OPENB_NODES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/openb/openb_node_list_all_node.csv"
);
pub const OPENB_PODS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/openb/openb_pod_list_default.csv"
);
/// The openb node list with GPU nodes only (the FGD paper's cluster, 6212 GPUs).
pub const OPENB_GPU_NODES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/openb/openb_node_list_gpu_node.csv"
);
/// The FGD paper's published allocation results (see its README).
pub const FGD_ALLOCATION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/fgd-expected-results/analysis_allo_discrete.csv"
);
