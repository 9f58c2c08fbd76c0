//! `lockstep-sim`: replays workload traces against a cluster in simulated time, on the same
//! engine that schedules real clusters, and reports what happened.
//!
//! Owns the discrete-event simulation ([`sim`]), the trace model and the trace readers
//! (Philly, Tiresias, the Alibaba openb trace, and Kubernetes manifests with arrival and
//! duration annotations; [`readers`]), the embedded default scenario ([`generate`]), the
//! policies compared ([`policy`]), the metrics ([`metrics`]) and the reports ([`report`]:
//! summary table, self-contained HTML with SVG charts, `metrics.json`).
//!
//! It must not make scheduling decisions: every placement comes from
//! `lockstep_engine::Scheduler`, and the simulator only advances time, offers pending pods
//! to the engine and applies what it decided. It must stay deterministic: the same trace,
//! policy and seed give byte-identical `metrics.json`; wall-clock time goes only to
//! `timing.json`.

pub mod bound;
pub mod data;
pub mod fragmentation;
pub mod generate;
pub mod metrics;
mod podset;
pub mod policy;
pub mod progress;
pub mod readers;
pub mod report;
pub mod sim;
pub mod trace;

pub use generate::DefaultScenario;
pub use metrics::{Metrics, RunMetrics, Timing};
pub use policy::{GangPreemption, Policy};
pub use sim::{RunResult, SimError, SimOptions, Simulation, simulate};
pub use trace::{Job, Trace, TraceError};

/// Runs every policy over the trace, one after the other, and gathers the metrics.
/// `progress(policy, done_jobs, total_jobs)` is called now and then.
pub fn run_policies(
    trace: &Trace,
    policies: &[Policy],
    options: &SimOptions,
    seed: Option<u64>,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<(Metrics, Timing), SimError> {
    let mut runs = Vec::new();
    let mut timings = Vec::new();
    for policy in policies {
        let name = policy.name.clone();
        let result = simulate(trace, policy.clone(), options.clone(), &mut |d, t| {
            progress(&name, d, t)
        })?;
        runs.push(RunMetrics::new(trace, &result));
        timings.push(metrics::RunTiming::new(&result));
    }
    Ok((
        Metrics {
            schema: "lockstep.dev/simulate-metrics/v1",
            seed,
            trace: metrics::TraceInfo::new(trace),
            runs,
            fragmentation_runs: Vec::new(),
            fgd_reference: None,
        },
        Timing { runs: timings },
    ))
}

/// Runs every policy over the trace in fragmentation mode ([`fragmentation`]) and gathers
/// the results (in `Metrics::fragmentation_runs`; `runs` stays empty).
pub fn run_fragmentation_policies(
    trace: &Trace,
    policies: &[Policy],
    options: &fragmentation::FragmentationOptions,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<(Metrics, Timing), SimError> {
    let mut runs: Vec<fragmentation::FragmentationRun> = Vec::new();
    let mut timings = Vec::new();
    for (i, policy) in policies.iter().enumerate() {
        progress(&policy.name, i, policies.len());
        // Every policy sees the same arrivals: the bound is computed once.
        let once = fragmentation::FragmentationOptions {
            bound: options.bound && runs.is_empty(),
            ..options.clone()
        };
        let mut run = fragmentation::run_fragmentation(trace, policy, &once)?;
        if let Some(first) = runs.first() {
            run.bound_steps = first.bound_steps.clone();
        }
        timings.push(metrics::RunTiming {
            policy: policy.name.clone(),
            wall_seconds: (run.wall.as_secs_f64() * 1e6).round() / 1e6,
            engine_seconds: 0.0,
            cycles: run.arrived_jobs,
            per_cycle_micros: metrics::Stats::of(Vec::new()),
        });
        runs.push(run);
        progress(&policy.name, i + 1, policies.len());
    }
    Ok((
        Metrics {
            schema: "lockstep.dev/simulate-metrics/v1",
            seed: Some(options.seed),
            trace: metrics::TraceInfo::new(trace),
            runs: Vec::new(),
            fragmentation_runs: runs,
            fgd_reference: None,
        },
        Timing { runs: timings },
    ))
}
