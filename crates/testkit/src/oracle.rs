//! An exhaustive reference solver for small gang preemption instances, and a generator of
//! such instances. Tests and the optimality report (`examples/preemption_optimality.rs`)
//! compare the preemption heuristic against it. Not used by the scheduler itself.

use lockstep_model::{Cluster, DisruptionMode, PodPhase};

use crate as testkit;
use crate::GI;
use lockstep_engine::{GangPreemption, Options, schedule};

/// A deterministic xorshift generator: instances are reproducible from their seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// The preemption objective of a victim set: (victim units, highest victim priority,
/// evicted amount as a share of cluster capacity). Lower is better, in that order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    pub units: usize,
    pub max_priority: i32,
    pub amount: f64,
}

impl Cost {
    pub fn compare(&self, other: &Cost) -> std::cmp::Ordering {
        (self.units, self.max_priority)
            .cmp(&(other.units, other.max_priority))
            .then(self.amount.total_cmp(&other.amount))
    }
}

/// A random instance: up to 4 nodes of 4 CPU full of low-priority pods (gangs, some with
/// disruptionMode all, and single pods) and a pending gang of priority 100.
pub fn instance(seed: u64) -> Cluster {
    let mut rng = Rng::new(seed);
    let mut c = Cluster::default();
    let nodes = rng.range(2, 4) as usize;
    let mut free = vec![4000i64; nodes];
    for i in 0..nodes {
        let n = testkit::node(&mut c, &format!("n{i}"), 4000, 16 * GI, 110);
        c.nodes.push(n);
    }
    let place = |rng: &mut Rng, free: &mut Vec<i64>, cpu: i64| -> Option<usize> {
        let start = rng.range(0, free.len() as u64 - 1) as usize;
        (0..free.len())
            .map(|k| (start + k) % free.len())
            .find(|&n| free[n] >= cpu)
            .inspect(|&n| free[n] -= cpu)
    };
    let gangs = rng.range(1, 3);
    for g in 0..gangs {
        let name = format!("g{g}");
        let mut pg = testkit::gang(&name, 1, None);
        pg.priority = Some(rng.range(0, 2) as i32);
        if rng.range(0, 4) == 0 {
            pg.disruption_mode = DisruptionMode::All;
        }
        let prio = pg.priority.unwrap();
        c.pod_groups.push(pg);
        for i in 0..rng.range(1, 3) {
            let cpu = rng.range(1, 2) as i64 * 1000;
            if let Some(n) = place(&mut rng, &mut free, cpu) {
                let p = testkit::running(
                    &mut c,
                    &format!("{name}-{i}"),
                    &format!("n{n}"),
                    cpu,
                    prio,
                    Some(&name),
                );
                c.pods.push(p);
            }
        }
    }
    for i in 0..rng.range(0, 2) {
        let cpu = rng.range(1, 2) as i64 * 1000;
        if let Some(n) = place(&mut rng, &mut free, cpu) {
            let prio = rng.range(0, 2) as i32;
            let p = testkit::running(&mut c, &format!("s{i}"), &format!("n{n}"), cpu, prio, None);
            c.pods.push(p);
        }
    }
    let size = rng.range(1, 3) as usize;
    let mut pg = testkit::gang("pre", size as u32, None);
    pg.priority = Some(100);
    c.pod_groups.push(pg);
    for i in 0..size {
        let cpu = rng.range(1, 3) as i64 * 1000;
        let mut p = testkit::pod(&mut c, &format!("pre-{i}"), cpu, GI);
        p.pod_group = Some("pre".into());
        p.priority = 100;
        c.pods.push(p);
    }
    testkit::finish(c)
}

fn victims(c: &Cluster) -> Vec<usize> {
    (0..c.pods.len())
        .filter(|&i| c.pods[i].is_bound())
        .collect()
}

/// The unit a victim counts under in `mode`.
fn unit_of(c: &Cluster, pod: usize, mode: GangPreemption) -> String {
    let p = &c.pods[pod];
    match &p.pod_group {
        Some(g) => {
            let all = c
                .pod_groups
                .iter()
                .any(|x| x.name == *g && x.disruption_mode == DisruptionMode::All);
            if mode == GangPreemption::Off && !all {
                p.name.clone()
            } else {
                format!("group/{g}")
            }
        }
        None => p.name.clone(),
    }
}

/// Whether a unit must be evicted whole in `mode`.
fn whole(c: &Cluster, unit: &str, mode: GangPreemption) -> bool {
    unit.strip_prefix("group/").is_some_and(|g| {
        mode == GangPreemption::Atomic
            || c.pod_groups
                .iter()
                .any(|x| x.name == g && x.disruption_mode == DisruptionMode::All)
    })
}

