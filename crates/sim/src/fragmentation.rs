//! Fragmentation mode, comparable to the ATC'23 paper "Beware of Fragmentation: Scheduling
//! GPU-Sharing Workloads with Fragmentation Gradient Descent" (its simulator,
//! `hkust-adsl/kubernetes-scheduler-simulator`): pods arrive one after the other, in a seeded
//! random order, and never leave; each gets one scheduling attempt (with nothing ever freed,
//! a pod that does not fit when it arrives never fits later). Arrivals go on until the GPUs
//! arrived pods asked for reach `share` of the cluster's GPU capacity; when the trace runs
//! out first, it is inflated with copies of randomly chosen single-pod jobs, as the paper's
//! `tune` does. The result is the GPU allocation ratio (GPUs requested by bound pods over
//! capacity) at every whole percent of arrived demand, as the paper's Fig. 9(a) and
//! `analysis_allo_discrete.csv` report it.
//!
//! Preemption is off (the paper's simulator never evicts). Every placement is the engine's.

use std::time::{Duration, Instant};

use lockstep_engine::{Options, Scheduler};
use lockstep_model::PodId;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::policy::Policy;
use crate::sim::SimError;
use crate::trace::{Trace, limits};

/// How a fragmentation run goes.
#[derive(Debug, Clone, PartialEq)]
pub struct FragmentationOptions {
    /// Stop once arrived GPU demand reaches this share of GPU capacity (1.0: all of it).
    pub share: f64,
    /// Seed of the arrival order (and of the copies that inflate the trace).
    pub seed: u64,
    /// A given arrival order replayed instead of the seeded one (with its node ranks).
    pub arrival_order: Option<std::sync::Arc<ArrivalOrder>>,
    /// Compute the allocation bound of the arrivals ([`crate::bound`]; not part of `wall`).
    pub bound: bool,
}

impl Default for FragmentationOptions {
    fn default() -> Self {
        FragmentationOptions {
            share: 1.0,
            seed: 42,
            arrival_order: None,
            bound: true,
        }
    }
}

/// An arrival order to replay exactly, as the FGD paper's simulator logged it for one run
/// (`fgd-seed42/arrival_order.csv`): the n-th arrival is the n-th row.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ArrivalOrder {
    /// Each arrival: its pod's name, the trace pod it is (the same name) or copies, and the
    /// milli-GPUs it asks for (checked against the trace).
    pub rows: Vec<Arrival>,
    /// Ties between nodes are broken by this rank (smallest first) rather than by name,
    /// when given: the nodes are renamed `r<rank, 5 digits>-<name>` for the run.
    pub node_rank: Vec<(String, u32)>,
}

/// One row of an [`ArrivalOrder`].
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    pub name: String,
    pub source: String,
    pub gpu_milli: i64,
}

impl ArrivalOrder {
    /// Reads `idx,name,source_pod,...,num_gpu,gpu_milli,...` rows (in `idx` order 0, 1, ...)
    /// and, when given, `node,tiebreak_rank` rows.
    pub fn parse(
        order_file: &str,
        order_text: &str,
        rank: Option<(&str, &str)>,
    ) -> Result<ArrivalOrder, crate::TraceError> {
        let table = crate::readers::table::Table::parse(order_file, order_text)?;
        let (c_idx, c_name, c_source, c_num, c_milli) = (
            table.column("idx")?,
            table.column("name")?,
            table.column("source_pod")?,
            table.column("num_gpu")?,
            table.column("gpu_milli")?,
        );
        let mut rows = Vec::with_capacity(table.rows.len());
        for row in &table.rows {
            let idx = table.int(row, c_idx, "idx")?;
            if idx != rows.len() as i64 {
                return Err(table.error(row, format!("idx {idx}: expected {}", rows.len())));
            }
            let num = table.int(row, c_num, "num_gpu")?;
            let milli = table.int(row, c_milli, "gpu_milli")?;
            rows.push(Arrival {
                name: table.object_name(row, c_name)?.to_string(),
                source: table.object_name(row, c_source)?.to_string(),
                gpu_milli: num.saturating_mul(milli),
            });
        }
        let mut node_rank = Vec::new();
        if let Some((file, text)) = rank {
            let t = crate::readers::table::Table::parse(file, text)?;
            let (c_node, c_rank) = (t.column("node")?, t.column("tiebreak_rank")?);
            for row in &t.rows {
                let r = t.int(row, c_rank, "tiebreak_rank")?;
                if !(0..100_000).contains(&r) {
                    return Err(t.error(row, format!("tiebreak_rank {r}: expected 0..99999")));
                }
                node_rank.push((t.object_name(row, c_node)?.to_string(), r as u32));
            }
        }
        Ok(ArrivalOrder { rows, node_rank })
    }
}

