//! An offline upper bound on the GPU allocation a fragmentation run can reach: no policy,
//! online or offline, allocates more GPUs of the arrived pods than this.
//!
//! Any run's allocation is a packing of some of the arrived pods into the nodes, so the
//! optimum of a relaxation of that packing problem bounds it. The relaxation is a linear
//! program over node types (nodes with the same CPU, memory and GPU count) and pod shapes
//! (pods with the same CPU, memory and milli-GPUs): `x[s][t]`, how many pods of shape `s`
//! go to nodes of type `t`, maximising the milli-GPUs placed, subject to
//!
//! - at most as many pods of each shape as arrived;
//! - a pod only on a type whose single node could hold it alone;
//! - per type, the CPU, memory and milli-GPUs of its pods within the type's total;
//! - per type, for each of the dual-feasible functions `u_k` of Fekete and Schepers
//!   (k = 1..=6: `u_k(x) = x` when `(k+1)x` is whole, else `floor((k+1)x) / k`), the sum of
//!   `u_k` over the GPU shares placed within its GPU count. Any set of shares that fits on
//!   one GPU has `u_k`-values summing to at most 1, so this holds for every real packing;
//!   it is what makes the bound tight: a pod taking 810 milli-GPUs uses a whole GPU for
//!   every other share bigger than 190, which the milli-GPU total alone does not see;
//! - per type, pods of `g >= 2` whole GPUs at most `floor(G / g)` per node.
//!
//! GPU models and pod affinities are left out (leaving a constraint out only raises the
//! bound). A pod asks for whole GPUs (a multiple of 1000 milli-GPUs) or a share of one GPU
//! (less than 1000), as the trace readers allow.

use std::collections::BTreeMap;

use microlp::{ComparisonOp, OptimizationDirection, Problem};

/// What one node has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Capacity {
    pub cpu: i64,
    pub memory: i64,
    /// Whole GPUs.
    pub gpus: i64,
}

/// What one pod asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    pub cpu: i64,
    pub memory: i64,
    /// Milli-GPUs: a multiple of 1000 for whole GPUs, less than 1000 for a share of one.
    pub gpu_milli: i64,
}

impl Need {
    /// Whole GPUs it needs on one node (a share needs one).
    fn gpus(&self) -> i64 {
        (self.gpu_milli + 999) / 1000
    }

    fn fits_alone(&self, node: &Capacity) -> bool {
        self.cpu <= node.cpu && self.memory <= node.memory && self.gpus() <= node.gpus
    }
}

/// A node type, how many nodes have it, and the variables of the shapes it may take.
type TypeVars = (Capacity, i64, Vec<(Need, microlp::Variable)>);

/// The dual-feasible functions used, `u_1` to `u_K`.
const DFF_LEVELS: i64 = 6;

/// `u_k` of a share of `milli` milli-GPUs, in GPUs.
fn dff(k: i64, milli: i64) -> f64 {
    if ((k + 1) * milli) % 1000 == 0 {
        milli as f64 / 1000.0
    } else {
        ((k + 1) * milli / 1000) as f64 / k as f64
    }
}

