//! The group cycle: one PodGroup or CompositePodGroup tree placed all or nothing. Pod by
//! pod in a few pod orders within each candidate topology domain, then, when none places
//! the gang, the whole-gang search (`gang_search`); composites place at least
//! `minGroupCount` ready children together inside their domain.

use lockstep_model::{GroupPolicy, NodeId, PodId};

use crate::config::GangPlacement;
use crate::gang_search::{Gang, Outcome};
use crate::group::{GroupIndex, Unit, candidate_orders, capacity_of, domains, free_of, min_demand};
use crate::scheduler::Scheduler;

/// The outcome of one group or composite attempt.
pub(crate) struct Attempt {
    pub(crate) ok: bool,
    pub(crate) message: String,
    /// Member pods that did not get a node, with why.
    pub(crate) failed: Vec<(PodId, String)>,
    /// Group statuses decided inside (for composites: every child group).
    pub(crate) statuses: Vec<(usize, bool, String)>,
}

impl Scheduler {
    pub(crate) fn try_unit(&mut self, index: &GroupIndex, unit: Unit) -> Attempt {
        match unit {
            Unit::Group(g) => self.try_group(index, g, None),
            Unit::Composite(c) => self.try_composite(index, c, None),
            Unit::Pod(_) => unreachable!("pods have their own cycle"),
        }
    }

    pub(crate) fn mark_subtree(
        &self,
        index: &GroupIndex,
        c: usize,
        msg: &str,
        status: &mut [Option<(bool, String)>],
    ) {
        for &g in &index.composites[c].groups {
            status[g] = Some((false, msg.to_string()));
        }
        for &k in &index.composites[c].composites {
            self.mark_subtree(index, k, msg, status);
        }
    }

    /// The candidate domains for a unit with an optional topology key: (label value, nodes)
    /// tightest first, restricted to the domain of already-bound members, dropping domains
    /// whose free capacity cannot hold `demand_pods`' first `needed` pods.
    fn candidate_domains(
        &self,
        nodes: Option<&[NodeId]>,
        key: Option<&str>,
        bound: &[PodId],
        demand_pods: &[PodId],
        needed: usize,
    ) -> Vec<(Option<String>, Vec<NodeId>)> {
        let snap = &self.snapshot;
        let all: Vec<NodeId>;
        let nodes = match nodes {
            Some(n) => n,
            None => {
                all = snap.nodes().to_vec();
                &all
            }
        };
        let Some(key) = key else {
            return vec![(None, nodes.to_vec())];
        };
        let mut doms = domains(snap, nodes, key);
        let mut bound_values: Vec<Option<&String>> = bound
            .iter()
            .filter_map(|p| snap.node_of(*p))
            .map(|n| snap.cluster.nodes[n.index()].labels.get(key))
            .collect();
        bound_values.sort();
        bound_values.dedup();
        match bound_values.as_slice() {
            [] => {}
            [Some(v)] => doms.retain(|k, _| *k == v.as_str()),
            _ => doms.clear(),
        }
        // The least any `needed` of the pods ask, per resource (pods as one slot each).
        let total_cap = capacity_of(snap, nodes);
        let demand = min_demand(snap, demand_pods, needed.max(1));
        let dominant = (0..snap.width)
            .filter(|&r| total_cap[r] > 0)
            .max_by(|&a, &b| {
                (demand[a] as f64 / total_cap[a] as f64)
                    .total_cmp(&(demand[b] as f64 / total_cap[b] as f64))
                    .then(b.cmp(&a))
            })
            .unwrap_or(lockstep_model::ResourceId::PODS.index());
        let mut ranked: Vec<(i64, &str, Vec<NodeId>)> = doms
            .into_iter()
            .filter_map(|(value, members)| {
                let free = free_of(snap, &members);
                if free.iter().zip(&demand).any(|(f, d)| d > f) {
                    return None;
                }
                Some((free[dominant] - demand[dominant], value, members))
            })
            .collect();
        ranked.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        ranked
            .into_iter()
            .map(|(_, v, m)| (Some(v.to_string()), m))
            .collect()
    }

