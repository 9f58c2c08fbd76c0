//! Karmada's general estimator: how many more replicas of a binding a cluster can take, from
//! its `status.resourceSummary` (allocatable − allocated − allocating per resource, and the
//! pod count), or, when the cluster has `spec.resourceModels` and the summary
//! `allocatableModelings`, by placing replicas first-fit on the model's nodes (each grade's
//! minimums, 110 pods a node) — minus what bindings already hold there in this run
//! ([`Usage`], Karmada's overcommit protection). CPU counts in milli-CPUs, every other
//! resource in whole units rounded up, as Karmada's `Value()`.

use std::collections::BTreeMap;

use crate::model::{Amounts, Binding, Cluster, Milli};

/// Pods a model node holds, as Karmada's estimator assumes.
const MODEL_NODE_PODS: i64 = 110;

/// What bindings hold on one cluster beyond its resource summary: each binding's replicas
/// there, and their pods and resources summed.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub pods: i64,
    pub amounts: Amounts,
    /// Binding index -> replicas held.
    pub held: BTreeMap<usize, i64>,
}

impl Usage {
    /// Adds (or, with negative `replicas`, removes) replicas of binding `index`.
    pub fn add(&mut self, index: usize, b: &Binding, replicas: i64) {
        if replicas == 0 {
            return;
        }
        let (pods, unit) = b.unit_demand();
        self.pods = self.pods.saturating_add(pods.saturating_mul(replicas));
        for (k, v) in unit {
            match self.amounts.get_mut(k) {
                Some(a) => *a += v * Milli::from(replicas),
                None => {
                    self.amounts.insert(k.clone(), v * Milli::from(replicas));
                }
            }
        }
        let e = self.held.entry(index).or_default();
        *e += replicas;
        if *e == 0 {
            self.held.remove(&index);
        }
    }
}

pub(crate) fn units_ceil(milli: Milli) -> Milli {
    // In 64 bits when the amount fits, as it almost always does: 128-bit division is a
    // library call.
    if let Ok(m) = i64::try_from(milli) {
        return Milli::from(m.div_euclid(1000) + i64::from(m.rem_euclid(1000) != 0));
    }
    milli.div_euclid(1000) + Milli::from(milli.rem_euclid(1000) != 0)
}

/// `free / req` for positive amounts, as a replica count (saturated to `i64::MAX`), in 64
/// bits when both fit.
fn replicas_in(free: Milli, req: Milli) -> i64 {
    match (i64::try_from(free), i64::try_from(req)) {
        (Ok(f), Ok(r)) => f / r,
        _ => i64::try_from(free / req).unwrap_or(i64::MAX),
    }
}

/// The summary estimate for binding `b` on `c`, `None` when the cluster has no resource
/// summary (Karmada then estimates 0; a `--member` cluster is counted by its nodes alone).
pub fn summary_estimate(
    c: &Cluster,
    usage: &Usage,
    b: &Binding,
    bindings: &[Binding],
) -> Option<i64> {
    let s = c.summary.as_ref()?;
    let allowed_pods = s.pods_free - Milli::from(usage.pods);
    if allowed_pods <= 0 {
        return Some(0);
    }
    let allowed_pods = i64::try_from(allowed_pods).unwrap_or(i64::MAX);
    let (pods_per_unit, unit) = b.unit_demand();
    if b.requirements.is_none() && b.components.is_empty() {
        return Some(allowed_pods);
    }
    let by_pods = if pods_per_unit > 0 {
        allowed_pods / pods_per_unit
    } else {
        allowed_pods
    };
    if !c.models.is_empty() && !s.modelings.is_empty() {
        let n = model_estimate(c, usage, unit, bindings, by_pods);
        return Some(n.min(by_pods));
    }
    let mut max = by_pods;
    for (k, &req) in unit {
        let cpu = k == "cpu";
        let req = if cpu { req } else { units_ceil(req) };
        if req <= 0 {
            continue;
        }
        // A resource the cluster does not have at all: nothing fits.
        let Some(&base) = s.free.get(k) else {
            return Some(0);
        };
        let left = base - usage.amounts.get(k).copied().unwrap_or(0);
        let avail = if cpu { left } else { units_ceil(left) };
        if avail <= 0 {
            return Some(0);
        }
        max = max.min(replicas_in(avail, req));
    }
    Some(max)
}

/// First-fit placement on the resource model's nodes: the replicas bindings hold are placed
/// first, then as many replicas of `unit` as fit (at most `bound`).
fn model_estimate(
    c: &Cluster,
    usage: &Usage,
    unit: &Amounts,
    bindings: &[Binding],
    bound: i64,
) -> i64 {
    let Some(s) = &c.summary else { return 0 };
    let nodes: Vec<Nodes> = c
        .models
        .iter()
        .map(|(grade, mins)| Nodes {
            free: mins.clone(),
            pods: MODEL_NODE_PODS,
            count: s
                .modelings
                .get(grade)
                .copied()
                .unwrap_or(0)
                .clamp(0, 100_000),
        })
        .filter(|n| n.count > 0)
        .collect();
    let held: Vec<(&Amounts, i64)> = usage
        .held
        .iter()
        .map(|(&index, &replicas)| (bindings[index].unit_demand().1, replicas))
        .collect();
    first_fit(nodes, &held, unit, bound)
}

