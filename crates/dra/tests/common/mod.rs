//! Builders for DRA fixtures: nodes, slices, classes, claims.
#![allow(dead_code)]

use std::collections::BTreeMap;

use lockstep_dra::{ClaimRef, DraInputs, DraState, NodeAllocation};
use lockstep_model::dra::*;
use lockstep_model::{
    Labels, Node, NodeId, NodeSelector, NodeSelectorTerm, Operator, Requirement, ResourceList,
    Taint, TaintEffect, Toleration, TolerationOperator,
};

pub const DRIVER: &str = "gpu.example.com";
pub const GI: i64 = 1 << 30;

pub fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        name: name.to_string(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Labels>(),
        taints: Vec::new(),
        unschedulable: false,
        allocatable: ResourceList::new(),
    }
}

pub fn int(v: i64) -> AttributeValue {
    AttributeValue::Int(v)
}
pub fn s(v: &str) -> AttributeValue {
    AttributeValue::String(v.to_string())
}
pub fn b(v: bool) -> AttributeValue {
    AttributeValue::Bool(v)
}
pub fn ver(v: &str) -> AttributeValue {
    AttributeValue::Version(v.to_string())
}

pub fn device(name: &str, attrs: &[(&str, AttributeValue)]) -> Device {
    Device {
        name: name.to_string(),
        attributes: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..Device::default()
    }
}

pub fn with_capacity(mut d: Device, name: &str, value: i64) -> Device {
    d.capacity.insert(
        name.to_string(),
        DeviceCapacity {
            value,
            request_policy: None,
        },
    );
    d
}

/// A GPU with `model`, `memory` (GiB, as capacity), `pcieRoot` and `numa`.
pub fn gpu(name: &str, model: &str, memory_gi: i64, pcie: &str, numa: i64) -> Device {
    with_capacity(
        device(
            name,
            &[
                ("model", s(model)),
                ("pcieRoot", s(pcie)),
                ("numa", int(numa)),
            ],
        ),
        "memory",
        memory_gi * GI,
    )
}

pub fn slice_on(name: &str, pool: &str, node: &str, devices: Vec<Device>) -> ResourceSlice {
    ResourceSlice {
        name: name.to_string(),
        driver: DRIVER.to_string(),
        pool: ResourcePool {
            name: pool.to_string(),
            generation: 0,
            resource_slice_count: 1,
        },
        node_scope: SliceNodeScope::NodeName(node.to_string()),
        devices,
        shared_counters: Vec::new(),
    }
}

pub fn slice_scoped(
    name: &str,
    pool: &str,
    scope: SliceNodeScope,
    devices: Vec<Device>,
) -> ResourceSlice {
    ResourceSlice {
        node_scope: scope,
        ..slice_on(name, pool, "", devices)
    }
}

pub fn selector_in(key: &str, values: &[&str]) -> NodeSelector {
    NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions: vec![Requirement {
                key: key.to_string(),
                operator: Operator::In,
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
            match_fields: Vec::new(),
        }],
    }
}

pub fn class(name: &str, selectors: &[&str]) -> DeviceClass {
    DeviceClass {
        name: name.to_string(),
        selectors: selectors.iter().map(|s| s.to_string()).collect(),
        ..DeviceClass::default()
    }
}

/// The class every fixture uses: all devices of the test driver.
pub fn gpu_class() -> DeviceClass {
    class("gpu", &["device.driver == 'gpu.example.com'"])
}

pub fn exact(class: &str, count: u32) -> ExactDeviceRequest {
    ExactDeviceRequest {
        device_class_name: class.to_string(),
        allocation_mode: AllocationMode::ExactCount(count),
        ..ExactDeviceRequest::default()
    }
}

pub fn all(class: &str) -> ExactDeviceRequest {
    ExactDeviceRequest {
        device_class_name: class.to_string(),
        allocation_mode: AllocationMode::All,
        ..ExactDeviceRequest::default()
    }
}

pub fn selecting(mut e: ExactDeviceRequest, selectors: &[&str]) -> ExactDeviceRequest {
    e.selectors = selectors.iter().map(|s| s.to_string()).collect();
    e
}

pub fn request(name: &str, e: ExactDeviceRequest) -> DeviceRequest {
    DeviceRequest {
        name: name.to_string(),
        kind: DeviceRequestKind::Exactly(e),
    }
}