/// The cost of evicting `pods` (indexes into `c.pods`).
pub fn cost(c: &Cluster, pods: &[usize], mode: GangPreemption) -> Cost {
    let mut units: Vec<String> = pods.iter().map(|&p| unit_of(c, p, mode)).collect();
    units.sort();
    units.dedup();
    let cap_cpu: i64 = c
        .nodes
        .iter()
        .map(|n| n.allocatable.get(lockstep_model::ResourceId::CPU))
        .sum();
    let cap_mem: i64 = c
        .nodes
        .iter()
        .map(|n| n.allocatable.get(lockstep_model::ResourceId::MEMORY))
        .sum();
    Cost {
        units: units.len(),
        max_priority: pods
            .iter()
            .map(|&p| c.pods[p].priority)
            .max()
            .unwrap_or(i32::MIN),
        amount: pods
            .iter()
            .map(|&p| {
                let r = &c.pods[p].requests;
                r.get(lockstep_model::ResourceId::CPU) as f64 / cap_cpu as f64
                    + r.get(lockstep_model::ResourceId::MEMORY) as f64 / cap_mem as f64
            })
            .sum(),
    }
}

/// Whether the pending gang is bound when `evicted` pods are gone (no preemption).
fn fits_without(c: &Cluster, evicted: &[usize]) -> bool {
    let mut c = c.clone();
    for &p in evicted {
        c.pods[p].phase = PodPhase::Succeeded;
    }
    let d = schedule(
        &c,
        Options {
            preemption: false,
            ..Options::default()
        },
    )
    .expect("default profile");
    !d.bindings.is_empty()
}

/// The optimal victim set by exhaustive search over every subset of the running pods that
/// respects whole units; `None` when no subset lets the gang fit.
pub fn optimum(c: &Cluster, mode: GangPreemption) -> Option<(Vec<usize>, Cost)> {
    let v = victims(c);
    assert!(
        v.len() <= 16,
        "instance too large for the exhaustive solver"
    );
    let mut best: Option<(Vec<usize>, Cost)> = None;
    for mask in 0u32..(1 << v.len()) {
        let set: Vec<usize> = (0..v.len())
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| v[i])
            .collect();
        // Whole units: all or none of their pods.
        let closed = set.iter().all(|&p| {
            let u = unit_of(c, p, mode);
            !whole(c, &u, mode)
                || v.iter()
                    .filter(|&&q| unit_of(c, q, mode) == u)
                    .all(|q| set.contains(q))
        });
        if !closed {
            continue;
        }
        let k = cost(c, &set, mode);
        if best.as_ref().is_some_and(|(_, b)| k.compare(b).is_ge()) {
            continue;
        }
        if fits_without(c, &set) {
            best = Some((set, k));
        }
    }
    best
}

/// How the heuristic did on one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Neither found a victim set (the gang cannot fit even after evicting everything).
    BothNone,
    /// The gang fits without evicting anything (and the heuristic evicted nothing).
    NoEvictionNeeded,
    Optimal,
    /// Same units and priority, more evicted.
    MoreEvicted,
    /// Same units, a higher highest priority.
    HigherPriority,
    /// This many more units than the optimum.
    ExtraUnits(usize),
    /// The heuristic found nothing although a victim set exists.
    Missed,
    /// The heuristic placed the gang although the exhaustive search says no victim set
    /// lets it fit: the two disagree about feasibility (a bug in one of them).
    Inconsistent,
}

/// Runs the heuristic on `c` and compares with the optimum.
pub fn judge(c: &Cluster, mode: GangPreemption) -> Verdict {
    let d = schedule(
        c,
        Options {
            gang_preemption: mode,
            ..Options::default()
        },
    )
    .expect("default profile");
    let chosen: Vec<usize> = d.evictions.iter().map(|e| e.pod.index()).collect();
    let opt = optimum(c, mode);
    match (chosen.is_empty() && d.bindings.is_empty(), opt) {
        (true, None) => Verdict::BothNone,
        (true, Some(_)) => Verdict::Missed,
        (false, None) => Verdict::Inconsistent,
        (false, Some((set, _))) if set.is_empty() && chosen.is_empty() => Verdict::NoEvictionNeeded,
        (false, Some((_, best))) => {
            let k = cost(c, &chosen, mode);
            if k.units > best.units {
                Verdict::ExtraUnits(k.units - best.units)
            } else if k.max_priority > best.max_priority && k.units == best.units {
                Verdict::HigherPriority
            } else if k.compare(&best).is_gt() {
                Verdict::MoreEvicted
            } else {
                Verdict::Optimal
            }
        }
    }
}
