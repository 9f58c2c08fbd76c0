//! Binding preemption, after Karmada's binding preemption proposal: a binding with
//! `schedulePriority.preemptionPolicy: PreemptLowerPriority` that cannot be placed may evict
//! bindings of strictly lower priority from one cluster. On each cluster the preemptor's
//! placement allows, every candidate victim (lower priority, not suspended, not already
//! being evicted from there, holding replicas there) is removed; if the preemptor can then be
//! placed, victims are reprieved one by one — highest priority first, then the oldest, then
//! by key — each staying when the preemptor still fits with it back. Room is counted as the
//! estimators count it: from the resource summary (a victim frees its request × its replicas
//! there) and, for `--member` clusters, node by node with the engine (only the victim's real
//! pods free room, on the nodes they run on); on a cluster known through its scheduler
//! estimator (`--estimator`), the estimator chooses the victims (`SelectVictims`, see
//! `remote_victims`). The cluster chosen is the one with the fewest victims, then the
//! lowest highest victim priority, then the fewest evicted replicas, then the name. When no
//! single cluster's victims make room for a preemptor that may spread, victims are chosen
//! across clusters (`across_clusters`). Victims lose their whole assignment on the
//! cluster they leave and are scheduled again without it; the preemptor claims each cluster
//! it preempted on, so no binding of lower or equal priority takes new replicas there for the
//! rest of the run. Equal priorities never preempt each other, so two bindings cannot evict
//! each other back and forth. Nothing is evicted unless the preemptor is placed.

use crate::schedule::{Evicted, State};

/// A preemption decided: the victims, each with the cluster it leaves and the replicas it
/// loses there (one cluster, or several when no single cluster made room).
#[derive(Debug, Clone)]
pub(crate) struct Decided {
    pub victims: Vec<(usize, usize, i64)>,
    /// On a cluster whose estimator chose the victims: the cluster and the preemptor's
    /// replicas it made room for, which stands as the estimator's answer for the rest of the
    /// run.
    pub remote_room: Option<(usize, i64)>,
}

/// Victims, each with the cluster it leaves and the replicas it loses there, and where the
/// cluster's estimator chose them, the preemptor's replicas it made room for.
type Victims = (Vec<(usize, usize, i64)>, Option<i64>);

/// Puts back what [`State::evict`] took.
fn restore_all(state: &mut State, removed: Vec<(usize, usize, Evicted)>) {
    for (j, c, e) in removed {
        state.restore(j, c, e);
    }
}

/// Gives the evicted candidates back one by one in the order given, each staying evicted
/// only when the preemptor no longer places with it back; then puts the victims back too,
/// so the state is as it was. Returns the victims with the cluster each leaves and the
/// replicas it loses there.
fn reprieve(
    state: &mut State,
    i: usize,
    removed: Vec<(usize, usize, Evicted)>,
) -> Vec<(usize, usize, i64)> {
    let mut victims = Vec::new();
    for (j, c, e) in removed {
        let replicas = e.replicas;
        state.restore(j, c, e);
        if !state.fits(i) {
            victims.push((j, c, replicas, state.evict(j, c)));
        }
    }
    let out = victims.iter().map(|&(j, c, r, _)| (j, c, r)).collect();
    restore_all(
        state,
        victims.into_iter().map(|(j, c, _, e)| (j, c, e)).collect(),
    );
    out
}

/// The bindings that may be evicted from cluster `c` for binding `i`: strictly lower
/// priority, not suspended, not already being evicted from there, holding replicas there;
/// in reprieve order.
fn candidates_on(state: &State, i: usize, c: usize) -> Vec<usize> {
    let priority = state.fed.bindings[i].priority;
    let cluster_name = &state.fed.clusters[c].name;
    let mut candidates: Vec<usize> = state.usage[c]
        .held
        .iter()
        .filter(|(j, r)| **r > 0 && **j != i)
        .map(|(j, _)| *j)
        .filter(|&j| {
            let v = &state.fed.bindings[j];
            v.priority < priority && !v.suspended && !v.eviction_clusters.contains(cluster_name)
        })
        .collect();
    candidates.sort_by(|&a, &b| reprieve_order(state, a, b));
    candidates
}

/// The order victims are given back in: the most important first (priority descending,
/// then the oldest, then by key).
fn reprieve_order(state: &State, a: usize, b: usize) -> std::cmp::Ordering {
    let (x, y) = (&state.fed.bindings[a], &state.fed.bindings[b]);
    y.priority
        .cmp(&x.priority)
        .then(
            x.creation
                .unwrap_or(i64::MAX)
                .cmp(&y.creation.unwrap_or(i64::MAX)),
        )
        .then_with(|| x.key.cmp(&y.key))
}

