//! One SchedulingBasic run with a timing and the process's peak memory, for BENCHMARKS.md:
//! `cargo run --release -p lockstep-engine --example scheduling_basic -- 5000 50000`.

use std::time::Instant;

use lockstep_engine::testkit;
use lockstep_engine::{Options, schedule};

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5000);
    let pods: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let cluster = testkit::scheduling_basic(nodes, pods);
    let start = Instant::now();
    let d = schedule(&cluster, Options::default()).expect("default profile");
    let secs = start.elapsed().as_secs_f64();
    println!(
        "SchedulingBasic {nodes} nodes x {pods} pods: {} bound in {:.3} s = {:.0} pods/s; peak RSS {:.1} MiB",
        d.bindings.len(),
        secs,
        pods as f64 / secs,
        peak_rss_mib().unwrap_or(f64::NAN)
    );
}
