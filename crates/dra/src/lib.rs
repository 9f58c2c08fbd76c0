//! `lockstep-dra`: Dynamic Resource Allocation (`resource.k8s.io/v1`) for lockstep.
//!
//! Owns the DRA half of scheduling: CEL device selectors with the Kubernetes DRA environment
//! ([`selector`]), the device index built from ResourceSlices (pools, generations, counters,
//! which nodes reach which devices), device bookkeeping (which devices, shares, capacity and
//! counters are in use), the structured allocator (a bounded backtracking search with the
//! semantics of Kubernetes' `k8s.io/dynamic-resource-allocation/structured` allocator) and
//! per-node replica estimation. The entry point is [`DraState`].
//!
//! It must not: do I/O, know YAML or the Kubernetes API types (it reads only
//! `lockstep_model::dra`), schedule pods or score nodes (that is the engine's DynamicResources
//! plugin), or depend on the engine. Given the same input it returns the same answer: devices
//! are tried in catalog order (pools by driver and name, slices by name, devices in slice
//! order), claims and requests in the order given.
//!
//! Performance rules: each distinct CEL expression is compiled once; each (expression, device)
//! pair is evaluated at most once per state and the boolean cached; the per-node search reads
//! only dense ids and cached booleans.

pub mod catalog;
mod claims;
pub mod error;
pub mod load;
mod search;
pub mod selector;
pub mod state;

pub use catalog::DeviceId;
pub use error::{DraError, Unfit, UnfitReason};
pub use load::{DEVICE_UNITS, DeviceLoad, FragmentMeasure, TaskShape};
pub use state::{
    AllocatedDevice, ClaimAllocation, ClaimId, ClaimRef, DraInputs, DraState, Limits,
    NodeAllocation, RequestRef, TemplateId,
};
