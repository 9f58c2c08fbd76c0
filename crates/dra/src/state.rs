//! [`DraState`]: the device catalog, the compiled claims, and which devices are in use; the
//! API the engine calls (`try_allocate`, `reserve`, `release`, `max_replicas`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use lockstep_model::dra::{
    AllocationResult, DeviceAllocation, DeviceClass, DeviceNodeScope, ResourceClaim,
    ResourceClaimTemplate, ResourceSlice, SliceNodeScope,
};
use lockstep_model::{Node, NodeId, NodeSelector, NodeSelectorTerm, Operator, Requirement};

use crate::catalog::{Catalog, DeviceId, NodeSet, Visibility};
use crate::claims::{ClassC, Compiler, Selectors, SpecC, compile_class};
use crate::error::{DraError, Unfit};
use crate::search;

/// Index of a ResourceClaim in [`DraInputs::claims`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimId(pub u32);

impl ClaimId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Index of a ResourceClaimTemplate in [`DraInputs::templates`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TemplateId(pub u32);

impl TemplateId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A claim a pod uses: an existing ResourceClaim (possibly shared, possibly already
/// allocated), or a fresh claim of the pod's own made from a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClaimRef {
    Claim(ClaimId),
    Template(TemplateId),
}

/// Which request (and subrequest of a `firstAvailable` request) a device was allocated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestRef {
    pub request: u16,
    pub subrequest: Option<u16>,
}

/// One allocated device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedDevice {
    pub request: RequestRef,
    pub device: DeviceId,
    pub admin_access: bool,
    /// Held as one share of the device (the allocation has a `shareID`): other shares may
    /// join within the device's capacity. Otherwise (and not admin access) the device is held
    /// exclusively, whatever its `allowMultipleAllocations` says: an allocation from a
    /// claim's status without a `shareID` blocks the device for everyone else.
    pub shared: bool,
    /// For shares of devices that allow multiple allocations: the amount consumed of each of
    /// the device's capacities (in the order of [`DraState::device_capacity_names`]); else
    /// empty.
    pub consumed_capacity: Box<[i64]>,
}

/// The allocation of one claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimAllocation {
    pub claim: ClaimRef,
    pub devices: Arc<[AllocatedDevice]>,
    /// The claim was allocated before (this pod shares it); nothing new is taken.
    pub already_allocated: bool,
}

/// The allocation of all claims of one pod on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAllocation {
    pub node: NodeId,
    pub claims: Vec<ClaimAllocation>,
}

/// What [`DraState::new`] builds from. Node ids are indexes into `nodes`; claim and template
/// ids are indexes into `claims` and `templates`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DraInputs<'a> {
    pub nodes: &'a [Node],
    pub classes: &'a [DeviceClass],
    pub slices: &'a [ResourceSlice],
    pub claims: &'a [ResourceClaim],
    pub templates: &'a [ResourceClaimTemplate],
}

/// Bounds of the allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Device placements one `try_allocate` may try before giving up.
    pub max_search_steps: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_search_steps: 100_000,
        }
    }
}

/// Nodes an allocated claim can be used from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeScope {
    All,
    One(NodeId),
    Set(Arc<NodeSet>),
}

