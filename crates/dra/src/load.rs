//! How loaded a node's devices are, in the units a scoring strategy can use: the facts behind
//! the engine's DynamicResources score (the crate itself scores nothing).
//!
//! A device counts [`DEVICE_UNITS`]: an exclusively allocated device all of them, a device that
//! allows multiple allocations the share of its most used capacity. Only devices that some
//! request of the pod's claims could select count (by class and request selectors), so a node's
//! NICs do not dilute its GPUs.

use lockstep_model::NodeId;
use lockstep_model::dra::AllocationMode;

use crate::catalog::{DeviceEntry, DeviceId};
use crate::claims::{AltC, Match, SpecC};
use crate::state::{ClaimRef, DraState};

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
        let mut load = DeviceLoad::default();
        let specs = || pending_specs(self, claims);
        let selects = |alt: &AltC, d: DeviceId| {
            alt.selectors
                .iter()
                .all(|&s| shared.selectors.matches(s, d, cat) == Match::Yes)
        };
        for &d in devices {
            let relevant = specs().any(|spec| {
                spec.requests
                    .iter()
                    .any(|r| r.alts.iter().any(|alt| selects(alt, d)))
            });
            if relevant {
                load.total += DEVICE_UNITS;
                load.used += self.device_units_used(d);
            }
        }
        if load.total == 0 {
            return load;
        }
        // The first alternative of each request, as the allocator tries it first; a share of
        // the first device here it could select for capacity requests.
        for spec in specs() {
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
                load.demand += i64::from(n) * per_device;
            }
        }
        load
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
        let used = &usage.capacity_used[e.cap_offset as usize..];
        let share = e
            .capacity
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.value > 0)
            .map(|(k, slot)| used[k].saturating_mul(DEVICE_UNITS) / slot.value)
            .max();
        // Shared with no capacity to measure by: in use is in use.
        share.unwrap_or(DEVICE_UNITS).min(DEVICE_UNITS)
    }
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