/// The victims of one cluster, or `None` when evicting every candidate does not place the
/// preemptor. The state is left as it was.
fn victims_on(state: &mut State, i: usize, c: usize) -> Option<Victims> {
    if let Some(t) = &mut state.trial {
        t.changing = c;
    }
    let candidates = candidates_on(state, i, c);
    if candidates.is_empty() {
        return None;
    }
    if state.estimators.contains_key(&c)
        && !state.members.contains_key(&c)
        && state.fed.bindings[i].components.is_empty()
    {
        return remote_victims(state, i, c, &candidates);
    }
    let removed: Vec<(usize, usize, Evicted)> = candidates
        .iter()
        .map(|&j| (j, c, state.evict(j, c)))
        .collect();
    if !state.fits(i) {
        restore_all(state, removed);
        return None;
    }
    let victims = reprieve(state, i, removed);
    (!victims.is_empty()).then_some((victims, None))
}

/// Victims on a cluster known through its scheduler estimator (`--estimator`), chosen by
/// the estimator with `SelectVictims` on the member as it runs, node by node: the
/// candidates go in reprieve order, and the replicas asked for are those the preemptor
/// would place on the cluster with every candidate gone, counted there by the summary. A
/// candidate without a permanent id cannot be named to the member and is not evicted. No
/// answer, or no room even with every candidate gone, is no preemption here. The state is
/// left as it was.
fn remote_victims(state: &mut State, i: usize, c: usize, candidates: &[usize]) -> Option<Victims> {
    let named: Vec<(usize, String)> = candidates
        .iter()
        .filter_map(|&j| Some((j, state.fed.bindings[j].permanent_id.clone()?)))
        .collect();
    if named.is_empty() {
        return None;
    }
    let cluster = state.fed.clusters[c].name.clone();
    // Within this function the estimator's answer for the preemptor on this cluster is
    // replaced: first by none (the summary counts), then by the room the victims make.
    let saved = state.remote.get(&(i, c)).copied();
    state.remote.insert((i, c), None);
    let removed: Vec<(usize, usize, Evicted)> = named
        .iter()
        .map(|(j, _)| (*j, c, state.evict(*j, c)))
        .collect();
    let need: i64 = match state.try_schedule(i) {
        Ok(assignment) => assignment
            .iter()
            .filter(|(n, _)| *n == cluster)
            .map(|(_, r)| r)
            .sum(),
        Err(_) => 0,
    };
    restore_all(state, removed);
    let answer = if need > 0 {
        let ids: Vec<String> = named.iter().map(|(_, id)| id.clone()).collect();
        let estimator = state.estimators[&c].clone();
        estimator.select_victims(&cluster, &state.fed.bindings[i], need, &ids)
    } else {
        None
    };
    let mut out = None;
    if let Some((true, chosen)) = answer {
        let victims: Vec<usize> = named
            .iter()
            .filter(|(_, id)| chosen.contains(id))
            .map(|(j, _)| *j)
            .collect();
        if !victims.is_empty() {
            let evicted: Vec<(usize, usize, Evicted)> =
                victims.iter().map(|&j| (j, c, state.evict(j, c))).collect();
            state.remote.insert((i, c), Some(need));
            let fits = state.fits(i);
            let list: Vec<(usize, usize, i64)> = evicted
                .iter()
                .map(|(j, c, e)| (*j, *c, e.replicas))
                .collect();
            restore_all(state, evicted);
            if fits {
                out = Some((list, Some(need)));
            }
        }
    }
    match saved {
        Some(v) => state.remote.insert((i, c), v),
        None => state.remote.remove(&(i, c)),
    };
    out
}

