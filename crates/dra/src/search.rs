//! The structured allocator: a bounded backtracking search over the candidate devices of one
//! node, with the semantics of Kubernetes' structured allocator.
//!
//! Claims are allocated in the order given, requests in claim order, and for each request the
//! devices in catalog order; a `firstAvailable` request tries its subrequests in order. Within
//! one request only combinations are tried (never permutations). The first complete solution
//! wins. Every placement attempt counts as a step; past the step bound the search stops.

use std::sync::Arc;

use lockstep_model::NodeId;
use lockstep_model::dra::{ALLOCATION_RESULTS_MAX_SIZE, AllocationMode};
use lockstep_model::node::tolerated;

use crate::catalog::{AttrValue, CapacitySlot, Catalog, DeviceEntry, DeviceId};
use crate::claims::{AltC, ConstraintC, Match, SpecC};
use crate::error::{Unfit, UnfitReason};
use crate::state::{
    AllocatedDevice, ClaimAllocation, ClaimRef, DraState, NodeAllocation, RequestRef,
};

const NO_CONSUMED: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Cand {
    dev: DeviceId,
    /// Offset of the consumed amounts (one per capacity slot) in the alt's buffer, for devices
    /// that allow multiple allocations.
    consumed: u32,
}

struct AltW<'s> {
    alt: &'s AltC,
    sub: Option<u16>,
    cands: Vec<Cand>,
    consumed: Vec<i64>,
    need: usize,
    all: bool,
}

struct ReqW<'s> {
    claim: usize,
    request: u16,
    alts: Vec<AltW<'s>>,
    /// Fewest devices the later requests of the same claim need.
    rest_min: usize,
}

enum CState {
    Match {
        attr: Option<u32>,
        first: Option<AttrValue>,
        count: u32,
    },
    Distinct {
        attr: Option<u32>,
        values: Vec<AttrValue>,
    },
}

struct Taken {
    dev: DeviceId,
    claim: usize,
    req: usize,
    alt: usize,
    cand: usize,
    counters: (u32, u32),
}

struct StepBound;

struct Search<'s> {
    cat: &'s Catalog,
    state: &'s DraState,
    reqs: Vec<ReqW<'s>>,
    constraints: Vec<Vec<CState>>,
    claim_counts: Vec<usize>,
    taken: Vec<Taken>,
    counter_log: Vec<(u32, i64)>,
    counter_delta: Vec<(u32, i64)>,
    steps: u64,
    max_steps: u64,
}

/// How much of each capacity slot an allocation of `dev` for `alt` consumes, or `None` when
/// the device cannot satisfy the request's capacity requests or violates a request policy.
fn consumed_capacity(e: &DeviceEntry, alt: &AltC, out: &mut Vec<i64>) -> bool {
    // Every requested capacity must exist on the device.
    for &(name, _) in &alt.capacity {
        let Some(name) = name else { return false };
        if !e
            .capacity
            .iter()
            .any(|c| c.fq == name || c.short == Some(name))
        {
            return false;
        }
    }
    for slot in &e.capacity {
        let requested = alt
            .capacity
            .iter()
            .find(|(n, _)| *n == Some(slot.fq) || (slot.short.is_some() && *n == slot.short))
            .map(|&(_, v)| v);
        let amount = consumed_amount(requested, slot);
        if violates_policy(amount, slot) || amount > slot.value {
            return false;
        }
        out.push(amount);
    }
    true
}

/// The amount a request consumes of a capacity: the request rounded up by the request policy,
/// or the policy default (else the whole capacity) when the request names no amount.
fn consumed_amount(requested: Option<i64>, slot: &CapacitySlot) -> i64 {
    let policy = slot.policy.as_ref();
    let Some(r) = requested else {
        return policy.and_then(|p| p.default).unwrap_or(slot.value);
    };
    let Some(p) = policy else { return r };
    if let Some(range) = &p.valid_range {
        if r < range.min {
            return range.min;
        }
        return match range.step {
            Some(step) if step > 0 => {
                let added = r - range.min;
                let n = added / step + i64::from(added % step != 0);
                range.min.saturating_add(step.saturating_mul(n))
            }
            _ => r,
        };
    }
    if !p.valid_values.is_empty() {
        return p
            .valid_values
            .iter()
            .copied()
            .find(|&v| r <= v)
            .unwrap_or(r);
    }
    r
}

