//! Dynamic Resource Allocation objects (`resource.k8s.io/v1`): DeviceClass, ResourceSlice,
//! ResourceClaim (spec, `status.allocation`, `status.reservedFor`) and ResourceClaimTemplate,
//! validated as the API server validates each object on its own: required fields, one-of
//! fields, names, enums, list limits, quantities (converted to whole base units, rounded up)
//! and typed attributes. CEL expressions are kept as text: `lockstep-dra` compiles them and
//! reports those that do not compile. What needs several objects (a request naming a missing
//! class, counters consumed from a set in another slice) is left to `lockstep-dra` as well.
//!
//! Alpha fields that the model does not carry are dropped with a warning, as an API server
//! with those feature gates off (the default) drops them; list-typed attributes, which would
//! leave an attribute without a value there, are an error.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1 as api;
use lockstep_model::dra::{
    AllocationMode, AllocationResult, AttributeValue, CapacityRange, CapacityRequestPolicy,
    ClaimConfig, ConstraintKind, CounterSet, Device, DeviceAllocation, DeviceCapacity, DeviceClass,
    DeviceConstraint, DeviceCounterConsumption, DeviceNodeScope, DeviceRequest, DeviceRequestKind,
    DeviceSubRequest, ExactDeviceRequest, OpaqueDeviceConfig, ResourceClaim, ResourceClaimSpec,
    ResourceClaimTemplate, ResourcePool, ResourceSlice, SliceNodeScope,
};
use lockstep_model::{Taint, TaintEffect, Toleration};
use serde_json::Value as Json;

use super::{Ctx, selectors};
use crate::error::LoadError;
use crate::route::Entry;

// Limits of `k8s.io/api/resource/v1`, checked as the API server checks them.
const MAX_DEVICES_PER_SLICE: usize = 128;
const MAX_DEVICES_PER_SLICE_WITH_TAINTS_OR_COUNTERS: usize = 64;
const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
const MAX_COUNTER_SETS: usize = 8;
const MAX_COUNTERS: usize = 32;
const MAX_COUNTER_CONSUMPTIONS: usize = 2;
const MAX_DEVICE_TAINTS: usize = 16;
const MAX_BINDING_CONDITIONS: usize = 4;
const MAX_VALID_VALUES: usize = 10;
const MAX_REQUESTS: usize = 32;
const MAX_SUBREQUESTS: usize = 8;
const MAX_SELECTORS: usize = 32;
const MAX_CONSTRAINTS: usize = 32;
const MAX_CONFIGS: usize = 32;
const MAX_TOLERATIONS: usize = 16;
const MAX_RESERVED_FOR: usize = 256;
const MAX_ATTRIBUTE_STRING: usize = 64;
const MAX_IDENTIFIER: usize = 32;
const MAX_DOMAIN: usize = 63;
const MAX_OPAQUE_PARAMETERS: usize = 10 * 1024;

fn ctx<T>(entry: &Entry<T>) -> Ctx<'_> {
    Ctx {
        origin: &entry.origin,
        object: &entry.object,
    }
}

/// A warning about a field that is dropped, naming the object and the field.
fn dropped(ctx: &Ctx, warnings: &mut Vec<String>, path: &str, why: &str) {
    warnings.push(format!(
        "warning: {}: {}: ignoring {path}: {why}",
        ctx.origin, ctx.object
    ));
}

pub(crate) fn device_class(entry: &Entry<api::DeviceClass>) -> Result<DeviceClass, LoadError> {
    let ctx = ctx(entry);
    let mut class = DeviceClass {
        name: entry.name.clone(),
        ..DeviceClass::default()
    };
    let Some(spec) = &entry.value.spec else {
        return Ok(class);
    };
    class.selectors = cel_selectors(&ctx, "spec.selectors", spec.selectors.as_deref())?;
    let configs = spec.config.as_deref().unwrap_or_default();
    max_items(&ctx, "spec.config", configs.len(), MAX_CONFIGS)?;
    for (i, c) in configs.iter().enumerate() {
        class.config.push(opaque(
            &ctx,
            &format!("spec.config[{i}].opaque"),
            c.opaque.as_ref(),
        )?);
    }
    class.extended_resource_name = non_empty(&spec.extended_resource_name).map(str::to_string);
    Ok(class)
}