/// `count` model nodes in a row that are alike: what each has left.
#[derive(Debug, Clone, PartialEq)]
struct Nodes {
    free: Amounts,
    pods: i64,
    count: i64,
}

/// Replicas of `req` one node of `node` still takes.
fn fits(node: &Nodes, req: &Amounts) -> i64 {
    let mut n = node.pods;
    for (k, &v) in req {
        if v <= 0 {
            continue;
        }
        let have = node.free.get(k).copied().unwrap_or(0);
        n = n.min(i64::try_from(have / v).unwrap_or(i64::MAX));
    }
    n.max(0)
}

/// Takes `k` replicas of `req` from each node of `node`.
fn take(node: &mut Nodes, req: &Amounts, k: i64) {
    node.pods -= k;
    for (r, &v) in req {
        if let Some(have) = node.free.get_mut(r) {
            *have -= v * Milli::from(k);
        }
    }
}

/// Places the `held` replicas (each binding's unit and replicas, in order) first-fit on the
/// nodes, then counts the replicas of `unit` that fit (at most `bound`). Nodes alike are kept
/// as one run, as node-by-node first-fit treats them: the runs a binding fills whole are
/// taken at once, and the run where it stops splits into the nodes filled, the one node
/// partly filled and the nodes untouched. A run per grade and at most two more per held
/// binding, whatever the node counts.
fn first_fit(mut nodes: Vec<Nodes>, held: &[(&Amounts, i64)], unit: &Amounts, bound: i64) -> i64 {
    for &(req, replicas) in held {
        let mut left = replicas;
        let mut i = 0;
        while i < nodes.len() && left > 0 {
            let each = fits(&nodes[i], req);
            if each == 0 {
                i += 1;
                continue;
            }
            let count = nodes[i].count;
            if each.saturating_mul(count) <= left {
                take(&mut nodes[i], req, each);
                left -= each * count;
                i += 1;
                continue;
            }
            // Stops inside this run: `full` nodes take `each`, one node takes the rest.
            let full = left / each;
            let rest = left % each;
            let mut split = Vec::with_capacity(3);
            if full > 0 {
                let mut filled = nodes[i].clone();
                filled.count = full;
                take(&mut filled, req, each);
                split.push(filled);
            }
            if rest > 0 {
                let mut partial = nodes[i].clone();
                partial.count = 1;
                take(&mut partial, req, rest);
                split.push(partial);
            }
            let untouched = count - full - i64::from(rest > 0);
            if untouched > 0 {
                let mut same = nodes[i].clone();
                same.count = untouched;
                split.push(same);
            }
            nodes.splice(i..=i, split);
            left = 0;
        }
    }
    let mut total = 0i64;
    for node in &nodes {
        total = total.saturating_add(fits(node, unit).saturating_mul(node.count));
        if total >= bound {
            return bound;
        }
    }
    total
}

/// The summary estimate's numbers with resource names interned to dense ids: each binding's
/// unit as (id, request as the estimate counts it, whether it is CPU), each cluster's free
/// room and what bindings hold there by id. [`Dense::summary_estimate`] answers exactly as
/// [`summary_estimate`] without looking names up.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dense {
    /// Per binding: its unit's resources the estimate counts (request above zero).
    counted: Vec<Vec<(usize, Milli, bool)>>,
    /// Per binding: its whole unit by id, for what it holds.
    unit: Vec<Vec<(usize, Milli)>>,
    /// Per cluster: the summary's free room by id, `None` when the cluster lacks it.
    free: Vec<Vec<Option<Milli>>>,
    /// Per cluster: [`Usage::amounts`] by id.
    used: Vec<Vec<Milli>>,
}

impl Dense {
    pub fn new(clusters: &[Cluster], bindings: &[Binding]) -> Dense {
        let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
        for b in bindings {
            for k in b.unit.keys() {
                let next = ids.len();
                ids.entry(k.as_str()).or_insert(next);
            }
        }
        let counted = bindings
            .iter()
            .map(|b| {
                b.unit
                    .iter()
                    .filter_map(|(k, &req)| {
                        let cpu = k == "cpu";
                        let req = if cpu { req } else { units_ceil(req) };
                        (req > 0).then(|| (ids[k.as_str()], req, cpu))
                    })
                    .collect()
            })
            .collect();
        let unit = bindings
            .iter()
            .map(|b| b.unit.iter().map(|(k, &v)| (ids[k.as_str()], v)).collect())
            .collect();
        let free = clusters
            .iter()
            .map(|c| {
                let mut free = vec![None; ids.len()];
                if let Some(s) = &c.summary {
                    for (k, &id) in &ids {
                        free[id] = s.free.get(*k).copied();
                    }
                }
                free
            })
            .collect();
        Dense {
            counted,
            unit,
            free,
            used: vec![vec![0; ids.len()]; clusters.len()],
        }
    }

