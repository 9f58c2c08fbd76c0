//! The device index: every device of the current generation of every pool, interned into dense
//! ids, with per-node lists of the devices a node can reach.
//!
//! Order (the documented tie-break of the allocator): pools by (driver, pool name), slices of a
//! pool by name, devices in slice order. A device's [`DeviceId`] is its position in that order.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use lockstep_model::dra::{
    AttributeValue, CapacityRequestPolicy, DeviceNodeScope, ResourceSlice, SliceNodeScope,
};
use lockstep_model::{Node, NodeId, NodeSelector, Taint, TaintEffect};

use crate::error::DraError;
use crate::selector::semver::Semver;
use crate::selector::{CelAttribute, CelDevice};

/// Dense device id: the position of the device in the catalog order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId(pub u32);

impl DeviceId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Strings interned to dense ids.
#[derive(Debug, Default, Clone)]
pub(crate) struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }
    pub fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
}

/// A set of nodes as a bitset over node ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeSet(Vec<u64>);

impl NodeSet {
    pub fn empty(nodes: usize) -> Self {
        NodeSet(vec![0; nodes.div_ceil(64)])
    }
    pub fn insert(&mut self, node: NodeId) {
        self.0[node.index() / 64] |= 1 << (node.index() % 64);
    }
    pub fn contains(&self, node: NodeId) -> bool {
        self.0
            .get(node.index() / 64)
            .is_some_and(|w| w & (1 << (node.index() % 64)) != 0)
    }
    pub fn intersect(&mut self, other: &NodeSet) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a &= b;
        }
    }
    pub fn from_selector(selector: &NodeSelector, nodes: &[Node]) -> Self {
        let mut set = NodeSet::empty(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            if selector.matches(&n.name, &n.labels) {
                set.insert(NodeId(i as u32));
            }
        }
        set
    }
}

/// The nodes that reach a device.
#[derive(Debug, Clone)]
pub(crate) enum Visibility {
    /// Local to this node (`nodeName`).
    Node(NodeId),
    /// Local to a node that is not in the node list.
    Nowhere,
    AllNodes,
    Selected(Arc<NodeSet>),
}

/// A typed attribute value with strings and versions interned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttrValue {
    Int(i64),
    Bool(bool),
    Str(u32),
    Version(u32),
}

#[derive(Debug, Clone)]
pub(crate) struct CapacitySlot {
    /// Fully qualified name.
    pub fq: u32,
    /// The name without domain, when the domain is the driver (requests may use either).
    pub short: Option<u32>,
    /// The name as the device published it (used in allocation results).
    pub published: u32,
    pub value: i64,
    pub policy: Option<CapacityRequestPolicy>,
}

#[derive(Debug, Clone)]
pub(crate) struct DeviceEntry {
    pub pool: u32,
    pub slice: u32,
    pub name: String,
    /// Sorted by fully qualified name id.
    pub attrs: Vec<(u32, AttrValue)>,
    pub capacity: Vec<CapacitySlot>,
    /// Offset of this device's capacity slots in the usage vector (devices that allow
    /// multiple allocations only).
    pub cap_offset: u32,
    pub consumes: Vec<(u32, i64)>,
    /// `NoSchedule` and `NoExecute` taints only.
    pub taints: Vec<Taint>,
    pub multi: bool,
    pub binds_to_node: bool,
    pub visibility: Visibility,
    /// Node-local (by slice or device `nodeName`): allocations pin the claim to the node.
    pub local: bool,
    /// `perDeviceNodeSelection` scope, for allocation results.
    pub device_scope: Option<DeviceNodeScope>,
    /// The pool is complete and valid.
    pub usable: bool,
}

