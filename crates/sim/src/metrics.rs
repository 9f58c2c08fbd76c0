//! Metrics of a run, in the shape `metrics.json` has.
//!
//! Everything in [`Metrics`] is a pure function of the trace, the policy and the options, so
//! the same seed gives the same JSON byte for byte. Wall-clock measurements (the engine's time
//! per cycle) live apart, in [`Timing`] (`timing.json`).
//!
//! Definitions:
//! - allocation ratio: requested GPUs (CPU) of bound pods over cluster capacity; means are
//!   time-weighted over the whole run `[0, end]`, and over `[0, last arrival]` (the loaded
//!   part, without the drain at the end);
//! - queueing delay: seconds a job spent pending, over all its attempts (jobs that never ran
//!   are counted apart, in `jobs.pendingAtEnd`);
//! - job completion time (JCT): completion minus arrival, for completed jobs;
//! - percentiles are nearest-rank;
//! - fragmentation: free GPUs on nodes where no pending pod shape fits (see
//!   [`crate::sim::fragmented_gpus`]);
//! - preemption: evicted pods, jobs evicted while running, gangs among them, and GPU-hours of
//!   progress those jobs lost.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::policy::{Policy, strategy_name};
use crate::sim::{RunResult, Sample};
use crate::trace::{Skipped, Trace};

/// Points per time series in the JSON and the charts.
pub const SERIES_POINTS: usize = 240;
/// Points per queueing-delay CDF.
pub const CDF_POINTS: usize = 101;

/// `metrics.json`: the trace and one entry per policy run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    pub schema: &'static str,
    pub seed: Option<u64>,
    pub trace: TraceInfo,
    pub runs: Vec<RunMetrics>,
    /// Fragmentation mode (`--fragmentation`): one entry per policy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fragmentation_runs: Vec<crate::fragmentation::FragmentationRun>,
    /// The FGD paper's published results for the same openb pod list, to compare with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fgd_reference: Option<crate::fragmentation::FgdReference>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceInfo {
    pub name: String,
    pub nodes: usize,
    pub gpu_nodes: usize,
    pub gpus: i64,
    pub cpu_cores: f64,
    pub jobs: usize,
    pub gang_jobs: usize,
    pub pods: usize,
    pub priority_classes: Vec<String>,
    pub skipped: Vec<Skipped>,
    pub notes: Vec<String>,
}