pub(crate) fn resource_slice(
    entry: &Entry<api::ResourceSlice>,
    warnings: &mut Vec<String>,
) -> Result<ResourceSlice, LoadError> {
    let ctx = ctx(entry);
    let spec = &entry.value.spec;
    if spec.driver.is_empty() {
        return Err(ctx.invalid(
            "spec.driver",
            "a ResourceSlice needs a driver (the DRA driver's name, e.g. gpu.example.com); add it",
        ));
    }
    let pool = &spec.pool;
    if pool.name.is_empty() {
        return Err(ctx.invalid(
            "spec.pool.name",
            "a ResourceSlice needs a pool name (often the node name); add spec.pool.name",
        ));
    }
    if pool.generation < 0 {
        return Err(ctx.invalid(
            "spec.pool.generation",
            format!("generation {} must be zero or more", pool.generation),
        ));
    }
    if pool.resource_slice_count < 1 {
        return Err(ctx.invalid(
            "spec.pool.resourceSliceCount",
            format!(
                "resourceSliceCount {} must be at least 1 (the number of slices in the pool)",
                pool.resource_slice_count
            ),
        ));
    }

    let mut scopes = Vec::new();
    if let Some(node) = non_empty(&spec.node_name) {
        scopes.push(SliceNodeScope::NodeName(node.to_string()));
    }
    if let Some(sel) = &spec.node_selector {
        scopes.push(SliceNodeScope::NodeSelector(one_term_selector(
            &ctx,
            "spec.nodeSelector",
            sel,
        )?));
    }
    if spec.all_nodes == Some(true) {
        scopes.push(SliceNodeScope::AllNodes);
    }
    let per_device = spec.per_device_node_selection == Some(true);
    if per_device {
        scopes.push(SliceNodeScope::PerDeviceNodeSelection);
    }
    if scopes.len() != 1 {
        return Err(ctx.invalid(
            "spec",
            format!(
                "exactly one of nodeName, nodeSelector, allNodes: true and \
                 perDeviceNodeSelection: true must be set, found {}; keep one",
                scopes.len()
            ),
        ));
    }
    let node_scope = scopes.remove(0);

    let devices = spec.devices.as_deref().unwrap_or_default();
    let counter_sets = spec.shared_counters.as_deref().unwrap_or_default();
    if !devices.is_empty() && !counter_sets.is_empty() {
        return Err(ctx.invalid(
            "spec",
            "only one of devices and sharedCounters may be set in a ResourceSlice; put the \
             shared counters in a separate slice of the same pool",
        ));
    }
    let limit = if devices.iter().any(|d| {
        d.taints.as_ref().is_some_and(|t| !t.is_empty())
            || d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
    }) {
        MAX_DEVICES_PER_SLICE_WITH_TAINTS_OR_COUNTERS
    } else {
        MAX_DEVICES_PER_SLICE
    };
    max_items(&ctx, "spec.devices", devices.len(), limit)?;
    let mut names = BTreeMap::new();
    let mut out_devices = Vec::with_capacity(devices.len());
    for (i, d) in devices.iter().enumerate() {
        let path = format!("spec.devices[{i}]");
        if let Some(first) = names.insert(d.name.clone(), i) {
            return Err(ctx.invalid(
                format!("{path}.name"),
                format!(
                    "device name {:?} is also used by spec.devices[{first}]; give each device \
                     its own name",
                    d.name
                ),
            ));
        }
        out_devices.push(device(&ctx, &path, d, per_device, warnings)?);
    }

    max_items(
        &ctx,
        "spec.sharedCounters",
        counter_sets.len(),
        MAX_COUNTER_SETS,
    )?;
    let mut shared_counters = Vec::with_capacity(counter_sets.len());
    let mut set_names = BTreeMap::new();
    for (i, set) in counter_sets.iter().enumerate() {
        let path = format!("spec.sharedCounters[{i}]");
        dns_label(&ctx, &format!("{path}.name"), &set.name, "counter set name")?;
        if let Some(first) = set_names.insert(set.name.clone(), i) {
            return Err(ctx.invalid(
                format!("{path}.name"),
                format!(
                    "counter set {:?} is also defined by spec.sharedCounters[{first}]; give \
                     each set its own name",
                    set.name
                ),
            ));
        }
        if set.counters.is_empty() {
            return Err(ctx.invalid(
                format!("{path}.counters"),
                "a counter set needs at least one counter; add counters",
            ));
        }
        shared_counters.push(CounterSet {
            name: set.name.clone(),
            counters: counters(&ctx, &format!("{path}.counters"), &set.counters)?,
        });
    }

    if spec.partition_type_attribute.is_some() {
        dropped(
            &ctx,
            warnings,
            "spec.partitionTypeAttribute",
            "lockstep does not read partition types",
        );
    }

    Ok(ResourceSlice {
        name: entry.name.clone(),
        driver: spec.driver.clone(),
        pool: ResourcePool {
            name: pool.name.clone(),
            generation: pool.generation,
            resource_slice_count: pool.resource_slice_count,
        },
        node_scope,
        devices: out_devices,
        shared_counters,
    })
}

