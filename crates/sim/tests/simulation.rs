//! Small traces whose outcome is computed by hand, eviction accounting, and determinism.

use lockstep_engine::Profile;
use lockstep_model::PodId;
use lockstep_sim::metrics::RunMetrics;
use lockstep_sim::policy::{Policy, gpu_aware};
use lockstep_sim::sim::JobOutcome;
use lockstep_sim::trace::{JobSpec, PodShape, Trace, TraceBuilder, gib};
use lockstep_sim::{DefaultScenario, SimOptions, Simulation, report, run_policies, simulate};

fn policy() -> Policy {
    Policy::from_profile(&gpu_aware(Profile::default()))
}

fn job(name: &str, arrival: u64, duration: u64, pods: usize, gpus: i64) -> JobSpec {
    JobSpec {
        name: name.into(),
        arrival,
        duration: Some(duration),
        priority_class: None,
        pods: vec![PodShape::new(1000, gib(1), gpus); pods],
        gang: pods > 1,
        topology_key: None,
    }
}

fn run(trace: &Trace, options: SimOptions) -> lockstep_sim::RunResult {
    simulate(trace, policy(), options, &mut |_, _| {}).expect("simulation starts")
}

fn outcome(trace: &Trace, result: &lockstep_sim::RunResult, name: &str) -> JobOutcome {
    let j = trace
        .jobs
        .iter()
        .position(|j| j.name == name)
        .expect("job exists");
    result.jobs[j].clone()
}

/// Two nodes of 4 GPUs. `a` (one 4-GPU pod, 0..100) takes one node; gang `b` (two 4-GPU
/// pods) arrives at 10 and needs both nodes, so it waits for `a`: it starts at exactly 100
/// and completes at 150 (JCT 140, wait 90). `c` (2 GPUs, arrives 20) fits beside `a` at once.
fn gang_waits() -> Trace {
    let mut b = TraceBuilder::new();
    b.node("n1", 16_000, gib(64), 4, &[]);
    b.node("n2", 16_000, gib(64), 4, &[]);
    b.job(job("a", 0, 100, 1, 4));
    b.job(job("b", 10, 50, 2, 4));
    b.job(job("c", 20, 30, 1, 2));
    b.finish("gang waits")
}

#[test]
fn gang_waits_for_a_completion() {
    let trace = gang_waits();
    let result = run(&trace, SimOptions::default());
    let b = outcome(&trace, &result, "b");
    assert_eq!(b.first_start, Some(100));
    assert_eq!(b.end, Some(150));
    assert_eq!(b.waited, 90);
    let c = outcome(&trace, &result, "c");
    assert_eq!((c.first_start, c.end, c.waited), (Some(20), Some(50), 0));
    assert_eq!(result.end_time, 150);

    let m = RunMetrics::new(&trace, &result);
    assert_eq!(m.jobs.completed, 3);
    assert_eq!(m.job_completion_time.all.max, 140);
    assert_eq!(m.queueing_delay.all.max, 90);
    assert_eq!(m.queueing_delay.all.p50, 0);
    // GPU-seconds: a 4x100 + b 8x50 + c 2x30 = 860 over 150 s of 8 GPUs.
    assert_eq!(
        m.allocation.gpu_mean,
        ((860.0 / 1200.0) * 1e6_f64).round() / 1e6
    );
    // While `b` waits (10..100), n2's free GPUs fit no pending pod shape except during
    // 20..50, when `c` leaves only 2 free: b's 4-GPU pods fit nowhere.
    assert!(m.fragmentation.peak_fragmented_gpus >= 2.0);
}

fn no_preemption() -> Policy {
    Policy::parse(
        "least-allocated+no-preemption",
        &gpu_aware(Profile::default()),
    )
    .expect("spec")
}