/// The cluster the arrivals run on, each pod's milli-GPUs, the jobs in arrival order and how
/// many of them are copies.
type Arrivals = (lockstep_model::Cluster, Vec<i64>, Vec<Vec<PodId>>, usize);

/// The cluster, pod milli-GPUs and single-pod jobs of `order` over `trace`: a row naming its
/// own trace pod is that pod, any other a copy of its source pod under the row's name.
fn replay(trace: &Trace, order: &ArrivalOrder) -> Result<Arrivals, SimError> {
    let mut cluster = trace.cluster.clone();
    let mut milli = trace.pod_gpu_milli.clone();
    let by_name: std::collections::HashMap<&str, PodId> = trace
        .jobs
        .iter()
        .filter(|j| !j.initially_running && j.pods.len() == 1)
        .map(|j| {
            (
                trace.cluster.pods[j.pods[0].index()].name.as_str(),
                j.pods[0],
            )
        })
        .collect();
    let mut used = vec![false; cluster.pods.len()];
    let mut jobs = Vec::with_capacity(order.rows.len());
    let mut copied = 0;
    for (i, a) in order.rows.iter().enumerate() {
        let bad = |m: String| SimError::Limit(format!("arrival order, row {i} ({}): {m}", a.name));
        let &from = by_name
            .get(a.source.as_str())
            .ok_or_else(|| bad(format!("no single-pod job {:?} in the trace", a.source)))?;
        if milli[from.index()] != a.gpu_milli {
            return Err(bad(format!(
                "asks for {} milli-GPUs, the trace's {} for {}",
                a.gpu_milli,
                a.source,
                milli[from.index()]
            )));
        }
        if a.name == a.source {
            if std::mem::replace(&mut used[from.index()], true) {
                return Err(bad("arrives twice".into()));
            }
            jobs.push(vec![from]);
            continue;
        }
        if cluster.pods.len() >= limits::PODS {
            return Err(bad(format!("more than {} pods", limits::PODS)));
        }
        let mut pod = cluster.pods[from.index()].clone();
        pod.name = a.name.clone();
        let id = PodId(cluster.pods.len() as u32);
        cluster.pods.push(pod);
        milli.push(milli[from.index()]);
        jobs.push(vec![id]);
        copied += 1;
    }
    // Trace pods that never arrive stay out of the cluster's workload.
    let arrived: std::collections::HashSet<PodId> = jobs.iter().map(|j| j[0]).collect();
    let keep: Vec<bool> = (0..cluster.pods.len())
        .map(|p| arrived.contains(&PodId(p as u32)))
        .collect();
    if keep.iter().any(|k| !k) {
        let mut new_id = vec![None; cluster.pods.len()];
        let mut pods = Vec::with_capacity(arrived.len());
        let mut new_milli = Vec::with_capacity(arrived.len());
        for (p, pod) in cluster.pods.drain(..).enumerate() {
            if keep[p] {
                new_id[p] = Some(PodId(pods.len() as u32));
                pods.push(pod);
                new_milli.push(milli[p]);
            }
        }
        cluster.pods = pods;
        milli = new_milli;
        for j in &mut jobs {
            j[0] = new_id[j[0].index()].expect("arrived pods are kept");
        }
    }
    if !order.node_rank.is_empty() {
        let rank: std::collections::HashMap<&str, u32> = order
            .node_rank
            .iter()
            .map(|(n, r)| (n.as_str(), *r))
            .collect();
        let mut renamed = std::collections::HashMap::new();
        for node in &mut cluster.nodes {
            let r = *rank.get(node.name.as_str()).ok_or_else(|| {
                SimError::Limit(format!("node rank: no rank for node {:?}", node.name))
            })?;
            let new = format!("r{r:05}-{}", node.name);
            renamed.insert(std::mem::replace(&mut node.name, new.clone()), new);
        }
        for slice in &mut cluster.resource_slices {
            if let lockstep_model::dra::SliceNodeScope::NodeName(n) = &mut slice.node_scope
                && let Some(new) = renamed.get(n.as_str())
            {
                *n = new.clone();
            }
        }
    }
    Ok((cluster, milli, jobs, copied))
}