fn device(
    ctx: &Ctx,
    path: &str,
    d: &api::Device,
    per_device: bool,
    warnings: &mut Vec<String>,
) -> Result<Device, LoadError> {
    dns_label(ctx, &format!("{path}.name"), &d.name, "device name")?;
    let multi = d.allow_multiple_allocations == Some(true);
    let attributes = d.attributes.as_ref();
    let capacities = d.capacity.as_ref();
    let total = attributes.map_or(0, BTreeMap::len) + capacities.map_or(0, BTreeMap::len);
    if total > MAX_ATTRIBUTES_AND_CAPACITIES {
        return Err(ctx.invalid(
            path,
            format!(
                "the device has {total} attributes and capacities; at most \
                 {MAX_ATTRIBUTES_AND_CAPACITIES} together are allowed"
            ),
        ));
    }

    let mut out = Device {
        name: d.name.clone(),
        allow_multiple_allocations: multi,
        binds_to_node: d.binds_to_node == Some(true),
        ..Device::default()
    };
    for (name, a) in attributes.into_iter().flatten() {
        let at = format!("{path}.attributes.{name}");
        qualified_name(ctx, &at, name, "attribute", false)?;
        out.attributes.insert(name.clone(), attribute(ctx, &at, a)?);
    }
    for (name, c) in capacities.into_iter().flatten() {
        let at = format!("{path}.capacity.{name}");
        qualified_name(ctx, &at, name, "capacity", false)?;
        if out.attributes.contains_key(name) {
            return Err(ctx.invalid(
                at,
                format!("{name:?} is both an attribute and a capacity; rename one of them"),
            ));
        }
        out.capacity
            .insert(name.clone(), capacity(ctx, &at, c, multi)?);
    }

    let consumptions = d.consumes_counters.as_deref().unwrap_or_default();
    max_items(
        ctx,
        &format!("{path}.consumesCounters"),
        consumptions.len(),
        MAX_COUNTER_CONSUMPTIONS,
    )?;
    for (i, c) in consumptions.iter().enumerate() {
        let at = format!("{path}.consumesCounters[{i}]");
        dns_label(
            ctx,
            &format!("{at}.counterSet"),
            &c.counter_set,
            "counter set name",
        )?;
        if out
            .consumes_counters
            .iter()
            .any(|o| o.counter_set == c.counter_set)
        {
            return Err(ctx.invalid(
                format!("{at}.counterSet"),
                format!(
                    "counter set {:?} is named twice; list each counter set once",
                    c.counter_set
                ),
            ));
        }
        if c.counters.is_empty() {
            return Err(ctx.invalid(
                format!("{at}.counters"),
                "a counter consumption needs at least one counter; add counters",
            ));
        }
        if c.compatibility_groups
            .as_ref()
            .is_some_and(|g| !g.is_empty())
        {
            dropped(
                ctx,
                warnings,
                &format!("{at}.compatibilityGroups"),
                "compatibility groups are an alpha feature lockstep does not implement",
            );
        }
        out.consumes_counters.push(DeviceCounterConsumption {
            counter_set: c.counter_set.clone(),
            counters: counters(ctx, &format!("{at}.counters"), &c.counters)?,
        });
    }

    let mut scopes = Vec::new();
    if let Some(node) = non_empty(&d.node_name) {
        scopes.push(("nodeName", DeviceNodeScope::NodeName(node.to_string())));
    }
    if let Some(sel) = &d.node_selector {
        let sel = one_term_selector(ctx, &format!("{path}.nodeSelector"), sel)?;
        scopes.push(("nodeSelector", DeviceNodeScope::NodeSelector(sel)));
    }
    if d.all_nodes == Some(true) {
        scopes.push(("allNodes", DeviceNodeScope::AllNodes));
    }
    if per_device {
        if scopes.len() != 1 {
            return Err(ctx.invalid(
                path,
                format!(
                    "with spec.perDeviceNodeSelection: true every device sets exactly one of \
                     nodeName, nodeSelector and allNodes: true, found {}; keep one",
                    scopes.len()
                ),
            ));
        }
        out.node_scope = scopes.pop().map(|(_, s)| s);
    } else if let Some((field, _)) = scopes.first() {
        return Err(ctx.invalid(
            format!("{path}.{field}"),
            "a device can say which nodes reach it only when the slice sets \
             perDeviceNodeSelection: true; remove the field or set spec.perDeviceNodeSelection",
        ));
    }

    let taints = d.taints.as_deref().unwrap_or_default();
    max_items(
        ctx,
        &format!("{path}.taints"),
        taints.len(),
        MAX_DEVICE_TAINTS,
    )?;
    for (i, t) in taints.iter().enumerate() {
        if let Some(taint) = device_taint(ctx, &format!("{path}.taints[{i}]"), t)? {
            out.taints.push(taint);
        }
    }

    for (field, list, into) in [
        (
            "bindingConditions",
            &d.binding_conditions,
            &mut out.binding_conditions,
        ),
        (
            "bindingFailureConditions",
            &d.binding_failure_conditions,
            &mut out.binding_failure_conditions,
        ),
    ] {
        let list = list.as_deref().unwrap_or_default();
        max_items(
            ctx,
            &format!("{path}.{field}"),
            list.len(),
            MAX_BINDING_CONDITIONS,
        )?;
        if let Some(i) = list.iter().position(String::is_empty) {
            return Err(ctx.invalid(
                format!("{path}.{field}[{i}]"),
                "a condition type must not be empty",
            ));
        }
        *into = list.to_vec();
    }
    if !out.binding_conditions.is_empty() && !out.binds_to_node {
        return Err(ctx.invalid(
            format!("{path}.bindingConditions"),
            "bindingConditions need bindsToNode: true; set it or remove the conditions",
        ));
    }
    if !out.binding_failure_conditions.is_empty() && out.binding_conditions.is_empty() {
        return Err(ctx.invalid(
            format!("{path}.bindingFailureConditions"),
            "bindingFailureConditions need bindingConditions; add them or remove these",
        ));
    }

    if d.node_allocatable_resources
        .as_ref()
        .is_some_and(|m| !m.is_empty())
    {
        dropped(
            ctx,
            warnings,
            &format!("{path}.nodeAllocatableResources"),
            "node-allocatable resources of devices are an alpha feature lockstep does not \
             implement",
        );
    }
    Ok(out)
}

/// A typed attribute value: exactly one of int, bool, string and version.
fn attribute(ctx: &Ctx, path: &str, a: &api::DeviceAttribute) -> Result<AttributeValue, LoadError> {
    if a.ints.is_some() || a.bools.is_some() || a.strings.is_some() || a.versions.is_some() {
        return Err(ctx.invalid(
            path,
            "list-typed attributes (ints, bools, strings, versions) are an alpha feature \
             (DRAListTypeAttributes) lockstep does not support; give a single int, bool, string \
             or version",
        ));
    }
    let mut values = Vec::new();
    if let Some(v) = a.int {
        values.push(AttributeValue::Int(v));
    }
    if let Some(v) = a.bool {
        values.push(AttributeValue::Bool(v));
    }
    if let Some(v) = &a.string {
        if v.len() > MAX_ATTRIBUTE_STRING {
            return Err(ctx.invalid(
                format!("{path}.string"),
                format!(
                    "the string is {} bytes long; at most {MAX_ATTRIBUTE_STRING} are allowed",
                    v.len()
                ),
            ));
        }
        values.push(AttributeValue::String(v.clone()));
    }
    if let Some(v) = &a.version {
        if v.len() > MAX_ATTRIBUTE_STRING || !is_semver(v) {
            return Err(ctx.invalid(
                format!("{path}.version"),
                format!(
                    "{v:?} is not a semantic version (semver 2.0.0, at most \
                     {MAX_ATTRIBUTE_STRING} bytes, e.g. 1.2.3 or 2.0.0-rc.1)"
                ),
            ));
        }
        values.push(AttributeValue::Version(v.clone()));
    }
    match values.len() {
        1 => Ok(values.remove(0)),
        0 => Err(ctx.invalid(
            path,
            "an attribute needs a value; set one of int, bool, string and version",
        )),
        n => Err(ctx.invalid(
            path,
            format!("an attribute has exactly one value, found {n}; keep one of int, bool, string and version"),
        )),
    }
}