pub fn first_available(name: &str, subs: Vec<(&str, ExactDeviceRequest)>) -> DeviceRequest {
    DeviceRequest {
        name: name.to_string(),
        kind: DeviceRequestKind::FirstAvailable(
            subs.into_iter()
                .map(|(n, r)| DeviceSubRequest {
                    name: n.to_string(),
                    request: r,
                })
                .collect(),
        ),
    }
}

pub fn match_attr(attr: &str, requests: &[&str]) -> DeviceConstraint {
    DeviceConstraint {
        requests: requests.iter().map(|s| s.to_string()).collect(),
        kind: ConstraintKind::MatchAttribute(attr.to_string()),
    }
}

pub fn distinct_attr(attr: &str, requests: &[&str]) -> DeviceConstraint {
    DeviceConstraint {
        requests: requests.iter().map(|s| s.to_string()).collect(),
        kind: ConstraintKind::DistinctAttribute(attr.to_string()),
    }
}

pub fn claim(
    name: &str,
    requests: Vec<DeviceRequest>,
    constraints: Vec<DeviceConstraint>,
) -> ResourceClaim {
    ResourceClaim {
        namespace: "default".to_string(),
        name: name.to_string(),
        spec: ResourceClaimSpec {
            requests,
            constraints,
            config: Vec::new(),
        },
        allocation: None,
        reserved_for: Vec::new(),
    }
}

pub fn template(
    name: &str,
    requests: Vec<DeviceRequest>,
    constraints: Vec<DeviceConstraint>,
) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        namespace: "default".to_string(),
        name: name.to_string(),
        spec: ResourceClaimSpec {
            requests,
            constraints,
            config: Vec::new(),
        },
    }
}

pub fn taint(key: &str, effect: TaintEffect) -> Taint {
    Taint {
        key: key.to_string(),
        value: "true".to_string(),
        effect,
    }
}

pub fn tolerate(key: &str, effect: Option<TaintEffect>) -> Toleration {
    Toleration {
        key: key.to_string(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect,
    }
}

/// Everything a DraState is built from.
#[derive(Default, Clone)]
pub struct World {
    pub nodes: Vec<Node>,
    pub classes: Vec<DeviceClass>,
    pub slices: Vec<ResourceSlice>,
    pub claims: Vec<ResourceClaim>,
    pub templates: Vec<ResourceClaimTemplate>,
}

impl World {
    pub fn new() -> Self {
        World {
            classes: vec![gpu_class()],
            ..World::default()
        }
    }
    pub fn inputs(&self) -> DraInputs<'_> {
        DraInputs {
            nodes: &self.nodes,
            classes: &self.classes,
            slices: &self.slices,
            claims: &self.claims,
            templates: &self.templates,
        }
    }
    pub fn state(&self) -> DraState {
        DraState::new(self.inputs()).expect("valid fixture")
    }
}

pub fn node_id(state_world: &World, name: &str) -> NodeId {
    NodeId(
        state_world
            .nodes
            .iter()
            .position(|n| n.name == name)
            .expect("node in fixture") as u32,
    )
}

pub fn claim_ref(state: &DraState, name: &str) -> ClaimRef {
    ClaimRef::Claim(state.claim_id("default", name).expect("claim in fixture"))
}

pub fn template_ref(state: &DraState, name: &str) -> ClaimRef {
    ClaimRef::Template(
        state
            .template_id("default", name)
            .expect("template in fixture"),
    )
}

/// `request=device` for every device of every claim, in allocation order.
pub fn picked(state: &DraState, a: &NodeAllocation) -> Vec<String> {
    let mut out = Vec::new();
    for c in &a.claims {
        for d in c.devices.iter() {
            let (_, _, dev) = state.device_name(d.device);
            out.push(format!("{}={dev}", state.request_name(c.claim, d.request)));
        }
    }
    out
}

/// Devices picked by one claim, by name.
pub fn devices_of(state: &DraState, a: &NodeAllocation) -> Vec<String> {
    a.claims
        .iter()
        .flat_map(|c| c.devices.iter())
        .map(|d| state.device_name(d.device).2.to_string())
        .collect()
}

pub fn consumed(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}