    /// What [`Usage::add`] adds to the amounts of cluster `c`.
    pub fn add(&mut self, c: usize, index: usize, replicas: i64) {
        for &(id, v) in &self.unit[index] {
            self.used[c][id] += v * Milli::from(replicas);
        }
    }

    /// [`summary_estimate`] for binding `index` on cluster `c`.
    pub fn summary_estimate(
        &self,
        c: usize,
        cluster: &Cluster,
        usage: &Usage,
        index: usize,
        bindings: &[Binding],
    ) -> Option<i64> {
        let b = &bindings[index];
        let s = cluster.summary.as_ref()?;
        if !cluster.models.is_empty() && !s.modelings.is_empty() {
            return summary_estimate(cluster, usage, b, bindings);
        }
        let allowed_pods = s.pods_free - Milli::from(usage.pods);
        if allowed_pods <= 0 {
            return Some(0);
        }
        let allowed_pods = i64::try_from(allowed_pods).unwrap_or(i64::MAX);
        if b.requirements.is_none() && b.components.is_empty() {
            return Some(allowed_pods);
        }
        let mut max = if b.unit_pods > 0 {
            allowed_pods / b.unit_pods
        } else {
            allowed_pods
        };
        let (free, used) = (&self.free[c], &self.used[c]);
        for &(id, req, cpu) in &self.counted[index] {
            // A resource the cluster does not have at all: nothing fits.
            let Some(base) = free[id] else {
                return Some(0);
            };
            let left = base - used[id];
            let avail = if cpu { left } else { units_ceil(left) };
            if avail <= 0 {
                return Some(0);
            }
            max = max.min(replicas_in(avail, req));
        }
        Some(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// First-fit node by node, every node apart.
    fn first_fit_by_node(
        nodes: &[Nodes],
        held: &[(&Amounts, i64)],
        unit: &Amounts,
        bound: i64,
    ) -> i64 {
        let mut each: Vec<Nodes> = nodes
            .iter()
            .flat_map(|n| {
                (0..n.count).map(|_| Nodes {
                    count: 1,
                    ..n.clone()
                })
            })
            .collect();
        for &(req, replicas) in held {
            let mut left = replicas;
            for node in each.iter_mut() {
                if left <= 0 {
                    break;
                }
                let k = fits(node, req).min(left);
                take(node, req, k);
                left -= k;
            }
        }
        let mut total = 0i64;
        for node in &each {
            total = total.saturating_add(fits(node, unit));
            if total >= bound {
                return bound;
            }
        }
        total
    }

    fn amounts(cpu: i64, gpu: i64) -> Amounts {
        [
            ("cpu".to_string(), Milli::from(cpu)),
            ("gpu".to_string(), Milli::from(gpu)),
        ]
        .into_iter()
        .collect()
    }

    proptest! {
        #[test]
        fn runs_of_alike_nodes_fill_as_node_by_node(
            grades in prop::collection::vec((0i64..9000, 0i64..5, 0i64..7), 1..4),
            held in prop::collection::vec((1i64..3000, 0i64..3, 0i64..40), 0..5),
            unit in (0i64..2500, 0i64..3),
            bound in 0i64..400,
        ) {
            let nodes: Vec<Nodes> = grades
                .iter()
                .map(|&(cpu, gpu, count)| Nodes { free: amounts(cpu, gpu), pods: MODEL_NODE_PODS, count })
                .filter(|n| n.count > 0)
                .collect();
            let units: Vec<Amounts> = held.iter().map(|&(cpu, gpu, _)| amounts(cpu, gpu)).collect();
            let held: Vec<(&Amounts, i64)> =
                units.iter().zip(&held).map(|(u, &(_, _, r))| (u, r)).collect();
            let unit = amounts(unit.0, unit.1);
            prop_assert_eq!(
                first_fit(nodes.clone(), &held, &unit, bound),
                first_fit_by_node(&nodes, &held, &unit, bound)
            );
        }
    }

    #[test]
    fn a_million_model_nodes_count_at_once() {
        let nodes: Vec<Nodes> = (0..20)
            .map(|g| Nodes {
                free: amounts(1000 * (g + 1), 0),
                pods: MODEL_NODE_PODS,
                count: 100_000,
            })
            .collect();
        let half = amounts(500, 0);
        let start = std::time::Instant::now();
        // 150001 half-CPU replicas: 75000 of grade 0's one-CPU nodes take 2, one node takes
        // 1, and 24999 stay free.
        let n = first_fit(nodes, &[(&half, 150_001)], &amounts(1000, 0), i64::MAX);
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        // One-CPU replicas: 1 on each free grade-0 node, g + 1 on each node of grade g.
        let expected: i64 = 24_999
            + (1..20)
                .map(|g| 100_000 * (g + 1).min(MODEL_NODE_PODS))
                .sum::<i64>();
        assert_eq!(n, expected);
    }
}
