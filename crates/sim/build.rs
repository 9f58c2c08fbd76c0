//! Compresses the trace data under `data/` into `OUT_DIR`, where `src/data.rs` includes it, so
//! the binary carries its built-in traces wherever it is copied.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Every file `src/data.rs` embeds, relative to `data/`.
const FILES: &[&str] = &[
    "pollux-philly/philly.csv",
    "tiresias/60_job.csv",
    "tiresias/cluster_spec.csv",
    "openb/openb_node_list_all_node.csv",
    "openb/openb_node_list_gpu_node.csv",
    "openb/openb_pod_list_default.csv",
    "fgd-expected-results/analysis_allo_discrete.csv",
    "fgd-seed42/arrival_order.csv",
    "fgd-seed42/node_prefix.csv",
];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo::rerun-if-changed=build.rs");
    for file in FILES {
        let src = Path::new("data").join(file);
        println!("cargo::rerun-if-changed={}", src.display());
        let bytes =
            std::fs::read(&src).unwrap_or_else(|e| panic!("cannot read {}: {e}", src.display()));
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&bytes).expect("compress in memory");
        let gz = encoder.finish().expect("compress in memory");
        let dest = out.join(format!("{}.gz", file.replace('/', "__")));
        std::fs::write(&dest, gz)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", dest.display()));
    }
}