    /// Places `pods` on `nodes` (None: the whole cluster) trying the candidate orders until
    /// at least `target` fit. On success the placements stay assumed and the pods that did
    /// not fit are returned; on failure nothing stays and the best count is returned.
    fn search(
        &mut self,
        pods: &[PodId],
        nodes: Option<&[NodeId]>,
        target: usize,
    ) -> Result<Vec<(PodId, String)>, (usize, String)> {
        let capacity = match nodes {
            Some(n) => capacity_of(&self.snapshot, n),
            None => {
                let all: Vec<NodeId> = self.snapshot.nodes().to_vec();
                capacity_of(&self.snapshot, &all)
            }
        };
        let orders = candidate_orders(&self.snapshot, pods, &capacity);
        self.scopes += 1;
        let scope = if nodes.is_some() { self.scopes } else { 0 };
        let mut best = (0usize, String::new());
        for order in orders {
            self.score_sum = 0;
            let mark = self.log.len();
            let ties_mark = self.search_ties.len();
            let mut failed: Vec<(PodId, String)> = Vec::new();
            for &pod in &order {
                match self
                    .framework
                    .schedule_pod_on(&self.snapshot, pod, nodes, scope)
                {
                    Ok(node) => {
                        self.score_sum += self.framework.last_score;
                        if self.options.record_ties {
                            self.search_ties.push((pod, self.framework.tied.clone()));
                        }
                        self.assume(pod, node);
                    }
                    Err(e) => {
                        failed.push((pod, e.message(&self.snapshot)));
                        if pods.len() - failed.len() < target {
                            break;
                        }
                    }
                }
            }
            let placed = self.log.len() - mark;
            if placed >= target && placed > 0 {
                return Ok(failed);
            }
            if placed >= best.0 && best.1.is_empty() || placed > best.0 {
                let first = failed
                    .first()
                    .map(|(p, m)| format!("{}: {}", self.pod_key(*p), m))
                    .unwrap_or_default();
                best = (placed, first);
            }
            self.rollback(mark);
            self.search_ties.truncate(ties_mark);
        }
        if self.options.profile.gang_placement == GangPlacement::Search {
            let gang = Gang {
                pods: pods.to_vec(),
                target,
            };
            match self.whole_gang(&[gang], nodes) {
                Outcome::Placed(unplaced) => return Ok(unplaced),
                Outcome::Infeasible => {}
                Outcome::Exhausted => {
                    self.search_proven = false;
                    best.1 = append_note(&best.1, &self.search_stopped_note());
                }
            }
        } else if !self.one_by_one_is_exact(pods) {
            self.search_proven = false;
        }
        Err(best)
    }

    /// What a gang's message says when the whole-gang search reached its bound.
    pub(crate) fn search_stopped_note(&self) -> String {
        format!(
            "the whole-gang search reached its bound (gangSearchSteps: {}) without finding a placement",
            self.options.profile.gang_search_steps
        )
    }

    /// One group cycle for PodGroup `g` within `nodes` (None: the whole cluster).
    pub(crate) fn try_group(
        &mut self,
        index: &GroupIndex,
        g: usize,
        nodes: Option<&[NodeId]>,
    ) -> Attempt {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let pg = &cluster.pod_groups[g];
        let info = &index.groups[g];
        let pods = info.pending.clone();
        let needed = index.needed(&self.snapshot, g);
        let target = needed.max(1);
        let domain_list = self.candidate_domains(
            nodes,
            pg.topology_key.as_deref(),
            &info.bound,
            &pods,
            needed,
        );
        let mut best: Option<(usize, Option<String>, String)> = None;
        for (value, members) in &domain_list {
            let restrict = if pg.topology_key.is_some() {
                Some(members.as_slice())
            } else {
                nodes
            };
            match self.search(&pods, restrict, target) {
                Ok(failed) => {
                    let placed = pods.len() - failed.len();
                    let where_ = match (&pg.topology_key, value) {
                        (Some(k), Some(v)) => format!(" in {k}={v}"),
                        _ => String::new(),
                    };
                    let message = format!("{placed} of {} pending pods bound{where_}", pods.len());
                    return Attempt {
                        ok: true,
                        failed,
                        statuses: vec![(g, true, message.clone())],
                        message,
                    };
                }
                Err((placed, first)) => {
                    if best.as_ref().is_none_or(|b| placed > b.0) {
                        best = Some((placed, value.clone(), first));
                    }
                }
            }
        }
        let what = match pg.policy {
            GroupPolicy::Gang { min } => format!(
                "gang {}: {} of minCount {} pods fit",
                info.key,
                best.as_ref().map_or(0, |b| b.0) + index.running(&self.snapshot, g),
                min
            ),
            GroupPolicy::Basic => format!("pod group {}: no pod fits", info.key),
        };
        let mut message = what;
        if let Some(key) = &pg.topology_key {
            match &best {
                Some((n, Some(v), _)) => message += &format!("; best domain {key}={v} fits {n}"),
                _ => {
                    message += &format!("; no domain of {key} has room for the group");
                }
            }
        }
        if let Some((_, _, first)) = &best
            && !first.is_empty()
        {
            message += &format!("; {first}");
        }
        Attempt {
            ok: false,
            failed: pods.iter().map(|p| (*p, message.clone())).collect(),
            statuses: vec![(g, false, message.clone())],
            message,
        }
    }

