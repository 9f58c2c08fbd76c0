//! Dynamic Resource Allocation objects (`resource.k8s.io/v1`) as plain data: DeviceClass,
//! ResourceSlice, ResourceClaim and ResourceClaimTemplate.
//!
//! Names stay strings here (the model is what `lockstep-manifests` produces); `lockstep-dra`
//! interns them into dense ids when it builds its device index. Quantities are whole base
//! units (bytes, counts) as `i64`, rounded up like `Quantity.Value()`. CEL expressions are kept
//! as text; `lockstep-dra` compiles them.

use std::collections::BTreeMap;

use crate::labels::NodeSelector;
use crate::node::{Taint, Toleration};

/// The most devices one claim may be allocated (`AllocationResultsMaxSize`).
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

/// Opaque, driver-specific configuration (`OpaqueDeviceConfiguration`), kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpaqueDeviceConfig {
    pub driver: String,
    /// The `parameters` object as JSON text.
    pub parameters: String,
}

/// A `DeviceClass`: selectors every device of the class must satisfy, and configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceClass {
    pub name: String,
    /// `spec.selectors[*].cel.expression`, in order.
    pub selectors: Vec<String>,
    pub config: Vec<OpaqueDeviceConfig>,
    /// `spec.extendedResourceName`, when the class backs an extended resource.
    pub extended_resource_name: Option<String>,
}

/// `spec.pool` of a ResourceSlice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourcePool {
    pub name: String,
    pub generation: i64,
    pub resource_slice_count: i64,
}

/// Which nodes can reach the devices of a slice (exactly one is set in a valid slice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SliceNodeScope {
    /// `spec.nodeName`: devices local to one node.
    NodeName(String),
    /// `spec.nodeSelector`: network-attached devices reachable from the selected nodes.
    NodeSelector(NodeSelector),
    /// `spec.allNodes`: reachable from every node.
    AllNodes,
    /// `spec.perDeviceNodeSelection`: each device says which nodes reach it.
    PerDeviceNodeSelection,
}

/// Which nodes can reach one device of a slice with `perDeviceNodeSelection`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceNodeScope {
    NodeName(String),
    NodeSelector(NodeSelector),
    AllNodes,
}

/// A typed device attribute value (`DeviceAttribute`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AttributeValue {
    Int(i64),
    Bool(bool),
    String(String),
    /// A semantic version 2.0.0 string, e.g. `"1.2.3"`.
    Version(String),
}

/// `validRange` of a capacity request policy, in base units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapacityRange {
    pub min: i64,
    pub max: Option<i64>,
    pub step: Option<i64>,
}

/// `requestPolicy` of a device capacity: how much a request consumes of shared capacity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapacityRequestPolicy {
    /// Consumed when a request names no amount for this capacity.
    pub default: Option<i64>,
    /// Allowed amounts, ascending; a request is rounded up to the next one.
    pub valid_values: Vec<i64>,
    pub valid_range: Option<CapacityRange>,
}

/// One capacity of a device (`DeviceCapacity`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceCapacity {
    /// Total, in base units.
    pub value: i64,
    pub request_policy: Option<CapacityRequestPolicy>,
}

/// A named set of counters shared by the devices of a pool (`CounterSet`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CounterSet {
    pub name: String,
    /// Counter name -> available amount, in base units.
    pub counters: BTreeMap<String, i64>,
}

/// Counters one device consumes from a counter set while allocated (`DeviceCounterConsumption`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceCounterConsumption {
    pub counter_set: String,
    pub counters: BTreeMap<String, i64>,
}