/// The allocation when arrived demand first reached a whole percent of capacity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FragmentationStep {
    /// Arrived GPU demand, percent of GPU capacity.
    pub arrived_percent: u32,
    /// GPUs requested by bound pods, percent of GPU capacity (two decimals).
    pub allocated_percent: f64,
}

/// One fragmentation run, for `metrics.json`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FragmentationRun {
    pub policy: String,
    pub share: f64,
    pub seed: u64,
    pub gpu_capacity: i64,
    /// Jobs that arrived (including copies).
    pub arrived_jobs: usize,
    /// Copies added because the trace's GPU demand was below `share` of capacity.
    pub copied_jobs: usize,
    /// Arrived jobs that did not fit.
    pub failed_jobs: usize,
    /// Arrived GPU demand at the end, percent of capacity.
    pub arrived_percent: f64,
    /// Allocated GPUs at the end, percent of capacity.
    pub allocated_percent: f64,
    /// One entry per whole percent 0..=share*100 that arrived demand reached.
    pub steps: Vec<FragmentationStep>,
    /// As the FGD paper's analysis measures it: for each whole percent k, the mean
    /// allocation over the arrivals after which arrived demand rounds to k percent (the
    /// allocation when demand first reached k when no arrival does).
    pub rounded_steps: Vec<FragmentationStep>,
    /// At most how much any policy could allocate of the pods arrived when demand first
    /// reached each whole percent ([`crate::bound`]), percent of GPU capacity rounded up
    /// (empty when not asked for).
    pub bound_steps: Vec<FragmentationStep>,
    /// The names of the arrived pods, in arrival order.
    #[serde(skip)]
    pub arrivals: Vec<String>,
    #[serde(skip)]
    pub wall: Duration,
}