fn capacity(
    ctx: &Ctx,
    path: &str,
    c: &api::DeviceCapacity,
    multi: bool,
) -> Result<DeviceCapacity, LoadError> {
    let value = ctx.base_units(&format!("{path}.value"), &c.value)?;
    let request_policy = match &c.request_policy {
        None => None,
        Some(_) if !multi => {
            return Err(ctx.invalid(
                format!("{path}.requestPolicy"),
                "a requestPolicy needs allowMultipleAllocations: true on the device; set it or \
                 remove the policy",
            ));
        }
        Some(p) => Some(request_policy(
            ctx,
            &format!("{path}.requestPolicy"),
            p,
            value,
        )?),
    };
    Ok(DeviceCapacity {
        value,
        request_policy,
    })
}

fn request_policy(
    ctx: &Ctx,
    path: &str,
    p: &api::CapacityRequestPolicy,
    capacity: i64,
) -> Result<CapacityRequestPolicy, LoadError> {
    let default = p
        .default
        .as_ref()
        .map(|q| ctx.base_units(&format!("{path}.default"), q))
        .transpose()?;
    if let Some(d) = default
        && d > capacity
    {
        return Err(ctx.invalid(
            format!("{path}.default"),
            format!("default {d} is more than the capacity {capacity}"),
        ));
    }

    let listed = p.valid_values.as_deref().unwrap_or_default();
    max_items(
        ctx,
        &format!("{path}.validValues"),
        listed.len(),
        MAX_VALID_VALUES,
    )?;
    let mut valid_values: Vec<i64> = Vec::with_capacity(listed.len());
    for (i, q) in listed.iter().enumerate() {
        let at = format!("{path}.validValues[{i}]");
        let v = ctx.base_units(&at, q)?;
        if v > capacity {
            return Err(ctx.invalid(
                at,
                format!("{:?} is more than the capacity {capacity}", q.0),
            ));
        }
        if valid_values.last().is_some_and(|&last| last >= v) {
            return Err(ctx.invalid(at, "validValues must be in ascending order without repeats"));
        }
        valid_values.push(v);
    }

    let valid_range = match &p.valid_range {
        None => None,
        Some(r) => {
            let at = format!("{path}.validRange");
            let min = ctx.base_units(&format!("{at}.min"), &r.min)?;
            let max = r
                .max
                .as_ref()
                .map(|q| ctx.base_units(&format!("{at}.max"), q))
                .transpose()?;
            let step = r
                .step
                .as_ref()
                .map(|q| ctx.base_units(&format!("{at}.step"), q))
                .transpose()?;
            if min > capacity {
                return Err(ctx.invalid(
                    format!("{at}.min"),
                    format!("min {min} is more than the capacity {capacity}"),
                ));
            }
            if let Some(max) = max {
                if max > capacity {
                    return Err(ctx.invalid(
                        format!("{at}.max"),
                        format!("max {max} is more than the capacity {capacity}"),
                    ));
                }
                if max < min {
                    return Err(ctx.invalid(
                        format!("{at}.max"),
                        format!("max {max} is less than min {min}"),
                    ));
                }
            }
            if let Some(step) = step {
                if step == 0 {
                    return Err(ctx.invalid(format!("{at}.step"), "step must be more than zero"));
                }
                if min.saturating_add(step) > capacity {
                    return Err(ctx.invalid(
                        format!("{at}.step"),
                        format!("min + step ({min} + {step}) is more than the capacity {capacity}"),
                    ));
                }
            }
            Some(CapacityRange { min, max, step })
        }
    };

    if !valid_values.is_empty() && valid_range.is_some() {
        return Err(ctx.invalid(path, "set at most one of validValues and validRange"));
    }
    if !valid_values.is_empty() || valid_range.is_some() {
        let Some(d) = default else {
            return Err(ctx.invalid(
                format!("{path}.default"),
                "a policy with validValues or validRange needs a default; add default",
            ));
        };
        if !valid_values.is_empty() && !valid_values.contains(&d) {
            return Err(ctx.invalid(
                format!("{path}.default"),
                format!("default {d} must be one of validValues"),
            ));
        }
        if let Some(r) = &valid_range
            && (d < r.min || r.max.is_some_and(|max| d > max))
        {
            return Err(ctx.invalid(
                format!("{path}.default"),
                format!("default {d} must be within validRange"),
            ));
        }
    }
    Ok(CapacityRequestPolicy {
        default,
        valid_values,
        valid_range,
    })
}

fn counters(
    ctx: &Ctx,
    path: &str,
    map: &BTreeMap<String, api::Counter>,
) -> Result<BTreeMap<String, i64>, LoadError> {
    max_items(ctx, path, map.len(), MAX_COUNTERS)?;
    let mut out = BTreeMap::new();
    for (name, c) in map {
        let at = format!("{path}.{name}");
        dns_label(ctx, &at, name, "counter name")?;
        out.insert(
            name.clone(),
            ctx.base_units(&format!("{at}.value"), &c.value)?,
        );
    }
    Ok(out)
}