fn violates_policy(amount: i64, slot: &CapacitySlot) -> bool {
    let Some(p) = &slot.policy else { return false };
    if p.default == Some(amount) {
        return false;
    }
    if let Some(range) = &p.valid_range {
        if range.max.is_some_and(|m| amount > m) {
            return true;
        }
        if let Some(step) = range.step.filter(|&s| s > 0) {
            return (amount - range.min) % step != 0;
        }
        return false;
    }
    if !p.valid_values.is_empty() {
        return !p.valid_values.contains(&amount);
    }
    false
}

fn same_for_distinct(cat: &Catalog, a: AttrValue, b: AttrValue) -> bool {
    match (a, b) {
        (AttrValue::Version(x), AttrValue::Version(y)) => {
            cat.versions[x as usize].precedence(&cat.versions[y as usize])
                == std::cmp::Ordering::Equal
        }
        _ => a == b,
    }
}

pub(crate) fn allocate(
    state: &DraState,
    node: NodeId,
    claims: &[ClaimRef],
) -> Result<NodeAllocation, Unfit> {
    let shared = state.shared();
    let cat = &shared.catalog;
    let usage = state.usage();

    // Claims in order, each once; already allocated ones are only checked.
    let mut out: Vec<Option<ClaimAllocation>> = Vec::with_capacity(claims.len());
    let mut order: Vec<ClaimRef> = Vec::with_capacity(claims.len());
    let mut pending: Vec<(usize, ClaimRef, &SpecC)> = Vec::new();
    for &c in claims {
        // A shared claim listed twice is one claim; each template reference is a claim of its own.
        if matches!(c, ClaimRef::Claim(_)) && order.contains(&c) {
            continue;
        }
        order.push(c);
        let slot = out.len();
        out.push(None);
        match c {
            ClaimRef::Claim(id) => {
                let Some(spec) = shared.claims.get(id.index()) else {
                    return Err(Unfit::with_detail(
                        UnfitReason::ClaimNotFound,
                        format!("claim id {}", id.0),
                    ));
                };
                if let Some(a) = &usage.claims[id.index()].allocation {
                    if !a.nodes.contains(node) {
                        return Err(Unfit::with_detail(
                            UnfitReason::ClaimNotAvailableOnNode,
                            format!("{} is allocated for other nodes", spec.spec.object),
                        ));
                    }
                    out[slot] = Some(ClaimAllocation {
                        claim: c,
                        devices: a.devices.clone(),
                        already_allocated: true,
                    });
                    continue;
                }
                pending.push((slot, c, &spec.spec));
            }
            ClaimRef::Template(id) => {
                let Some(spec) = shared.templates.get(id.index()) else {
                    return Err(Unfit::with_detail(
                        UnfitReason::ClaimNotFound,
                        format!("template id {}", id.0),
                    ));
                };
                pending.push((slot, c, &spec.spec));
            }
        }
    }
    if pending.is_empty() {
        return Ok(NodeAllocation {
            node,
            claims: out.into_iter().flatten().collect(),
        });
    }

    let node_devices: &[DeviceId] = cat
        .node_devices
        .get(node.index())
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let unusable_pools: &[u32] = cat
        .node_unusable_pools
        .get(node.index())
        .map(Vec::as_slice)
        .unwrap_or(&[]);

    let mut cel_error: Option<(u32, DeviceId)> = None;
    let mut reqs: Vec<ReqW> = Vec::new();
    let mut constraints = Vec::with_capacity(pending.len());
    for (ci, &(_, _, spec)) in pending.iter().enumerate() {
        constraints.push(
            spec.constraints
                .iter()
                .map(|c| match *c {
                    ConstraintC::Match(attr) => CState::Match {
                        attr,
                        first: None,
                        count: 0,
                    },
                    ConstraintC::Distinct(attr) => CState::Distinct {
                        attr,
                        values: Vec::new(),
                    },
                })
                .collect(),
        );
        let first_req = reqs.len();
        for (ri, r) in spec.requests.iter().enumerate() {
            let mut alts = Vec::with_capacity(r.alts.len());
            for (si, alt) in r.alts.iter().enumerate() {
                if let Err(class) = &alt.class {
                    return Err(Unfit::with_detail(
                        UnfitReason::DeviceClassNotFound,
                        format!(
                            "{}, request {}: device class {class} does not exist",
                            spec.object, r.name
                        ),
                    ));
                }
                let all = alt.mode == AllocationMode::All;
                if all && let Some(&p) = unusable_pools.first() {
                    let why = cat.pools[p as usize].unusable.clone().unwrap_or_default();
                    return Err(Unfit::with_detail(
                        UnfitReason::CannotAllocateAllClaims,
                        format!(
                            "{}, request {}: asks for all devices, but {why}",
                            spec.object, r.name
                        ),
                    ));
                }
                let mut w = AltW {
                    alt,
                    sub: r.first_available.then_some(si as u16),
                    cands: Vec::new(),
                    consumed: Vec::new(),
                    need: 0,
                    all,
                };
                for &dev in node_devices {
                    let e = cat.device(dev);
                    let mut selected = true;
                    for &s in &alt.selectors {
                        match shared.selectors.matches(s, dev, cat) {
                            Match::Yes => {}
                            Match::No => {
                                selected = false;
                                break;
                            }
                            Match::Error => {
                                cel_error.get_or_insert((s, dev));
                                selected = false;
                                break;
                            }
                        }
                    }
                    if !selected || e.taints.iter().any(|t| !tolerated(&alt.tolerations, t)) {
                        continue;
                    }
                    let start = w.consumed.len();
                    if e.capacity.is_empty() && alt.capacity.is_empty() {
                        w.cands.push(Cand {
                            dev,
                            consumed: NO_CONSUMED,
                        });
                        continue;
                    }
                    if !consumed_capacity(e, alt, &mut w.consumed) {
                        w.consumed.truncate(start);
                        continue;
                    }
                    if !e.multi {
                        w.consumed.truncate(start);
                        w.cands.push(Cand {
                            dev,
                            consumed: NO_CONSUMED,
                        });
                        continue;
                    }
                    if all {
                        // "All" takes the devices that still have room for the request.
                        let used = &usage.capacity_used[e.cap_offset as usize..];
                        if (0..e.capacity.len())
                            .any(|k| used[k] + w.consumed[start + k] > e.capacity[k].value)
                        {
                            w.consumed.truncate(start);
                            continue;
                        }
                    }
                    w.cands.push(Cand {
                        dev,
                        consumed: start as u32,
                    });
                }
                w.need = match alt.mode {
                    AllocationMode::All => w.cands.len(),
                    AllocationMode::ExactCount(n) => n as usize,
                };
                alts.push(w);
            }
            reqs.push(ReqW {
                claim: ci,
                request: ri as u16,
                alts,
                rest_min: 0,
            });
        }
        // Lower bound on the devices the rest of the claim needs, and the claim limit.
        let mut rest = 0usize;
        for r in reqs[first_req..].iter_mut().rev() {
            r.rest_min = rest;
            rest += r.alts.iter().map(|a| a.need).min().unwrap_or(0);
        }
        if rest > ALLOCATION_RESULTS_MAX_SIZE {
            return Err(Unfit::with_detail(
                UnfitReason::CannotAllocateAllClaims,
                format!(
                    "{}: number of requested devices {rest} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}",
                    spec.object
                ),
            ));
        }
    }

    let mut search = Search {
        cat,
        state,
        reqs,
        constraints,
        claim_counts: vec![0; pending.len()],
        taken: Vec::new(),
        counter_log: Vec::new(),
        counter_delta: Vec::new(),
        steps: 0,
        max_steps: state.limits().max_search_steps,
    };
    match search.request(0) {
        Ok(true) => {}
        Ok(false) => {
            // Say why some devices were not considered: a CEL error, or an unusable pool.
            let detail = match cel_error {
                Some((s, d)) => Some(shared.selectors.error_message(s, d, cat)),
                None => unusable_pools
                    .first()
                    .and_then(|&p| cat.pools[p as usize].unusable.clone()),
            };
            return Err(Unfit {
                reason: UnfitReason::CannotAllocateAllClaims,
                detail,
            });
        }
        Err(StepBound) => {
            return Err(Unfit::with_detail(
                UnfitReason::SearchBoundExceeded,
                format!(
                    "gave up after {} steps on node {}; simplify the claims or raise the bound",
                    search.max_steps,
                    cat.node_names.get(node.index()).map_or("?", String::as_str)
                ),
            ));
        }
    }

    // Results per claim, in allocation order.
    let mut per_claim: Vec<Vec<AllocatedDevice>> = vec![Vec::new(); pending.len()];
    for t in &search.taken {
        let r = &search.reqs[t.req];
        let a = &r.alts[t.alt];
        let c = a.cands[t.cand];
        let consumed: Box<[i64]> = if c.consumed == NO_CONSUMED {
            Box::new([])
        } else {
            let n = cat.device(c.dev).capacity.len();
            a.consumed[c.consumed as usize..c.consumed as usize + n].into()
        };
        per_claim[t.claim].push(AllocatedDevice {
            request: RequestRef {
                request: r.request,
                subrequest: a.sub,
            },
            device: t.dev,
            admin_access: a.alt.admin,
            consumed_capacity: consumed,
        });
    }
    for ((slot, claim, _), devices) in pending.iter().zip(per_claim) {
        out[*slot] = Some(ClaimAllocation {
            claim: *claim,
            devices: Arc::from(devices),
            already_allocated: false,
        });
    }
    Ok(NodeAllocation {
        node,
        claims: out.into_iter().flatten().collect(),
    })
}