impl TraceInfo {
    pub fn new(trace: &Trace) -> TraceInfo {
        TraceInfo {
            name: trace.name.clone(),
            nodes: trace.cluster.nodes.len(),
            gpu_nodes: trace.node_gpus.iter().filter(|g| **g > 0).count(),
            gpus: trace.gpus(),
            cpu_cores: round(trace.capacity("cpu") as f64 / 1000.0),
            jobs: trace.jobs.len(),
            gang_jobs: trace.jobs.iter().filter(|j| j.gang).count(),
            pods: trace.jobs.iter().map(|j| j.pods.len()).sum(),
            priority_classes: trace.priority_classes(),
            skipped: trace.skipped.clone(),
            notes: trace.notes.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInfo {
    pub name: String,
    pub scoring_strategy: &'static str,
    pub batching: bool,
    pub preemption: bool,
    pub gang_preemption: &'static str,
    /// Seconds between cycles; `None`: a cycle at every event time.
    pub interval: Option<u64>,
}

impl PolicyInfo {
    pub fn new(policy: &Policy, interval: Option<u64>) -> PolicyInfo {
        PolicyInfo {
            name: policy.name.clone(),
            scoring_strategy: strategy_name(policy.profile.scoring_strategy.kind),
            batching: policy.batching,
            preemption: policy.preemption,
            gang_preemption: policy.gang_preemption.as_str(),
            interval,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub count: usize,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl Stats {
    pub fn of(mut values: Vec<u64>) -> Stats {
        if values.is_empty() {
            return Stats::default();
        }
        values.sort_unstable();
        let n = values.len();
        let rank = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        Stats {
            count: n,
            mean: round(values.iter().map(|&v| v as f64).sum::<f64>() / n as f64),
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: values[n - 1],
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassStats {
    pub priority_class: String,
    #[serde(flatten)]
    pub stats: Stats,
}

/// Statistics over all jobs and per priority class (highest priority first).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ByClass {
    pub all: Stats,
    pub by_priority_class: Vec<ClassStats>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobCounts {
    pub total: usize,
    pub completed: usize,
    pub running_at_end: usize,
    /// Arrived, never got (back) onto nodes before the run ended.
    pub pending_at_end: usize,
    pub not_arrived: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Allocation {
    /// Over the whole run.
    pub gpu_mean: f64,
    /// From the start to the last arrival (the loaded part of the run, without the drain).
    pub gpu_mean_while_arriving: f64,
    pub gpu_peak: f64,
    pub cpu_mean: f64,
    pub cpu_mean_while_arriving: f64,
    pub cpu_peak: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    pub evicted_pods: usize,
    pub preempted_jobs: usize,
    pub disrupted_gangs: usize,
    pub gpu_hours_lost: f64,
    /// (time, evictions so far), one point per time with evictions.
    pub timeline: Vec<(u64, usize)>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fragmentation {
    /// Time-weighted mean of fragmented GPUs.
    pub mean_fragmented_gpus: f64,
    pub peak_fragmented_gpus: f64,
    /// Time-weighted mean of fragmented GPUs over cluster GPU capacity.
    pub mean_share_of_capacity: f64,
}

/// Time series, each the time-weighted mean over `SERIES_POINTS` equal bins of the run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    /// The start of each bin, seconds.
    pub time: Vec<u64>,
    pub gpu_allocation: Vec<f64>,
    pub cpu_allocation: Vec<f64>,
    pub pending_jobs: Vec<f64>,
    pub running_jobs: Vec<f64>,
    pub fragmented_gpus: Vec<f64>,
}

/// One queueing-delay CDF: `(seconds, fraction of started jobs that waited at most that)`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cdf {
    pub priority_class: String,
    pub points: Vec<(u64, f64)>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunMetrics {
    pub policy: PolicyInfo,
    pub simulated_seconds: u64,
    pub cycles: usize,
    pub jobs: JobCounts,
    pub allocation: Allocation,
    pub queueing_delay: ByClass,
    pub job_completion_time: ByClass,
    pub preemption: Preemption,
    pub fragmentation: Fragmentation,
    pub series: Series,
    pub queueing_delay_cdf: Vec<Cdf>,
}

/// Rounds to 6 decimals, so JSON stays short and stable.
pub fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn ratio(a: i64, b: i64) -> f64 {
    if b > 0 { a as f64 / b as f64 } else { 0.0 }
}

/// Integrates the step function `value(sample)` over `[0, end]`, into `bins` equal bins
/// (each the mean over its bin) and overall (the mean over the run).
fn integrate(
    samples: &[Sample],
    end: u64,
    bins: usize,
    value: impl Fn(&Sample) -> f64,
) -> (Vec<f64>, f64) {
    let mut out = vec![0f64; bins];
    if end == 0 || samples.is_empty() {
        let v = samples.last().map_or(0.0, &value);
        return (vec![v; bins], v);
    }
    let width = end as f64 / bins as f64;
    let mut total = 0f64;
    for (i, s) in samples.iter().enumerate() {
        let a = s.time.min(end) as f64;
        let b = samples.get(i + 1).map_or(end, |n| n.time.min(end)) as f64;
        if b <= a {
            continue;
        }
        let v = value(s);
        total += v * (b - a);
        let first = ((a / width) as usize).min(bins - 1);
        let last = ((b / width) as usize).min(bins - 1);
        for (k, slot) in out.iter_mut().enumerate().take(last + 1).skip(first) {
            let lo = a.max(k as f64 * width);
            let hi = b.min((k + 1) as f64 * width);
            if hi > lo {
                *slot += v * (hi - lo);
            }
        }
    }
    for slot in &mut out {
        *slot = round(*slot / width);
    }
    (out, round(total / end as f64))
}

fn by_class(trace: &Trace, classes: &[String], values: &[(usize, u64)]) -> ByClass {
    ByClass {
        all: Stats::of(values.iter().map(|v| v.1).collect()),
        by_priority_class: classes
            .iter()
            .map(|c| ClassStats {
                priority_class: c.clone(),
                stats: Stats::of(
                    values
                        .iter()
                        .filter(|(j, _)| trace.jobs[*j].priority_class == *c)
                        .map(|v| v.1)
                        .collect(),
                ),
            })
            .collect(),
    }
}

fn cdf(mut values: Vec<u64>) -> Vec<(u64, f64)> {
    if values.is_empty() {
        return Vec::new();
    }
    values.sort_unstable();
    let n = values.len();
    (0..CDF_POINTS)
        .map(|i| {
            let q = i as f64 / (CDF_POINTS - 1) as f64;
            let idx = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
            (values[idx], round((idx + 1) as f64 / n as f64))
        })
        .collect()
}

impl RunMetrics {
    pub fn new(trace: &Trace, run: &RunResult) -> RunMetrics {
        let classes = trace.priority_classes();
        let end = run.end_time;
        let waits: Vec<(usize, u64)> = run
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, o)| o.first_start.is_some())
            .filter(|(j, _)| !trace.jobs[*j].initially_running)
            .map(|(j, o)| (j, o.waited))
            .collect();
        let jcts: Vec<(usize, u64)> = run
            .jobs
            .iter()
            .enumerate()
            .filter_map(|(j, o)| o.end.map(|e| (j, e - o.arrival)))
            .filter(|(j, _)| !trace.jobs[*j].initially_running)
            .collect();
        let completed = run.jobs.iter().filter(|o| o.end.is_some()).count();
        let pending_at_end = run.jobs.iter().filter(|o| o.pending_at_end).count();
        let not_arrived = run
            .jobs
            .iter()
            .filter(|o| o.first_start.is_none() && !o.pending_at_end && o.arrival > end)
            .count();
        let running_at_end = run.jobs.len() - completed - pending_at_end - not_arrived;
        let samples = &run.samples;
        let (gpu_series, gpu_mean) = integrate(samples, end, SERIES_POINTS, |s| {
            ratio(s.gpu_milli_allocated, run.gpu_capacity.saturating_mul(1000))
        });
        let (cpu_series, cpu_mean) = integrate(samples, end, SERIES_POINTS, |s| {
            ratio(s.cpu_allocated, run.cpu_capacity)
        });
        let last_arrival = trace
            .jobs
            .iter()
            .map(|j| j.arrival)
            .max()
            .unwrap_or(0)
            .min(end);
        let (_, gpu_arriving) = integrate(samples, last_arrival, 1, |s| {
            ratio(s.gpu_milli_allocated, run.gpu_capacity.saturating_mul(1000))
        });
        let (_, cpu_arriving) = integrate(samples, last_arrival, 1, |s| {
            ratio(s.cpu_allocated, run.cpu_capacity)
        });
        let (pending_series, _) =
            integrate(samples, end, SERIES_POINTS, |s| f64::from(s.pending_jobs));
        let (running_series, _) =
            integrate(samples, end, SERIES_POINTS, |s| f64::from(s.running_jobs));
        let (frag_series, frag_mean) = integrate(samples, end, SERIES_POINTS, |s| {
            s.fragmented_gpu_milli as f64 / 1000.0
        });
        let mut timeline: Vec<(u64, usize)> = Vec::new();
        for (i, e) in run.evictions.iter().enumerate() {
            match timeline.last_mut() {
                Some(last) if last.0 == e.time => last.1 = i + 1,
                _ => timeline.push((e.time, i + 1)),
            }
        }
        let mut preempted: BTreeMap<u32, bool> = BTreeMap::new();
        for e in run.evictions.iter().filter(|e| e.was_running) {
            preempted.insert(e.job, e.gang);
        }
        let lost: i64 = run
            .jobs
            .iter()
            .fold(0i64, |a, o| a.saturating_add(o.lost_gpu_seconds));
        let width = end as f64 / SERIES_POINTS as f64;
        let mut class_cdfs = vec![Cdf {
            priority_class: "all".into(),
            points: cdf(waits.iter().map(|w| w.1).collect()),
        }];
        for c in &classes {
            class_cdfs.push(Cdf {
                priority_class: c.clone(),
                points: cdf(waits
                    .iter()
                    .filter(|(j, _)| trace.jobs[*j].priority_class == *c)
                    .map(|w| w.1)
                    .collect()),
            });
        }
        RunMetrics {
            policy: PolicyInfo::new(&run.policy, run.options.interval),
            simulated_seconds: end,
            cycles: run.cycles.len(),
            jobs: JobCounts {
                total: run.jobs.len(),
                completed,
                running_at_end,
                pending_at_end,
                not_arrived,
            },
            allocation: Allocation {
                gpu_mean,
                gpu_mean_while_arriving: gpu_arriving,
                gpu_peak: round(
                    samples
                        .iter()
                        .map(|s| {
                            ratio(s.gpu_milli_allocated, run.gpu_capacity.saturating_mul(1000))
                        })
                        .fold(0.0, f64::max),
                ),
                cpu_mean,
                cpu_mean_while_arriving: cpu_arriving,
                cpu_peak: round(
                    samples
                        .iter()
                        .map(|s| ratio(s.cpu_allocated, run.cpu_capacity))
                        .fold(0.0, f64::max),
                ),
            },
            queueing_delay: by_class(trace, &classes, &waits),
            job_completion_time: by_class(trace, &classes, &jcts),
            preemption: Preemption {
                evicted_pods: run.evictions.len(),
                preempted_jobs: preempted.len(),
                disrupted_gangs: preempted.values().filter(|g| **g).count(),
                gpu_hours_lost: round(lost as f64 / 3600.0),
                timeline,
            },
            fragmentation: Fragmentation {
                mean_fragmented_gpus: frag_mean,
                peak_fragmented_gpus: samples
                    .iter()
                    .map(|s| s.fragmented_gpu_milli)
                    .max()
                    .unwrap_or(0) as f64
                    / 1000.0,
                mean_share_of_capacity: round(frag_mean / run.gpu_capacity.max(1) as f64),
            },
            series: Series {
                time: (0..SERIES_POINTS)
                    .map(|k| (k as f64 * width).round() as u64)
                    .collect(),
                gpu_allocation: gpu_series,
                cpu_allocation: cpu_series,
                pending_jobs: pending_series,
                running_jobs: running_series,
                fragmented_gpus: frag_series,
            },
            queueing_delay_cdf: class_cdfs,
        }
    }
}

/// `timing.json`: wall-clock measurements, which differ from run to run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timing {
    pub runs: Vec<RunTiming>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTiming {
    pub policy: String,
    /// The whole run, simulator included.
    pub wall_seconds: f64,
    /// Inside `Scheduler::schedule`, summed over cycles.
    pub engine_seconds: f64,
    pub cycles: usize,
    /// Engine time per cycle, microseconds.
    pub per_cycle_micros: Stats,
}

impl RunTiming {
    pub fn new(run: &RunResult) -> RunTiming {
        let micros: Vec<u64> = run
            .cycle_wall
            .iter()
            .map(|d| d.as_micros() as u64)
            .collect();
        RunTiming {
            policy: run.policy.name.clone(),
            wall_seconds: round(run.wall.as_secs_f64()),
            engine_seconds: round(run.cycle_wall.iter().sum::<Duration>().as_secs_f64()),
            cycles: run.cycles.len(),
            per_cycle_micros: Stats::of(micros),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = Stats::of((1..=100).collect());
        assert_eq!((s.p50, s.p90, s.p99, s.max), (50, 90, 99, 100));
        assert_eq!(s.mean, 50.5);
        let one = Stats::of(vec![7]);
        assert_eq!((one.p50, one.p99), (7, 7));
        assert_eq!(Stats::of(Vec::new()).count, 0);
    }

    #[test]
    fn step_function_integral() {
        let s = |time, gpus| Sample {
            time,
            gpu_milli_allocated: gpus,
            cpu_allocated: 0,
            pending_jobs: 0,
            running_jobs: 0,
            fragmented_gpu_milli: 0,
            free_gpu_milli: 0,
        };
        // 4 GPUs for 10 s, then 8 GPUs for 30 s.
        let samples = [s(0, 4), s(10, 8)];
        let (bins, mean) = integrate(&samples, 40, 4, |x| x.gpu_milli_allocated as f64);
        assert_eq!(bins, vec![4.0, 8.0, 8.0, 8.0]);
        assert_eq!(mean, 7.0);
        let (bins, _) = integrate(&samples, 40, 2, |x| x.gpu_milli_allocated as f64);
        assert_eq!(bins, vec![6.0, 8.0]);
    }
}