/// A device taint; `None` for effect `None`, which does not keep the device from being
/// allocated.
fn device_taint(ctx: &Ctx, path: &str, t: &api::DeviceTaint) -> Result<Option<Taint>, LoadError> {
    if t.key.is_empty() {
        return Err(ctx.invalid(format!("{path}.key"), "a taint needs a key; add key"));
    }
    let effect = match t.effect.as_str() {
        "NoSchedule" => TaintEffect::NoSchedule,
        "NoExecute" => TaintEffect::NoExecute,
        "None" => return Ok(None),
        "" => {
            return Err(ctx.invalid(
                format!("{path}.effect"),
                "a device taint needs an effect; use NoSchedule, NoExecute or None",
            ));
        }
        other => {
            return Err(ctx.invalid(
                format!("{path}.effect"),
                format!(
                    "invalid effect {other:?} for a device taint; use NoSchedule, NoExecute or None"
                ),
            ));
        }
    };
    Ok(Some(Taint {
        key: t.key.clone(),
        value: t.value.clone().unwrap_or_default(),
        effect,
    }))
}

pub(crate) fn resource_claim(
    entry: &Entry<api::ResourceClaim>,
    warnings: &mut Vec<String>,
) -> Result<ResourceClaim, LoadError> {
    let ctx = ctx(entry);
    let namespace = entry.namespace.clone().unwrap_or_default();
    let claim = &entry.value;
    let spec = claim_spec(&ctx, "spec", claim.spec.as_ref(), warnings)?;
    let status = claim.status.as_ref();
    let allocation = status
        .and_then(|s| s.allocation.as_ref())
        .map(|a| allocation(&ctx, "status.allocation", a))
        .transpose()?;
    let consumers = status
        .and_then(|s| s.reserved_for.as_deref())
        .unwrap_or_default();
    if !consumers.is_empty() && allocation.is_none() {
        return Err(ctx.invalid(
            "status.reservedFor",
            "a claim can be reserved only once it is allocated; add status.allocation or \
             remove status.reservedFor",
        ));
    }
    max_items(
        &ctx,
        "status.reservedFor",
        consumers.len(),
        MAX_RESERVED_FOR,
    )?;
    let mut reserved_for = Vec::with_capacity(consumers.len());
    for (i, c) in consumers.iter().enumerate() {
        let path = format!("status.reservedFor[{i}]");
        if c.resource.is_empty() {
            return Err(ctx.invalid(
                format!("{path}.resource"),
                "a consumer needs its resource (pods for a pod); add resource",
            ));
        }
        if c.name.is_empty() {
            return Err(ctx.invalid(format!("{path}.name"), "a consumer needs a name; add name"));
        }
        let group = c.api_group.as_deref().unwrap_or_default();
        let consumer = if group.is_empty() && c.resource == "pods" {
            format!("{namespace}/{}", c.name)
        } else if group.is_empty() {
            format!("{}/{namespace}/{}", c.resource, c.name)
        } else {
            format!("{}.{group}/{namespace}/{}", c.resource, c.name)
        };
        if reserved_for.contains(&consumer) {
            return Err(ctx.invalid(
                path,
                format!("consumer {consumer} is listed twice; list each consumer once"),
            ));
        }
        reserved_for.push(consumer);
    }
    Ok(ResourceClaim {
        namespace,
        name: entry.name.clone(),
        spec,
        allocation,
        reserved_for,
    })
}

pub(crate) fn resource_claim_template(
    entry: &Entry<api::ResourceClaimTemplate>,
    warnings: &mut Vec<String>,
) -> Result<ResourceClaimTemplate, LoadError> {
    let ctx = ctx(entry);
    let spec = entry.value.spec.as_ref().and_then(|s| s.spec.as_ref());
    Ok(ResourceClaimTemplate {
        namespace: entry.namespace.clone().unwrap_or_default(),
        name: entry.name.clone(),
        spec: claim_spec(&ctx, "spec.spec", spec, warnings)?,
    })
}