    /// One cycle for a CompositePodGroup tree: at least `minGroupCount` ready children must
    /// fit together, each meeting its own gang condition, inside the composite's domain.
    pub(crate) fn try_composite(
        &mut self,
        index: &GroupIndex,
        c: usize,
        nodes: Option<&[NodeId]>,
    ) -> Attempt {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let cpg = &cluster.composite_pod_groups[c];
        let need = cpg.policy.min_members();
        let mut pending = Vec::new();
        index.composite_pending(c, &mut pending);
        let mut bound = Vec::new();
        index.composite_bound(c, &mut bound);
        let children = self.composite_children(index, c);
        // Aggregate precheck on the pods of the `need` smallest children is approximated by
        // all pending pods of the smallest children; domains are only a filter here.
        let domain_list =
            self.candidate_domains(nodes, cpg.topology_key.as_deref(), &bound, &pending, 1);
        let mut best: Option<(usize, Option<String>, Vec<String>)> = None;
        for (value, members) in &domain_list {
            let restrict = if cpg.topology_key.is_some() {
                Some(members.as_slice())
            } else {
                nodes
            };
            let where_ = match (&cpg.topology_key, value) {
                (Some(k), Some(v)) => format!(" in {k}={v}"),
                _ => String::new(),
            };
            let (ok_children, notes) =
                match self.composite_in_domain(index, c, &children, need, restrict, &where_) {
                    Ok(attempt) => return attempt,
                    Err(tried) => tried,
                };
            if best.as_ref().is_none_or(|b| ok_children > b.0) {
                best = Some((ok_children, value.clone(), notes));
            }
        }
        self.composite_failed(index, c, need, best, &pending)
    }

