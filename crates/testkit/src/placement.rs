//! Random small gang placement instances and an exhaustive placement oracle, independent of
//! the engine, for testing the whole-gang placement search.
//!
//! An instance is at most four nodes (CPU, memory and zero to four GPUs described by a DRA
//! ResourceSlice, each GPU with a `model` of `a` or `b` and an `nvlink` flag; some nodes with
//! a `rack` label), sometimes running pods holding CPU, memory or one GPU, and one gang of two
//! to five pods (minCount its size or one less, optionally a topology key `rack`). Each pod
//! asks CPU, memory and zero to two GPUs through a ResourceClaimTemplate whose requests select GPUs by CEL on
//! the attributes.
//!
//! The oracle enumerates every assignment of the pods to nodes or to no node, keeps those that
//! place at least minCount pods within CPU and memory and (with the topology key) within one rack, and
//! for every node matches the placed pods' device requests to distinct free devices by brute
//! force. It shares no code with the engine.

use std::collections::BTreeMap;

use lockstep_model::dra::*;
use lockstep_model::{Cluster, NodeSelector, NodeSelectorTerm, Operator, PodPhase, Requirement};

use crate::{GI, finish, gang, node, pod};

/// The DRA driver of the instances' GPUs.
pub const DRIVER: &str = "gpu.example.com";
/// The topology key a gang may carry.
pub const RACK: &str = "rack";
/// The gang's PodGroup name.
pub const GANG: &str = "g";

/// A GPU's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpu {
    /// `model`: `a` when true, `b` otherwise.
    pub model_a: bool,
    pub nvlink: bool,
}

/// What one device request of a pod accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Selector {
    Any,
    ModelA,
    ModelB,
    Nvlink,
    ModelANvlink,
}

impl Selector {
    const ALL: [Selector; 5] = [
        Selector::Any,
        Selector::ModelA,
        Selector::ModelB,
        Selector::Nvlink,
        Selector::ModelANvlink,
    ];

    /// Whether the GPU satisfies the selector.
    pub fn accepts(self, g: Gpu) -> bool {
        match self {
            Selector::Any => true,
            Selector::ModelA => g.model_a,
            Selector::ModelB => !g.model_a,
            Selector::Nvlink => g.nvlink,
            Selector::ModelANvlink => g.model_a && g.nvlink,
        }
    }

