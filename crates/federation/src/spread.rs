//! Cluster selection with spread constraints, as Karmada's `spreadconstraint` package does
//! it: clusters ordered by score, then available replicas, then name; spreading by cluster
//! (at most maxGroups clusters, swapping in clusters with more room while the best-scored
//! ones cannot hold the replicas) and by region (regions chosen by a depth-first search over
//! region sets, scored by the replicas they hold and their clusters' scores).

use std::collections::BTreeMap;

use crate::api::SpreadConstraint;
use crate::model::{Binding, Cluster, Strategy};

/// A feasible cluster with its score and room.
#[derive(Debug, Clone, Copy)]
pub struct Scored {
    /// The cluster's index in the federation (clusters are in name order).
    pub index: usize,
    pub score: i64,
    /// Room plus this binding's replicas already there.
    pub available: i64,
    /// Room.
    pub allocatable: i64,
}

/// Orders clusters as Karmada's `sortClusters`: score, then available replicas (both
/// descending), then name.
pub fn sort(list: &mut [Scored]) {
    // The order is total, so an unstable sort gives the one result. Where every field fits,
    // the order is that of one packed integer, which sorts faster.
    let keys: Option<Vec<(u64, u32)>> = list
        .iter()
        .enumerate()
        .map(|(at, s)| Some((packed(s)?, u32::try_from(at).ok()?)))
        .collect();
    match keys {
        Some(mut keys) => {
            keys.sort_unstable();
            let sorted: Vec<Scored> = keys.iter().map(|&(_, at)| list[at as usize]).collect();
            list.copy_from_slice(&sorted);
        }
        None => list.sort_unstable_by(order),
    }
}

/// [`order`] as one integer, ascending, when the score is in 0..=255, the available
/// replicas in 0..2^40 and the index below 2^16.
fn packed(s: &Scored) -> Option<u64> {
    let score = u8::try_from(s.score).ok()?;
    let available = u64::try_from(s.available).ok().filter(|a| *a < 1 << 40)?;
    let index = u16::try_from(s.index).ok()?;
    Some(
        (u64::from(u8::MAX - score) << 56)
            | (((1u64 << 40) - 1 - available) << 16)
            | u64::from(index),
    )
}

/// [`sort`]'s order: a total order, as no two clusters share an index.
pub fn order(a: &Scored, b: &Scored) -> std::cmp::Ordering {
    b.score
        .cmp(&a.score)
        .then(b.available.cmp(&a.available))
        .then(a.index.cmp(&b.index))
}

fn constraint<'a>(b: &'a Binding, field: &str) -> Option<&'a SpreadConstraint> {
    b.placement
        .spread_constraints
        .iter()
        .find(|c| c.spread_by_field == field)
}

/// Weighted with a static weight list (or no weight preference) ignores spread constraints.
fn ignores_spread(b: &Binding) -> bool {
    match &b.placement.replica_scheduling {
        Some(rs)
            if rs.replica_scheduling_type == "Divided"
                && rs.replica_division_preference == "Weighted" =>
        {
            match &rs.weight_preference {
                None => true,
                Some(w) => !w.static_weight_list.is_empty() && w.dynamic_weight.is_empty(),
            }
        }
        _ => false,
    }
}

/// Selects the clusters to assign replicas to; `Err` is Karmada's message. `clusters` must
/// be sorted with [`sort`]. `need` is the replicas the selection must hold.
pub fn select(
    b: &Binding,
    clusters: &[Scored],
    all: &[Cluster],
    need: i64,
) -> Result<Vec<Scored>, String> {
    if b.placement.spread_constraints.is_empty() || ignores_spread(b) {
        return Ok(clusters.to_vec());
    }
    let need = if b.strategy == Strategy::Duplicated {
        None
    } else {
        Some(need)
    };
    if let Some(region) = constraint(b, "region") {
        return by_region(b, region, constraint(b, "cluster"), clusters, all);
    }
    if let Some(cluster) = constraint(b, "cluster") {
        return by_cluster(cluster, clusters, need);
    }
    Err("just support cluster and region spread constraint".into())
}

fn by_cluster(
    sc: &SpreadConstraint,
    clusters: &[Scored],
    need: Option<i64>,
) -> Result<Vec<Scored>, String> {
    let total = clusters.len();
    if (total as i64) < sc.min_groups {
        return Err(
            "the number of feasible clusters is less than spreadConstraint.MinGroups".into(),
        );
    }
    let count = total.min(usize::try_from(sc.max_groups).unwrap_or(usize::MAX));
    let Some(need) = need else {
        return Ok(clusters[..count].to_vec());
    };
    let mut chosen = clusters[..count].to_vec();
    let mut rest = clusters[count..].to_vec();
    let holds = |list: &[Scored]| list.iter().map(|c| c.available).sum::<i64>() >= need;
    let mut update = count as i64 - 1;
    while !holds(&chosen) && update >= 0 {
        let u = update as usize;
        // The first of the remaining clusters with the most room above this one's.
        let mut best: Option<usize> = None;
        let mut most = chosen[u].available;
        for (i, c) in rest.iter().enumerate() {
            if c.available > most {
                most = c.available;
                best = Some(i);
            }
        }
        if let Some(i) = best {
            std::mem::swap(&mut chosen[u], &mut rest[i]);
        }
        update -= 1;
    }
    if !holds(&chosen) {
        return Err(format!(
            "no enough resource when selecting {count} clusters"
        ));
    }
    Ok(chosen)
}