impl Search<'_> {
    fn request(&mut self, r: usize) -> Result<bool, StepBound> {
        if r == self.reqs.len() {
            return Ok(true);
        }
        let ci = self.reqs[r].claim;
        for a in 0..self.reqs[r].alts.len() {
            let w = &self.reqs[r].alts[a];
            if w.all && w.cands.is_empty() {
                continue; // "All" needs at least one device.
            }
            if w.cands.len() < w.need {
                continue;
            }
            if self.claim_counts[ci] + w.need + self.reqs[r].rest_min > ALLOCATION_RESULTS_MAX_SIZE
            {
                continue;
            }
            if self.devices(r, a, 0, 0)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn devices(&mut self, r: usize, a: usize, k: usize, start: usize) -> Result<bool, StepBound> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(StepBound);
        }
        let (need, all, n) = {
            let w = &self.reqs[r].alts[a];
            (w.need, w.all, w.cands.len())
        };
        if k == need {
            return self.request(r + 1);
        }
        if all {
            // Every selected device, in order; any failure means no solution.
            if !self.take(r, a, k) {
                return Ok(false);
            }
            if self.devices(r, a, k + 1, 0)? {
                return Ok(true);
            }
            self.untake();
            return Ok(false);
        }
        let mut c = start;
        while c + (need - k) <= n {
            if self.take(r, a, c) {
                if self.devices(r, a, k + 1, c + 1)? {
                    return Ok(true);
                }
                self.untake();
            }
            c += 1;
        }
        Ok(false)
    }

    fn in_search_capacity(&self, dev: DeviceId, slot: usize) -> i64 {
        self.taken
            .iter()
            .filter(|t| t.dev == dev)
            .map(|t| {
                let w = &self.reqs[t.req].alts[t.alt];
                let c = w.cands[t.cand].consumed;
                if c == NO_CONSUMED {
                    0
                } else {
                    w.consumed[c as usize + slot]
                }
            })
            .sum()
    }

    fn delta(&self, id: u32) -> i64 {
        self.counter_delta
            .iter()
            .find(|d| d.0 == id)
            .map_or(0, |d| d.1)
    }

    fn add_delta(&mut self, id: u32, amount: i64) {
        match self.counter_delta.iter_mut().find(|d| d.0 == id) {
            Some(d) => d.1 += amount,
            None => self.counter_delta.push((id, amount)),
        }
    }

    fn take(&mut self, r: usize, a: usize, c: usize) -> bool {
        let cat = self.cat;
        let usage = self.state.usage();
        let w = &self.reqs[r].alts[a];
        let alt = w.alt;
        let cand = w.cands[c];
        let dev = cand.dev;
        let e = cat.device(dev);
        let ci = self.reqs[r].claim;

        // In use?
        if !e.multi {
            let busy = if alt.admin {
                self.taken.iter().any(|t| t.dev == dev && t.claim == ci)
            } else {
                usage.exclusive[dev.index()] > 0 || self.taken.iter().any(|t| t.dev == dev)
            };
            if busy {
                return false;
            }
        }

        // Capacity of a shared device.
        if e.multi && cand.consumed != NO_CONSUMED {
            let base = e.cap_offset as usize;
            for (k, slot) in e.capacity.iter().enumerate() {
                let used = usage.capacity_used[base + k]
                    + self.in_search_capacity(dev, k)
                    + w.consumed[cand.consumed as usize + k];
                if used > slot.value {
                    return false;
                }
            }
        }

        // Counters (a shared device consumes them once).
        let log_start = self.counter_log.len() as u32;
        let already =
            e.multi && (usage.shares[dev.index()] > 0 || self.taken.iter().any(|t| t.dev == dev));
        if !already && !e.consumes.is_empty() {
            for &(id, amount) in &e.consumes {
                self.add_delta(id, amount);
                self.counter_log.push((id, amount));
            }
            let over = e.consumes.iter().any(|&(id, _)| {
                usage.counters_used[id as usize] + self.delta(id) > cat.counter_totals[id as usize]
            });
            if over {
                self.revert_counters(log_start);
                return false;
            }
        }

        // Constraints.
        let mask = alt.constraint_mask;
        let mut applied = 0u64;
        let mut ok = true;
        let mut bits = mask;
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let fits = match &mut self.constraints[ci][j] {
                CState::Match { attr, first, count } => match attr.and_then(|at| e.attribute(at)) {
                    None => false,
                    Some(v) => {
                        if *count == 0 {
                            *first = Some(v);
                            *count = 1;
                            true
                        } else if *first == Some(v) {
                            *count += 1;
                            true
                        } else {
                            false
                        }
                    }
                },
                CState::Distinct { attr, values } => match attr.and_then(|at| e.attribute(at)) {
                    None => false,
                    Some(v) => {
                        if values.iter().any(|&x| same_for_distinct(cat, x, v)) {
                            false
                        } else {
                            values.push(v);
                            true
                        }
                    }
                },
            };
            if !fits {
                ok = false;
                break;
            }
            applied |= 1 << j;
        }
        if !ok {
            self.revert_constraints(ci, applied);
            self.revert_counters(log_start);
            return false;
        }

        self.taken.push(Taken {
            dev,
            claim: ci,
            req: r,
            alt: a,
            cand: c,
            counters: (log_start, self.counter_log.len() as u32),
        });
        self.claim_counts[ci] += 1;
        true
    }

    fn revert_counters(&mut self, from: u32) {
        while self.counter_log.len() > from as usize {
            let (id, amount) = self.counter_log.pop().expect("log entry");
            self.add_delta(id, -amount);
        }
    }

    fn revert_constraints(&mut self, ci: usize, mut bits: u64) {
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            match &mut self.constraints[ci][j] {
                CState::Match { count, .. } => *count -= 1,
                CState::Distinct { values, .. } => {
                    values.pop();
                }
            }
        }
    }

    fn untake(&mut self) {
        let t = self.taken.pop().expect("a device to give back");
        let mask = self.reqs[t.req].alts[t.alt].alt.constraint_mask;
        self.revert_constraints(t.claim, mask);
        self.revert_counters(t.counters.0);
        self.claim_counts[t.claim] -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_model::dra::{CapacityRange, CapacityRequestPolicy};

    fn slot(value: i64, policy: Option<CapacityRequestPolicy>) -> CapacitySlot {
        CapacitySlot {
            fq: 0,
            short: None,
            published: 0,
            value,
            policy,
        }
    }

    fn range(
        min: i64,
        max: Option<i64>,
        step: Option<i64>,
        default: Option<i64>,
    ) -> CapacityRequestPolicy {
        CapacityRequestPolicy {
            default,
            valid_values: vec![],
            valid_range: Some(CapacityRange { min, max, step }),
        }
    }

    #[test]
    fn no_policy_consumes_the_request_or_everything() {
        let s = slot(100, None);
        assert_eq!(consumed_amount(Some(30), &s), 30);
        assert_eq!(consumed_amount(None, &s), 100);
        assert!(!violates_policy(30, &s));
    }

    #[test]
    fn ranges_round_up_to_min_and_steps() {
        let s = slot(100, Some(range(10, Some(60), Some(10), Some(20))));
        assert_eq!(consumed_amount(Some(3), &s), 10);
        assert_eq!(consumed_amount(Some(10), &s), 10);
        assert_eq!(consumed_amount(Some(11), &s), 20);
        assert_eq!(consumed_amount(Some(60), &s), 60);
        assert_eq!(consumed_amount(None, &s), 20);
        assert!(violates_policy(70, &s), "above max");
        assert!(!violates_policy(20, &s));
        let offset = slot(100, Some(range(5, None, Some(10), None)));
        assert_eq!(consumed_amount(Some(6), &offset), 15);
        assert!(violates_policy(10, &offset), "not min + k*step");
        assert!(!violates_policy(
            100,
            &slot(100, Some(range(5, None, None, None)))
        ));
    }

    #[test]
    fn valid_values_round_up_to_the_next_value() {
        let p = CapacityRequestPolicy {
            default: None,
            valid_values: vec![8, 16, 32],
            valid_range: None,
        };
        let s = slot(32, Some(p));
        assert_eq!(consumed_amount(Some(1), &s), 8);
        assert_eq!(consumed_amount(Some(9), &s), 16);
        assert_eq!(consumed_amount(Some(33), &s), 33);
        assert!(violates_policy(33, &s));
        assert!(!violates_policy(16, &s));
        // No amount and no default: the whole capacity, which is a valid value here.
        assert_eq!(consumed_amount(None, &s), 32);
        assert!(!violates_policy(32, &s));
    }
}
