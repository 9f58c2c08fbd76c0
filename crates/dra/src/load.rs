//! How loaded a node's devices are, in the units a scoring strategy can use: the facts behind
//! the engine's DynamicResources score (the crate itself scores nothing).
//!
//! A device counts [`DEVICE_UNITS`]: an exclusively allocated device all of them, a device that
//! allows multiple allocations the share of its most used capacity. Only devices that some
//! request of the pod's claims could select count (by class and request selectors), so a node's
//! NICs do not dilute its GPUs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use lockstep_model::NodeId;
use lockstep_model::dra::AllocationMode;

use crate::catalog::{DeviceEntry, DeviceId};
use crate::claims::{AltC, Match, SpecC};
use crate::state::{ClaimRef, DraState, NodeAllocation};

thread_local! {
    /// The fragmentation cache's key, built in place for each node scored.
    static FRAG_KEY: RefCell<Vec<i64>> = const { RefCell::new(Vec::new()) };
    /// [`DraState::remembered`]'s key.
    static SCORE_KEY: RefCell<Vec<i64>> = const { RefCell::new(Vec::new()) };
}

/// Units of one whole device.
pub const DEVICE_UNITS: i64 = 1000;

/// The load of the devices on one node that a pod's claims could use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceLoad {
    /// Units in use now.
    pub used: i64,
    /// Units the pod's claims not yet allocated would take (whole devices for requests that
    /// name no capacity; a share of the device for capacity requests).
    pub demand: i64,
    /// Units of all such devices.
    pub total: i64,
}

impl DraState {
    /// The [`DeviceLoad`] of `node` for a pod with `claims`; `total` is 0 when the node has no
    /// device the claims could select.
    pub fn device_load(&self, node: NodeId, claims: &[ClaimRef]) -> DeviceLoad {
        let shared = self.shared();
        let cat = &shared.catalog;
        let devices: &[DeviceId] = cat
            .node_devices
            .get(node.index())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        // Which devices count and the demand depend only on the devices' static properties:
        // remembered per node class for claims from templates.
        let (relevant, demand) = match crate::search::cache_class(self, node, claims) {
            Some(class) => {
                let mut key = Vec::with_capacity(claims.len() + 1);
                key.push(i64::from(class));
                key.extend(claims.iter().map(|c| match c {
                    ClaimRef::Template(t) => i64::from(t.0),
                    ClaimRef::Claim(c) => -1 - i64::from(c.0),
                }));
                match shared.load_cache.get(&key) {
                    Some(v) => v,
                    None => {
                        let v = self.relevant_and_demand(devices, claims);
                        shared.load_cache.insert(&key, v.clone());
                        v
                    }
                }
            }
            None => self.relevant_and_demand(devices, claims),
        };
        if relevant.is_empty() {
            return DeviceLoad::default();
        }
        DeviceLoad {
            used: relevant
                .iter()
                .map(|&i| self.device_units_used(devices[usize::from(i)]))
                .sum(),
            demand,
            total: relevant.len() as i64 * DEVICE_UNITS,
        }
    }

    /// The positions in `devices` of those some request of `claims` could select, and the
    /// units the claims would take: the first alternative of each request, as the allocator
    /// tries it first; a share of the first device it could select for capacity requests.
    fn relevant_and_demand(&self, devices: &[DeviceId], claims: &[ClaimRef]) -> (Arc<[u16]>, i64) {
        let shared = self.shared();
        let cat = &shared.catalog;
        let selects = |alt: &AltC, d: DeviceId| {
            alt.selectors
                .iter()
                .all(|&s| shared.selectors.matches(s, d, cat) == Match::Yes)
        };
        let relevant: Arc<[u16]> = devices
            .iter()
            .enumerate()
            .filter(|&(_, &d)| {
                pending_specs(self, claims).any(|spec| {
                    spec.requests
                        .iter()
                        .any(|r| r.alts.iter().any(|alt| selects(alt, d)))
                })
            })
            .map(|(i, _)| i as u16)
            .collect();
        let mut demand = 0;
        for spec in pending_specs(self, claims) {
            for r in &spec.requests {
                let Some(alt) = r.alts.first() else { continue };
                let AllocationMode::ExactCount(n) = alt.mode else {
                    continue;
                };
                let per_device = if alt.capacity.is_empty() {
                    DEVICE_UNITS
                } else {
                    devices
                        .iter()
                        .find(|&&d| selects(alt, d))
                        .map_or(DEVICE_UNITS, |&d| capacity_share(cat.device(d), alt))
                };
                demand += i64::from(n) * per_device;
            }
        }
        (relevant, demand)
    }