fn below(rng: &mut ChaCha8Rng, n: usize) -> usize {
    ((rng.random::<u64>() as u128 * n as u128) >> 64) as usize
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Runs `policy` over `trace` in fragmentation mode.
pub fn run_fragmentation(
    trace: &Trace,
    policy: &Policy,
    options: &FragmentationOptions,
) -> Result<FragmentationRun, SimError> {
    let started = Instant::now();
    let capacity_milli = trace.gpus().saturating_mul(1000);
    let limit = (options.share.max(0.0) * capacity_milli as f64).round() as i64;
    let (cluster, milli, jobs, copied) = match &options.arrival_order {
        Some(order) => replay(trace, order)?,
        None => seeded_order(trace, options, limit)?,
    };
    let demand = |pods: &[PodId], milli: &[i64]| -> i64 {
        pods.iter()
            .fold(0i64, |a, p| a.saturating_add(milli[p.index()]))
    };
    let engine_options = Options {
        profile: policy.profile.clone(),
        batching: policy.batching,
        preemption: false,
        gang_preemption: policy.gang_preemption,
        explain: false,
        ..Options::default()
    };
    let mut scheduler =
        Scheduler::new(&cluster, engine_options).map_err(|source| SimError::Config {
            policy: policy.name.clone(),
            error: source,
        })?;
    let max_step = (options.share.max(0.0) * 100.0).floor() as u32;
    let pct = |m: i64| {
        if capacity_milli > 0 {
            m as f64 * 100.0 / capacity_milli as f64
        } else {
            0.0
        }
    };
    let mut steps = Vec::new();
    let (mut arrived, mut allocated) = (0i64, 0i64);
    let (mut arrived_jobs, mut failed) = (0usize, 0usize);
    // Per step, how many pods had arrived (for the bound).
    let mut step_pods: Vec<usize> = Vec::new();
    let mut arrived_pods: Vec<PodId> = Vec::new();
    let record = |arrived: i64,
                  allocated: i64,
                  pods: usize,
                  steps: &mut Vec<FragmentationStep>,
                  step_pods: &mut Vec<usize>| {
        while steps.len() as u32 <= max_step && arrived * 100 >= steps.len() as i64 * capacity_milli
        {
            steps.push(FragmentationStep {
                arrived_percent: steps.len() as u32,
                allocated_percent: round2(pct(allocated)),
            });
            step_pods.push(pods);
        }
    };
    record(arrived, allocated, 0, &mut steps, &mut step_pods);
    let mut rounded = vec![(0.0f64, 0u32); max_step as usize + 1];
    let mut arrivals = Vec::new();
    for pods in &jobs {
        if arrived >= limit || capacity_milli == 0 {
            break;
        }
        arrived_jobs += 1;
        arrivals.extend(pods.iter().map(|p| cluster.pods[p.index()].name.clone()));
        arrived_pods.extend_from_slice(pods);
        let d = demand(pods, &milli);
        arrived += d;
        let decisions = scheduler.schedule(pods);
        if decisions.bindings.len() >= pods.len() {
            allocated += d;
        } else {
            failed += 1;
            // A gang that bound only partly gives its pods back.
            for &(p, _) in &decisions.bindings {
                scheduler.release(p);
            }
        }
        record(
            arrived,
            allocated,
            arrived_pods.len(),
            &mut steps,
            &mut step_pods,
        );
        let k = (pct(arrived) + 0.5).floor() as usize;
        if k < rounded.len() {
            rounded[k].0 += pct(allocated);
            rounded[k].1 += 1;
        }
    }
    let rounded_steps = steps
        .iter()
        .map(|s| {
            let (sum, n) = rounded[s.arrived_percent as usize];
            FragmentationStep {
                arrived_percent: s.arrived_percent,
                allocated_percent: if n > 0 {
                    round2(sum / n as f64)
                } else {
                    s.allocated_percent
                },
            }
        })
        .collect();
    let wall = started.elapsed();
    let bound_steps = if options.bound {
        bound_steps(trace, &cluster, &milli, &arrived_pods, &steps, &step_pods)
    } else {
        Vec::new()
    };
    Ok(FragmentationRun {
        policy: policy.name.clone(),
        share: options.share,
        seed: options.seed,
        gpu_capacity: trace.gpus(),
        arrived_jobs,
        copied_jobs: copied,
        failed_jobs: failed,
        arrived_percent: round2(pct(arrived)),
        allocated_percent: round2(pct(allocated)),
        steps,
        rounded_steps,
        bound_steps,
        arrivals,
        wall,
    })
}

/// The allocation bound at each step, for the pods arrived by then. While everything that
/// arrived can be placed, the bound is the arrived demand itself; the linear program runs
/// only from the first step where it is less (found by bisection: a subset of pods that
/// all fit fits too).
fn bound_steps(
    trace: &Trace,
    cluster: &lockstep_model::Cluster,
    milli: &[i64],
    arrived: &[PodId],
    steps: &[FragmentationStep],
    step_pods: &[usize],
) -> Vec<FragmentationStep> {
    use crate::bound::{Capacity, Need, allocation_bound};
    use lockstep_model::ResourceId;
    let capacity_milli = trace.gpus().saturating_mul(1000);
    if capacity_milli <= 0 {
        return Vec::new();
    }
    let nodes: Vec<Capacity> = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Capacity {
            cpu: n.allocatable.get(ResourceId::CPU),
            memory: n.allocatable.get(ResourceId::MEMORY),
            gpus: trace.node_gpus.get(i).copied().unwrap_or(0),
        })
        .collect();
    let needs: Vec<Need> = arrived
        .iter()
        .map(|p| {
            let pod = &cluster.pods[p.index()];
            Need {
                cpu: pod.requests.get(ResourceId::CPU),
                memory: pod.requests.get(ResourceId::MEMORY),
                gpu_milli: milli[p.index()],
            }
        })
        .collect();
    // Demand of the first n pods: demand[n].
    let demand: Vec<i64> = std::iter::once(0)
        .chain(needs.iter().scan(0i64, |sum, p| {
            *sum = sum.saturating_add(p.gpu_milli.max(0));
            Some(*sum)
        }))
        .collect();
    // One program per distinct pod count (steps without arrivals between share it, and the
    // bisection's programs are not solved again below).
    let mut solved: std::collections::BTreeMap<usize, i64> = Default::default();
    let mut bound = |n: usize| {
        *solved
            .entry(n)
            .or_insert_with(|| allocation_bound(&nodes, &needs[..n]))
    };
    // The first step whose pods cannot all be placed.
    let (mut lo, mut hi) = (0usize, steps.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if bound(step_pods[mid]) >= demand[step_pods[mid]] {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let percent = |m: i64| ((m as f64 * 10000.0 / capacity_milli as f64).ceil()) / 100.0;
    steps
        .iter()
        .zip(step_pods)
        .enumerate()
        .map(|(i, (s, &n))| FragmentationStep {
            arrived_percent: s.arrived_percent,
            allocated_percent: percent(if i < lo { demand[n] } else { bound(n) }),
        })
        .collect()
}

/// The seeded arrival order: the trace's jobs, inflated with copies until demand reaches
/// `limit`, shuffled.
fn seeded_order(
    trace: &Trace,
    options: &FragmentationOptions,
    limit: i64,
) -> Result<Arrivals, SimError> {
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut cluster = trace.cluster.clone();
    let mut milli = trace.pod_gpu_milli.clone();
    // Each job: its pods. Jobs already running in the input are left out (no departures, but
    // no arrivals either).
    let mut jobs: Vec<Vec<PodId>> = trace
        .jobs
        .iter()
        .filter(|j| !j.initially_running)
        .map(|j| j.pods.clone())
        .collect();
    let demand = |pods: &[PodId], milli: &[i64]| -> i64 {
        pods.iter()
            .fold(0i64, |a, p| a.saturating_add(milli[p.index()]))
    };
    let mut total: i64 = jobs
        .iter()
        .fold(0i64, |a, j| a.saturating_add(demand(j, &milli)));
    // Inflate with copies of single-pod GPU jobs until demand reaches the limit.
    let singles: Vec<PodId> = jobs
        .iter()
        .filter(|j| j.len() == 1 && milli[j[0].index()] > 0)
        .filter(|j| cluster.pods[j[0].index()].pod_group.is_none())
        .map(|j| j[0])
        .collect();
    let mut copied = 0;
    while total < limit && !singles.is_empty() {
        if cluster.pods.len() >= limits::PODS {
            return Err(SimError::Limit(format!(
                "--fragmentation {}: reaching that share of {} GPUs takes more than {} pods, \
                 the most lockstep simulates; give a smaller share (see \"Limits\" in README.md)",
                options.share,
                trace.gpus(),
                limits::PODS
            )));
        }
        let from = singles[below(&mut rng, singles.len())];
        let mut pod = cluster.pods[from.index()].clone();
        copied += 1;
        pod.name = format!("{}-copy-{copied}", pod.name);
        let id = PodId(cluster.pods.len() as u32);
        cluster.pods.push(pod);
        milli.push(milli[from.index()]);
        total += milli[from.index()];
        jobs.push(vec![id]);
    }
    // A seeded Fisher-Yates shuffle: the arrival order.
    for i in (1..jobs.len()).rev() {
        let k = below(&mut rng, i + 1);
        jobs.swap(i, k);
    }
    Ok((cluster, milli, jobs, copied))
}

/// One policy of the FGD paper's published results: its mean allocation over the seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FgdCurve {
    /// The paper's policy name, e.g. `06-FGD`.
    pub policy: String,
    pub seeds: usize,
    /// Mean allocation (percent of GPU capacity) at arrived demand 0, 1, 2, ... percent.
    pub allocated_percent: Vec<f64>,
}

/// The published results for one openb pod list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FgdReference {
    /// Where the numbers come from.
    pub source: String,
    pub workload: String,
    pub tune: String,
    pub curves: Vec<FgdCurve>,
}