/// At most how many milli-GPUs of `pods` any packing into `nodes` allocates (the linear
/// program's optimum, rounded up). Pods without GPUs and nodes without GPUs take no part.
pub fn allocation_bound(nodes: &[Capacity], pods: &[Need]) -> i64 {
    let mut types: BTreeMap<Capacity, i64> = BTreeMap::new();
    for n in nodes
        .iter()
        .filter(|n| n.gpus > 0 && n.cpu >= 0 && n.memory >= 0)
    {
        *types.entry(*n).or_default() += 1;
    }
    let mut shapes: BTreeMap<Need, i64> = BTreeMap::new();
    for p in pods.iter().filter(|p| p.gpu_milli > 0) {
        *shapes.entry(*p).or_default() += 1;
    }
    let mut problem = Problem::new(OptimizationDirection::Maximize);
    // Variables per type, with their shapes; per shape, its variables.
    let mut by_type: Vec<TypeVars> = Vec::new();
    let mut by_shape: BTreeMap<Need, Vec<microlp::Variable>> = BTreeMap::new();
    for (&t, &count) in &types {
        let mut vars = Vec::new();
        for &s in shapes.keys().filter(|s| s.fits_alone(&t)) {
            // Objective in GPUs, so the program's numbers stay near 1.
            let v = problem.add_var(s.gpu_milli as f64 / 1000.0, (0.0, f64::INFINITY));
            vars.push((s, v));
            by_shape.entry(s).or_default().push(v);
        }
        by_type.push((t, count, vars));
    }
    if by_shape.is_empty() {
        return 0;
    }
    for (s, vars) in &by_shape {
        let row: Vec<_> = vars.iter().map(|&v| (v, 1.0)).collect();
        problem.add_constraint(&row, ComparisonOp::Le, shapes[s] as f64);
    }
    for (t, count, vars) in &by_type {
        if vars.is_empty() {
            continue;
        }
        let n = *count as f64;
        // Each row in units of one node's capacity.
        let mut rows: Vec<Vec<(microlp::Variable, f64)>> = vec![
            vars.iter()
                .map(|&(s, v)| (v, s.cpu as f64 / t.cpu.max(1) as f64))
                .collect(),
            vars.iter()
                .map(|&(s, v)| (v, s.memory as f64 / t.memory.max(1) as f64))
                .collect(),
            vars.iter()
                .map(|&(s, v)| (v, s.gpu_milli as f64 / 1000.0 / t.gpus as f64))
                .collect(),
        ];
        for k in 1..=DFF_LEVELS {
            rows.push(
                vars.iter()
                    .map(|&(s, v)| {
                        let used = if s.gpu_milli >= 1000 {
                            s.gpus() as f64
                        } else {
                            dff(k, s.gpu_milli)
                        };
                        (v, used / t.gpus as f64)
                    })
                    .collect(),
            );
        }
        for row in rows {
            problem.add_constraint(&row, ComparisonOp::Le, n);
        }
        for &(s, v) in vars {
            if s.gpu_milli >= 2000 {
                let per_node = (t.gpus / s.gpus()) as f64;
                problem.add_constraint([(v, 1.0)], ComparisonOp::Le, n * per_node);
            }
        }
    }
    match problem.solve() {
        // Rounded up, after a tolerance for the solver's arithmetic.
        Ok(solution) => ((solution.objective() * 1000.0) - 1e-6).ceil().max(0.0) as i64,
        // The program is feasible (all zeros) and bounded (each shape's count); should the
        // solver still fail, the trivial bound holds.
        Err(_) => pods
            .iter()
            .map(|p| p.gpu_milli.max(0))
            .sum::<i64>()
            .min(nodes.iter().map(|n| n.gpus.max(0) * 1000).sum()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(gpus: i64) -> Capacity {
        Capacity {
            cpu: 96_000,
            memory: 1 << 40,
            gpus,
        }
    }

    fn share(milli: i64) -> Need {
        Need {
            cpu: 1000,
            memory: 1 << 30,
            gpu_milli: milli,
        }
    }

    #[test]
    fn the_functions_are_dual_feasible_at_their_breakpoints() {
        // u_1: over a half counts whole, a half counts a half, under it nothing.
        assert_eq!(dff(1, 810), 1.0);
        assert_eq!(dff(1, 500), 0.5);
        assert_eq!(dff(1, 470), 0.0);
        // u_4: (0.2, 0.4) a quarter, (0.4, 0.6) a half, (0.6, 0.8) three quarters.
        assert_eq!(dff(4, 320), 0.25);
        assert_eq!(dff(4, 470), 0.5);
        assert_eq!(dff(4, 650), 0.75);
        assert_eq!(dff(4, 400), 0.4);
        // Shares that fit on one GPU sum to at most 1 under every u_k.
        for k in 1..=DFF_LEVELS {
            for a in (10..1000).step_by(10) {
                for b in (10..=1000 - a).step_by(10) {
                    let c = 1000 - a - b;
                    let sum = dff(k, a) + dff(k, b) + if c > 0 { dff(k, c) } else { 0.0 };
                    assert!(sum <= 1.0 + 1e-9, "u_{k}({a}, {b}, {c}) = {sum}");
                }
            }
        }
    }

    #[test]
    fn pods_that_all_fit_are_all_counted() {
        let nodes = [node(2)];
        let pods = [share(500), share(500), share(1000)];
        assert_eq!(allocation_bound(&nodes, &pods), 2000);
    }

    #[test]
    fn shares_over_a_half_take_a_gpu_each() {
        // Two GPUs, three pods of 600: the milli total (1800 <= 2000) would allow all
        // three; only two fit.
        let pods = [share(600), share(600), share(600)];
        assert_eq!(allocation_bound(&[node(2)], &pods), 1200);
        // Two of 750 and two of 300 on two GPUs: at most 1500 really fit (no 300 beside a
        // 750); the milli total allows 2000, the functions bring it below that.
        let pods = [share(750), share(750), share(300), share(300)];
        let bound = allocation_bound(&[node(2)], &pods);
        assert!((1500..2000).contains(&bound), "{bound}");
    }

    #[test]
    fn whole_gpu_pods_need_room_on_one_node() {
        // Two nodes of 4 GPUs cannot take a pod of 8, nor more than two pods of 3.
        let nodes = [node(4), node(4)];
        let eight = Need {
            gpu_milli: 8000,
            ..share(0)
        };
        assert_eq!(allocation_bound(&nodes, &[eight]), 0);
        let three = Need {
            gpu_milli: 3000,
            ..share(0)
        };
        assert_eq!(allocation_bound(&nodes, &[three, three, three]), 6000);
    }

    #[test]
    fn cpu_limits_what_a_node_type_takes() {
        let nodes = [Capacity {
            cpu: 8_000,
            memory: 1 << 40,
            gpus: 8,
        }];
        let hungry = Need {
            cpu: 4_000,
            memory: 1 << 30,
            gpu_milli: 1000,
        };
        assert_eq!(allocation_bound(&nodes, &[hungry; 5]), 2000);
    }

    #[test]
    fn no_gpus_no_bound() {
        assert_eq!(allocation_bound(&[node(0)], &[share(500)]), 0);
        assert_eq!(allocation_bound(&[node(2)], &[]), 0);
    }
}