impl NodeScope {
    pub fn contains(&self, node: NodeId) -> bool {
        match self {
            NodeScope::All => true,
            NodeScope::One(n) => *n == node,
            NodeScope::Set(s) => s.contains(node),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ClaimAllocated {
    pub devices: Arc<[AllocatedDevice]>,
    pub nodes: NodeScope,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ClaimUsage {
    pub allocation: Option<ClaimAllocated>,
    /// Pods using the claim (from `reservedFor`, then `reserve`/`release`).
    pub users: u32,
    /// Allocated in the input with no consumer: kept allocated when users drop to zero.
    pub pinned: bool,
}

/// Devices in use. Cheap to clone relative to the catalog, which is shared.
#[derive(Debug, Clone, Default)]
pub(crate) struct Usage {
    pub exclusive: Vec<u32>,
    pub shares: Vec<u32>,
    pub capacity_used: Vec<i64>,
    pub counters_used: Vec<i64>,
    pub claims: Vec<ClaimUsage>,
}

#[derive(Debug)]
pub(crate) struct CompiledClaim {
    pub key: String,
    pub spec: SpecC,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub catalog: Catalog,
    pub selectors: Selectors,
    pub claims: Vec<CompiledClaim>,
    pub templates: Vec<CompiledClaim>,
    claim_ids: HashMap<(String, String), ClaimId>,
    template_ids: HashMap<(String, String), TemplateId>,
    /// Answers of [`DraState::fits`] by (claims, node class, device usage), shared by the
    /// clones of a state (the key holds all they can differ in).
    pub fit_cache: crate::search::FitCache,
    /// Answers of [`DraState::fragmentation_delta`], keyed the same way plus the shape list.
    pub frag_cache: crate::search::Memo<f64>,
    /// Answers of [`DraState::remembered`], keyed the same way plus the caller's inputs.
    pub score_cache: crate::search::Memo<Option<i64>>,
    /// Devices that count for [`DraState::device_load`] and the demand, by node class and
    /// claims.
    pub load_cache: crate::search::Memo<(Arc<[u16]>, i64)>,
}

/// The DRA view of a cluster: devices, classes, claims, templates, and which devices are in
/// use. `try_allocate` never mutates; `reserve` and `release` are exact inverses, so the engine
/// can roll back transactions and evictions. Cloning shares the immutable parts.
#[derive(Debug, Clone)]
pub struct DraState {
    shared: Arc<Shared>,
    usage: Usage,
    limits: Limits,
}

impl DraState {
    /// Builds the state with default [`Limits`]. Fails on input the API server would reject:
    /// CEL selectors that do not compile, invalid slices or claims, duplicate names.
    pub fn new(inputs: DraInputs<'_>) -> Result<DraState, DraError> {
        Self::with_limits(inputs, Limits::default())
    }

    pub fn with_limits(inputs: DraInputs<'_>, limits: Limits) -> Result<DraState, DraError> {
        let catalog = Catalog::build(inputs.nodes, inputs.slices)?;
        let mut selectors = Selectors::default();
        let mut class_ids = HashMap::new();
        let mut classes: Vec<ClassC> = Vec::with_capacity(inputs.classes.len());
        for c in inputs.classes {
            if class_ids
                .insert(c.name.clone(), classes.len() as u32)
                .is_some()
            {
                return Err(DraError::Duplicate {
                    kind: "DeviceClass",
                    name: c.name.clone(),
                });
            }
            classes.push(compile_class(&mut selectors, c)?);
        }
        let mut compiler = Compiler {
            selectors: &mut selectors,
            catalog: &catalog,
            classes: &class_ids,
            class_list: &classes,
        };
        let mut claims = Vec::with_capacity(inputs.claims.len());
        let mut claim_ids = HashMap::new();
        for c in inputs.claims {
            let key = c.key();
            let id = ClaimId(claims.len() as u32);
            if claim_ids
                .insert((c.namespace.clone(), c.name.clone()), id)
                .is_some()
            {
                return Err(DraError::Duplicate {
                    kind: "ResourceClaim",
                    name: key,
                });
            }
            let spec = compiler.spec(format!("ResourceClaim {key}"), "spec", &c.spec)?;
            claims.push(CompiledClaim { key, spec });
        }
        let mut templates = Vec::with_capacity(inputs.templates.len());
        let mut template_ids = HashMap::new();
        for t in inputs.templates {
            let key = t.key();
            let id = TemplateId(templates.len() as u32);
            if template_ids
                .insert((t.namespace.clone(), t.name.clone()), id)
                .is_some()
            {
                return Err(DraError::Duplicate {
                    kind: "ResourceClaimTemplate",
                    name: key,
                });
            }
            let spec =
                compiler.spec(format!("ResourceClaimTemplate {key}"), "spec.spec", &t.spec)?;
            templates.push(CompiledClaim { key, spec });
        }

        let usage = Usage {
            exclusive: vec![0; catalog.devices.len()],
            shares: vec![0; catalog.devices.len()],
            capacity_used: vec![0; catalog.capacity_slots],
            counters_used: vec![0; catalog.counter_totals.len()],
            claims: vec![ClaimUsage::default(); claims.len()],
        };
        let mut state = DraState {
            shared: Arc::new(Shared {
                catalog,
                selectors,
                claims,
                templates,
                claim_ids,
                template_ids,
                fit_cache: Default::default(),
                frag_cache: Default::default(),
                score_cache: Default::default(),
                load_cache: Default::default(),
            }),
            usage,
            limits,
        };
        for (i, c) in inputs.claims.iter().enumerate() {
            if let Some(a) = &c.allocation {
                state.adopt_allocation(ClaimId(i as u32), c, a, inputs.nodes)?;
            }
        }
        Ok(state)
    }

    /// Records an allocation from a claim's status: its devices are in use.
    fn adopt_allocation(
        &mut self,
        id: ClaimId,
        claim: &ResourceClaim,
        a: &AllocationResult,
        nodes: &[Node],
    ) -> Result<(), DraError> {
        let shared = self.shared.clone();
        let cat = &shared.catalog;
        let spec = &shared.claims[id.index()].spec;
        let mut devices = Vec::with_capacity(a.devices.len());
        for (i, r) in a.devices.iter().enumerate() {
            let (req_name, sub_name) = match r.request.split_once('/') {
                Some((a, b)) => (a, Some(b)),
                None => (r.request.as_str(), None),
            };
            let request = spec.requests.iter().position(|q| q.name == req_name);
            let subrequest = match (request, sub_name) {
                (Some(ri), Some(s)) if spec.requests[ri].first_available => spec.requests[ri]
                    .alts
                    .iter()
                    .position(|a| a.name == s)
                    .map(|x| Some(x as u16)),
                (Some(ri), None) if !spec.requests[ri].first_available => Some(None),
                _ => None,
            };
            let (Some(request), Some(subrequest)) = (request, subrequest) else {
                return Err(DraError::Invalid {
                    object: format!("ResourceClaim {}", claim.key()),
                    field: format!("status.allocation.devices.results[{i}].request"),
                    message: format!(
                        "request {:?} is not a request (or request/subrequest) of the claim",
                        r.request
                    ),
                });
            };
            // A device no current slice publishes takes nothing.
            let Some(dev) = cat.device_id(&r.driver, &r.pool, &r.device) else {
                continue;
            };
            let e = cat.device(dev);
            // Held as a share only when the allocation says so (a shareID), as the
            // Kubernetes allocator reads allocated state: without one, the device is taken
            // whole even if it allows multiple allocations.
            let shared = r.share_id.is_some() && !r.admin_access;
            let consumed: Box<[i64]> = if shared && e.multi {
                e.capacity
                    .iter()
                    .map(|slot| {
                        [slot.published, slot.fq]
                            .into_iter()
                            .chain(slot.short)
                            .find_map(|n| r.consumed_capacity.get(cat.names.name(n)).copied())
                            .unwrap_or(0)
                    })
                    .collect()
            } else {
                Box::new([])
            };
            devices.push(AllocatedDevice {
                request: RequestRef {
                    request: request as u16,
                    subrequest,
                },
                device: dev,
                admin_access: r.admin_access,
                shared,
                consumed_capacity: consumed,
            });
        }
        let nodes = match &a.node_selector {
            None => NodeScope::All,
            Some(sel) => NodeScope::Set(Arc::new(NodeSet::from_selector(sel, nodes))),
        };
        for d in &devices {
            self.take_device(d);
        }
        let u = &mut self.usage.claims[id.index()];
        u.allocation = Some(ClaimAllocated {
            devices: devices.into(),
            nodes,
        });
        u.users = claim.reserved_for.len() as u32;
        u.pinned = claim.reserved_for.is_empty();
        Ok(())
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }
    pub(crate) fn usage(&self) -> &Usage {
        &self.usage
    }
    pub fn limits(&self) -> Limits {
        self.limits
    }
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The claim `namespace/name`, if the state knows it.
    pub fn claim_id(&self, namespace: &str, name: &str) -> Option<ClaimId> {
        self.shared
            .claim_ids
            .get(&(namespace.to_string(), name.to_string()))
            .copied()
    }

    /// The template `namespace/name`, if the state knows it.
    pub fn template_id(&self, namespace: &str, name: &str) -> Option<TemplateId> {
        self.shared
            .template_ids
            .get(&(namespace.to_string(), name.to_string()))
            .copied()
    }

    /// `namespace/name` of a claim or template.
    pub fn claim_key(&self, claim: ClaimRef) -> &str {
        match claim {
            ClaimRef::Claim(id) => &self.shared.claims[id.index()].key,
            ClaimRef::Template(id) => &self.shared.templates[id.index()].key,
        }
    }

    /// Lets an allocated claim go with its last user: for a claim allocated in the input
    /// whose consumers are all counted by [`reserve`](Self::reserve) from now on.
    pub fn unpin(&mut self, claim: ClaimId) {
        if let Some(u) = self.usage.claims.get_mut(claim.index()) {
            u.pinned = false;
        }
    }

    /// Whether the claim is allocated now.
    pub fn is_allocated(&self, claim: ClaimId) -> bool {
        self.usage
            .claims
            .get(claim.index())
            .is_some_and(|u| u.allocation.is_some())
    }

    /// Whether the claim is allocated and its allocation cannot be used from `node`.
    pub fn allocated_elsewhere(&self, claim: ClaimId, node: NodeId) -> bool {
        self.usage
            .claims
            .get(claim.index())
            .and_then(|u| u.allocation.as_ref())
            .is_some_and(|a| !a.nodes.contains(node))
    }

    /// How many pods use the claim (its `reservedFor` in the input, then the pods placed
    /// with it).
    pub fn claim_users(&self, claim: ClaimId) -> u32 {
        self.usage.claims.get(claim.index()).map_or(0, |u| u.users)
    }

    /// The request name as allocation results spell it: `request` or `request/subrequest`.
    pub fn request_name(&self, claim: ClaimRef, request: RequestRef) -> String {
        let spec = match claim {
            ClaimRef::Claim(id) => &self.shared.claims[id.index()].spec,
            ClaimRef::Template(id) => &self.shared.templates[id.index()].spec,
        };
        let r = &spec.requests[request.request as usize];
        match request.subrequest {
            Some(s) => format!("{}/{}", r.name, r.alts[s as usize].name),
            None => r.name.clone(),
        }
    }

    /// The first request of the claims still to allocate whose device class does not exist,
    /// in kube-scheduler's words: `request gpu: device class missing does not exist` (a
    /// `firstAvailable` subrequest is named `request/subrequest`). Allocated claims are not
    /// looked at.
    pub fn missing_class(&self, claims: &[ClaimRef]) -> Option<String> {
        for &c in claims {
            let spec = match c {
                ClaimRef::Claim(id) => {
                    if self.is_allocated(id) {
                        continue;
                    }
                    &self.shared.claims.get(id.index())?.spec
                }
                ClaimRef::Template(id) => &self.shared.templates.get(id.index())?.spec,
            };
            for r in &spec.requests {
                for alt in &r.alts {
                    if let Err(class) = &alt.class {
                        let name = if r.first_available {
                            format!("{}/{}", r.name, alt.name)
                        } else {
                            r.name.clone()
                        };
                        return Some(format!(
                            "request {name}: device class {class} does not exist"
                        ));
                    }
                }
            }
        }
        None
    }

    /// Number of devices in the catalog (device ids are `0..device_count()`).
    pub fn device_count(&self) -> usize {
        self.shared.catalog.devices.len()
    }

    /// `(driver, pool, device)` names of a device.
    pub fn device_name(&self, device: DeviceId) -> (&str, &str, &str) {
        let cat = &self.shared.catalog;
        let d = cat.device(device);
        let p = &cat.pools[d.pool as usize];
        (&p.driver, &p.name, &d.name)
    }

    /// The capacity names of a device, in the order of [`AllocatedDevice::consumed_capacity`].
    pub fn device_capacity_names(&self, device: DeviceId) -> Vec<&str> {
        let cat = &self.shared.catalog;
        cat.device(device)
            .capacity
            .iter()
            .map(|c| cat.names.name(c.published))
            .collect()
    }

    /// Whether a device is allocated (exclusively, or shared at least once).
    pub fn device_in_use(&self, device: DeviceId) -> bool {
        self.usage.exclusive[device.index()] > 0 || self.usage.shares[device.index()] > 0
    }

    /// Whether what `allocation` holds is reachable from its node only (every device is
    /// node-local), so that releasing it can help no other node.
    pub fn is_node_local(&self, allocation: &NodeAllocation) -> bool {
        let cat = &self.shared().catalog;
        allocation
            .claims
            .iter()
            .all(|c| c.devices.iter().all(|d| cat.device(d.device).local))
    }

    /// Appends to `key` what decides device allocations on `node` right now: its class of
    /// alike devices and how each of them is used. Nodes with equal keys give the same
    /// answers to the same claims. `false` (nothing appended) when the node has no class (it
    /// reaches shared counters, other nodes' devices or unusable pools): it is alike only to
    /// itself.
    pub fn node_usage_key(&self, node: NodeId, key: &mut Vec<i64>) -> bool {
        let cat = &self.shared().catalog;
        let Some(class) = cat.node_class.get(node.index()).copied().flatten() else {
            return false;
        };
        key.push(i64::from(class));
        self.push_device_usage(node, key);
        true
    }

    /// Appends how each device of `node` is used (allocations, shares, consumed capacity).
    pub(crate) fn push_device_usage(&self, node: NodeId, key: &mut Vec<i64>) {
        let cat = &self.shared().catalog;
        let usage = self.usage();
        for &d in &cat.node_devices[node.index()] {
            let e = cat.device(d);
            key.push(i64::from(usage.exclusive[d.index()]));
            if e.multi {
                key.push(i64::from(usage.shares[d.index()]));
                let start = e.cap_offset as usize;
                key.extend_from_slice(&usage.capacity_used[start..start + e.capacity.len()]);
            }
        }
    }

    /// Finds an allocation of `claims` on `node` without changing anything: claims already
    /// allocated must be usable from the node, the others are allocated by the search.
    pub fn try_allocate(&self, node: NodeId, claims: &[ClaimRef]) -> Result<NodeAllocation, Unfit> {
        search::allocate(self, node, claims)
    }

    /// The allocations of `claims` on `node` a placement could choose from: the one
    /// [`try_allocate`](Self::try_allocate) finds first, then, while it shares devices with
    /// other allocations, the next one found without the shared devices taken so far (so a
    /// request for part of one device gets every device it fits, in catalog order). Requests
    /// for whole devices get the first allocation only. Empty when the claims do not fit.
    pub fn allocation_choices(&self, node: NodeId, claims: &[ClaimRef]) -> Vec<NodeAllocation> {
        let Ok(first) = self.try_allocate(node, claims) else {
            return Vec::new();
        };
        let shared_of = |a: &NodeAllocation| -> Vec<crate::catalog::DeviceId> {
            a.claims
                .iter()
                .filter(|c| !c.already_allocated)
                .flat_map(|c| c.devices.iter())
                .filter(|d| d.shared)
                .map(|d| d.device)
                .collect()
        };
        let mut exclude = shared_of(&first);
        let mut choices = vec![first];
        let limit = self
            .shared()
            .catalog
            .node_devices
            .get(node.index())
            .map_or(0, Vec::len);
        while !exclude.is_empty() && choices.len() <= limit {
            let Ok(next) = search::allocate_excluding(self, node, claims, &exclude) else {
                break;
            };
            let more = shared_of(&next);
            if more.is_empty() {
                break;
            }
            exclude.extend(more);
            choices.push(next);
        }
        choices
    }

    /// Whether [`try_allocate`](Self::try_allocate) would succeed, with the same answer and the
    /// same reason when not (the detail may be left out); faster, as it builds no allocation
    /// and remembers answers for nodes whose devices are alike and used alike (the filter's
    /// question).
    pub fn fits(&self, node: NodeId, claims: &[ClaimRef]) -> Result<(), Unfit> {
        search::fits(self, node, claims)
    }

    /// Takes the devices of an allocation found by [`try_allocate`](Self::try_allocate) (on
    /// this state, with nothing reserved since) and counts the pod as a user of its claims.
    pub fn reserve(&mut self, allocation: &NodeAllocation) {
        for ca in &allocation.claims {
            match ca.claim {
                ClaimRef::Claim(id) => {
                    if self.usage.claims[id.index()].allocation.is_none() {
                        for d in ca.devices.iter() {
                            self.take_device(d);
                        }
                        let nodes = self.claim_nodes(allocation.node, &ca.devices);
                        self.usage.claims[id.index()].allocation = Some(ClaimAllocated {
                            devices: ca.devices.clone(),
                            nodes,
                        });
                    }
                    self.usage.claims[id.index()].users += 1;
                }
                ClaimRef::Template(_) => {
                    for d in ca.devices.iter() {
                        self.take_device(d);
                    }
                }
            }
        }
    }

    /// The inverse of [`reserve`](Self::reserve): the pod stops using its claims; a claim
    /// whose last user goes is deallocated (unless it was allocated in the input without
    /// users), and a template claim's devices are freed.
    pub fn release(&mut self, allocation: &NodeAllocation) {
        for ca in allocation.claims.iter().rev() {
            match ca.claim {
                ClaimRef::Claim(id) => {
                    let u = &mut self.usage.claims[id.index()];
                    u.users = u.users.saturating_sub(1);
                    if u.users == 0
                        && !u.pinned
                        && let Some(a) = u.allocation.take()
                    {
                        for d in a.devices.iter() {
                            self.give_back_device(d);
                        }
                    }
                }
                ClaimRef::Template(_) => {
                    for d in ca.devices.iter() {
                        self.give_back_device(d);
                    }
                }
            }
        }
    }

    /// The current allocation of claims that are all allocated (for a running pod, so that
    /// evicting it can [`release`](Self::release) them); `None` if one is not allocated or is a
    /// template.
    pub fn allocation_of(&self, node: NodeId, claims: &[ClaimRef]) -> Option<NodeAllocation> {
        let mut out = Vec::with_capacity(claims.len());
        for &c in claims {
            let ClaimRef::Claim(id) = c else { return None };
            let a = self.usage.claims.get(id.index())?.allocation.as_ref()?;
            if out.iter().any(|x: &ClaimAllocation| x.claim == c) {
                continue;
            }
            out.push(ClaimAllocation {
                claim: c,
                devices: a.devices.clone(),
                already_allocated: true,
            });
        }
        Some(NodeAllocation { node, claims: out })
    }

    /// How many more replicas of a pod using `claims` fit on `node`, found by allocating one
    /// replica after the other (templates give each replica a fresh claim; shared claims are
    /// allocated once). Stops at `limit`, which is also the answer when the claims take no
    /// devices per replica.
    pub fn max_replicas(&self, claims: &[ClaimRef], node: NodeId, limit: u32) -> u32 {
        let mut scratch = self.clone();
        let mut n = 0;
        while n < limit {
            match scratch.try_allocate(node, claims) {
                Ok(a) => scratch.reserve(&a),
                Err(_) => break,
            }
            n += 1;
        }
        n
    }

    /// [`max_replicas`](Self::max_replicas) for every node, in node id order.
    pub fn max_replicas_per_node(&self, claims: &[ClaimRef], limit: u32) -> Vec<u32> {
        let mut scratch = self.clone();
        let mut out = Vec::with_capacity(self.shared.catalog.node_names.len());
        let mut stack = Vec::new();
        for node in 0..self.shared.catalog.node_names.len() {
            let node = NodeId(node as u32);
            while (stack.len() as u32) < limit {
                match scratch.try_allocate(node, claims) {
                    Ok(a) => {
                        scratch.reserve(&a);
                        stack.push(a);
                    }
                    Err(_) => break,
                }
            }
            out.push(stack.len() as u32);
            while let Some(a) = stack.pop() {
                scratch.release(&a);
            }
        }
        out
    }

    /// The allocation as `status.allocation` spells it: names, consumed capacity, a share id
    /// for shared devices (deterministic: derived from the claim, request, device and position)
    /// and the node selector (the node itself when a device is node-local).
    pub fn allocation_result(
        &self,
        node: NodeId,
        allocation: &ClaimAllocation,
    ) -> AllocationResult {
        let cat = &self.shared.catalog;
        let claim_key = self.claim_key(allocation.claim);
        let devices = allocation
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let (driver, pool, device) = self.device_name(d.device);
                let request = self.request_name(allocation.claim, d.request);
                let e = cat.device(d.device);
                let consumed_capacity: BTreeMap<String, i64> = e
                    .capacity
                    .iter()
                    .zip(d.consumed_capacity.iter())
                    .map(|(c, &v)| (cat.names.name(c.published).to_string(), v))
                    .collect();
                let share_id = d.shared.then(|| {
                    share_id(&format!(
                        "{claim_key}\0{request}\0{driver}/{pool}/{device}\0{i}"
                    ))
                });
                DeviceAllocation {
                    request,
                    driver: driver.to_string(),
                    pool: pool.to_string(),
                    device: device.to_string(),
                    admin_access: d.admin_access,
                    consumed_capacity,
                    share_id,
                }
            })
            .collect();
        AllocationResult {
            devices,
            node_selector: self.result_node_selector(node, &allocation.devices),
        }
    }

    fn result_node_selector(
        &self,
        node: NodeId,
        devices: &[AllocatedDevice],
    ) -> Option<NodeSelector> {
        let cat = &self.shared.catalog;
        let mut term = NodeSelectorTerm::default();
        for d in devices {
            let e = cat.device(d.device);
            if e.local || e.binds_to_node {
                let name = cat
                    .node_names
                    .get(node.index())
                    .cloned()
                    .unwrap_or_default();
                return Some(NodeSelector {
                    terms: vec![NodeSelectorTerm {
                        match_expressions: Vec::new(),
                        match_fields: vec![Requirement {
                            key: "metadata.name".into(),
                            operator: Operator::In,
                            values: vec![name],
                        }],
                    }],
                });
            }
            let selector = match (&e.device_scope, &cat.slices[e.slice as usize].scope) {
                (Some(DeviceNodeScope::NodeSelector(s)), _) => Some(s),
                (None, SliceNodeScope::NodeSelector(s)) => Some(s),
                _ => None,
            };
            if let Some(first) = selector.and_then(|s| s.terms.first()) {
                for r in &first.match_expressions {
                    if !term.match_expressions.contains(r) {
                        term.match_expressions.push(r.clone());
                    }
                }
                for r in &first.match_fields {
                    if !term.match_fields.contains(r) {
                        term.match_fields.push(r.clone());
                    }
                }
            }
        }
        if term.match_expressions.is_empty() && term.match_fields.is_empty() {
            None
        } else {
            Some(NodeSelector { terms: vec![term] })
        }
    }

    /// The nodes a newly allocated claim can be used from.
    fn claim_nodes(&self, node: NodeId, devices: &[AllocatedDevice]) -> NodeScope {
        let cat = &self.shared.catalog;
        let mut set: Option<NodeSet> = None;
        for d in devices {
            let e = cat.device(d.device);
            if e.local || e.binds_to_node {
                return NodeScope::One(node);
            }
            match &e.visibility {
                Visibility::AllNodes => {}
                Visibility::Selected(s) => match &mut set {
                    None => set = Some((**s).clone()),
                    Some(acc) => acc.intersect(s),
                },
                Visibility::Node(_) | Visibility::Nowhere => return NodeScope::One(node),
            }
        }
        match set {
            None => NodeScope::All,
            Some(s) => NodeScope::Set(Arc::new(s)),
        }
    }

    fn take_device(&mut self, d: &AllocatedDevice) {
        if d.admin_access {
            return;
        }
        let cat = &self.shared.catalog;
        let e = cat.device(d.device);
        let i = d.device.index();
        let was_free = self.usage.exclusive[i] == 0 && self.usage.shares[i] == 0;
        if d.shared {
            self.usage.shares[i] += 1;
            for (k, v) in d.consumed_capacity.iter().enumerate() {
                self.usage.capacity_used[e.cap_offset as usize + k] += v;
            }
        } else {
            self.usage.exclusive[i] += 1;
        }
        if was_free {
            for &(id, amount) in &e.consumes {
                self.usage.counters_used[id as usize] += amount;
            }
        }
    }

    fn give_back_device(&mut self, d: &AllocatedDevice) {
        if d.admin_access {
            return;
        }
        let cat = &self.shared.catalog;
        let e = cat.device(d.device);
        let i = d.device.index();
        if d.shared {
            self.usage.shares[i] = self.usage.shares[i].saturating_sub(1);
            for (k, v) in d.consumed_capacity.iter().enumerate() {
                self.usage.capacity_used[e.cap_offset as usize + k] -= v;
            }
        } else {
            self.usage.exclusive[i] = self.usage.exclusive[i].saturating_sub(1);
        }
        if self.usage.exclusive[i] == 0 && self.usage.shares[i] == 0 {
            for &(id, amount) in &e.consumes {
                self.usage.counters_used[id as usize] -= amount;
            }
        }
    }
}

/// A deterministic UUID-shaped id from a string (FNV-1a, two seeds).
fn share_id(text: &str) -> String {
    fn fnv(seed: u64, text: &str) -> u64 {
        let mut h = seed;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        h
    }
    let a = fnv(0xcbf2_9ce4_8422_2325, text);
    let b = fnv(0x8422_2325_cbf2_9ce4, text);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}
