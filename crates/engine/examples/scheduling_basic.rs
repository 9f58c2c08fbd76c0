//! One in-process run of a scheduler_perf shape with its timing and the process's peak
//! memory, for BENCHMARKS.md:
//! `cargo run --release -p lockstep-engine --example scheduling_basic -- [SHAPE] [NODES] [PODS] [--no-batching]`
//! SHAPE is `basic` (default), `saturation` or `hostports`.

use std::time::Instant;

use lockstep_engine::{Options, Scheduler};
use lockstep_testkit as testkit;

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let batching = !args.iter().any(|a| a == "--no-batching");
    let rest: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let shape = rest.first().map_or("basic", |s| s.as_str());
    let nodes: usize = rest.get(1).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let pods: usize = rest.get(2).and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let cluster = match shape {
        "saturation" => testkit::resource_saturation(nodes, pods),
        "hostports" => testkit::host_port_conflict(nodes, pods),
        _ => testkit::scheduling_basic(nodes, pods),
    };
    let start = Instant::now();
    let mut s = Scheduler::new(
        &cluster,
        Options {
            batching,
            ..Options::default()
        },
    )
    .expect("default profile");
    let d = s.run();
    let secs = start.elapsed().as_secs_f64();
    let (batched, full) = s.cycle_counts();
    println!(
        "{shape} {nodes} nodes x {pods} pods, batching {}: {} bound in {:.3} s = {:.0} pods/s \
         ({batched} batched, {full} full cycles); peak RSS {:.1} MiB",
        if batching { "on" } else { "off" },
        d.bindings.len(),
        secs,
        pods as f64 / secs,
        peak_rss_mib().unwrap_or(f64::NAN)
    );
}
