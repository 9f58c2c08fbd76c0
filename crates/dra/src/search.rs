//! The structured allocator: a bounded backtracking search over the candidate devices of one
//! node, with the semantics of Kubernetes' structured allocator.
//!
//! Claims are allocated in the order given, requests in claim order, and for each request the
//! devices in catalog order; a `firstAvailable` request tries its subrequests in order. Within
//! one request only combinations are tried (never permutations). The first complete solution
//! wins. Every placement attempt counts as a step; past the step bound the search stops.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use lockstep_model::NodeId;
use lockstep_model::dra::{ALLOCATION_RESULTS_MAX_SIZE, AllocationMode};
use lockstep_model::node::tolerated;

use crate::catalog::{AttrValue, CapacitySlot, Catalog, DeviceEntry, DeviceId};
use crate::claims::{AltC, ConstraintC, Match, SpecC};
use crate::error::{Unfit, UnfitReason};
use crate::state::Shared;
use crate::state::{
    AllocatedDevice, ClaimAllocation, ClaimRef, DraState, NodeAllocation, RequestRef,
};

const NO_CONSUMED: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Cand {
    dev: DeviceId,
    /// Offset of the consumed amounts (one per capacity slot) in [`Scratch::consumed`], for
    /// devices that allow multiple allocations.
    consumed: u32,
}

/// One way to satisfy a request: the request itself, or one subrequest of `firstAvailable`.
struct AltW {
    sub: Option<u16>,
    /// Its candidates in [`Scratch::cands`].
    cands: Range<u32>,
    need: usize,
    all: bool,
    admin: bool,
    constraint_mask: u64,
}

struct ReqW {
    /// Index of the claim in [`Scratch::pending`].
    claim: usize,
    request: u16,
    /// Its alternatives in [`Scratch::alts`].
    alts: Range<u32>,
    /// Fewest devices the later requests of the same claim need.
    rest_min: usize,
}