    /// The children of composite `c` that can enter: ready groups and ready composites,
    /// largest first (then by name), with their pending pod counts and names.
    fn composite_children(&self, index: &GroupIndex, c: usize) -> Vec<(Unit, usize, String)> {
        let cluster = &self.snapshot.cluster;
        let info = &index.composites[c];
        let mut children: Vec<(Unit, usize, String)> = Vec::new();
        for &g in &info.groups {
            if index.group_ready(cluster, g) {
                let n: usize = index.groups[g].pending.len();
                children.push((Unit::Group(g), n, index.groups[g].key.clone()));
            }
        }
        for &k in &info.composites {
            let (r, nk) = index.composite_ready(cluster, k);
            if r >= nk.max(1) {
                let mut p = Vec::new();
                index.composite_pending(k, &mut p);
                children.push((Unit::Composite(k), p.len(), index.composites[k].key.clone()));
            }
        }
        children.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.2.cmp(&b.2)));
        children
    }

    /// Composite `c`'s children in one domain (`restrict`; `where_` names it for messages):
    /// one after another, then, when every ready child is needed, all at once by the
    /// whole-gang search. The attempt when enough children bound (left assumed); else, rolled
    /// back, how many children fit and the notes on why the others did not.
    fn composite_in_domain(
        &mut self,
        index: &GroupIndex,
        c: usize,
        children: &[(Unit, usize, String)],
        need: usize,
        restrict: Option<&[NodeId]>,
        where_: &str,
    ) -> Result<Attempt, (usize, Vec<String>)> {
        let mark = self.log.len();
        let mut ok_children = 0;
        let mut statuses = Vec::new();
        let mut failed = Vec::new();
        let mut notes = Vec::new();
        for (unit, _, _) in children {
            let a = match *unit {
                Unit::Group(g) => self.try_group(index, g, restrict),
                Unit::Composite(k) => self.try_composite(index, k, restrict),
                Unit::Pod(_) => unreachable!("children are groups"),
            };
            if a.ok {
                ok_children += 1;
            } else {
                notes.push(a.message.clone());
            }
            statuses.extend(a.statuses);
            failed.extend(a.failed);
        }
        if ok_children >= need && ok_children > 0 {
            return Ok(Attempt {
                ok: true,
                message: format!(
                    "composite {}: {ok_children}/{} child groups bound{where_}",
                    index.composites[c].key,
                    children.len()
                ),
                failed,
                statuses,
            });
        }
        self.rollback(mark);
        if self.options.profile.gang_placement == GangPlacement::Search
            && need == children.len()
            && ok_children < need
        {
            match self.composite_search(index, c, children, restrict, where_) {
                Ok(Some(attempt)) => return Ok(attempt),
                Ok(None) => {}
                Err(note) => notes.insert(0, note),
            }
        }
        Err((ok_children, notes))
    }

    /// The whole-gang search for all of composite `c`'s children at once, when each is a
    /// PodGroup whose own topology constraint (if any) names the composite's key: the
    /// attempt when it places them, `None` when it does not apply or proves no placement,
    /// the note saying so when it stopped at its bound.
    fn composite_search(
        &mut self,
        index: &GroupIndex,
        c: usize,
        children: &[(Unit, usize, String)],
        restrict: Option<&[NodeId]>,
        where_: &str,
    ) -> Result<Option<Attempt>, String> {
        let cluster = std::sync::Arc::clone(&self.snapshot.cluster);
        let cpg = &cluster.composite_pod_groups[c];
        let gangs: Option<Vec<(usize, Gang)>> = children
            .iter()
            .map(|(unit, _, _)| match *unit {
                // A child's own topology constraint is met by the composite's domain only
                // when it names the same key.
                Unit::Group(g)
                    if cluster.pod_groups[g]
                        .topology_key
                        .as_ref()
                        .is_none_or(|k| Some(k) == cpg.topology_key.as_ref()) =>
                {
                    Some((
                        g,
                        Gang {
                            pods: index.groups[g].pending.clone(),
                            target: index.needed(&self.snapshot, g).max(1),
                        },
                    ))
                }
                _ => None,
            })
            .collect();
        let Some(gangs) = gangs else {
            return Ok(None);
        };
        let list: Vec<Gang> = gangs.iter().map(|(_, g)| g.clone()).collect();
        let unplaced = match self.whole_gang(&list, restrict) {
            Outcome::Placed(unplaced) => unplaced,
            Outcome::Infeasible => return Ok(None),
            Outcome::Exhausted => return Err(self.search_stopped_note()),
        };
        let statuses = gangs
            .iter()
            .map(|(g, gang)| {
                let placed = gang
                    .pods
                    .iter()
                    .filter(|p| self.snapshot.node_of(**p).is_some())
                    .count();
                // As the child's own cycle reports it: its domain only when it has a
                // topology constraint of its own.
                let own = if cluster.pod_groups[*g].topology_key.is_some() {
                    where_
                } else {
                    ""
                };
                let message = format!("{placed} of {} pending pods bound{own}", gang.pods.len());
                (*g, true, message)
            })
            .collect();
        Ok(Some(Attempt {
            ok: true,
            message: format!(
                "composite {}: {}/{} child groups bound{where_}",
                index.composites[c].key,
                children.len(),
                children.len()
            ),
            failed: unplaced,
            statuses,
        }))
    }

    /// The failed attempt of composite `c`: how many children fit at best (and in which
    /// domain), the first note on why, for every pending pod and every group under it.
    fn composite_failed(
        &self,
        index: &GroupIndex,
        c: usize,
        need: usize,
        best: Option<(usize, Option<String>, Vec<String>)>,
        pending: &[PodId],
    ) -> Attempt {
        let cpg = &self.snapshot.cluster.composite_pod_groups[c];
        let mut message = format!(
            "composite {}: {} of minGroupCount {} child groups fit",
            index.composites[c].key,
            best.as_ref().map_or(0, |b| b.0),
            need
        );
        if let Some(key) = &cpg.topology_key {
            match &best {
                Some((n, Some(v), _)) => message += &format!("; best domain {key}={v} fits {n}"),
                _ => message += &format!("; no domain of {key} has room for the group"),
            }
        }
        if let Some((_, _, notes)) = &best
            && let Some(first) = notes.first()
        {
            message += &format!("; {first}");
        }
        let mut groups = Vec::new();
        collect_groups(index, c, &mut groups);
        let statuses = groups
            .into_iter()
            .map(|g| (g, false, message.clone()))
            .collect();
        Attempt {
            ok: false,
            failed: pending.iter().map(|p| (*p, message.clone())).collect(),
            statuses,
            message,
        }
    }
}

/// `text`, then `note` as a sentence of its own when `text` ends one, else after "; ".
fn append_note(text: &str, note: &str) -> String {
    if text.is_empty() {
        return note.to_string();
    }
    match text.strip_suffix('.') {
        Some(_) => {
            let mut chars = note.chars();
            let first: String = chars
                .next()
                .map(|c| c.to_uppercase().collect())
                .unwrap_or_default();
            format!("{text} {first}{}.", chars.as_str())
        }
        None => format!("{text}; {note}"),
    }
}

fn collect_groups(index: &GroupIndex, c: usize, out: &mut Vec<usize>) {
    out.extend(&index.composites[c].groups);
    for &k in &index.composites[c].composites {
        collect_groups(index, k, out);
    }
}