#[test]
fn higher_priority_goes_first_when_room_frees() {
    let mut b = TraceBuilder::new();
    b.priority_class("high", 1000);
    b.priority_class("low", 0);
    b.node("n1", 16_000, gib(64), 4, &[]);
    b.job(job("a", 0, 100, 1, 4));
    let mut low = job("low", 10, 10, 1, 4);
    low.priority_class = Some("low".into());
    b.job(low);
    let mut high = job("high", 20, 10, 1, 4);
    high.priority_class = Some("high".into());
    b.job(high);
    let trace = b.finish("priority");
    let result = simulate(
        &trace,
        no_preemption(),
        SimOptions::default(),
        &mut |_, _| {},
    )
    .expect("simulation starts");
    assert_eq!(outcome(&trace, &result, "high").first_start, Some(100));
    assert_eq!(outcome(&trace, &result, "low").first_start, Some(110));
    let m = RunMetrics::new(&trace, &result);
    let classes: Vec<(&str, u64)> = m
        .queueing_delay
        .by_priority_class
        .iter()
        .map(|c| (c.priority_class.as_str(), c.stats.max))
        .collect();
    assert_eq!(classes, vec![("high", 80), ("(none)", 0), ("low", 100)]);
}

#[test]
fn interval_cycles_run_at_multiples_of_the_interval() {
    let trace = gang_waits();
    let result = run(
        &trace,
        SimOptions {
            interval: Some(60),
            until: None,
        },
    );
    // a arrives at 0 (a cycle at 0), b at 10 and c at 20 wait for the cycle at 60; a ends at
    // 100, b starts in the cycle at 120 and ends at 170.
    assert_eq!(outcome(&trace, &result, "a").first_start, Some(0));
    assert_eq!(outcome(&trace, &result, "c").first_start, Some(60));
    let b = outcome(&trace, &result, "b");
    assert_eq!((b.first_start, b.end), (Some(120), Some(170)));
    assert!(result.cycles.iter().all(|c| c.time % 60 == 0));
}

#[test]
fn eviction_loses_the_progress_of_the_whole_gang() {
    // One node of 8 GPUs; gang g (two 4-GPU pods) runs from 0 for 2 h. A CPU pod arriving
    // at 1800 gives the simulation an event there; one pod of g is evicted at 1800: g loses
    // 8 GPUs x 0.5 h = 4 GPU-hours, goes back to pending, is bound again at once and
    // completes 2 h later, at 9000.
    let mut b = TraceBuilder::new();
    b.node("n1", 32_000, gib(128), 8, &[]);
    b.job(job("g", 0, 7200, 2, 4));
    b.job(job("tick", 1800, 10, 1, 0));
    let trace = b.finish("eviction");
    let mut sim = Simulation::new(&trace, policy(), SimOptions::default()).expect("starts");
    while sim.now() < 1800 {
        assert!(sim.step());
    }
    let g = &trace.jobs[0];
    let victim: PodId = g.pods[1];
    assert!(sim.node_of(victim).is_some());
    sim.evict(victim);
    assert_eq!(sim.node_of(g.pods[0]), None, "the whole gang is released");
    while sim.step() {}
    let result = sim.finish();
    let out = &result.jobs[0];
    assert_eq!(out.first_start, Some(0));
    assert_eq!(out.end, Some(9000));
    assert_eq!(out.restarts, 1);
    assert_eq!(out.lost_gpu_seconds, 8 * 1800);
    let m = RunMetrics::new(&trace, &result);
    assert_eq!(m.preemption.evicted_pods, 1);
    assert_eq!(m.preemption.preempted_jobs, 1);
    assert_eq!(m.preemption.disrupted_gangs, 1);
    assert_eq!(m.preemption.gpu_hours_lost, 4.0);
    assert_eq!(m.preemption.timeline, vec![(1800, 1)]);
    assert_eq!(m.job_completion_time.all.max, 9000);
}

#[test]
fn a_job_that_never_fits_is_pending_at_the_end() {
    let mut b = TraceBuilder::new();
    b.node("n1", 16_000, gib(64), 4, &[]);
    b.job(job("huge", 0, 10, 2, 4));
    b.job(job("small", 5, 10, 1, 1));
    let trace = b.finish("never fits");
    let result = run(&trace, SimOptions::default());
    let m = RunMetrics::new(&trace, &result);
    assert_eq!(m.jobs.completed, 1);
    assert_eq!(m.jobs.pending_at_end, 1);
    assert_eq!(result.jobs[0].first_start, None);
}

fn small_default(seed: u64) -> Trace {
    DefaultScenario {
        seed,
        jobs: 120,
        ..DefaultScenario::default()
    }
    .build()
}