/// `ResourceClaimSpec` at `prefix` (`spec` of a claim, `spec.spec` of a template).
fn claim_spec(
    ctx: &Ctx,
    prefix: &str,
    spec: Option<&api::ResourceClaimSpec>,
    warnings: &mut Vec<String>,
) -> Result<ResourceClaimSpec, LoadError> {
    let mut out = ResourceClaimSpec::default();
    let Some(devices) = spec.and_then(|s| s.devices.as_ref()) else {
        return Ok(out);
    };
    let base = format!("{prefix}.devices");

    let requests = devices.requests.as_deref().unwrap_or_default();
    max_items(
        ctx,
        &format!("{base}.requests"),
        requests.len(),
        MAX_REQUESTS,
    )?;
    // Request names and `request/subrequest` names, for constraints and configs.
    let mut names: BTreeSet<String> = BTreeSet::new();
    for (i, r) in requests.iter().enumerate() {
        let path = format!("{base}.requests[{i}]");
        dns_label(ctx, &format!("{path}.name"), &r.name, "request name")?;
        if !names.insert(r.name.clone()) {
            return Err(ctx.invalid(
                format!("{path}.name"),
                format!(
                    "request name {:?} is used twice; give each request its own name",
                    r.name
                ),
            ));
        }
        let kind = match (&r.exactly, &r.first_available) {
            (Some(e), None) => DeviceRequestKind::Exactly(exact(
                ctx,
                &format!("{path}.exactly"),
                ExactFields::from_request(e),
                warnings,
            )?),
            (None, Some(subs)) => {
                let at = format!("{path}.firstAvailable");
                if subs.is_empty() {
                    return Err(ctx.invalid(
                        at,
                        "firstAvailable needs at least one subrequest; add one or use exactly",
                    ));
                }
                max_items(ctx, &at, subs.len(), MAX_SUBREQUESTS)?;
                let mut out_subs: Vec<DeviceSubRequest> = Vec::with_capacity(subs.len());
                for (j, s) in subs.iter().enumerate() {
                    let sub_path = format!("{at}[{j}]");
                    dns_label(ctx, &format!("{sub_path}.name"), &s.name, "subrequest name")?;
                    if out_subs.iter().any(|o| o.name == s.name) {
                        return Err(ctx.invalid(
                            format!("{sub_path}.name"),
                            format!(
                                "subrequest name {:?} is used twice in this request; give each \
                                 its own name",
                                s.name
                            ),
                        ));
                    }
                    names.insert(format!("{}/{}", r.name, s.name));
                    out_subs.push(DeviceSubRequest {
                        name: s.name.clone(),
                        request: exact(ctx, &sub_path, ExactFields::from_subrequest(s), warnings)?,
                    });
                }
                DeviceRequestKind::FirstAvailable(out_subs)
            }
            (None, None) | (Some(_), Some(_)) => {
                return Err(ctx.invalid(
                    path,
                    "a device request sets exactly one of exactly and firstAvailable",
                ));
            }
        };
        out.requests.push(DeviceRequest {
            name: r.name.clone(),
            kind,
        });
    }

    let constraints = devices.constraints.as_deref().unwrap_or_default();
    max_items(
        ctx,
        &format!("{base}.constraints"),
        constraints.len(),
        MAX_CONSTRAINTS,
    )?;
    for (i, c) in constraints.iter().enumerate() {
        let path = format!("{base}.constraints[{i}]");
        let requests = request_refs(ctx, &path, c.requests.as_deref(), &names)?;
        let kind = match (
            non_empty(&c.match_attribute),
            non_empty(&c.distinct_attribute),
        ) {
            (Some(a), None) => {
                qualified_name(ctx, &format!("{path}.matchAttribute"), a, "attribute", true)?;
                ConstraintKind::MatchAttribute(a.to_string())
            }
            (None, Some(a)) => {
                qualified_name(
                    ctx,
                    &format!("{path}.distinctAttribute"),
                    a,
                    "attribute",
                    true,
                )?;
                ConstraintKind::DistinctAttribute(a.to_string())
            }
            _ => {
                return Err(ctx.invalid(
                    path,
                    "a constraint sets exactly one of matchAttribute and distinctAttribute",
                ));
            }
        };
        out.constraints.push(DeviceConstraint { requests, kind });
    }

    let configs = devices.config.as_deref().unwrap_or_default();
    max_items(ctx, &format!("{base}.config"), configs.len(), MAX_CONFIGS)?;
    for (i, c) in configs.iter().enumerate() {
        let path = format!("{base}.config[{i}]");
        out.config.push(ClaimConfig {
            requests: request_refs(ctx, &path, c.requests.as_deref(), &names)?,
            opaque: opaque(ctx, &format!("{path}.opaque"), c.opaque.as_ref())?,
        });
    }
    Ok(out)
}

/// The `requests` of a constraint or a config at `path`: each must name a request or a
/// `request/subrequest` of the claim, once.
fn request_refs(
    ctx: &Ctx,
    path: &str,
    refs: Option<&[String]>,
    names: &BTreeSet<String>,
) -> Result<Vec<String>, LoadError> {
    let refs = refs.unwrap_or_default();
    for (k, n) in refs.iter().enumerate() {
        if !names.contains(n) {
            return Err(ctx.invalid(
                format!("{path}.requests[{k}]"),
                format!(
                    "{n:?} is not a request (or request/subrequest) of this claim; name one of \
                     its requests"
                ),
            ));
        }
        if refs[..k].contains(n) {
            return Err(ctx.invalid(
                format!("{path}.requests[{k}]"),
                format!("request {n:?} is listed twice; list it once"),
            ));
        }
    }
    Ok(refs.to_vec())
}

/// The fields `ExactDeviceRequest` and `DeviceSubRequest` share.
struct ExactFields<'a> {
    device_class_name: &'a str,
    selectors: Option<&'a [api::DeviceSelector]>,
    allocation_mode: Option<&'a str>,
    count: Option<i64>,
    /// Always `None` for subrequests.
    admin_access: Option<bool>,
    tolerations: Option<&'a [api::DeviceToleration]>,
    capacity: Option<&'a api::CapacityRequirements>,
    has_derived_attributes: bool,
}

impl<'a> ExactFields<'a> {
    fn from_request(r: &'a api::ExactDeviceRequest) -> Self {
        ExactFields {
            device_class_name: &r.device_class_name,
            selectors: r.selectors.as_deref(),
            allocation_mode: r.allocation_mode.as_deref(),
            count: r.count,
            admin_access: r.admin_access,
            tolerations: r.tolerations.as_deref(),
            capacity: r.capacity.as_ref(),
            has_derived_attributes: r.derived_attributes.as_ref().is_some_and(|d| !d.is_empty()),
        }
    }
    fn from_subrequest(r: &'a api::DeviceSubRequest) -> Self {
        ExactFields {
            device_class_name: &r.device_class_name,
            selectors: r.selectors.as_deref(),
            allocation_mode: r.allocation_mode.as_deref(),
            count: r.count,
            admin_access: None,
            tolerations: r.tolerations.as_deref(),
            capacity: r.capacity.as_ref(),
            has_derived_attributes: r.derived_attributes.as_ref().is_some_and(|d| !d.is_empty()),
        }
    }
}