struct Region {
    name: String,
    clusters: Vec<Scored>,
    score: i64,
}

const WEIGHT_UNIT: i64 = 1000;

fn group_score(b: &Binding, clusters: &[Scored], min_groups: i64) -> i64 {
    if b.strategy == Strategy::Duplicated {
        let valid: Vec<&Scored> = clusters
            .iter()
            .filter(|c| c.available >= b.replicas)
            .collect();
        if valid.is_empty() {
            return 0;
        }
        let n = valid.len() as i64;
        return n * WEIGHT_UNIT + valid.iter().map(|c| c.score).sum::<i64>() / n;
    }
    let min_groups = min_groups.max(1);
    let target = (b.replicas + min_groups - 1) / min_groups;
    let cluster_min = constraint(b, "cluster")
        .map(|c| c.min_groups)
        .unwrap_or(0)
        .max(min_groups);
    let (mut sum_available, mut sum_score, mut valid) = (0i64, 0i64, 0i64);
    for c in clusters {
        sum_available += c.available;
        sum_score += c.score;
        valid += 1;
        if valid >= cluster_min && sum_available >= target {
            break;
        }
    }
    if sum_available < target {
        return sum_available * WEIGHT_UNIT + sum_score / clusters.len().max(1) as i64;
    }
    target * WEIGHT_UNIT + sum_score / valid.max(1)
}

fn by_region(
    b: &Binding,
    region: &SpreadConstraint,
    cluster: Option<&SpreadConstraint>,
    clusters: &[Scored],
    all: &[Cluster],
) -> Result<Vec<Scored>, String> {
    let mut map: BTreeMap<&str, Vec<Scored>> = BTreeMap::new();
    for c in clusters {
        let r = all[c.index].region.as_str();
        if !r.is_empty() {
            map.entry(r).or_default().push(*c);
        }
    }
    let regions: Vec<Region> = map
        .into_iter()
        .map(|(name, clusters)| Region {
            name: name.to_string(),
            score: group_score(b, &clusters, region.min_groups),
            clusters,
        })
        .collect();
    if (regions.len() as i64) < region.min_groups {
        return Err("the number of feasible region is less than spreadConstraint.MinGroups".into());
    }
    let cluster_min = cluster.map(|c| c.min_groups).unwrap_or(0);
    let cluster_max = cluster.map(|c| c.max_groups).unwrap_or(0);
    let groups: Vec<Group> = regions
        .iter()
        .map(|r| Group {
            name: r.name.clone(),
            value: r.clusters.len() as i64,
            weight: r.score,
        })
        .collect();
    let chosen = select_groups(groups, region.min_groups, region.max_groups, cluster_min);
    if chosen.is_empty() {
        return Err(
            "the number of clusters is less than the cluster spreadConstraint.MinGroups".into(),
        );
    }
    let mut selected = Vec::new();
    let mut candidates = Vec::new();
    for g in &chosen {
        let r = regions
            .iter()
            .find(|r| r.name == g.name)
            .expect("a chosen region exists");
        selected.push(r.clusters[0]);
        candidates.extend(r.clusters[1..].iter().cloned());
    }
    let need = ((candidates.len() + selected.len()) as i64).min(cluster_max);
    let rest = need - selected.len() as i64;
    if rest > 0 {
        sort(&mut candidates);
        selected.extend(candidates.into_iter().take(rest as usize));
    }
    Ok(selected)
}

#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    pub value: i64,
    pub weight: i64,
}

struct Path {
    id: usize,
    groups: Vec<Group>,
    weight: i64,
    value: i64,
}

