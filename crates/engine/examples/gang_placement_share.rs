//! The share of feasible random gangs (`lockstep_testkit::placement`) that each
//! `gangPlacement` places, for BENCHMARKS.md:
//! `cargo run --release -p lockstep-engine --example gang_placement_share -- [SEEDS]`

use lockstep_testkit::placement::tally;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let t = tally(0..n);
    let share = |placed: usize| 100.0 * placed as f64 / t.feasible.max(1) as f64;
    println!(
        "{n} instances, {} with a placement (exhaustive oracle)",
        t.feasible
    );
    println!(
        "Search    places {:>6} ({:.2}% of feasible)",
        t.search_placed,
        share(t.search_placed)
    );
    println!(
        "PodByPod  places {:>6} ({:.2}% of feasible)",
        t.pod_by_pod_placed,
        share(t.pod_by_pod_placed)
    );
    println!("{} wrong:", t.errors.len());
    for e in &t.errors {
        println!("  {e}");
    }
}