    /// Units of device `d` in use.
    fn device_units_used(&self, d: DeviceId) -> i64 {
        let usage = self.usage();
        let e = self.shared().catalog.device(d);
        if usage.exclusive[d.index()] > 0 {
            return DEVICE_UNITS;
        }
        if !e.multi || usage.shares[d.index()] == 0 {
            return 0;
        }
        share_used(e, &usage.capacity_used[e.cap_offset as usize..], |_| 0)
    }
}

/// The share of shared device `e` in use (in units), by its most used capacity: `used` (its
/// slots of the usage vector) plus `extra(slot)`. Shared with no capacity to measure by: in
/// use is in use.
fn share_used(e: &DeviceEntry, used: &[i64], extra: impl Fn(usize) -> i64) -> i64 {
    e.capacity
        .iter()
        .enumerate()
        .filter(|(_, slot)| slot.value > 0)
        .map(|(k, slot)| (used[k] + extra(k)).saturating_mul(DEVICE_UNITS) / slot.value)
        .max()
        .unwrap_or(DEVICE_UNITS)
        .min(DEVICE_UNITS)
}

/// The share of `e` (in units) the capacity requests of `alt` take: the largest over the
/// capacities it names.
fn capacity_share(e: &DeviceEntry, alt: &AltC) -> i64 {
    alt.capacity
        .iter()
        .filter_map(|&(name, amount)| {
            let name = name?;
            let slot = e
                .capacity
                .iter()
                .find(|c| c.fq == name || c.short == Some(name))?;
            (slot.value > 0).then(|| amount.saturating_mul(DEVICE_UNITS) / slot.value)
        })
        .max()
        .map_or(DEVICE_UNITS, |s| s.clamp(1, DEVICE_UNITS))
}

/// The specs of the claims in `claims` that are not allocated yet (a shared claim once).
fn pending_specs<'a>(
    state: &'a DraState,
    claims: &'a [ClaimRef],
) -> impl Iterator<Item = &'a SpecC> {
    let shared = state.shared();
    let usage = state.usage();
    claims
        .iter()
        .enumerate()
        .filter_map(move |(i, &c)| match c {
            ClaimRef::Claim(id) => {
                if claims[..i].contains(&c)
                    || usage
                        .claims
                        .get(id.index())
                        .is_none_or(|u| u.allocation.is_some())
                {
                    return None;
                }
                shared.claims.get(id.index()).map(|s| &s.spec)
            }
            ClaimRef::Template(id) => shared.templates.get(id.index()).map(|s| &s.spec),
        })
}

/// A kind of task in the workload a fragmentation score plans for: the claims of a pod, and
/// how common such pods are (any positive scale).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskShape {
    pub claims: Vec<ClaimRef>,
    pub weight: f64,
}

/// With [`FragmentMeasure::Copies`], a task with devices weighs its pods times
/// `(DEVICE_UNITS / units one copy takes)` to this power: the smaller the share of a device a
/// task takes, the more it counts (the small shares are what fills what larger ones leave
/// of a device). Of the powers measured on openb (-1 to 6), 3 allocates the most; 2.5 and
/// 3.5 are within 0.1 point of it, 4 and above fall off (BENCHMARKS.md).
const SMALL_COPY_WEIGHT: i32 = 3;

/// The share of device `e` (units of [`DEVICE_UNITS`]) that the capacity in `consumed`
/// (by capacity slot, as `consumed_capacity` fills it) takes: that of its most used slot.
fn share_units(e: &DeviceEntry, consumed: &[i64]) -> i64 {
    e.capacity
        .iter()
        .enumerate()
        .filter(|(_, slot)| slot.value > 0)
        .map(|(k, slot)| consumed[k].saturating_mul(DEVICE_UNITS) / slot.value)
        .max()
        .unwrap_or(0)
}