impl DeviceEntry {
    pub fn attribute(&self, fq: u32) -> Option<AttrValue> {
        self.attrs
            .binary_search_by_key(&fq, |a| a.0)
            .ok()
            .map(|i| self.attrs[i].1)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct PoolInfo {
    pub driver: String,
    pub name: String,
    /// Why devices of the pool cannot be allocated, if they cannot.
    pub unusable: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct SliceInfo {
    pub scope: SliceNodeScope,
}

/// Everything about devices that does not change while scheduling.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub node_names: Vec<String>,
    pub pools: Vec<PoolInfo>,
    pub slices: Vec<SliceInfo>,
    pub devices: Vec<DeviceEntry>,
    by_name: HashMap<(String, String, String), DeviceId>,
    /// Usable devices each node reaches, in id order.
    pub node_devices: Vec<Vec<DeviceId>>,
    /// Incomplete or invalid pools each node reaches (they block `All` requests).
    pub node_unusable_pools: Vec<Vec<u32>>,
    /// Nodes with the same class have device lists that are alike in everything the allocator
    /// reads but names and ids (drivers, attributes, capacities, taints, in the same order),
    /// so the same claims against the same usage get the same answer. `None`: the node reaches
    /// shared counters, devices of other nodes or unusable pools, and has no class.
    pub node_class: Vec<Option<u32>>,
    pub counter_totals: Vec<i64>,
    /// (pool, counter set, counter) of each counter id.
    pub counter_names: Vec<(u32, String, String)>,
    /// Fully qualified attribute and capacity names (`domain/name`).
    pub names: Interner,
    pub strings: Interner,
    pub versions: Vec<Semver>,
    version_ids: HashMap<String, u32>,
    pub capacity_slots: usize,
}

fn split_qualified<'a>(key: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    key.split_once('/').unwrap_or((driver, key))
}

fn slice_error(slice: &ResourceSlice, field: String, message: String) -> DraError {
    DraError::Invalid {
        object: format!("ResourceSlice {}", slice.name),
        field,
        message,
    }
}

impl Catalog {
    pub fn build(nodes: &[Node], input: &[ResourceSlice]) -> Result<Catalog, DraError> {
        let mut cat = Catalog {
            node_names: nodes.iter().map(|n| n.name.clone()).collect(),
            node_devices: vec![Vec::new(); nodes.len()],
            node_unusable_pools: vec![Vec::new(); nodes.len()],
            ..Catalog::default()
        };
        let node_ids: HashMap<&str, NodeId> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), NodeId(i as u32)))
            .collect();

        let mut seen_slices = HashMap::new();
        let mut pools: BTreeMap<(&str, &str), Vec<&ResourceSlice>> = BTreeMap::new();
        for s in input {
            if seen_slices.insert(s.name.as_str(), ()).is_some() {
                return Err(DraError::Duplicate {
                    kind: "ResourceSlice",
                    name: s.name.clone(),
                });
            }
            pools
                .entry((s.driver.as_str(), s.pool.name.as_str()))
                .or_default()
                .push(s);
        }

        for ((driver, pool_name), mut slices) in pools {
            let generation = slices.iter().map(|s| s.pool.generation).max().unwrap_or(0);
            slices.retain(|s| s.pool.generation == generation);
            slices.sort_by(|a, b| a.name.cmp(&b.name));
            let pool_id = cat.pools.len() as u32;

            let mut unusable = None;
            let expected = slices[0].pool.resource_slice_count;
            if slices.len() as i64 != expected {
                unusable = Some(format!(
                    "resource pool {driver}/{pool_name} is currently being updated ({} of {expected} slices of generation {generation})",
                    slices.len()
                ));
            }
            let mut device_names = HashMap::new();
            for s in &slices {
                for d in &s.devices {
                    if device_names.insert(d.name.as_str(), ()).is_some() && unusable.is_none() {
                        unusable = Some(format!(
                            "resource pool {driver}/{pool_name} is invalid: duplicate device name {}",
                            d.name
                        ));
                    }
                }
            }

            // Counter sets of the pool.
            let mut counters: HashMap<(&str, &str), u32> = HashMap::new();
            for s in &slices {
                for (i, set) in s.shared_counters.iter().enumerate() {
                    for (cname, &total) in &set.counters {
                        if total < 0 {
                            return Err(slice_error(
                                s,
                                format!("spec.sharedCounters[{i}].counters[{cname}]"),
                                format!("counter value {total} is negative"),
                            ));
                        }
                        let id = cat.counter_totals.len() as u32;
                        if counters
                            .insert((set.name.as_str(), cname.as_str()), id)
                            .is_some()
                        {
                            if unusable.is_none() {
                                unusable = Some(format!(
                                    "resource pool {driver}/{pool_name} is invalid: counter set {} defined twice",
                                    set.name
                                ));
                            }
                            continue;
                        }
                        cat.counter_totals.push(total);
                        cat.counter_names
                            .push((pool_id, set.name.clone(), cname.clone()));
                    }
                }
            }

            // As upstream, a complete pool whose devices consume a counter set, or a counter,
            // that no slice of the pool defines is invalid.
            if unusable.is_none() {
                let sets: HashSet<&str> = slices
                    .iter()
                    .flat_map(|s| &s.shared_counters)
                    .map(|set| set.name.as_str())
                    .collect();
                'check: for s in &slices {
                    for d in &s.devices {
                        for c in &d.consumes_counters {
                            let set = c.counter_set.as_str();
                            let missing = if !sets.contains(set) {
                                Some(format!("counter set {set} not found"))
                            } else {
                                c.counters
                                    .keys()
                                    .find(|cname| !counters.contains_key(&(set, cname.as_str())))
                                    .map(|cname| {
                                        format!("counter {cname} not found in counter set {set}")
                                    })
                            };
                            if let Some(why) = missing {
                                unusable = Some(format!(
                                    "resource pool {driver}/{pool_name} is invalid: {why} \
                                     (device {} of ResourceSlice {})",
                                    d.name, s.name
                                ));
                                break 'check;
                            }
                        }
                    }
                }
            }

            cat.pools.push(PoolInfo {
                driver: driver.to_string(),
                name: pool_name.to_string(),
                unusable: unusable.clone(),
            });

            for s in slices {
                let slice_id = cat.slices.len() as u32;
                cat.slices.push(SliceInfo {
                    scope: s.node_scope.clone(),
                });
                let slice_visibility = match &s.node_scope {
                    SliceNodeScope::NodeName(n) => Some(match node_ids.get(n.as_str()) {
                        Some(&id) => Visibility::Node(id),
                        None => Visibility::Nowhere,
                    }),
                    SliceNodeScope::AllNodes => Some(Visibility::AllNodes),
                    SliceNodeScope::NodeSelector(sel) => Some(Visibility::Selected(Arc::new(
                        NodeSet::from_selector(sel, nodes),
                    ))),
                    SliceNodeScope::PerDeviceNodeSelection => None,
                };
                for (di, d) in s.devices.iter().enumerate() {
                    let field = |rest: &str| format!("spec.devices[{di}]{rest}");
                    let (visibility, local, device_scope) = match &slice_visibility {
                        Some(v) => (
                            v.clone(),
                            matches!(s.node_scope, SliceNodeScope::NodeName(_)),
                            None,
                        ),
                        None => match &d.node_scope {
                            Some(DeviceNodeScope::NodeName(n)) => (
                                match node_ids.get(n.as_str()) {
                                    Some(&id) => Visibility::Node(id),
                                    None => Visibility::Nowhere,
                                },
                                true,
                                d.node_scope.clone(),
                            ),
                            Some(DeviceNodeScope::AllNodes) => {
                                (Visibility::AllNodes, false, d.node_scope.clone())
                            }
                            Some(DeviceNodeScope::NodeSelector(sel)) => (
                                Visibility::Selected(Arc::new(NodeSet::from_selector(sel, nodes))),
                                false,
                                d.node_scope.clone(),
                            ),
                            None => {
                                return Err(slice_error(
                                    s,
                                    field(""),
                                    "the slice uses perDeviceNodeSelection, so the device must set one of nodeName, nodeSelector or allNodes".into(),
                                ));
                            }
                        },
                    };

                    // Attributes: fully qualified, an explicit driver domain wins over none.
                    let mut attrs: Vec<(u32, AttrValue)> = Vec::with_capacity(d.attributes.len());
                    let mut ordered: Vec<(&String, &AttributeValue)> =
                        d.attributes.iter().collect();
                    ordered.sort_by_key(|(k, _)| !k.contains('/'));
                    for (key, value) in ordered {
                        let (domain, name) = split_qualified(key, driver);
                        let fq = cat.names.intern(&format!("{domain}/{name}"));
                        if attrs.iter().any(|a| a.0 == fq) {
                            continue;
                        }
                        let v = match value {
                            AttributeValue::Int(i) => AttrValue::Int(*i),
                            AttributeValue::Bool(b) => AttrValue::Bool(*b),
                            AttributeValue::String(t) => AttrValue::Str(cat.strings.intern(t)),
                            AttributeValue::Version(t) => {
                                let id = match cat.version_ids.get(t) {
                                    Some(&id) => id,
                                    None => {
                                        let parsed = Semver::parse(t).map_err(|e| {
                                            slice_error(
                                                s,
                                                field(&format!(".attributes[{key}].version")),
                                                e,
                                            )
                                        })?;
                                        let id = cat.versions.len() as u32;
                                        cat.versions.push(parsed);
                                        cat.version_ids.insert(t.clone(), id);
                                        id
                                    }
                                };
                                AttrValue::Version(id)
                            }
                        };
                        attrs.push((fq, v));
                    }
                    attrs.sort_by_key(|a| a.0);

                    let mut capacity: Vec<CapacitySlot> = Vec::with_capacity(d.capacity.len());
                    let mut ordered: Vec<_> = d.capacity.iter().collect();
                    ordered.sort_by_key(|(k, _)| !k.contains('/'));
                    for (key, cap) in ordered {
                        if cap.value < 0 {
                            return Err(slice_error(
                                s,
                                field(&format!(".capacity[{key}].value")),
                                format!("capacity {} is negative", cap.value),
                            ));
                        }
                        let (domain, name) = split_qualified(key, driver);
                        let fq = cat.names.intern(&format!("{domain}/{name}"));
                        if capacity.iter().any(|c| c.fq == fq) {
                            continue;
                        }
                        let short = (domain == driver).then(|| cat.names.intern(name));
                        let published = cat.names.intern(key);
                        capacity.push(CapacitySlot {
                            fq,
                            short,
                            published,
                            value: cap.value,
                            policy: cap.request_policy.clone(),
                        });
                    }
                    capacity.sort_by_key(|c| c.fq);

                    let mut consumes = Vec::new();
                    for c in &d.consumes_counters {
                        for (cname, &amount) in &c.counters {
                            if amount < 0 {
                                return Err(slice_error(
                                    s,
                                    field(&format!(
                                        ".consumesCounters[{}].counters[{cname}]",
                                        c.counter_set
                                    )),
                                    format!("counter value {amount} is negative"),
                                ));
                            }
                            // Missing sets and counters made the pool invalid above.
                            if let Some(&id) =
                                counters.get(&(c.counter_set.as_str(), cname.as_str()))
                            {
                                consumes.push((id, amount));
                            }
                        }
                    }

                    let cap_offset = cat.capacity_slots as u32;
                    if d.allow_multiple_allocations {
                        cat.capacity_slots += capacity.len();
                    }
                    let id = DeviceId(cat.devices.len() as u32);
                    cat.by_name.insert(
                        (driver.to_string(), pool_name.to_string(), d.name.clone()),
                        id,
                    );
                    cat.devices.push(DeviceEntry {
                        pool: pool_id,
                        slice: slice_id,
                        name: d.name.clone(),
                        attrs,
                        capacity,
                        cap_offset,
                        consumes,
                        taints: d
                            .taints
                            .iter()
                            .filter(|t| {
                                matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
                            })
                            .cloned()
                            .collect(),
                        multi: d.allow_multiple_allocations,
                        binds_to_node: d.binds_to_node,
                        visibility,
                        local,
                        device_scope,
                        usable: unusable.is_none(),
                    });
                }
            }
        }

        // Per-node device lists.
        for (i, dev) in cat.devices.iter().enumerate() {
            let add =
                |node: NodeId, cat_nodes: &mut Vec<Vec<DeviceId>>, bad: &mut Vec<Vec<u32>>| {
                    if dev.usable {
                        cat_nodes[node.index()].push(DeviceId(i as u32));
                    } else if bad[node.index()].last() != Some(&dev.pool) {
                        bad[node.index()].push(dev.pool);
                    }
                };
            match &dev.visibility {
                Visibility::Node(n) => add(*n, &mut cat.node_devices, &mut cat.node_unusable_pools),
                Visibility::Nowhere => {}
                Visibility::AllNodes => {
                    for n in 0..nodes.len() {
                        add(
                            NodeId(n as u32),
                            &mut cat.node_devices,
                            &mut cat.node_unusable_pools,
                        );
                    }
                }
                Visibility::Selected(set) => {
                    for n in 0..nodes.len() {
                        if set.contains(NodeId(n as u32)) {
                            add(
                                NodeId(n as u32),
                                &mut cat.node_devices,
                                &mut cat.node_unusable_pools,
                            );
                        }
                    }
                }
            }
        }
        for list in &mut cat.node_unusable_pools {
            list.sort_unstable();
            list.dedup();
        }
        cat.node_class = cat.node_classes();
        Ok(cat)
    }

    fn node_classes(&self) -> Vec<Option<u32>> {
        let mut classes: HashMap<String, u32> = HashMap::new();
        (0..self.node_devices.len())
            .map(|n| {
                if !self.node_unusable_pools[n].is_empty() {
                    return None;
                }
                let mut key = String::new();
                for &d in &self.node_devices[n] {
                    let e = self.device(d);
                    if !matches!(e.visibility, Visibility::Node(_)) || !e.consumes.is_empty() {
                        return None;
                    }
                    use std::fmt::Write;
                    let _ = write!(
                        key,
                        "{}|{:?}|{:?}|{:?}|{}|{};",
                        self.pools[e.pool as usize].driver,
                        e.attrs,
                        e.capacity,
                        e.taints,
                        e.multi,
                        e.binds_to_node
                    );
                }
                let next = classes.len() as u32;
                Some(*classes.entry(key).or_insert(next))
            })
            .collect()
    }

    pub fn device_id(&self, driver: &str, pool: &str, device: &str) -> Option<DeviceId> {
        self.by_name
            .get(&(driver.to_string(), pool.to_string(), device.to_string()))
            .copied()
    }

    pub fn device(&self, id: DeviceId) -> &DeviceEntry {
        &self.devices[id.index()]
    }

    pub fn driver_of(&self, id: DeviceId) -> &str {
        &self.pools[self.device(id).pool as usize].driver
    }

    /// `driver/pool/device`, for messages.
    pub fn device_label(&self, id: DeviceId) -> String {
        let d = self.device(id);
        let p = &self.pools[d.pool as usize];
        format!("{}/{}/{}", p.driver, p.name, d.name)
    }

    /// The `device` variable of a CEL evaluation.
    pub fn cel_device(&self, id: DeviceId) -> CelDevice<'_> {
        let d = self.device(id);
        let driver = self.driver_of(id);
        let attributes = d
            .attrs
            .iter()
            .map(|&(fq, v)| {
                let (domain, name) = split_qualified(self.names.name(fq), driver);
                let v = match v {
                    AttrValue::Int(i) => CelAttribute::Int(i),
                    AttrValue::Bool(b) => CelAttribute::Bool(b),
                    AttrValue::Str(s) => CelAttribute::String(self.strings.name(s)),
                    AttrValue::Version(v) => CelAttribute::Version(&self.versions[v as usize]),
                };
                (domain, name, v)
            })
            .collect();
        let capacity = d
            .capacity
            .iter()
            .map(|c| {
                let (domain, name) = split_qualified(self.names.name(c.fq), driver);
                (domain, name, c.value)
            })
            .collect();
        CelDevice {
            driver,
            attributes,
            capacity,
            allow_multiple_allocations: d.multi,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_model::dra::{Device, ResourcePool};
    use lockstep_model::{Labels, ResourceList};

    fn node(name: &str, rack: &str) -> Node {
        let mut labels = Labels::new();
        labels.insert("rack".into(), rack.into());
        Node {
            name: name.into(),
            labels,
            taints: vec![],
            unschedulable: false,
            allocatable: ResourceList::new(),
        }
    }

    fn slice(
        name: &str,
        pool: &str,
        generation: i64,
        scope: SliceNodeScope,
        devices: &[&str],
    ) -> ResourceSlice {
        ResourceSlice {
            name: name.into(),
            driver: "d.example.com".into(),
            pool: ResourcePool {
                name: pool.into(),
                generation,
                resource_slice_count: 1,
            },
            node_scope: scope,
            devices: devices
                .iter()
                .map(|n| Device {
                    name: n.to_string(),
                    ..Device::default()
                })
                .collect(),
            shared_counters: vec![],
        }
    }

    #[test]
    fn node_sets() {
        let mut a = NodeSet::empty(130);
        a.insert(NodeId(0));
        a.insert(NodeId(129));
        assert!(a.contains(NodeId(129)) && !a.contains(NodeId(64)) && !a.contains(NodeId(500)));
        let mut b = NodeSet::empty(130);
        b.insert(NodeId(129));
        a.intersect(&b);
        assert!(!a.contains(NodeId(0)) && a.contains(NodeId(129)));
    }

    #[test]
    fn devices_are_ordered_by_pool_then_slice_and_listed_per_node() {
        let nodes = [node("n0", "r1"), node("n1", "r2")];
        let sel = NodeSelector {
            terms: vec![lockstep_model::NodeSelectorTerm {
                match_expressions: vec![lockstep_model::Requirement {
                    key: "rack".into(),
                    operator: lockstep_model::Operator::In,
                    values: vec!["r2".into()],
                }],
                match_fields: vec![],
            }],
        };
        let cat = Catalog::build(
            &nodes,
            &[
                slice(
                    "z",
                    "pool-b",
                    0,
                    SliceNodeScope::NodeName("n0".into()),
                    &["b0"],
                ),
                slice(
                    "y",
                    "pool-a",
                    0,
                    SliceNodeScope::NodeSelector(sel),
                    &["a0", "a1"],
                ),
                slice("old", "pool-a", -1, SliceNodeScope::AllNodes, &["gone"]),
                slice(
                    "x",
                    "pool-c",
                    0,
                    SliceNodeScope::NodeName("elsewhere".into()),
                    &["c0"],
                ),
            ],
        )
        .unwrap();
        let names: Vec<&str> = cat.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a0", "a1", "b0", "c0"]);
        assert_eq!(cat.node_devices[0], [DeviceId(2)]);
        assert_eq!(cat.node_devices[1], [DeviceId(0), DeviceId(1)]);
        assert_eq!(
            cat.device_id("d.example.com", "pool-a", "a1"),
            Some(DeviceId(1))
        );
        assert_eq!(cat.device_id("d.example.com", "pool-a", "gone"), None);
        assert_eq!(cat.device_label(DeviceId(3)), "d.example.com/pool-c/c0");
    }

    #[test]
    fn duplicate_slice_names_are_bad_input() {
        let nodes = [node("n0", "r1")];
        let s = slice("s", "p", 0, SliceNodeScope::AllNodes, &[]);
        assert!(matches!(
            Catalog::build(&nodes, &[s.clone(), s]),
            Err(DraError::Duplicate {
                kind: "ResourceSlice",
                ..
            })
        ));
    }
}