    /// The request's CEL selector, when it has one.
    pub fn cel(self) -> Option<String> {
        let a = format!("device.attributes['{DRIVER}']");
        match self {
            Selector::Any => None,
            Selector::ModelA => Some(format!("{a}.model == 'a'")),
            Selector::ModelB => Some(format!("{a}.model == 'b'")),
            Selector::Nvlink => Some(format!("{a}.nvlink == true")),
            Selector::ModelANvlink => Some(format!("{a}.model == 'a' && {a}.nvlink")),
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Selector::Any => "any",
            Selector::ModelA => "a",
            Selector::ModelB => "b",
            Selector::Nvlink => "nvl",
            Selector::ModelANvlink => "anvl",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub cpu_milli: i64,
    pub memory_gi: i64,
    pub gpus: Vec<Gpu>,
    pub rack: Option<u8>,
}

/// A running pod outside the gang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub node: usize,
    pub cpu_milli: i64,
    pub memory_gi: i64,
    /// The index of the GPU it holds on its node.
    pub gpu: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSpec {
    pub cpu_milli: i64,
    pub memory_gi: i64,
    /// One device per entry (the requests `r0`, `r1` of its claim template).
    pub devices: Vec<Selector>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub nodes: Vec<NodeSpec>,
    pub running: Vec<Running>,
    pub pods: Vec<PodSpec>,
    pub min: usize,
    /// The gang's PodGroup has topology key `rack`.
    pub topology: bool,
}

/// A small deterministic generator (SplitMix64), so an instance is a function of its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

impl Instance {
    /// The instance of `seed`.
    pub fn random(seed: u64) -> Instance {
        let mut r = Rng::new(seed);
        let n_nodes = 1 + r.below(4) as usize;
        let racks = r.chance(50);
        let nodes: Vec<NodeSpec> = (0..n_nodes)
            .map(|_| NodeSpec {
                cpu_milli: r.pick(&[2000, 3000, 4000, 6000]),
                memory_gi: r.pick(&[4, 6, 8, 16]),
                gpus: (0..r.below(5))
                    .map(|_| Gpu {
                        model_a: r.chance(50),
                        nvlink: r.chance(50),
                    })
                    .collect(),
                rack: (racks && r.chance(85)).then(|| r.below(2) as u8),
            })
            .collect();
        let mut running = Vec::new();
        for _ in 0..r.below(3) {
            let node = r.below(n_nodes as u64) as usize;
            let held: Vec<usize> = running
                .iter()
                .filter(|x: &&Running| x.node == node)
                .filter_map(|x| x.gpu)
                .collect();
            let free: Vec<usize> = (0..nodes[node].gpus.len())
                .filter(|g| !held.contains(g))
                .collect();
            let gpu = (!free.is_empty() && r.chance(60)).then(|| r.pick(&free));
            let on_node = || running.iter().filter(|x: &&Running| x.node == node);
            let used: i64 = on_node().map(|x| x.cpu_milli).sum();
            let used_memory: i64 = on_node().map(|x| x.memory_gi).sum();
            // Running pods fit their node.
            let cpu_milli = r
                .pick(&[0, 500, 1000, 2000])
                .min(nodes[node].cpu_milli - used);
            let memory_gi = r
                .pick(&[0, 1, 2, 4])
                .min(nodes[node].memory_gi - used_memory);
            running.push(Running {
                node,
                cpu_milli,
                memory_gi,
                gpu,
            });
        }
        let size = 2 + r.below(4) as usize;
        // A few shapes, so identical pods are common.
        let shapes: Vec<PodSpec> = (0..1 + r.below(size as u64))
            .map(|_| PodSpec {
                cpu_milli: r.pick(&[500, 1000, 1500, 2000, 3000]),
                memory_gi: r.pick(&[1, 2, 3, 4, 6]),
                devices: (0..r.pick(&[0, 1, 1, 2, 2]))
                    .map(|_| r.pick(&Selector::ALL))
                    .collect(),
            })
            .collect();
        let pods = (0..size)
            .map(|_| shapes[r.below(shapes.len() as u64) as usize].clone())
            .collect();
        let min = if r.chance(50) { size } else { size - 1 };
        let topology = racks && r.chance(60);
        Instance {
            nodes,
            running,
            pods,
            min,
            topology,
        }
    }

    pub fn node_name(i: usize) -> String {
        format!("node-{i}")
    }

    pub fn pod_name(i: usize) -> String {
        format!("{GANG}-{i}")
    }

    /// The claim template of a device list (shared by the pods that ask the same devices).
    pub fn template_name(devices: &[Selector]) -> String {
        let tags: Vec<&str> = devices.iter().map(|s| s.tag()).collect();
        format!("gpus-{}", tags.join("-"))
    }

    /// The instance as a cluster: nodes `node-I`, GPUs `gpu-J` in pool `node-I`, pods `g-K`
    /// of PodGroup `g` in `default`, running pods `run-K`.
    pub fn cluster(&self) -> Cluster {
        let mut c = Cluster::default();
        for (i, n) in self.nodes.iter().enumerate() {
            let name = Self::node_name(i);
            let mut nd = node(&mut c, &name, n.cpu_milli, n.memory_gi * GI, 110);
            if let Some(rack) = n.rack {
                nd.labels.insert(RACK.into(), format!("rack-{rack}"));
            }
            c.nodes.push(nd);
            if n.gpus.is_empty() {
                continue;
            }
            let devices = n
                .gpus
                .iter()
                .enumerate()
                .map(|(j, g)| {
                    let mut d = Device {
                        name: format!("gpu-{j}"),
                        ..Device::default()
                    };
                    let model = if g.model_a { "a" } else { "b" };
                    d.attributes
                        .insert("model".into(), AttributeValue::String(model.into()));
                    d.attributes
                        .insert("nvlink".into(), AttributeValue::Bool(g.nvlink));
                    d
                })
                .collect();
            c.resource_slices.push(ResourceSlice {
                name: format!("{name}-gpus"),
                driver: DRIVER.into(),
                pool: ResourcePool {
                    name: name.clone(),
                    generation: 1,
                    resource_slice_count: 1,
                },
                node_scope: SliceNodeScope::NodeName(name),
                devices,
                shared_counters: Vec::new(),
            });
        }
        c.device_classes.push(DeviceClass {
            name: "gpu".into(),
            selectors: vec![format!("device.driver == '{DRIVER}'")],
            ..DeviceClass::default()
        });
        for (k, run) in self.running.iter().enumerate() {
            let name = format!("run-{k}");
            let node_name = Self::node_name(run.node);
            let mut p = pod(&mut c, &name, run.cpu_milli, run.memory_gi * GI);
            p.node_name = Some(node_name.clone());
            p.phase = PodPhase::Running;
            if let Some(g) = run.gpu {
                let claim_name = format!("{name}-gpu");
                let mut claim = ResourceClaim {
                    namespace: "default".into(),
                    name: claim_name.clone(),
                    spec: request_spec(&[Selector::Any]),
                    allocation: None,
                    reserved_for: vec![format!("default/{name}")],
                };
                claim.allocation = Some(AllocationResult {
                    devices: vec![DeviceAllocation {
                        request: "r0".into(),
                        driver: DRIVER.into(),
                        pool: node_name.clone(),
                        device: format!("gpu-{g}"),
                        ..DeviceAllocation::default()
                    }],
                    node_selector: Some(NodeSelector {
                        terms: vec![NodeSelectorTerm {
                            match_expressions: vec![],
                            match_fields: vec![Requirement {
                                key: "metadata.name".into(),
                                operator: Operator::In,
                                values: vec![node_name.clone()],
                            }],
                        }],
                    }),
                });
                c.resource_claims.push(claim);
                p.resource_claims.push(lockstep_model::PodResourceClaim {
                    name: "gpu".into(),
                    resource_claim_name: Some(claim_name),
                    resource_claim_template_name: None,
                    generated_claim: None,
                });
            }
            c.pods.push(p);
        }
        let mut templates: BTreeMap<String, Vec<Selector>> = BTreeMap::new();
        for p in &self.pods {
            if !p.devices.is_empty() {
                templates.insert(Self::template_name(&p.devices), p.devices.clone());
            }
        }
        for (name, devices) in templates {
            c.resource_claim_templates.push(ResourceClaimTemplate {
                namespace: "default".into(),
                name,
                spec: request_spec(&devices),
            });
        }
        c.pod_groups
            .push(gang(GANG, self.min as u32, self.topology.then_some(RACK)));
        for (k, spec) in self.pods.iter().enumerate() {
            let mut p = pod(
                &mut c,
                &Self::pod_name(k),
                spec.cpu_milli,
                spec.memory_gi * GI,
            );
            p.pod_group = Some(GANG.into());
            if !spec.devices.is_empty() {
                p.resource_claims.push(lockstep_model::PodResourceClaim {
                    name: "gpus".into(),
                    resource_claim_name: None,
                    resource_claim_template_name: Some(Self::template_name(&spec.devices)),
                    generated_claim: None,
                });
            }
            c.pods.push(p);
        }
        finish(c)
    }

    /// CPU (millicores) and memory (GiB) free on each node after the running pods.
    pub fn free_cpu_memory(&self) -> Vec<(i64, i64)> {
        let mut free: Vec<(i64, i64)> = self
            .nodes
            .iter()
            .map(|n| (n.cpu_milli, n.memory_gi))
            .collect();
        for r in &self.running {
            free[r.node].0 -= r.cpu_milli;
            free[r.node].1 -= r.memory_gi;
        }
        free
    }

    /// Whether the pods of `assign` fit the free CPU and memory; else the node over.
    pub fn over_capacity(&self, assign: &[Option<usize>]) -> Option<usize> {
        let mut free = self.free_cpu_memory();
        for (k, a) in assign.iter().enumerate() {
            if let Some(n) = a {
                free[*n].0 -= self.pods[k].cpu_milli;
                free[*n].1 -= self.pods[k].memory_gi;
            }
        }
        free.iter().position(|&(c, m)| c < 0 || m < 0)
    }

    /// Whether each GPU of each node is free of running pods.
    pub fn free_gpus(&self) -> Vec<Vec<bool>> {
        let mut free: Vec<Vec<bool>> = self
            .nodes
            .iter()
            .map(|n| vec![true; n.gpus.len()])
            .collect();
        for r in &self.running {
            if let Some(g) = r.gpu {
                free[r.node][g] = false;
            }
        }
        free
    }

    /// The oracle: whether some placement of at least minCount pods exists.
    pub fn feasible(&self) -> bool {
        let mut assign: Vec<Option<usize>> = vec![None; self.pods.len()];
        self.search(0, &mut assign)
    }

    fn search(&self, i: usize, assign: &mut Vec<Option<usize>>) -> bool {
        if i == self.pods.len() {
            return self.valid(assign);
        }
        for choice in std::iter::once(None).chain((0..self.nodes.len()).map(Some)) {
            assign[i] = choice;
            if self.search(i + 1, assign) {
                return true;
            }
        }
        assign[i] = None;
        false
    }

    /// Whether an assignment of pods to nodes (None: left out) places minCount pods within
    /// every constraint.
    pub fn valid(&self, assign: &[Option<usize>]) -> bool {
        if assign.iter().flatten().count() < self.min {
            return false;
        }
        if self.topology {
            let racks: Vec<Option<u8>> = assign
                .iter()
                .flatten()
                .map(|&n| self.nodes[n].rack)
                .collect();
            if racks.iter().any(Option::is_none) || racks.windows(2).any(|w| w[0] != w[1]) {
                return false;
            }
        }
        if self.over_capacity(assign).is_some() {
            return false;
        }
        let free = self.free_gpus();
        (0..self.nodes.len()).all(|n| {
            let wants: Vec<Selector> = assign
                .iter()
                .enumerate()
                .filter(|(_, a)| **a == Some(n))
                .flat_map(|(k, _)| self.pods[k].devices.iter().copied())
                .collect();
            let mut taken = free[n].iter().map(|f| !f).collect::<Vec<bool>>();
            matches(&self.nodes[n].gpus, &wants, &mut taken)
        })
    }
}

/// Whether every request in `wants` gets a distinct device of `gpus` not yet `taken` that it
/// accepts (brute force over the choices).
pub fn matches(gpus: &[Gpu], wants: &[Selector], taken: &mut [bool]) -> bool {
    let Some((first, rest)) = wants.split_first() else {
        return true;
    };
    for g in 0..gpus.len() {
        if !taken[g] && first.accepts(gpus[g]) {
            taken[g] = true;
            let ok = matches(gpus, rest, taken);
            taken[g] = false;
            if ok {
                return true;
            }
        }
    }
    false
}

/// A claim spec with one single-device request `rK` per selector.
fn request_spec(devices: &[Selector]) -> ResourceClaimSpec {
    ResourceClaimSpec {
        requests: devices
            .iter()
            .enumerate()
            .map(|(k, s)| DeviceRequest {
                name: format!("r{k}"),
                kind: DeviceRequestKind::Exactly(ExactDeviceRequest {
                    device_class_name: "gpu".into(),
                    selectors: s.cel().into_iter().collect(),
                    allocation_mode: AllocationMode::ExactCount(1),
                    ..ExactDeviceRequest::default()
                }),
            })
            .collect(),
        constraints: Vec::new(),
        config: Vec::new(),
    }
}

/// Outcomes over a range of seeds.
#[derive(Debug, Default)]
pub struct Tally {
    /// Instances the oracle finds feasible.
    pub feasible: usize,
    /// Gangs placed with `Search` and with `PodByPod`.
    pub search_placed: usize,
    pub pod_by_pod_placed: usize,
    /// Everything wrong, one line per instance and mode, starting `seed N MODE:`.
    pub errors: Vec<String>,
}

/// Runs both modes on the instances of `seeds` and checks them against the oracle and
/// `check`.
pub fn tally(seeds: std::ops::Range<u64>) -> Tally {
    let mut t = Tally::default();
    for seed in seeds {
        let inst = Instance::random(seed);
        let feasible = inst.feasible();
        t.feasible += usize::from(feasible);
        for placement in [
            lockstep_engine::GangPlacement::Search,
            lockstep_engine::GangPlacement::PodByPod,
        ] {
            let d = decide(&inst, placement);
            match check(&inst, &d) {
                Err(e) => t
                    .errors
                    .push(format!("seed {seed} {}: {e}", placement.as_str())),
                Ok(placed) => {
                    if placed && !feasible {
                        t.errors.push(format!(
                            "seed {seed} {}: placed a gang the oracle finds infeasible",
                            placement.as_str()
                        ));
                    }
                    match placement {
                        lockstep_engine::GangPlacement::Search => {
                            t.search_placed += usize::from(placed);
                            if feasible && !placed {
                                let msg = &d.pod_groups[0].message;
                                t.errors.push(format!(
                                    "seed {seed} Search: feasible gang not placed: {msg}"
                                ));
                            }
                        }
                        lockstep_engine::GangPlacement::PodByPod => {
                            t.pod_by_pod_placed += usize::from(placed);
                        }
                    }
                }
            }
        }
    }
    t
}

/// The engine's decisions for `inst` with `placement` (no preemption: the running pods stay).
pub fn decide(
    inst: &Instance,
    placement: lockstep_engine::GangPlacement,
) -> lockstep_engine::Decisions {
    let cluster = inst.cluster();
    let mut options = lockstep_engine::Options {
        preemption: false,
        ..lockstep_engine::Options::default()
    };
    options.profile.gang_placement = placement;
    lockstep_engine::schedule(&cluster, options).expect("the instance sets up")
}

/// Checks the engine's decisions against the instance: every bound pod is a gang pod, the
/// bound pods fit the nodes' free CPU and memory, sit in one rack under the topology key, and hold
/// distinct free devices of their node that their requests' selectors accept, one per
/// request. Returns whether the gang was placed (at least minCount pods bound, and the
/// PodGroup says so).
pub fn check(inst: &Instance, d: &lockstep_engine::Decisions) -> Result<bool, String> {
    let cluster = inst.cluster();
    let node_index = |name: &str| -> Result<usize, String> {
        name.strip_prefix("node-")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("unknown node {name}"))
    };
    let pod_index = |name: &str| -> Result<usize, String> {
        name.strip_prefix(&format!("{GANG}-"))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("pod {name} bound but not of the gang"))
    };
    let mut assign: Vec<Option<usize>> = vec![None; inst.pods.len()];
    for (p, n) in &d.bindings {
        let k = pod_index(&cluster.pods[p.index()].name)?;
        if assign[k].is_some() {
            return Err(format!("pod {k} bound twice"));
        }
        assign[k] = Some(node_index(&cluster.nodes[n.index()].name)?);
    }
    let placed = assign.iter().flatten().count();
    let status = d
        .pod_groups
        .iter()
        .find(|g| g.name == format!("default/{GANG}"))
        .ok_or("no status for the gang")?;
    if placed > 0 && placed < inst.min {
        return Err(format!("{placed} pods bound, below minCount {}", inst.min));
    }
    if status.scheduled != (placed >= inst.min) {
        return Err(format!(
            "status scheduled={} with {placed} pods bound: {}",
            status.scheduled, status.message
        ));
    }
    if placed == 0 {
        return Ok(false);
    }
    if let Some(n) = inst.over_capacity(&assign) {
        return Err(format!("node-{n} over its CPU or memory: {assign:?}"));
    }
    if inst.topology {
        let racks: Vec<Option<u8>> = assign
            .iter()
            .flatten()
            .map(|&n| inst.nodes[n].rack)
            .collect();
        if racks.iter().any(Option::is_none) || racks.windows(2).any(|w| w[0] != w[1]) {
            return Err(format!("pods across racks {racks:?}: {assign:?}"));
        }
    }
    let free = inst.free_gpus();
    let mut used: Vec<(usize, usize)> = Vec::new();
    let mut got: Vec<usize> = vec![0; inst.pods.len()];
    for a in &d.allocations {
        let k = pod_index(&cluster.pods[a.pod.index()].name)?;
        let n = node_index(&cluster.nodes[a.node.index()].name)?;
        if assign[k] != Some(n) {
            return Err(format!(
                "pod {k} has devices on node-{n} but is on {:?}",
                assign[k]
            ));
        }
        for dev in &a.devices {
            let pool = node_index(&dev.pool)?;
            let g: usize = dev
                .device
                .strip_prefix("gpu-")
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("unknown device {}", dev.device))?;
            let r: usize = dev
                .request
                .strip_prefix('r')
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("unknown request {}", dev.request))?;
            if pool != n || g >= inst.nodes[n].gpus.len() {
                return Err(format!(
                    "pod {k} on node-{n} got {}/{}",
                    dev.pool, dev.device
                ));
            }
            if !free[n][g] {
                return Err(format!(
                    "pod {k} got node-{n}/gpu-{g}, held by a running pod"
                ));
            }
            if used.contains(&(n, g)) {
                return Err(format!("node-{n}/gpu-{g} allocated twice"));
            }
            used.push((n, g));
            let sel = *inst.pods[k]
                .devices
                .get(r)
                .ok_or_else(|| format!("pod {k} has no request r{r}"))?;
            if !sel.accepts(inst.nodes[n].gpus[g]) {
                return Err(format!(
                    "pod {k} request r{r} ({sel:?}) got node-{n}/gpu-{g} {:?}",
                    inst.nodes[n].gpus[g]
                ));
            }
            got[k] += 1;
        }
    }
    for (k, a) in assign.iter().enumerate() {
        if a.is_some() && got[k] != inst.pods[k].devices.len() {
            return Err(format!(
                "pod {k} got {} devices for {} requests",
                got[k],
                inst.pods[k].devices.len()
            ));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(model_a: bool, nvlink: bool) -> Gpu {
        Gpu { model_a, nvlink }
    }

    #[test]
    fn matching_finds_the_assignment_first_fit_misses() {
        // First fit gives the nvlink GPU to `Any`; the matching gives it to `Nvlink`.
        let gpus = [gpu(true, true), gpu(true, false)];
        let mut taken = [false, false];
        assert!(matches(
            &gpus,
            &[Selector::Any, Selector::Nvlink],
            &mut taken
        ));
        assert!(!matches(
            &gpus,
            &[Selector::Nvlink, Selector::Nvlink],
            &mut taken
        ));
        taken[0] = true;
        assert!(!matches(
            &gpus,
            &[Selector::Any, Selector::Nvlink],
            &mut taken
        ));
    }

    #[test]
    fn oracle_respects_cpu_memory_min_count_and_racks() {
        let node = |cpu, rack| NodeSpec {
            cpu_milli: cpu,
            memory_gi: 8,
            gpus: vec![],
            rack,
        };
        let p = |cpu, memory_gi| PodSpec {
            cpu_milli: cpu,
            memory_gi,
            devices: vec![],
        };
        let mut inst = Instance {
            nodes: vec![node(2000, Some(0)), node(2000, Some(1))],
            running: vec![],
            pods: vec![p(2000, 1), p(2000, 1)],
            min: 2,
            topology: false,
        };
        assert!(inst.feasible());
        inst.topology = true;
        assert!(!inst.feasible(), "two racks of one pod each");
        inst.min = 1;
        assert!(inst.feasible());
        let run = |node, cpu_milli, memory_gi| Running {
            node,
            cpu_milli,
            memory_gi,
            gpu: None,
        };
        inst.running = vec![run(0, 500, 0), run(1, 500, 0)];
        assert!(!inst.feasible(), "no node has 2 CPU free");
        inst.running = vec![run(0, 0, 8), run(1, 0, 7)];
        assert!(inst.feasible(), "node-1 has 1Gi free");
        inst.running = vec![run(0, 0, 8), run(1, 0, 8)];
        assert!(!inst.feasible(), "no node has 1Gi free");
    }

    #[test]
    fn two_resources_pick_the_pair_that_fits() {
        // One node of 9 CPU and 9Gi: of (5, 5), (5, 4), (1, 5) only the last two fit together.
        let inst = Instance {
            nodes: vec![NodeSpec {
                cpu_milli: 9000,
                memory_gi: 9,
                gpus: vec![],
                rack: None,
            }],
            running: vec![],
            pods: [(5000, 5), (5000, 4), (1000, 5)]
                .map(|(cpu_milli, memory_gi)| PodSpec {
                    cpu_milli,
                    memory_gi,
                    devices: vec![],
                })
                .to_vec(),
            min: 2,
            topology: false,
        };
        assert!(inst.feasible());
        assert!(inst.valid(&[None, Some(0), Some(0)]));
        assert!(!inst.valid(&[Some(0), Some(0), None]));
        assert!(!inst.valid(&[Some(0), None, Some(0)]));
    }

    #[test]
    fn instances_are_a_function_of_the_seed_and_vary() {
        assert_eq!(Instance::random(7), Instance::random(7));
        let distinct: std::collections::HashSet<String> = (0..50)
            .map(|s| format!("{:?}", Instance::random(s)))
            .collect();
        assert!(distinct.len() > 45);
        let c = Instance::random(3).cluster();
        assert!(c.pods.iter().any(|p| p.pod_group.as_deref() == Some(GANG)));
    }
}