/// What a task's devices find on a node: whether they fit, the free units of the devices it
/// could not take, and how many copies of it the devices hold and the units one takes.
struct DeviceFit {
    fits: bool,
    unusable: i64,
    held: i64,
    per_copy: i64,
}

impl DeviceFit {
    /// The task's fragments among `all_free` units, where the node's other resources hold
    /// `host` copies of it (none: every free unit is a fragment for it). Counted in copies,
    /// those left once `min(held, host)` copies are placed (a task taking no device units
    /// counts the devices it could not take, as the paper).
    fn fragments(&self, all_free: i64, host: i64, measure: FragmentMeasure) -> i64 {
        if host <= 0 || !self.fits {
            return all_free;
        }
        match measure {
            FragmentMeasure::Copies if self.per_copy > 0 => {
                (all_free - host.min(self.held).saturating_mul(self.per_copy)).max(0)
            }
            _ => self.unusable,
        }
    }
}

/// The workload a fragmentation growth is computed for.
struct Tasks<'a> {
    shapes: &'a [TaskShape],
    shapes_id: u64,
    measure: FragmentMeasure,
}

/// How a fragmentation score counts the device units a task could not use on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragmentMeasure {
    /// As the ATC'23 fragmentation paper: the free units of the devices the task could not
    /// take (all of them where it does not fit).
    Devices,
    /// What is left over once as many copies of the task as the node holds are placed: the
    /// copies its devices hold (a device shared by requests of a fraction holds as many as
    /// fit in its free share), bounded by the copies the node's other resources hold. Tasks
    /// taking a smaller share of a device weigh more (see [`SMALL_COPY_WEIGHT`]).
    Copies,
}

/// Free units of one device, and whether it is wholly free.
#[derive(Debug, Clone, Copy)]
struct Free {
    units: i64,
    whole: bool,
}

impl DraState {
    /// `compute()`'s answer for a pod with `claims` on `node`, remembered for every node of
    /// the same class whose devices are used alike, given the same `inputs`. For a caller
    /// whose answer depends on nothing else: the node's devices and their usage, the claims
    /// (all from templates, so no claim is shared with another pod) and what `inputs` holds.
    /// Computed every time for a node without a class or a claim that is not a template's.
    pub fn remembered(
        &self,
        node: NodeId,
        claims: &[ClaimRef],
        inputs: &[i64],
        compute: impl FnOnce() -> Option<i64>,
    ) -> Option<i64> {
        let Some(class) = crate::search::cache_class(self, node, claims) else {
            return compute();
        };
        SCORE_KEY.with(|cell| {
            let Ok(mut key) = cell.try_borrow_mut() else {
                return compute();
            };
            crate::search::fit_key(self, node, class, claims, &mut key);
            key.extend_from_slice(inputs);
            let cache = &self.shared().score_cache;
            if let Some(answer) = cache.get(&key) {
                return answer;
            }
            let answer = compute();
            cache.insert(&key, answer);
            answer
        })
    }

    /// How much placing `allocation` (found by [`try_allocate`](Self::try_allocate) on its
    /// node) grows the node's expected GPU fragmentation for a task drawn from `shapes`, in
    /// device units (negative: it shrinks). As the ATC'23 fragmentation paper defines it, the
    /// fragmentation of a node for one task is the free device units the task could not use:
    /// all of them when the task cannot be placed there, else those of the devices it could
    /// not take (a device in part used is no use to a task asking for whole devices, a share
    /// smaller than a task's request is no use to it; a task without claims can use none
    /// and needs none, so it sees fragments only where it does not fit). Devices are counted one by one
    /// (constraints between devices are not considered). `shapes_id` names the shape list for
    /// the cache (answers for alike nodes with alike usage are remembered).
    ///
    /// `host_fit(i)` says how many copies of a task of shape `i` the node's other resources
    /// (cpu, memory: the engine's part) hold before and after the placement (`i64::MAX` for
    /// no bound); where none fits, all the node's free device units are fragments for it.
    /// [`FragmentMeasure::Devices`] only asks whether one fits. `host_key` must hold
    /// everything `host_fit` depends on (for the cache).
    #[allow(clippy::too_many_arguments)]
    pub fn fragmentation_delta(
        &self,
        allocation: &NodeAllocation,
        shapes: &[TaskShape],
        shapes_id: u64,
        measure: FragmentMeasure,
        host_key: &[i64],
        host_fit: &mut dyn FnMut(usize) -> (i64, i64),
    ) -> f64 {
        // The cache key is built in one buffer per thread (asked for every node scored).
        let task = Tasks {
            shapes,
            shapes_id,
            measure,
        };
        FRAG_KEY.with(|cell| match cell.try_borrow_mut() {
            Ok(mut key) => {
                self.fragmentation_delta_in(&mut key, allocation, &task, host_key, host_fit)
            }
            Err(_) => {
                self.fragmentation_delta_in(&mut Vec::new(), allocation, &task, host_key, host_fit)
            }
        })
    }