#[test]
fn same_seed_gives_byte_identical_metrics() {
    let policies = vec![
        policy(),
        Policy::parse("most-allocated", &gpu_aware(Profile::default())).expect("spec"),
    ];
    let json = |seed| {
        let trace = small_default(seed);
        let (metrics, _) = run_policies(
            &trace,
            &policies,
            &SimOptions::default(),
            Some(seed),
            &mut |_, _, _| {},
        )
        .expect("runs");
        report::metrics_json(&metrics)
    };
    let a = json(7);
    let b = json(7);
    assert_eq!(a, b);
    assert_ne!(a, json(8));
    let v: serde_json::Value = serde_json::from_str(&a).expect("valid JSON");
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["seed"], 7);
    assert!(v["runs"][0]["jobs"]["completed"].as_u64().unwrap_or(0) > 100);
}

#[test]
fn report_files_are_written() {
    let trace = small_default(3);
    let (metrics, timing) = run_policies(
        &trace,
        &[policy()],
        &SimOptions::default(),
        Some(3),
        &mut |_, _, _| {},
    )
    .expect("runs");
    let dir = std::env::temp_dir().join(format!("lockstep-sim-report-{}", std::process::id()));
    report::write(&dir, &metrics, &timing).expect("report written");
    let html = std::fs::read_to_string(dir.join("index.html")).expect("html");
    assert!(html.contains("<svg"), "charts are inline SVG");
    assert!(html.contains("GPU allocation"));
    assert!(!html.contains("<script"), "self-contained, no scripts");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("timing.json")).expect("timing"))
            .expect("valid JSON");
    assert!(written["runs"][0]["cycles"].as_u64().unwrap_or(0) > 0);
    let summary = report::summary(&metrics, &timing);
    assert!(summary.contains("priority class"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn runs_with_the_same_decisions_are_reported_as_identical() {
    // A small cluster, so that where GPUs go changes what waits.
    let trace = DefaultScenario {
        seed: 5,
        jobs: 120,
        racks: 4,
        cpu_nodes: 4,
        ..DefaultScenario::default()
    }
    .build();
    let base = gpu_aware(Profile::default());
    let policies = vec![
        Policy::parse("least-allocated", &base).expect("spec"),
        // Batching is on by default: the same decisions under another name.
        Policy::parse("least-allocated+batching", &base).expect("spec"),
        Policy::parse("most-allocated", &base).expect("spec"),
    ];
    let (metrics, timing) = run_policies(
        &trace,
        &policies,
        &SimOptions::default(),
        Some(5),
        &mut |_, _, _| {},
    )
    .expect("runs");
    assert_eq!(report::identical_runs(&metrics), vec![None, Some(0), None]);
    let summary = report::summary(&metrics, &timing);
    assert!(
        summary.contains("least-allocated+batching gave the same metrics as least-allocated:"),
        "{summary}"
    );
}

/// One node of 4 GPUs. `a` (priority 0) runs from 0 for 100 s; `high` (priority 1000, 4
/// GPUs, 10 s) arrives at 20 and preempts it: `a` loses 4 GPUs x 20 s, waits while `high`
/// runs (20..30), restarts at 30 and completes at 130.
#[test]
fn engine_preemption_requeues_the_victim_and_counts_lost_gpu_time() {
    let mut b = TraceBuilder::new();
    b.priority_class("high", 1000);
    b.node("n1", 16_000, gib(64), 4, &[]);
    b.job(job("a", 0, 100, 1, 4));
    let mut high = job("high", 20, 10, 1, 4);
    high.priority_class = Some("high".into());
    b.job(high);
    let trace = b.finish("engine preemption");
    let result = run(&trace, SimOptions::default());
    assert_eq!(outcome(&trace, &result, "high").first_start, Some(20));
    let a = outcome(&trace, &result, "a");
    assert_eq!((a.first_start, a.end), (Some(0), Some(130)));
    assert_eq!((a.restarts, a.lost_gpu_seconds, a.waited), (1, 80, 10));
    let m = RunMetrics::new(&trace, &result);
    assert_eq!(m.preemption.evicted_pods, 1);
    assert_eq!(m.preemption.preempted_jobs, 1);
    assert_eq!(m.preemption.disrupted_gangs, 0);
    assert_eq!(m.preemption.timeline, vec![(20, 1)]);
}