fn exact(
    ctx: &Ctx,
    path: &str,
    r: ExactFields,
    warnings: &mut Vec<String>,
) -> Result<ExactDeviceRequest, LoadError> {
    if r.device_class_name.is_empty() {
        return Err(ctx.invalid(
            format!("{path}.deviceClassName"),
            "a request needs a deviceClassName; name a DeviceClass",
        ));
    }
    let allocation_mode = match (r.allocation_mode.unwrap_or(""), r.count) {
        ("" | "ExactCount", None) => AllocationMode::ExactCount(1),
        ("" | "ExactCount", Some(n)) => match u32::try_from(n) {
            Ok(n) if n > 0 => AllocationMode::ExactCount(n),
            Ok(_) => {
                return Err(ctx.invalid(
                    format!("{path}.count"),
                    format!("count {n} must be greater than zero"),
                ));
            }
            Err(_) if n < 0 => {
                return Err(ctx.invalid(
                    format!("{path}.count"),
                    format!("count {n} must be greater than zero"),
                ));
            }
            Err(_) => {
                return Err(ctx.invalid(
                    format!("{path}.count"),
                    format!(
                        "count {n} is more than {}, the most devices one request may ask for; \
                         ask for fewer devices",
                        u32::MAX
                    ),
                ));
            }
        },
        ("All", None) => AllocationMode::All,
        ("All", Some(_)) => {
            return Err(ctx.invalid(
                format!("{path}.count"),
                "count is used only with allocationMode ExactCount; remove it",
            ));
        }
        (other, _) => {
            return Err(ctx.invalid(
                format!("{path}.allocationMode"),
                format!("invalid allocationMode {other:?}; use ExactCount or All"),
            ));
        }
    };
    let mut capacity_requests = BTreeMap::new();
    let requested = r.capacity.and_then(|c| c.requests.as_ref());
    for (name, q) in requested.into_iter().flatten() {
        let at = format!("{path}.capacity.requests.{name}");
        qualified_name(ctx, &at, name, "capacity", false)?;
        capacity_requests.insert(name.clone(), ctx.base_units(&at, q)?);
    }
    if r.has_derived_attributes {
        dropped(
            ctx,
            warnings,
            &format!("{path}.derivedAttributes"),
            "derived attributes are an alpha feature lockstep does not implement",
        );
    }
    Ok(ExactDeviceRequest {
        device_class_name: r.device_class_name.to_string(),
        selectors: cel_selectors(ctx, &format!("{path}.selectors"), r.selectors)?,
        allocation_mode,
        admin_access: r.admin_access == Some(true),
        tolerations: tolerations(ctx, &format!("{path}.tolerations"), r.tolerations)?,
        capacity_requests,
    })
}

fn tolerations(
    ctx: &Ctx,
    path: &str,
    list: Option<&[api::DeviceToleration]>,
) -> Result<Vec<Toleration>, LoadError> {
    let list = list.unwrap_or_default();
    max_items(ctx, path, list.len(), MAX_TOLERATIONS)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some("NoSchedule") => Some(TaintEffect::NoSchedule),
            Some("NoExecute") => Some(TaintEffect::NoExecute),
            Some(other) => {
                return Err(ctx.invalid(
                    format!("{at}.effect"),
                    format!(
                        "invalid effect {other:?} for a device toleration; use NoSchedule, \
                         NoExecute or leave it out"
                    ),
                ));
            }
        };
        out.push(super::pod::toleration(
            ctx,
            &at,
            t.key.as_deref(),
            t.operator.as_deref(),
            t.value.as_deref(),
            effect,
        )?);
    }
    Ok(out)
}

fn allocation(
    ctx: &Ctx,
    path: &str,
    a: &api::AllocationResult,
) -> Result<AllocationResult, LoadError> {
    let results = a
        .devices
        .as_ref()
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default();
    let at = format!("{path}.devices.results");
    max_items(
        ctx,
        &at,
        results.len(),
        lockstep_model::dra::ALLOCATION_RESULTS_MAX_SIZE,
    )?;
    let mut devices = Vec::with_capacity(results.len());
    for (i, r) in results.iter().enumerate() {
        let at = format!("{at}[{i}]");
        for (field, value) in [
            ("request", &r.request),
            ("driver", &r.driver),
            ("pool", &r.pool),
            ("device", &r.device),
        ] {
            if value.is_empty() {
                return Err(ctx.invalid(
                    format!("{at}.{field}"),
                    format!("an allocated device needs its {field}; add {field}"),
                ));
            }
        }
        let mut consumed_capacity = BTreeMap::new();
        for (name, q) in r.consumed_capacity.iter().flatten() {
            let at = format!("{at}.consumedCapacity.{name}");
            consumed_capacity.insert(name.clone(), ctx.base_units(&at, q)?);
        }
        devices.push(DeviceAllocation {
            request: r.request.clone(),
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
            admin_access: r.admin_access == Some(true),
            consumed_capacity,
            share_id: non_empty(&r.share_id).map(str::to_string),
        });
    }
    let node_selector = a
        .node_selector
        .as_ref()
        .map(|s| selectors::node_selector(ctx, &format!("{path}.nodeSelector"), s))
        .transpose()?;
    Ok(AllocationResult {
        devices,
        node_selector,
    })
}

/// `selectors[*].cel.expression`, in order.
fn cel_selectors(
    ctx: &Ctx,
    path: &str,
    list: Option<&[api::DeviceSelector]>,
) -> Result<Vec<String>, LoadError> {
    let list = list.unwrap_or_default();
    max_items(ctx, path, list.len(), MAX_SELECTORS)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        match &s.cel {
            Some(cel) if !cel.expression.trim().is_empty() => out.push(cel.expression.clone()),
            _ => {
                return Err(ctx.invalid(
                    format!("{path}[{i}].cel.expression"),
                    "a selector needs a CEL expression, e.g. cel: {expression: 'device.driver == \
                     \"gpu.example.com\"'}",
                ));
            }
        }
    }
    Ok(out)
}