    fn fragmentation_delta_in(
        &self,
        key: &mut Vec<i64>,
        allocation: &NodeAllocation,
        task: &Tasks<'_>,
        host_key: &[i64],
        host_fit: &mut dyn FnMut(usize) -> (i64, i64),
    ) -> f64 {
        let (shapes, shapes_id) = (task.shapes, task.shapes_id);
        let node = allocation.node;
        let shared = self.shared();
        let cat = &shared.catalog;
        let claims: Vec<ClaimRef> = allocation.claims.iter().map(|c| c.claim).collect();
        let class = cat.node_class.get(node.index()).copied().flatten();
        let cacheable =
            class.is_some() && claims.iter().all(|c| matches!(c, ClaimRef::Template(_)));
        key.clear();
        if let (true, Some(class)) = (cacheable, class) {
            crate::search::fit_key(self, node, class, &claims, key);
            // Which devices the allocation takes (it may be one of several choices).
            let devices = &cat.node_devices[node.index()];
            for c in allocation.claims.iter().filter(|c| !c.already_allocated) {
                for a in c.devices.iter() {
                    key.push(
                        devices
                            .iter()
                            .position(|&d| d == a.device)
                            .map_or(-1, |p| p as i64),
                    );
                }
                key.push(-2);
            }
            key.push(shapes_id as i64);
            key.push(task.measure as i64);
            key.extend_from_slice(host_key);
            if let Some(v) = shared.frag_cache.get(key) {
                return v;
            }
        }
        let devices: &[DeviceId] = cat
            .node_devices
            .get(node.index())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let before: Vec<Free> = devices.iter().map(|&d| self.free_of(d, None)).collect();
        let after: Vec<Free> = devices
            .iter()
            .map(|&d| {
                let taken: Vec<&crate::state::AllocatedDevice> = allocation
                    .claims
                    .iter()
                    .filter(|c| !c.already_allocated)
                    .flat_map(|c| c.devices.iter())
                    .filter(|a| a.device == d && !a.admin_access)
                    .collect();
                if taken.is_empty() {
                    self.free_of(d, None)
                } else {
                    self.free_of(d, Some(&taken))
                }
            })
            .collect();
        // The device side depends on the claims only: worked out once per distinct claims
        // (shapes differ by their cpu too), before and after, with the weight it gives.
        let mut buf = Vec::new();
        let all_before: i64 = before.iter().map(|f| f.units).sum();
        let all_after: i64 = after.iter().map(|f| f.units).sum();
        let mut index: HashMap<&[ClaimRef], usize> = HashMap::new();
        let mut sides: Vec<(DeviceFit, DeviceFit, f64)> = Vec::new();
        let mut side_of = Vec::with_capacity(shapes.len());
        for s in shapes {
            let i = *index.entry(s.claims.as_slice()).or_insert_with(|| {
                let fit_before = self.device_fit(devices, &before, &s.claims, &mut buf);
                let factor = match task.measure {
                    FragmentMeasure::Copies if !s.claims.is_empty() => {
                        let units = fit_before.per_copy.max(1) as f64;
                        (DEVICE_UNITS as f64 / units).powi(SMALL_COPY_WEIGHT)
                    }
                    _ => 1.0,
                };
                let fit_after = self.device_fit(devices, &after, &s.claims, &mut buf);
                sides.push((fit_before, fit_after, factor));
                sides.len() - 1
            });
            side_of.push(i);
        }
        let total: f64 = shapes
            .iter()
            .zip(&side_of)
            .map(|(s, &i)| s.weight * sides[i].2)
            .sum();
        if total <= 0.0 {
            return 0.0;
        }
        let mut delta = 0.0;
        for (i, s) in shapes.iter().enumerate() {
            let (host_before, host_after) = host_fit(i);
            let (before, after, factor) = &sides[side_of[i]];
            let f_before = before.fragments(all_before, host_before, task.measure);
            let f_after = after.fragments(all_after, host_after, task.measure);
            delta += s.weight * factor * (f_after - f_before) as f64;
        }
        let delta = delta / total;
        if !key.is_empty() {
            shared.frag_cache.insert(key, delta);
        }
        delta
    }