/// The state of one claim constraint during the search. The values a `distinctAttribute`
/// constraint has seen live in [`Scratch::distinct`], tagged with the constraint's index.
#[derive(Clone, Copy)]
enum CState {
    Match {
        attr: Option<u32>,
        first: Option<AttrValue>,
        count: u32,
    },
    Distinct {
        attr: Option<u32>,
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

/// Buffers of one allocation, kept per thread and reused, so the filter (which runs the
/// allocator on hundreds of nodes per pod) allocates no memory in the common case.
#[derive(Default)]
struct Scratch {
    /// The pod's claims, each once, in order.
    order: Vec<ClaimRef>,
    /// Claims already allocated: (position in `order`).
    allocated: Vec<usize>,
    /// Claims to allocate: (position in `order`, claim).
    pending: Vec<(usize, ClaimRef)>,
    reqs: Vec<ReqW>,
    alts: Vec<AltW>,
    cands: Vec<Cand>,
    consumed: Vec<i64>,
    /// Constraint states of all pending claims; claim `i`'s start at `constraint_start[i]`.
    constraints: Vec<CState>,
    constraint_start: Vec<usize>,
    distinct: Vec<(usize, AttrValue)>,
    claim_counts: Vec<usize>,
    taken: Vec<Taken>,
    counter_log: Vec<(u32, i64)>,
    counter_delta: Vec<(u32, i64)>,
    /// Devices the search must not take (see [`allocate_excluding`]).
    exclude: Vec<DeviceId>,
}

impl Scratch {
    /// What a taken device consumes of each of its capacities (empty unless shared).
    fn consumed_by(&self, cat: &Catalog, t: &Taken) -> Box<[i64]> {
        let c = self.cands[t.cand];
        if c.consumed == NO_CONSUMED {
            return Box::new([]);
        }
        let n = cat.device(c.dev).capacity.len();
        self.consumed[c.consumed as usize..c.consumed as usize + n].into()
    }

    fn clear(&mut self) {
        self.order.clear();
        self.allocated.clear();
        self.pending.clear();
        self.reqs.clear();
        self.alts.clear();
        self.cands.clear();
        self.consumed.clear();
        self.constraints.clear();
        self.constraint_start.clear();
        self.distinct.clear();
        self.claim_counts.clear();
        self.taken.clear();
        self.counter_log.clear();
        self.counter_delta.clear();
        self.exclude.clear();
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

struct Search<'s> {
    cat: &'s Catalog,
    state: &'s DraState,
    w: &'s mut Scratch,
    steps: u64,
    max_steps: u64,
}

/// How much of each capacity slot an allocation of `dev` for `alt` consumes, or `None` when
/// the device cannot satisfy the request's capacity requests or violates a request policy.
pub(crate) fn consumed_capacity(e: &DeviceEntry, alt: &AltC, out: &mut Vec<i64>) -> bool {
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

fn spec_of(shared: &Shared, c: ClaimRef) -> Result<&SpecC, Unfit> {
    match c {
        ClaimRef::Claim(id) => shared
            .claims
            .get(id.index())
            .map(|s| &s.spec)
            .ok_or_else(|| {
                Unfit::with_detail(UnfitReason::ClaimNotFound, format!("claim id {}", id.0))
            }),
        ClaimRef::Template(id) => shared
            .templates
            .get(id.index())
            .map(|s| &s.spec)
            .ok_or_else(|| {
                Unfit::with_detail(UnfitReason::ClaimNotFound, format!("template id {}", id.0))
            }),
    }
}

/// Finds an allocation of `claims` on `node` (see [`DraState::try_allocate`]); a remembered
/// success of [`fits`] on an alike node with alike usage is reused.
pub(crate) fn allocate(
    state: &DraState,
    node: NodeId,
    claims: &[ClaimRef],
) -> Result<NodeAllocation, Unfit> {
    if let Some(class) = cache_class(state, node, claims)
        && let Ok(picked) = remembered(state, node, claims, class).0
    {
        return Ok(from_picked(state, node, claims, &picked));
    }
    with_scratch(|w| {
        search(state, node, claims, w)?;
        Ok(result(state, node, w))
    })
}

/// [`allocate`] with the devices of `exclude` left out (never remembered).
pub(crate) fn allocate_excluding(
    state: &DraState,
    node: NodeId,
    claims: &[ClaimRef],
    exclude: &[DeviceId],
) -> Result<NodeAllocation, Unfit> {
    with_scratch(|w| {
        w.exclude.extend_from_slice(exclude);
        search(state, node, claims, w)?;
        Ok(result(state, node, w))
    })
}

/// Whether `claims` can be allocated on `node` (see [`DraState::fits`]): the search of
/// [`allocate`] without building the result, its answer remembered when the claims are all
/// from templates and the node has a class.
pub(crate) fn fits(state: &DraState, node: NodeId, claims: &[ClaimRef]) -> Result<(), Unfit> {
    let Some(class) = cache_class(state, node, claims) else {
        return with_scratch(|w| search(state, node, claims, w));
    };
    match remembered(state, node, claims, class) {
        (Ok(_), _) => Ok(()),
        (Err(_), Some(unfit)) => Err(unfit),
        (Err(reason), None) => Err(Unfit {
            reason,
            detail: None,
        }),
    }
}

/// The node's class when answers for `claims` on it can be remembered: claims from
/// templates only (allocated claims would add their state to the key).
pub(crate) fn cache_class(state: &DraState, node: NodeId, claims: &[ClaimRef]) -> Option<u32> {
    let class = state
        .shared()
        .catalog
        .node_class
        .get(node.index())
        .copied()
        .flatten()?;
    claims
        .iter()
        .all(|c| matches!(c, ClaimRef::Template(_)))
        .then_some(class)
}

/// The remembered answer for `claims` on `node`, searching (and remembering) on a miss; the
/// search's own `Unfit` (with its detail) comes along when it ran and failed.
fn remembered(
    state: &DraState,
    node: NodeId,
    claims: &[ClaimRef],
    class: u32,
) -> (FitAnswer, Option<Unfit>) {
    FIT_KEY.with(|cell| {
        let mut key = cell.borrow_mut();
        fit_key(state, node, class, claims, &mut key);
        let cache = &state.shared().fit_cache;
        if let Some(answer) = cache.get(&key) {
            return (answer, None);
        }
        let (answer, unfit) = with_scratch(|w| match search(state, node, claims, w) {
            Ok(()) => (Ok(picked(state, node, w)), None),
            Err(u) => (Err(u.reason), Some(u)),
        });
        cache.insert(&key, answer.clone());
        (answer, unfit)
    })
}

/// A device of a remembered solution, by its position in the node's device list.
#[derive(Debug)]
pub(crate) struct Picked {
    claim: u16,
    request: RequestRef,
    position: u16,
    admin: bool,
    consumed: Box<[i64]>,
}

/// The solution [`search`] left in `w`, by device position (claims from templates only, so
/// pending claim `i` is `claims[i]`).
fn picked(state: &DraState, node: NodeId, w: &Scratch) -> Arc<[Picked]> {
    let cat = &state.shared().catalog;
    let devices = &cat.node_devices[node.index()];
    w.taken
        .iter()
        .map(|t| {
            let alt = &w.alts[t.alt];
            let consumed = w.consumed_by(cat, t);
            Picked {
                claim: t.claim as u16,
                request: RequestRef {
                    request: w.reqs[t.req].request,
                    subrequest: alt.sub,
                },
                position: devices.iter().position(|&d| d == t.dev).unwrap_or(0) as u16,
                admin: alt.admin,
                consumed,
            }
        })
        .collect()
}

/// The allocation a remembered solution stands for on `node`.
fn from_picked(
    state: &DraState,
    node: NodeId,
    claims: &[ClaimRef],
    picked: &[Picked],
) -> NodeAllocation {
    let cat = &state.shared().catalog;
    let devices = &cat.node_devices[node.index()];
    NodeAllocation {
        node,
        claims: claims
            .iter()
            .enumerate()
            .map(|(ci, &claim)| ClaimAllocation {
                claim,
                devices: picked
                    .iter()
                    .filter(|p| usize::from(p.claim) == ci)
                    .map(|p| {
                        let device = devices[usize::from(p.position)];
                        AllocatedDevice {
                            request: p.request,
                            device,
                            admin_access: p.admin,
                            shared: !p.admin && cat.device(device).multi,
                            consumed_capacity: p.consumed.clone(),
                        }
                    })
                    .collect(),
                already_allocated: false,
            })
            .collect(),
    }
}

thread_local! {
    static FIT_KEY: RefCell<Vec<i64>> = const { RefCell::new(Vec::new()) };
}

/// Everything the search's answer depends on besides the node's class: the step bound, the
/// claims, and the usage of each of the node's devices.
pub(crate) fn fit_key(
    state: &DraState,
    node: NodeId,
    class: u32,
    claims: &[ClaimRef],
    key: &mut Vec<i64>,
) {
    key.clear();
    key.push(state.limits().max_search_steps as i64);
    key.push(i64::from(class));
    key.push(claims.len() as i64);
    key.extend(claims.iter().map(|c| match c {
        ClaimRef::Template(t) => i64::from(t.0),
        ClaimRef::Claim(c) => -1 - i64::from(c.0),
    }));
    state.push_device_usage(node, key);
}

/// A remembered answer of [`fits`]: the solution, or why there is none.
type FitAnswer = Result<Arc<[Picked]>, UnfitReason>;

/// Remembered answers by key (the allocator's [`fits`], the fragmentation score); cleared
/// when it grows past [`Memo::MAX_ENTRIES`].
#[derive(Debug)]
pub(crate) struct Memo<V> {
    map: std::sync::Mutex<rustc_hash::FxHashMap<Box<[i64]>, V>>,
}

impl<V> Default for Memo<V> {
    fn default() -> Self {
        Memo {
            map: Default::default(),
        }
    }
}

/// Remembered answers of [`fits`].
pub(crate) type FitCache = Memo<FitAnswer>;

impl<V: Clone> Memo<V> {
    const MAX_ENTRIES: usize = 1 << 16;

    pub(crate) fn get(&self, key: &[i64]) -> Option<V> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key).cloned()
    }

    pub(crate) fn insert(&self, key: &[i64], value: V) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= Self::MAX_ENTRIES {
            map.clear();
        }
        map.insert(key.into(), value);
    }
}

fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut w) => {
            w.clear();
            f(&mut w)
        }
        // Not reentrant in practice; a fresh buffer keeps it correct if it ever is.
        Err(_) => f(&mut Scratch::default()),
    })
}