/// An `OpaqueDeviceConfiguration` (required where it is read).
fn opaque(
    ctx: &Ctx,
    path: &str,
    o: Option<&api::OpaqueDeviceConfiguration>,
) -> Result<OpaqueDeviceConfig, LoadError> {
    let Some(o) = o else {
        return Err(ctx.invalid(
            path,
            "a configuration needs opaque (driver and parameters); add it",
        ));
    };
    if o.driver.is_empty() {
        return Err(ctx.invalid(
            format!("{path}.driver"),
            "opaque configuration needs the driver it is for; add driver",
        ));
    }
    if !matches!(o.parameters.0, Json::Object(_)) {
        return Err(ctx.invalid(
            format!("{path}.parameters"),
            "parameters must be an object (the driver's configuration); add one",
        ));
    }
    let parameters = o.parameters.0.to_string();
    if parameters.len() > MAX_OPAQUE_PARAMETERS {
        return Err(ctx.invalid(
            format!("{path}.parameters"),
            format!(
                "parameters are {} bytes as JSON; at most {MAX_OPAQUE_PARAMETERS} are allowed",
                parameters.len()
            ),
        ));
    }
    Ok(OpaqueDeviceConfig {
        driver: o.driver.clone(),
        parameters,
    })
}

/// A node selector with exactly one term, as slices and devices must use.
fn one_term_selector(
    ctx: &Ctx,
    path: &str,
    selector: &k8s_openapi::api::core::v1::NodeSelector,
) -> Result<lockstep_model::NodeSelector, LoadError> {
    if selector.node_selector_terms.len() != 1 {
        return Err(ctx.invalid(
            format!("{path}.nodeSelectorTerms"),
            format!(
                "a ResourceSlice node selector uses exactly one term, found {}",
                selector.node_selector_terms.len()
            ),
        ));
    }
    selectors::node_selector(ctx, path, selector)
}

fn max_items(ctx: &Ctx, path: &str, len: usize, max: usize) -> Result<(), LoadError> {
    if len > max {
        return Err(ctx.invalid(path, format!("{len} entries; at most {max} are allowed")));
    }
    Ok(())
}

/// Checks a DNS label (RFC 1123: lower-case letters, digits and `-`, starting and ending with
/// a letter or digit, at most 63 characters).
pub(crate) fn dns_label(ctx: &Ctx, path: &str, value: &str, what: &str) -> Result<(), LoadError> {
    let bytes = value.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-';
    if ok {
        return Ok(());
    }
    let message = if value.is_empty() {
        format!("a {what} is required; add one")
    } else {
        format!(
            "{what} {value:?} is not a DNS label (lower-case letters, digits and '-', starting \
             and ending with a letter or digit, at most 63 characters)"
        )
    };
    Err(ctx.invalid(path, message))
}

/// Checks an attribute or capacity name: a C identifier of at most 32 characters, optionally
/// prefixed by `domain/` (a DNS subdomain of at most 63 characters). `fully_qualified`
/// requires the domain.
fn qualified_name(
    ctx: &Ctx,
    path: &str,
    name: &str,
    what: &str,
    fully_qualified: bool,
) -> Result<(), LoadError> {
    let (domain, id) = match name.split_once('/') {
        Some((d, id)) => (Some(d), id),
        None => (None, name),
    };
    let id_ok = !id.is_empty()
        && id.len() <= MAX_IDENTIFIER
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !id.as_bytes()[0].is_ascii_digit();
    let domain_ok = match domain {
        None => !fully_qualified,
        Some(d) => {
            d.len() <= MAX_DOMAIN
                && !d.is_empty()
                && d.split('.').all(|label| {
                    let b = label.as_bytes();
                    !b.is_empty()
                        && b.iter()
                            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                        && b[0] != b'-'
                        && b[b.len() - 1] != b'-'
                })
        }
    };
    if id_ok && domain_ok {
        return Ok(());
    }
    let shape = if fully_qualified {
        "domain/name, e.g. gpu.example.com/pcieRoot"
    } else {
        "name or domain/name, e.g. memory or gpu.example.com/memory"
    };
    Err(ctx.invalid(
        path,
        format!(
            "{what} name {name:?} is not valid: use {shape}, where name is a C identifier of at \
             most {MAX_IDENTIFIER} characters and domain a DNS subdomain of at most {MAX_DOMAIN}"
        ),
    ))
}

/// Whether `v` is a semantic version by semver.org 2.0.0 (no leading `v`, no leading zeros in
/// numeric identifiers).
fn is_semver(v: &str) -> bool {
    fn numeric(s: &str) -> bool {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
    }
    fn identifiers(s: &str, pre_release: bool) -> bool {
        s.split('.').all(|id| {
            !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && (!pre_release || !id.bytes().all(|b| b.is_ascii_digit()) || numeric(id))
        })
    }
    let (rest, build) = match v.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (v, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| numeric(p))
        && pre.is_none_or(|p| identifiers(p, true))
        && build.is_none_or(|b| identifiers(b, false))
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::is_semver;

    #[test]
    fn semver_follows_semver_org() {
        for ok in [
            "0.0.0",
            "1.2.3",
            "10.20.30",
            "1.0.0-rc.1",
            "1.0.0-alpha-a.b",
            "1.0.0+build.7",
            "1.0.0-0.3.7+sha.5114f85",
        ] {
            assert!(is_semver(ok), "{ok}");
        }
        for bad in [
            "",
            "1",
            "1.2",
            "v1.2.3",
            "01.2.3",
            "1.2.3-",
            "1.2.3-01",
            "1.2.3+",
            "1.2.3.4",
            "1.2.x",
            "1.2.3-a..b",
        ] {
            assert!(!is_semver(bad), "{bad}");
        }
    }
}