/// A device in a ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Device {
    pub name: String,
    /// Qualified name (`name` or `domain/name`; without a domain the driver is the domain)
    /// -> value.
    pub attributes: BTreeMap<String, AttributeValue>,
    /// Qualified name -> capacity.
    pub capacity: BTreeMap<String, DeviceCapacity>,
    pub consumes_counters: Vec<DeviceCounterConsumption>,
    /// Set only in slices with `perDeviceNodeSelection`.
    pub node_scope: Option<DeviceNodeScope>,
    /// Device taints; only `NoSchedule` and `NoExecute` keep a device from being allocated.
    pub taints: Vec<Taint>,
    /// Whether several claims may share the device within its capacity.
    pub allow_multiple_allocations: bool,
    /// Whether an allocation of this device binds the claim to the chosen node.
    pub binds_to_node: bool,
    pub binding_conditions: Vec<String>,
    pub binding_failure_conditions: Vec<String>,
}

/// A `ResourceSlice`: devices of one driver in one pool, with the nodes that reach them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceSlice {
    pub name: String,
    pub driver: String,
    pub pool: ResourcePool,
    pub node_scope: SliceNodeScope,
    pub devices: Vec<Device>,
    pub shared_counters: Vec<CounterSet>,
}

/// `allocationMode` with its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationMode {
    /// `ExactCount` with `count` (default 1).
    ExactCount(u32),
    /// `All` matching devices.
    All,
}

impl Default for AllocationMode {
    fn default() -> Self {
        AllocationMode::ExactCount(1)
    }
}

/// The fields shared by `ExactDeviceRequest` and `DeviceSubRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExactDeviceRequest {
    pub device_class_name: String,
    /// CEL expressions, in order.
    pub selectors: Vec<String>,
    pub allocation_mode: AllocationMode,
    /// Always false for subrequests.
    pub admin_access: bool,
    pub tolerations: Vec<Toleration>,
    /// `capacity.requests`: qualified capacity name -> amount in base units.
    pub capacity_requests: BTreeMap<String, i64>,
}

/// One alternative of a `firstAvailable` request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceSubRequest {
    pub name: String,
    pub request: ExactDeviceRequest,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceRequestKind {
    Exactly(ExactDeviceRequest),
    /// Subrequests tried in order; the first that can be satisfied is used.
    FirstAvailable(Vec<DeviceSubRequest>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRequest {
    pub name: String,
    pub kind: DeviceRequestKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstraintKind {
    /// All devices of the named requests have the same value of this fully qualified attribute.
    MatchAttribute(String),
    /// All devices of the named requests have different values of this attribute.
    DistinctAttribute(String),
}

/// A `DeviceConstraint`. `requests` empty: applies to every request of the claim. An entry
/// `req` covers all subrequests of `req`; `req/sub` covers one subrequest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceConstraint {
    pub requests: Vec<String>,
    pub kind: ConstraintKind,
}

/// `DeviceClaimConfiguration`: opaque configuration for some or all requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimConfig {
    pub requests: Vec<String>,
    pub opaque: OpaqueDeviceConfig,
}

/// `ResourceClaimSpec.devices`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceClaimSpec {
    pub requests: Vec<DeviceRequest>,
    pub constraints: Vec<DeviceConstraint>,
    pub config: Vec<ClaimConfig>,
}

/// One allocated device (`DeviceRequestAllocationResult`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceAllocation {
    /// The request name, or `request/subrequest` for a `firstAvailable` request.
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub admin_access: bool,
    /// Capacity consumed on a device that allows multiple allocations, base units.
    pub consumed_capacity: BTreeMap<String, i64>,
    /// Set for allocations of devices that allow multiple allocations.
    pub share_id: Option<String>,
}

/// `status.allocation` of a ResourceClaim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllocationResult {
    pub devices: Vec<DeviceAllocation>,
    /// Nodes the allocation can be used on; `None`: every node.
    pub node_selector: Option<NodeSelector>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceClaim {
    pub namespace: String,
    pub name: String,
    pub spec: ResourceClaimSpec,
    /// `status.allocation`, for claims already allocated.
    pub allocation: Option<AllocationResult>,
    /// `status.reservedFor`: the consumers (pods as `namespace/name`) using the claim.
    pub reserved_for: Vec<String>,
}

impl ResourceClaim {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceClaimTemplate {
    pub namespace: String,
    pub name: String,
    pub spec: ResourceClaimSpec,
}

impl ResourceClaimTemplate {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