/// Karmada's `selectGroups`: every set of groups (found depth-first over groups ordered by
/// value ascending, weight descending, name) whose values reach `target` with between
/// `min` and `max` groups; the heaviest wins, then the most valuable, then the first found,
/// and a shorter path that is a prefix of the winner replaces it.
pub fn select_groups(mut groups: Vec<Group>, min: i64, max: i64, target: i64) -> Vec<Group> {
    if groups.is_empty() {
        return Vec::new();
    }
    groups.sort_by(|a, b| {
        a.value
            .cmp(&b.value)
            .then(b.weight.cmp(&a.weight))
            .then_with(|| a.name.cmp(&b.name))
    });
    let mut paths: Vec<Path> = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    let mut next_id = 0usize;
    #[allow(clippy::too_many_arguments)]
    fn dfs(
        groups: &[Group],
        stack: &mut Vec<usize>,
        paths: &mut Vec<Path>,
        next_id: &mut usize,
        sum: i64,
        begin: usize,
        min: i64,
        max: i64,
        target: i64,
    ) {
        let len = stack.len() as i64;
        if sum >= target && len >= min && len <= max {
            *next_id += 1;
            let mut chosen: Vec<Group> = stack.iter().map(|&i| groups[i].clone()).collect();
            let weight = chosen.iter().map(|g| g.weight).sum();
            let value = chosen.iter().map(|g| g.value).sum();
            chosen.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
            paths.push(Path {
                id: *next_id,
                groups: chosen,
                weight,
                value,
            });
            return;
        }
        if len >= max {
            return;
        }
        for i in begin..groups.len() {
            stack.push(i);
            dfs(
                groups,
                stack,
                paths,
                next_id,
                sum + groups[i].value,
                i + 1,
                min,
                max,
                target,
            );
            if groups.len() as i64 == min {
                break;
            }
            stack.pop();
        }
    }
    dfs(
        &groups,
        &mut stack,
        &mut paths,
        &mut next_id,
        0,
        0,
        min,
        max,
        target,
    );
    if paths.is_empty() {
        return Vec::new();
    }
    paths.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then(b.value.cmp(&a.value))
            .then(a.id.cmp(&b.id))
    });
    let mut best = 0;
    for i in 1..paths.len() {
        let (p, sub) = (&paths[best], &paths[i]);
        if sub.groups.len() < p.groups.len()
            && sub
                .groups
                .iter()
                .zip(&p.groups)
                .all(|(a, b)| a.name == b.name)
        {
            best = i;
        }
    }
    paths.swap_remove(best).groups
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The packed order is `order`, and lists with fields too large to pack still sort.
        #[test]
        fn sort_is_the_order(
            list in proptest::collection::vec(
                (0usize..3000, 0i64..3, proptest::prop_oneof![0i64..20, 0i64..(1 << 40)]),
                0..60,
            ),
            // One cluster whose fields do not pack, or none.
            wide in proptest::option::of((
                proptest::prop_oneof![0usize..3000, 65_536usize..70_000],
                -1i64..300,
                proptest::prop_oneof![-3i64..(1 << 41), proptest::strategy::Just(i64::MAX)],
            )),
        ) {
            let mut seen = std::collections::BTreeSet::new();
            let mut list: Vec<Scored> = list
                .into_iter()
                .map(|(index, score, available)| (index, score * 50, available))
                .chain(wide)
                .filter(|(index, _, _)| seen.insert(*index))
                .map(|(index, score, available)| Scored {
                    index,
                    score,
                    available,
                    allocatable: 0,
                })
                .collect();
            let mut expected = list.clone();
            expected.sort_by(order);
            sort(&mut list);
            let key = |l: &[Scored]| -> Vec<(usize, i64, i64)> {
                l.iter().map(|s| (s.index, s.score, s.available)).collect()
            };
            proptest::prop_assert_eq!(key(&list), key(&expected));
        }
    }

    fn g(name: &str, value: i64, weight: i64) -> Group {
        Group {
            name: name.into(),
            value,
            weight,
        }
    }

    #[test]
    fn groups_heaviest_set_that_reaches_the_target() {
        let groups = vec![g("r1", 1, 10), g("r2", 2, 30), g("r3", 1, 20)];
        // Two regions holding at least 2 clusters: {r2, r3} weighs 50, the most.
        let chosen = select_groups(groups, 2, 2, 2);
        let names: Vec<&str> = chosen.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["r2", "r3"]);
    }

    #[test]
    fn no_set_reaches_the_target() {
        let groups = vec![g("r1", 1, 10)];
        assert!(select_groups(groups, 1, 1, 3).is_empty());
    }

    fn s(index: usize, score: i64, available: i64) -> Scored {
        Scored {
            index,
            score,
            available,
            allocatable: available,
        }
    }

    #[test]
    fn by_cluster_swaps_in_clusters_with_more_room() {
        let sc = SpreadConstraint {
            spread_by_field: "cluster".into(),
            spread_by_label: String::new(),
            max_groups: 2,
            min_groups: 1,
        };
        let list = vec![s(0, 100, 2), s(1, 100, 1), s(2, 0, 10)];
        let chosen = by_cluster(&sc, &list, Some(11)).unwrap();
        let indices: Vec<usize> = chosen.iter().map(|c| c.index).collect();
        assert_eq!(indices, [0, 2]);
        assert_eq!(
            by_cluster(&sc, &list, Some(13)).unwrap_err(),
            "no enough resource when selecting 2 clusters"
        );
    }
}