/// Tries to make room for binding `i`; on success the victims are evicted, marked as being
/// evicted from the cluster, their placement there dropped, and the cluster claimed. The
/// caller schedules the preemptor and the victims again.
pub(crate) fn preempt(state: &mut State, i: usize) -> Option<Decided> {
    let b = &state.fed.bindings[i];
    if !b.preempts || b.suspended || !b.is_workload() {
        return None;
    }
    let terms = b.placement.cluster_affinities.len().max(1);
    let mut best: Option<(usize, i64, i64, String, Decided)> = None;
    state.trial = Some(crate::schedule::Trial::new(i, state.fed.clusters.len()));
    // ClusterAffinities are tried term by term: the first term with any way to make room.
    for term in 0..terms {
        let (feasible, _) = state.feasible(i, term);
        for c in feasible {
            let Some((victims, remote_room)) = victims_on(state, i, c) else {
                continue;
            };
            let highest = victims
                .iter()
                .map(|(j, _, _)| state.fed.bindings[*j].priority)
                .max()
                .unwrap_or(i64::MIN);
            let evicted: i64 = victims.iter().map(|(_, _, r)| r).sum();
            let name = state.fed.clusters[c].name.clone();
            let key = (victims.len(), highest, evicted, name);
            let better = match &best {
                None => true,
                Some((n, h, e, m, _)) => key < (*n, *h, *e, m.clone()),
            };
            if better {
                best = Some((
                    key.0,
                    key.1,
                    key.2,
                    key.3,
                    Decided {
                        victims,
                        remote_room: remote_room.map(|room| (c, room)),
                    },
                ));
            }
        }
        if best.is_some() {
            break;
        }
    }
    state.trial = None;
    let decided = match best {
        Some((_, _, _, _, decided)) => decided,
        None => across_clusters(state, i, terms)?,
    };
    let priority = state.fed.bindings[i].priority;
    for &(j, c, _) in &decided.victims {
        let cluster_name = state.fed.clusters[c].name.clone();
        let _ = state.evict(j, c);
        let v = &mut state.fed.bindings[j];
        v.clusters.retain(|(n, _)| n != &cluster_name);
        v.eviction_clusters.insert(cluster_name);
        v.needs_scheduling = true;
        state.claims.insert(c, (priority, i));
    }
    if let Some((c, room)) = decided.remote_room {
        state.remote.insert((i, c), Some(room));
    }
    Some(decided)
}

/// When no single cluster's victims make room: victims on several clusters, for a
/// preemptor whose placement spreads over more than one (an Aggregated or DynamicWeight
/// binding whose spread constraints allow several clusters). Every candidate of every
/// feasible cluster is removed; if the preemptor then places, clusters are given back whole,
/// the one whose most important candidate is the most important first (then the one with
/// more candidates, then by name), each staying untouched when the preemptor still places;
/// then the victims of the clusters left are reprieved one by one in reprieve order across
/// them. Greedy: the clusters touched are few, not always the fewest. Clusters known only
/// through an estimator take no part (their victims are the estimator's to choose). The
/// state is left as it was.
fn across_clusters(state: &mut State, i: usize, terms: usize) -> Option<Decided> {
    for term in 0..terms {
        let (feasible, _) = state.feasible(i, term);
        let mut touched: Vec<(usize, Vec<usize>)> = feasible
            .into_iter()
            .filter(|c| !state.estimators.contains_key(c) || state.members.contains_key(c))
            .map(|c| (c, candidates_on(state, i, c)))
            .filter(|(_, list)| !list.is_empty())
            .collect();
        if touched.len() < 2 {
            continue;
        }
        // The most costly cluster to touch first.
        touched.sort_by(|(a, x), (b, y)| {
            let top = |list: &[usize]| list.iter().map(|&j| state.fed.bindings[j].priority).max();
            top(y)
                .cmp(&top(x))
                .then(y.len().cmp(&x.len()))
                .then(a.cmp(b))
        });
        // Every candidate of every such cluster removed, cluster by cluster.
        let removed: Vec<Vec<(usize, usize, Evicted)>> = touched
            .iter()
            .map(|(c, list)| list.iter().map(|&j| (j, *c, state.evict(j, *c))).collect())
            .collect();
        if !state.fits(i) {
            removed.into_iter().for_each(|r| restore_all(state, r));
            continue;
        }
        // Clusters given back whole (in the order above) while the preemptor still places.
        let mut kept: Vec<(usize, usize, Evicted)> = Vec::new();
        for (cluster, (c, ids)) in removed.into_iter().zip(touched) {
            restore_all(state, cluster);
            if !state.fits(i) {
                kept.extend(ids.into_iter().map(|j| (j, c, state.evict(j, c))));
            }
        }
        // Then victims one by one across the clusters left.
        kept.sort_by(|(a, c, _), (b, d, _)| reprieve_order(state, *a, *b).then(c.cmp(d)));
        let victims = reprieve(state, i, kept);
        if !victims.is_empty() {
            return Some(Decided {
                victims,
                remote_room: None,
            });
        }
    }
    None
}