/// Reads the rows of `workload` (an openb pod list's file name without `.csv`) from the FGD
/// paper's `analysis_allo_discrete.csv` text, averaging each policy over its seeds, up to
/// `max_percent` of arrived demand. `None` when the file has no row for the workload.
pub fn fgd_reference(
    file: &str,
    text: &str,
    workload: &str,
    max_percent: u32,
) -> Result<Option<FgdReference>, crate::TraceError> {
    let table = crate::readers::table::Table::parse(file, text)?;
    let (c_work, c_policy, c_tune) = (
        table.column("workload")?,
        table.column("sc_policy")?,
        table.column("tune")?,
    );
    let steps: Vec<usize> = (0..=max_percent)
        .map_while(|k| table.optional_column(&k.to_string()))
        .collect();
    let mut sums: Vec<(String, usize, Vec<f64>)> = Vec::new();
    let mut tune = String::new();
    for row in &table.rows {
        if &row.fields[c_work] != workload {
            continue;
        }
        tune = row.fields[c_tune].to_string();
        let policy = row.fields[c_policy].to_string();
        let mut values = Vec::with_capacity(steps.len());
        for &c in &steps {
            let v: f64 = row.fields[c].parse().map_err(|_| {
                table.error(row, format!("{:?} is not a percentage", &row.fields[c]))
            })?;
            values.push(v);
        }
        match sums.iter_mut().find(|s| s.0 == policy) {
            Some(s) => {
                s.1 += 1;
                for (a, v) in s.2.iter_mut().zip(values) {
                    *a += v;
                }
            }
            None => sums.push((policy, 1, values)),
        }
    }
    if sums.is_empty() {
        return Ok(None);
    }
    sums.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Some(FgdReference {
        source: "hkust-adsl/kubernetes-scheduler-simulator@8f3d641 \
                 experiments/analysis/expected_results/analysis_allo_discrete.csv"
            .into(),
        workload: workload.into(),
        tune,
        curves: sums
            .into_iter()
            .map(|(policy, seeds, values)| FgdCurve {
                policy,
                seeds,
                allocated_percent: values
                    .into_iter()
                    .map(|v| round2(v / seeds as f64))
                    .collect(),
            })
            .collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readers::openb::parse_openb;

    fn policy() -> Policy {
        Policy::from_profile(&crate::policy::gpu_aware(Default::default()))
    }

    /// Two 1-GPU nodes; pods of 0.6, 0.6 and 0.4 GPU arrive in some order. Whatever the
    /// order, one 0.6 pod and the 0.4 pod can share a GPU and the other 0.6 pod takes the
    /// second: all fit, allocation follows demand. A fourth pod of a whole GPU cannot fit.
    #[test]
    fn tiny_trace_allocation_against_arrived_demand() {
        let nodes =
            "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,1,T4\nn1,64000,262144,1,T4\n";
        let pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\
                    a,1000,1024,1,600\nb,1000,1024,1,600\nc,1000,1024,1,400\n";
        let t = parse_openb("nodes.csv", nodes, "pods.csv", pods).expect("valid");
        let opts = FragmentationOptions {
            share: 0.8,
            seed: 7,
            ..Default::default()
        };
        let r = run_fragmentation(&t, &policy(), &opts).expect("runs");
        assert_eq!(
            r.copied_jobs, 0,
            "1.6 GPUs of demand already reach 0.8 of 2"
        );
        assert_eq!(r.steps.len(), 81);
        assert_eq!(r.steps[0].allocated_percent, 0.0);
        for s in &r.steps {
            // Nothing failed before demand reached 80%: allocation is at least the step.
            assert!(s.allocated_percent >= s.arrived_percent as f64, "{s:?}");
        }
        assert!(r.arrived_percent >= 80.0);
        assert_eq!(r.failed_jobs, 0);
        // Same seed, same run.
        let again = run_fragmentation(&t, &policy(), &opts).expect("runs");
        assert_eq!(again.steps, r.steps);

        // Inflated to 150% of capacity: copies are added and allocation stays at most 100%.
        let opts = FragmentationOptions {
            share: 1.5,
            seed: 7,
            ..Default::default()
        };
        let r = run_fragmentation(&t, &policy(), &opts).expect("runs");
        assert!(r.copied_jobs > 0);
        assert_eq!(r.steps.len(), 151);
        assert!(r.failed_jobs > 0);
        assert!(r.allocated_percent <= 100.0);
        assert!(r.arrived_percent >= 150.0);
    }

    /// A given arrival order is replayed row by row: trace pods by name, copies of them under
    /// the row's name; the node ranks rename the nodes so that ties follow them.
    #[test]
    fn arrival_order_is_replayed_exactly() {
        let nodes =
            "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,1,T4\nn1,64000,262144,1,T4\n";
        let pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\
                    a,1000,1024,1,600\nb,1000,1024,1,600\nc,1000,1024,1,400\n";
        let t = parse_openb("nodes.csv", nodes, "pods.csv", pods).expect("valid");
        let order = "idx,name,source_pod,cpu_milli,memory_mib,num_gpu,gpu_milli\n\
                     0,c,c,1000,1024,1,400\n1,a-tuned-1,a,1000,1024,1,600\n\
                     2,a,a,1000,1024,1,600\n3,b,b,1000,1024,1,600\n";
        let rank = "node,tiebreak_rank\nn0,1\nn1,0\n";
        let order =
            ArrivalOrder::parse("order.csv", order, Some(("rank.csv", rank))).expect("parses");
        let opts = FragmentationOptions {
            share: 2.0,
            arrival_order: Some(std::sync::Arc::new(order.clone())),
            ..Default::default()
        };
        for p in [
            policy(),
            Policy::parse("fgd", &crate::policy::gpu_aware(Default::default())).expect("fgd"),
        ] {
            let r = run_fragmentation(&t, &p, &opts).expect("runs");
            let names: Vec<&str> = order.rows.iter().map(|a| a.name.as_str()).collect();
            assert_eq!(r.arrivals, names, "the n-th arrival is the n-th row");
            assert_eq!(r.copied_jobs, 1);
            // 0.4 + 0.6 share one GPU, 0.6 takes the other, the last 0.6 cannot fit.
            assert_eq!(r.failed_jobs, 1);
        }
        // A row whose demand differs from its source pod's is an error.
        let bad = "idx,name,source_pod,num_gpu,gpu_milli\n0,c,c,1,500\n";
        let opts = FragmentationOptions {
            arrival_order: Some(std::sync::Arc::new(
                ArrivalOrder::parse("bad.csv", bad, None).expect("parses"),
            )),
            ..Default::default()
        };
        assert!(run_fragmentation(&t, &policy(), &opts).is_err());
        // Rows out of order are an error.
        let skip = "idx,name,source_pod,num_gpu,gpu_milli\n1,c,c,1,400\n";
        assert!(ArrivalOrder::parse("skip.csv", skip, None).is_err());
    }

    #[test]
    fn the_bundled_seed_42_order_has_every_trace_pod_once() {
        let (f, text) = crate::data::Dataset::FgdArrivalOrder
            .read(None)
            .expect("built in");
        let (rf, rank) = crate::data::Dataset::FgdNodeRank
            .read(None)
            .expect("built in");
        let order = ArrivalOrder::parse(&f, &text, Some((&rf, &rank))).expect("parses");
        assert_eq!(order.rows.len(), 10_866);
        assert_eq!(
            order.rows.iter().filter(|a| a.name == a.source).count(),
            8152
        );
        assert_eq!(order.node_rank.len(), 1213);
        assert_eq!(order.rows[1].name, "openb-pod-1685");
    }

    #[test]
    fn fgd_reference_of_the_default_pod_list() {
        let text = crate::data::Dataset::FgdAllocation.builtin();
        let r = fgd_reference("fgd.csv", &text, "openb_pod_list_default", 130)
            .expect("parses")
            .expect("has the default pod list");
        assert_eq!(r.curves.len(), 6);
        assert!(r.curves.iter().all(|c| c.seeds == 10));
        assert!(r.curves.iter().all(|c| c.allocated_percent.len() == 131));
        // The README's example: FGD 95.23 at 100%, Random 86.30.
        let at = |p: &str, k: usize| {
            r.curves
                .iter()
                .find(|c| c.policy == p)
                .expect("policy")
                .allocated_percent[k]
        };
        assert_eq!(at("06-FGD", 100), 95.23);
        assert_eq!(at("01-Random", 100), 86.3);
        assert!(
            fgd_reference("fgd.csv", &text, "nope", 100)
                .expect("parses")
                .is_none()
        );
    }

    #[test]
    fn report_shows_fragmentation_mode() {
        let nodes = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,T4\n";
        let pods =
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,1024,1,500\nb,1000,1024,1,1000\n";
        let t = parse_openb("nodes.csv", nodes, "pods.csv", pods).expect("valid");
        let opts = FragmentationOptions {
            share: 1.0,
            seed: 1,
            ..Default::default()
        };
        let (m, timing) =
            crate::run_fragmentation_policies(&t, &[policy()], &opts, &mut |_, _, _| {})
                .expect("runs");
        assert_eq!(m.fragmentation_runs.len(), 1);
        assert_eq!(m.fragmentation_runs[0].steps.len(), 101);
        let json = crate::report::metrics_json(&m);
        assert!(json.contains("\"fragmentationRuns\""));
        assert!(json.contains("\"allocatedPercent\""));
        let html = crate::report::html(&m, &timing);
        assert!(html.contains("<h2>Fragmentation mode</h2>"));
        assert!(html.contains("<svg"));
        let summary = crate::report::summary(&m, &timing);
        assert!(summary.contains("100%"), "{summary}");
    }
}