    /// Free units of device `d`, with the devices of `taken` (allocations of `d`) added.
    fn free_of(&self, d: DeviceId, taken: Option<&[&crate::state::AllocatedDevice]>) -> Free {
        let usage = self.usage();
        let e = self.shared().catalog.device(d);
        let Some(taken) = taken else {
            let used = self.device_units_used(d);
            return Free {
                units: DEVICE_UNITS - used,
                whole: used == 0 && usage.shares[d.index()] == 0,
            };
        };
        if !e.multi {
            return Free {
                units: 0,
                whole: false,
            };
        }
        let share = share_used(e, &usage.capacity_used[e.cap_offset as usize..], |k| {
            taken
                .iter()
                .map(|a| a.consumed_capacity.get(k).copied().unwrap_or(0))
                .sum()
        });
        Free {
            units: DEVICE_UNITS - share,
            whole: false,
        }
    }

    /// What a task with `claims` finds on `devices` (free as `free` says); the units one copy
    /// takes whether or not it fits (a request for a share of a device counted on the devices
    /// it selects there, a whole device as [`DEVICE_UNITS`]).
    fn device_fit(
        &self,
        devices: &[DeviceId],
        free: &[Free],
        claims: &[ClaimRef],
        buf: &mut Vec<i64>,
    ) -> DeviceFit {
        let shared = self.shared();
        let cat = &shared.catalog;
        if claims.is_empty() {
            // A task without devices leaves none unusable where it fits.
            return DeviceFit {
                fits: true,
                unusable: 0,
                held: i64::MAX,
                per_copy: 0,
            };
        }
        let mut fits = true;
        let mut usable = vec![false; devices.len()];
        let (mut held, mut per_copy) = (i64::MAX, 0i64);
        for spec in pending_specs(self, claims) {
            for r in &spec.requests {
                let Some(alt) = r.alts.first() else { continue };
                let need = match alt.mode {
                    AllocationMode::ExactCount(n) => n as usize,
                    AllocationMode::All => 1,
                };
                let mut count = 0;
                // Copies of this request the usable devices hold (in `need`s), its units.
                let (mut slots, mut units) = (0i64, DEVICE_UNITS);
                for (i, &d) in devices.iter().enumerate() {
                    let e = cat.device(d);
                    let selected = alt
                        .selectors
                        .iter()
                        .all(|&s| shared.selectors.matches(s, d, cat) == Match::Yes);
                    if !selected {
                        continue;
                    }
                    let fits = if alt.capacity.is_empty() || !e.multi {
                        units = DEVICE_UNITS;
                        free[i].whole.then_some(1)
                    } else {
                        buf.clear();
                        if crate::search::consumed_capacity(e, alt, buf) {
                            // The device's free share against the request's share of it.
                            let share = share_units(e, buf);
                            units = share;
                            (share <= free[i].units).then(|| free[i].units / share.max(1))
                        } else {
                            None
                        }
                    };
                    if let Some(n) = fits {
                        usable[i] = true;
                        count += 1;
                        slots += n;
                    }
                }
                fits &= count >= need;
                match alt.mode {
                    AllocationMode::ExactCount(n) => {
                        held = held.min(slots / i64::from(n.max(1)));
                        per_copy += units * i64::from(n);
                    }
                    // All of the usable devices, once.
                    AllocationMode::All => {
                        held = held.min(1);
                        per_copy += units * count as i64;
                    }
                }
            }
        }
        DeviceFit {
            fits,
            unusable: free
                .iter()
                .zip(&usable)
                .filter(|(_, u)| !**u)
                .map(|(f, _)| f.units)
                .sum(),
            held,
            per_copy,
        }
    }
}
