//! Timed in-process runs of a scheduler_perf affinity / spread shape at its upstream CI size,
//! for BENCHMARKS.md (the criterion bench `affinity` times the same):
//! `cargo run --release -p lockstep-engine --example perf_shapes -- SHAPE [RUNS] [--no-batching]`
//! SHAPE is `anti`, `affinity`, `preferred`, `spread`, `preferred-spread` or `node-affinity`.
//! Prints each run and the median (state built from the objects plus every pending pod
//! scheduled; the init pods are already running).

use std::time::Instant;

use lockstep_model::WhenUnsatisfiable;
use lockstep_testkit::perf_shapes as shapes;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let batching = !args.iter().any(|a| a == "--no-batching");
    let rest: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let shape = rest.first().map_or("anti", |s| s.as_str());
    let runs: usize = rest.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let cluster = match shape {
        "anti" => shapes::pod_anti_affinity(5000, 1000, 2000),
        "affinity" => shapes::pod_affinity(5000, 5000, 5000),
        "preferred" => shapes::preferred_pod_affinity(5000, 5000, 5000),
        "spread" => shapes::topology_spread(5000, 5000, 5000, WhenUnsatisfiable::DoNotSchedule),
        "preferred-spread" => {
            shapes::topology_spread(5000, 5000, 5000, WhenUnsatisfiable::ScheduleAnyway)
        }
        "node-affinity" => shapes::node_affinity(5000, 5000, 10_000),
        other => panic!("unknown shape {other}"),
    };
    let pending = cluster
        .pods
        .iter()
        .filter(|p| p.node_name.is_none())
        .count();
    let mut times = Vec::new();
    for _ in 0..runs {
        let objects = cluster.clone();
        let start = Instant::now();
        let d = shapes::schedule_all(objects, batching);
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(d.bindings.len(), pending);
        println!("  run: {secs:.4} s");
        times.push(secs);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!(
        "{shape} 5000 nodes x {pending} pods, batching {}: median {median:.4} s = {:.0} pods/s",
        if batching { "on" } else { "off" },
        pending as f64 / median
    );
}