/// Runs the search; on success `w.taken` holds the devices of the pending claims. An
/// allocated claim that cannot be used from the node rejects it only after the claims still
/// to allocate have been found devices: kube-scheduler's DynamicResources runs the
/// allocator first, so a node where that fails reports `cannot allocate all claims`.
fn search(
    state: &DraState,
    node: NodeId,
    claims: &[ClaimRef],
    w: &mut Scratch,
) -> Result<(), Unfit> {
    let mut unavailable = None;
    search_pending(state, node, claims, w, &mut unavailable)?;
    match unavailable {
        Some(unfit) => Err(unfit),
        None => Ok(()),
    }
}

/// [`search`] without the final verdict on allocated claims: the first allocated claim that
/// cannot be used from the node is left in `unavailable`.
fn search_pending(
    state: &DraState,
    node: NodeId,
    claims: &[ClaimRef],
    w: &mut Scratch,
    unavailable: &mut Option<Unfit>,
) -> Result<(), Unfit> {
    let shared = state.shared();
    let cat = &shared.catalog;
    let usage = state.usage();

    // Claims in order, each once; already allocated ones are only checked.
    for &c in claims {
        // A shared claim listed twice is one claim; each template reference is a claim of its own.
        if matches!(c, ClaimRef::Claim(_)) && w.order.contains(&c) {
            continue;
        }
        let slot = w.order.len();
        w.order.push(c);
        let spec = spec_of(shared, c)?;
        if let ClaimRef::Claim(id) = c
            && let Some(a) = &usage.claims[id.index()].allocation
        {
            if !a.nodes.contains(node) {
                if unavailable.is_none() {
                    *unavailable = Some(Unfit::with_detail(
                        UnfitReason::ClaimNotAvailableOnNode,
                        format!("{} is allocated for other nodes", spec.object),
                    ));
                }
                continue;
            }
            w.allocated.push(slot);
            continue;
        }
        w.pending.push((slot, c));
    }
    if w.pending.is_empty() {
        return Ok(());
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
    for ci in 0..w.pending.len() {
        let spec = spec_of(shared, w.pending[ci].1)?;
        w.constraint_start.push(w.constraints.len());
        w.constraints
            .extend(spec.constraints.iter().map(|c| match *c {
                ConstraintC::Match(attr) => CState::Match {
                    attr,
                    first: None,
                    count: 0,
                },
                ConstraintC::Distinct(attr) => CState::Distinct { attr },
            }));
        let first_req = w.reqs.len();
        for (ri, r) in spec.requests.iter().enumerate() {
            let alts_start = w.alts.len() as u32;
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
                let cands_start = w.cands.len() as u32;
                candidates(shared, usage, node_devices, alt, w, &mut cel_error);
                let cands = cands_start..w.cands.len() as u32;
                let need = match alt.mode {
                    AllocationMode::All => cands.len(),
                    AllocationMode::ExactCount(n) => n as usize,
                };
                w.alts.push(AltW {
                    sub: r.first_available.then_some(si as u16),
                    cands,
                    need,
                    all,
                    admin: alt.admin,
                    constraint_mask: alt.constraint_mask,
                });
            }
            w.reqs.push(ReqW {
                claim: ci,
                request: ri as u16,
                alts: alts_start..w.alts.len() as u32,
                rest_min: 0,
            });
        }
        // Lower bound on the devices the rest of the claim needs, and the claim limit.
        let mut rest = 0usize;
        for r in w.reqs[first_req..].iter_mut().rev() {
            r.rest_min = rest;
            rest += w.alts[r.alts.start as usize..r.alts.end as usize]
                .iter()
                .map(|a| a.need)
                .min()
                .unwrap_or(0);
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
    w.claim_counts.resize(w.pending.len(), 0);

    let max_steps = state.limits().max_search_steps;
    let mut search = Search {
        cat,
        state,
        w,
        steps: 0,
        max_steps,
    };
    match search.request(0) {
        Ok(true) => Ok(()),
        Ok(false) => {
            // Say why some devices were not considered: a CEL error, or an unusable pool.
            let detail = match cel_error {
                Some((s, d)) => Some(shared.selectors.error_message(s, d, cat)),
                None => unusable_pools
                    .first()
                    .and_then(|&p| cat.pools[p as usize].unusable.clone()),
            };
            Err(Unfit {
                reason: UnfitReason::CannotAllocateAllClaims,
                detail,
            })
        }
        Err(StepBound) => Err(Unfit::with_detail(
            UnfitReason::SearchBoundExceeded,
            format!(
                "gave up after {max_steps} steps on node {}; simplify the claims or raise the bound",
                cat.node_names.get(node.index()).map_or("?", String::as_str)
            ),
        )),
    }
}

/// Appends the devices of `node_devices` that can serve `alt` to `w.cands` (with what they
/// would consume of shared capacity to `w.consumed`).
fn candidates(
    shared: &Shared,
    usage: &crate::state::Usage,
    node_devices: &[DeviceId],
    alt: &AltC,
    w: &mut Scratch,
    cel_error: &mut Option<(u32, DeviceId)>,
) {
    let cat = &shared.catalog;
    for &dev in node_devices {
        if w.exclude.contains(&dev) {
            continue;
        }
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
        // A shared device without room for the request now cannot take it at any point of
        // the search (which only adds use); "All" takes the devices that still have room.
        let used = &usage.capacity_used[e.cap_offset as usize..];
        if (0..e.capacity.len()).any(|k| used[k] + w.consumed[start + k] > e.capacity[k].value) {
            w.consumed.truncate(start);
            continue;
        }
        w.cands.push(Cand {
            dev,
            consumed: start as u32,
        });
    }
}

/// The allocation found by [`search`], per claim in the pod's order.
fn result(state: &DraState, node: NodeId, w: &Scratch) -> NodeAllocation {
    let cat = &state.shared().catalog;
    let usage = state.usage();
    let mut claims: Vec<ClaimAllocation> = Vec::with_capacity(w.order.len());
    let (mut a, mut p) = (0, 0);
    for (slot, &claim) in w.order.iter().enumerate() {
        if w.allocated.get(a) == Some(&slot) {
            a += 1;
            let ClaimRef::Claim(id) = claim else {
                continue;
            };
            if let Some(al) = &usage.claims[id.index()].allocation {
                claims.push(ClaimAllocation {
                    claim,
                    devices: al.devices.clone(),
                    already_allocated: true,
                });
            }
            continue;
        }
        let ci = p;
        p += 1;
        let devices: Vec<AllocatedDevice> = w
            .taken
            .iter()
            .filter(|t| t.claim == ci)
            .map(|t| {
                let r = &w.reqs[t.req];
                let alt = &w.alts[t.alt];
                let consumed = w.consumed_by(cat, t);
                AllocatedDevice {
                    request: RequestRef {
                        request: r.request,
                        subrequest: alt.sub,
                    },
                    device: t.dev,
                    admin_access: alt.admin,
                    shared: !alt.admin && cat.device(t.dev).multi,
                    consumed_capacity: consumed,
                }
            })
            .collect();
        claims.push(ClaimAllocation {
            claim,
            devices: Arc::from(devices),
            already_allocated: false,
        });
    }
    NodeAllocation { node, claims }
}

impl Search<'_> {
    fn request(&mut self, r: usize) -> Result<bool, StepBound> {
        if r == self.w.reqs.len() {
            return Ok(true);
        }
        let ci = self.w.reqs[r].claim;
        let alts = self.w.reqs[r].alts.clone();
        for a in alts.start as usize..alts.end as usize {
            let alt = &self.w.alts[a];
            if alt.all && alt.cands.is_empty() {
                continue; // "All" needs at least one device.
            }
            if alt.cands.len() < alt.need {
                continue;
            }
            if self.w.claim_counts[ci] + alt.need + self.w.reqs[r].rest_min
                > ALLOCATION_RESULTS_MAX_SIZE
            {
                continue;
            }
            if self.devices(r, a, 0, 0)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Chooses device `k` of alternative `a` of request `r` from its candidates `start..`
    /// (positions relative to the alternative's first candidate).
    fn devices(&mut self, r: usize, a: usize, k: usize, start: usize) -> Result<bool, StepBound> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(StepBound);
        }
        let (need, all, first, n) = {
            let alt = &self.w.alts[a];
            (alt.need, alt.all, alt.cands.start as usize, alt.cands.len())
        };
        if k == need {
            return self.request(r + 1);
        }
        if all {
            // Every selected device, in order; any failure means no solution.
            if !self.take(r, a, first + k) {
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
            if self.take(r, a, first + c) {
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
        self.w
            .taken
            .iter()
            .filter(|t| t.dev == dev)
            .map(|t| {
                let c = self.w.cands[t.cand].consumed;
                if c == NO_CONSUMED {
                    0
                } else {
                    self.w.consumed[c as usize + slot]
                }
            })
            .sum()
    }

    fn delta(&self, id: u32) -> i64 {
        self.w
            .counter_delta
            .iter()
            .find(|d| d.0 == id)
            .map_or(0, |d| d.1)
    }

    fn add_delta(&mut self, id: u32, amount: i64) {
        match self.w.counter_delta.iter_mut().find(|d| d.0 == id) {
            Some(d) => d.1 += amount,
            None => self.w.counter_delta.push((id, amount)),
        }
    }

    /// Tries to take candidate `c` (an index into [`Scratch::cands`]) for alternative `a` of
    /// request `r`.
    fn take(&mut self, r: usize, a: usize, c: usize) -> bool {
        let cat = self.cat;
        let usage = self.state.usage();
        let (admin, mask) = {
            let alt = &self.w.alts[a];
            (alt.admin, alt.constraint_mask)
        };
        let cand = self.w.cands[c];
        let dev = cand.dev;
        let e = cat.device(dev);
        let ci = self.w.reqs[r].claim;

        // In use? A device held exclusively (an allocation without a share) is in use for
        // every request but admin access, even a device that allows multiple allocations.
        if !e.multi {
            let busy = if admin {
                self.w.taken.iter().any(|t| t.dev == dev && t.claim == ci)
            } else {
                usage.exclusive[dev.index()] > 0 || self.w.taken.iter().any(|t| t.dev == dev)
            };
            if busy {
                return false;
            }
        } else if !admin && usage.exclusive[dev.index()] > 0 {
            return false;
        }

        // Capacity of a shared device.
        if e.multi && cand.consumed != NO_CONSUMED {
            let base = e.cap_offset as usize;
            for (k, slot) in e.capacity.iter().enumerate() {
                let used = usage.capacity_used[base + k]
                    + self.in_search_capacity(dev, k)
                    + self.w.consumed[cand.consumed as usize + k];
                if used > slot.value {
                    return false;
                }
            }
        }

        // Counters (a shared device consumes them once).
        let log_start = self.w.counter_log.len() as u32;
        let already =
            e.multi && (usage.shares[dev.index()] > 0 || self.w.taken.iter().any(|t| t.dev == dev));
        if !already && !e.consumes.is_empty() {
            for &(id, amount) in &e.consumes {
                self.add_delta(id, amount);
                self.w.counter_log.push((id, amount));
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
        let base = self.w.constraint_start[ci];
        let mut applied = 0u64;
        let mut ok = true;
        let mut bits = mask;
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let fits = match &mut self.w.constraints[base + j] {
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
                CState::Distinct { attr } => match attr.and_then(|at| e.attribute(at)) {
                    None => false,
                    Some(v) => {
                        let seen = self
                            .w
                            .distinct
                            .iter()
                            .any(|&(at, x)| at == base + j && same_for_distinct(cat, x, v));
                        if !seen {
                            self.w.distinct.push((base + j, v));
                        }
                        !seen
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

        self.w.taken.push(Taken {
            dev,
            claim: ci,
            req: r,
            alt: a,
            cand: c,
            counters: (log_start, self.w.counter_log.len() as u32),
        });
        self.w.claim_counts[ci] += 1;
        true
    }

    fn revert_counters(&mut self, from: u32) {
        while self.w.counter_log.len() > from as usize {
            let (id, amount) = self.w.counter_log.pop().expect("log entry");
            self.add_delta(id, -amount);
        }
    }

    fn revert_constraints(&mut self, ci: usize, mut bits: u64) {
        let base = self.w.constraint_start[ci];
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            match &mut self.w.constraints[base + j] {
                CState::Match { count, .. } => *count -= 1,
                CState::Distinct { .. } => {
                    if let Some(pos) = self.w.distinct.iter().rposition(|&(at, _)| at == base + j) {
                        self.w.distinct.remove(pos);
                    }
                }
            }
        }
    }

    fn untake(&mut self) {
        let t = self.w.taken.pop().expect("a device to give back");
        let mask = self.w.alts[t.alt].constraint_mask;
        self.revert_constraints(t.claim, mask);
        self.revert_counters(t.counters.0);
        self.w.claim_counts[t.claim] -= 1;
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
