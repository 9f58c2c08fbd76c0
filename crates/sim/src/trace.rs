//! A workload trace as the simulator replays it: one [`Cluster`] that holds every node and
//! every pod of the trace up front (all unbound, so pod ids stay stable for the whole run),
//! and the jobs that group those pods with an arrival time and a duration.
//!
//! [`TraceBuilder`] builds traces in code (generated scenarios, trace readers, tests).

use std::fmt;

use lockstep_model::builders as testkit;
use lockstep_model::dra::{
    AttributeValue, Device, DeviceCapacity, DeviceClass, ResourceClaimTemplate, ResourcePool,
    ResourceSlice, SliceNodeScope,
};
use lockstep_model::{
    Cluster, DisruptionMode, GroupPolicy, NodeAffinity, NodeSelectorTerm, Operator, PodGroup,
    PodId, PodResourceClaim, PreemptionPolicy, PriorityClass, Requirement, ResourceId, Taint,
    TaintEffect, Toleration, TolerationOperator,
};

/// The extended resource whole GPUs are requested as.
pub const GPU: &str = "nvidia.com/gpu";
/// The node label of the rack a node sits in (the topology key of rack-local gangs).
pub const RACK_LABEL: &str = "topology.kubernetes.io/rack";
/// The node label of the GPU model (as NVIDIA GPU feature discovery names it).
pub const GPU_MODEL_LABEL: &str = "nvidia.com/gpu.product";
/// The priority class name reported for jobs whose pods name none.
pub const NO_PRIORITY_CLASS: &str = "(none)";

const MI: i64 = 1024 * 1024;
const GI: i64 = 1024 * MI;

/// One unit of work: pods that arrive together and run for `duration` once enough of them
/// are bound (all of them, or `minCount` for a gang).
#[derive(Debug, Clone)]
pub struct Job {
    pub name: String,
    /// Seconds from the start of the trace.
    pub arrival: u64,
    /// Seconds of running time; `None` runs until the simulation ends.
    pub duration: Option<u64>,
    /// The job's pods, ids into `Trace::cluster.pods`.
    pub pods: Vec<PodId>,
    /// How many pods must be bound for the job to run.
    pub min_pods: usize,
    /// Whether the pods form a PodGroup with a gang condition.
    pub gang: bool,
    /// The priority class of the job's pods ([`NO_PRIORITY_CLASS`] when none).
    pub priority_class: String,
    /// Whole GPUs requested by all pods together.
    pub gpus: i64,
    /// The job's pods are already bound when the trace starts (manifests with `nodeName`).
    pub initially_running: bool,
}

/// Trace input that was left out, and why (for example pods already finished, or pods for
/// another scheduler).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    pub reason: String,
    pub count: usize,
}

/// A cluster and a workload, ready to simulate.
#[derive(Debug, Clone)]
pub struct Trace {
    /// What the trace is, for reports (for example `philly.csv (jobs 1..5000)`).
    pub name: String,
    pub cluster: Cluster,
    /// Sorted by arrival, then name.
    pub jobs: Vec<Job>,
    pub skipped: Vec<Skipped>,
    /// Remarks on how the input was mapped, for reports.
    pub notes: Vec<String>,
    /// Whole GPUs of each node, by node id (the `nvidia.com/gpu` extended resource, or GPU
    /// devices published through DRA).
    pub node_gpus: Vec<i64>,
    /// Milli-GPUs each pod asks for, by pod id (1000 per whole GPU; a pod sharing a GPU
    /// through DRA consumable capacity asks for less).
    pub pod_gpu_milli: Vec<i64>,
}

impl Trace {
    /// Whole GPUs over all nodes.
    pub fn gpus(&self) -> i64 {
        self.node_gpus
            .iter()
            .fold(0i64, |a, g| a.saturating_add(*g))
    }

    /// GPU accounting from the `nvidia.com/gpu` extended resource alone: (GPUs per node,
    /// milli-GPUs per pod).
    pub fn extended_gpu_accounting(cluster: &Cluster) -> (Vec<i64>, Vec<i64>) {
        let Some(gpu) = cluster.resources.get(GPU) else {
            return (vec![0; cluster.nodes.len()], vec![0; cluster.pods.len()]);
        };
        (
            cluster
                .nodes
                .iter()
                .map(|n| n.allocatable.get(gpu))
                .collect(),
            cluster
                .pods
                .iter()
                .map(|p| p.requests.get(gpu).saturating_mul(1000))
                .collect(),
        )
    }

    /// Total allocatable of resource `name` over all nodes.
    pub fn capacity(&self, name: &str) -> i64 {
        let Some(id) = self.cluster.resources.get(name) else {
            return 0;
        };
        self.cluster
            .nodes
            .iter()
            .fold(0i64, |a, n| a.saturating_add(n.allocatable.get(id)))
    }

    /// The priority classes jobs use, highest value first, then by name.
    pub fn priority_classes(&self) -> Vec<String> {
        let mut seen: Vec<(i32, String)> = Vec::new();
        for job in &self.jobs {
            if seen.iter().any(|(_, n)| *n == job.priority_class) {
                continue;
            }
            let value = self
                .cluster
                .priority_classes
                .iter()
                .find(|pc| pc.name == job.priority_class)
                .map(|pc| pc.value)
                .or_else(|| {
                    job.pods
                        .first()
                        .map(|p| self.cluster.pods[p.index()].priority)
                })
                .unwrap_or(0);
            seen.push((value, job.priority_class.clone()));
        }
        seen.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        seen.into_iter().map(|(_, n)| n).collect()
    }
}

/// An error in trace input: the file, the line (1-based, 0 when the whole file is at fault)
/// and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct TraceError {
    pub file: String,
    pub line: u64,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(f, "{}: {}", self.file, self.message)
        }
    }
}

impl TraceError {
    pub fn new(file: impl Into<String>, line: u64, message: impl Into<String>) -> Self {
        TraceError {
            file: file.into(),
            line,
            message: message.into(),
        }
    }
}

/// Bounds on what a trace may describe. Readers check them before building anything, so a
/// mistaken or hostile input is an error naming the file and line instead of exhausting
/// memory or overflowing; the same numbers are listed under "Limits" in README.md.
pub mod limits {
    /// Nodes in a cluster (a Tiresias cluster spec, `--gpu-nodes`, an openb node list).
    pub const NODES: usize = 100_000;
    /// GPUs on one node, and GPUs of one pod: the devices one ResourceSlice may hold.
    pub const GPUS_PER_NODE: i64 = 128;
    /// GPUs in a cluster (openb GPUs are DRA devices, each an object of its own).
    pub const GPUS: i64 = 1_000_000;
    /// Pods of one job (a job's GPUs split into pods of at most a node's GPUs).
    pub const JOB_PODS: i64 = 10_000;
    /// Pods in a whole trace, including copies made by `--fragmentation`.
    pub const PODS: usize = 1_000_000;
    /// Jobs the embedded scenario generates (`--jobs`).
    pub const GENERATED_JOBS: usize = 100_000;
    /// Milli-CPU of one node or pod (a million CPUs).
    pub const CPU_MILLI: i64 = 1_000_000_000;
    /// Bytes of memory of one node or pod (64 TiB).
    pub const MEMORY: i64 = 64 << 40;
    /// Seconds of an arrival time or a duration (100 years of 365 days).
    pub const SECONDS: u64 = 100 * 365 * 86_400;
}

/// The resources of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodShape {
    pub cpu_milli: i64,
    pub memory: i64,
    pub gpus: i64,
    /// Milli-GPUs of each GPU (1000: whole GPUs). Less than 1000 needs DRA GPUs
    /// ([`TraceBuilder::dra_gpus`]): the pod shares one GPU's consumable capacity.
    pub gpu_milli: i64,
    /// Allowed GPU models (node label [`GPU_MODEL_LABEL`]); empty allows any.
    pub gpu_models: Vec<String>,
}

impl PodShape {
    pub fn new(cpu_milli: i64, memory: i64, gpus: i64) -> Self {
        PodShape {
            cpu_milli,
            memory,
            gpus,
            gpu_milli: 1000,
            gpu_models: Vec::new(),
        }
    }
}

/// A job to add to a trace.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub name: String,
    pub arrival: u64,
    pub duration: Option<u64>,
    pub priority_class: Option<String>,
    pub pods: Vec<PodShape>,
    /// Make a gang PodGroup with `minCount` = every pod (jobs of more than one pod always
    /// get a PodGroup; without `gang` it is a `basic` one).
    pub gang: bool,
    /// Topology key for the PodGroup (all pods in one domain of that node label).
    pub topology_key: Option<String>,
}

/// Builds a [`Trace`] in code: nodes, priority classes and jobs.
pub struct TraceBuilder {
    cluster: Cluster,
    jobs: Vec<Job>,
    skipped: Vec<Skipped>,
    notes: Vec<String>,
    gpu: ResourceId,
    /// Taint GPU nodes with `nvidia.com/gpu=present:NoSchedule`; GPU pods tolerate it.
    taint_gpu_nodes: bool,
    /// The DRA driver GPUs are published under, when GPUs are DRA devices.
    dra_driver: Option<String>,
    /// GPUs of each node by name.
    node_gpus: std::collections::BTreeMap<String, i64>,
    /// Milli-GPUs of each pod, by pod id.
    pod_gpu_milli: Vec<i64>,
    /// ResourceClaimTemplate names by (GPUs, milli-GPUs each, models).
    templates: std::collections::BTreeMap<(i64, i64, Vec<String>), String>,
}

impl Default for TraceBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl TraceBuilder {
    pub fn new() -> Self {
        let mut cluster = Cluster::default();
        let gpu = cluster.resources.intern(GPU);
        TraceBuilder {
            cluster,
            jobs: Vec::new(),
            skipped: Vec::new(),
            notes: Vec::new(),
            gpu,
            taint_gpu_nodes: false,
            dra_driver: None,
            node_gpus: Default::default(),
            pod_gpu_milli: Vec::new(),
            templates: Default::default(),
        }
    }

    /// Publish GPUs as DRA devices of `driver` instead of the `nvidia.com/gpu` extended
    /// resource (call before adding nodes): each GPU node gets a ResourceSlice with one
    /// shareable device per GPU (attribute `model` from the node's [`GPU_MODEL_LABEL`],
    /// consumable capacity `milli` of 1000), one DeviceClass `gpu` selects the driver, and GPU
    /// pods claim devices through ResourceClaimTemplates: a whole-GPU pod `gpus` devices
    /// (naming no capacity, so each takes all of a device's 1000 milli and a device already
    /// shared cannot be taken whole), a fractional pod one device with a `milli` capacity
    /// request. Allowed models become a CEL selector on `model`.
    pub fn dra_gpus(&mut self, driver: &str) {
        self.dra_driver = Some(driver.to_string());
        self.cluster.device_classes.push(DeviceClass {
            name: "gpu".into(),
            selectors: vec![format!("device.driver == '{driver}'")],
            ..DeviceClass::default()
        });
    }

    /// Keep pods that request no GPU off GPU nodes with a NoSchedule taint (call before adding
    /// nodes).
    pub fn taint_gpu_nodes(&mut self) {
        self.taint_gpu_nodes = true;
    }

    /// A node with `cpu_milli`, `memory` bytes, `gpus` whole GPUs and 110 pod slots.
    pub fn node(
        &mut self,
        name: &str,
        cpu_milli: i64,
        memory: i64,
        gpus: i64,
        labels: &[(&str, &str)],
    ) {
        let mut node = testkit::node(&mut self.cluster, name, cpu_milli, memory, 110);
        self.node_gpus.insert(name.to_string(), gpus.max(0));
        if gpus > 0 {
            if let Some(driver) = &self.dra_driver {
                let model = labels
                    .iter()
                    .find(|(k, _)| *k == GPU_MODEL_LABEL)
                    .map(|(_, v)| *v);
                self.cluster
                    .resource_slices
                    .push(gpu_slice(driver, name, gpus, model));
            } else {
                node.allocatable.set(self.gpu, gpus);
            }
            if self.taint_gpu_nodes {
                node.taints.push(Taint {
                    key: GPU.into(),
                    value: "present".into(),
                    effect: TaintEffect::NoSchedule,
                });
            }
        }
        for (k, v) in labels {
            node.labels.insert(k.to_string(), v.to_string());
        }
        self.cluster.nodes.push(node);
    }

    pub fn priority_class(&mut self, name: &str, value: i32) {
        self.cluster.priority_classes.push(PriorityClass {
            name: name.into(),
            value,
            global_default: false,
            preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        });
    }

    pub fn skip(&mut self, reason: impl Into<String>, count: usize) {
        if count > 0 {
            self.skipped.push(Skipped {
                reason: reason.into(),
                count,
            });
        }
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Adds a job: its pods (named `<job>` for one pod, `<job>-<i>` for more) and, for more
    /// than one pod, a PodGroup named after the job.
    pub fn job(&mut self, spec: JobSpec) {
        let priority = spec.priority_class.as_ref().map(|name| {
            self.cluster
                .priority_classes
                .iter()
                .find(|pc| &pc.name == name)
                .map_or(0, |pc| pc.value)
        });
        let grouped = spec.pods.len() > 1 || spec.gang;
        let mut ids = Vec::with_capacity(spec.pods.len());
        let mut gpus = 0;
        for (i, shape) in spec.pods.iter().enumerate() {
            let name = if grouped {
                format!("{}-{i:03}", spec.name)
            } else {
                spec.name.clone()
            };
            let mut pod = testkit::pod(&mut self.cluster, &name, shape.cpu_milli, shape.memory);
            let milli = if shape.gpus > 0 {
                shape.gpu_milli.clamp(1, 1000)
            } else {
                0
            };
            self.pod_gpu_milli.push(shape.gpus.max(0) * milli);
            if shape.gpus > 0 && self.dra_driver.is_some() {
                let key = (shape.gpus, milli, shape.gpu_models.clone());
                let n = self.templates.len();
                let template = self
                    .templates
                    .entry(key)
                    .or_insert_with(|| format!("gpu-{n}"))
                    .clone();
                if self.templates.len() > n {
                    let driver = self.dra_driver.as_deref().unwrap_or_default();
                    self.cluster.resource_claim_templates.push(gpu_template(
                        driver,
                        &template,
                        shape.gpus,
                        milli,
                        &shape.gpu_models,
                    ));
                }
                pod.resource_claims.push(PodResourceClaim {
                    name: "gpu".into(),
                    resource_claim_name: None,
                    resource_claim_template_name: Some(template),
                    generated_claim: None,
                });
                if milli == 1000 {
                    gpus += shape.gpus;
                }
            }
            if shape.gpus > 0 && self.dra_driver.is_none() {
                pod.requests.set(self.gpu, shape.gpus);
                gpus += shape.gpus;
            }
            if shape.gpus > 0 && self.taint_gpu_nodes {
                pod.tolerations.push(Toleration {
                    key: GPU.into(),
                    operator: TolerationOperator::Exists,
                    value: String::new(),
                    effect: Some(TaintEffect::NoSchedule),
                });
            }
            if !shape.gpu_models.is_empty() && self.dra_driver.is_none() {
                pod.node_affinity = NodeAffinity {
                    required: Some(vec![NodeSelectorTerm {
                        match_expressions: vec![Requirement {
                            key: GPU_MODEL_LABEL.into(),
                            operator: Operator::In,
                            values: shape.gpu_models.clone(),
                        }],
                        match_fields: Vec::new(),
                    }]),
                    preferred: Vec::new(),
                };
            }
            pod.scheduler_name = "lockstep".into();
            pod.priority = priority.unwrap_or(0);
            pod.priority_class_name = spec.priority_class.clone();
            pod.creation_timestamp = Some(spec.arrival as i64);
            // The engine's cluster is fixed for the run: a job's arrival stands in for its
            // pods' status.startTime (preemption's tie-breaks read it).
            pod.start_time = Some(spec.arrival as i64);
            if grouped {
                pod.pod_group = Some(spec.name.clone());
            }
            ids.push(PodId(self.cluster.pods.len() as u32));
            self.cluster.pods.push(pod);
        }
        let min_pods = ids.len();
        if grouped {
            self.cluster.pod_groups.push(PodGroup {
                namespace: "default".into(),
                name: spec.name.clone(),
                policy: if spec.gang {
                    GroupPolicy::Gang {
                        min: min_pods as u32,
                    }
                } else {
                    GroupPolicy::Basic
                },
                topology_key: spec.topology_key.clone(),
                priority: None,
                preemption_policy: PreemptionPolicy::PreemptLowerPriority,
                disruption_mode: DisruptionMode::Single,
                parent: None,
                resource_claims: Vec::new(),
                creation_timestamp: Some(spec.arrival as i64),
                initially_scheduled: false,
            });
        }
        self.jobs.push(Job {
            name: spec.name,
            arrival: spec.arrival,
            duration: spec.duration,
            pods: ids,
            min_pods,
            gang: spec.gang,
            priority_class: spec
                .priority_class
                .unwrap_or_else(|| NO_PRIORITY_CLASS.into()),
            gpus,
            initially_running: false,
        });
    }

    /// Sorts nodes by name (node ids are name order, as the manifest loader makes them) and
    /// jobs by arrival.
    pub fn finish(self, name: impl Into<String>) -> Trace {
        let mut jobs = self.jobs;
        jobs.sort_by(|a, b| a.arrival.cmp(&b.arrival).then_with(|| a.name.cmp(&b.name)));
        let cluster = testkit::finish(self.cluster);
        let node_gpus = cluster
            .nodes
            .iter()
            .map(|n| self.node_gpus.get(&n.name).copied().unwrap_or(0))
            .collect();
        Trace {
            name: name.into(),
            cluster,
            jobs,
            skipped: self.skipped,
            notes: self.notes,
            node_gpus,
            pod_gpu_milli: self.pod_gpu_milli,
        }
    }
}

/// The ResourceSlice of a node's `gpus` GPUs under `driver`.
fn gpu_slice(driver: &str, node: &str, gpus: i64, model: Option<&str>) -> ResourceSlice {
    let devices = (0..gpus)
        .map(|i| {
            let mut d = Device {
                name: format!("gpu-{i}"),
                allow_multiple_allocations: true,
                ..Device::default()
            };
            if let Some(m) = model {
                d.attributes
                    .insert("model".into(), AttributeValue::String(m.into()));
            }
            d.capacity.insert(
                "milli".into(),
                DeviceCapacity {
                    value: 1000,
                    request_policy: None,
                },
            );
            d
        })
        .collect();
    ResourceSlice {
        name: format!("{node}-gpus"),
        driver: driver.into(),
        pool: ResourcePool {
            name: node.into(),
            generation: 1,
            resource_slice_count: 1,
        },
        node_scope: SliceNodeScope::NodeName(node.into()),
        devices,
        shared_counters: Vec::new(),
    }
}

/// A template claiming `gpus` devices of class `gpu` (`milli` < 1000: one device, sharing
/// `milli` of its capacity), of one of `models` when any are given.
fn gpu_template(
    driver: &str,
    name: &str,
    gpus: i64,
    milli: i64,
    models: &[String],
) -> ResourceClaimTemplate {
    let mut selectors = Vec::new();
    if !models.is_empty() {
        let any: Vec<String> = models
            .iter()
            .map(|m| format!("device.attributes['{driver}'].model == '{m}'"))
            .collect();
        selectors.push(any.join(" || "));
    }
    let mut capacity_requests = std::collections::BTreeMap::new();
    if milli < 1000 {
        capacity_requests.insert("milli".to_string(), milli);
    }
    testkit::claim_template(name, "gpu", gpus as u32, selectors, capacity_requests)
}

/// Memory helpers for readers and generators.
pub const fn gib(n: i64) -> i64 {
    n * GI
}
pub const fn mib(n: i64) -> i64 {
    n * MI
}

/// Splits `gpus` whole GPUs into pods of at most `per_node` GPUs each, as evenly as possible
/// (12 GPUs on 8-GPU nodes: two pods of 6).
pub fn split_gpus(gpus: i64, per_node: i64) -> Vec<i64> {
    if gpus <= 0 {
        return vec![0];
    }
    let per_node = per_node.max(1);
    let n = split_pods(gpus, per_node);
    let base = gpus / n;
    let extra = gpus % n;
    (0..n).map(|i| base + i64::from(i < extra)).collect()
}

/// How many pods [`split_gpus`] makes of `gpus` GPUs, without making them.
pub fn split_pods(gpus: i64, per_node: i64) -> i64 {
    if gpus <= 0 {
        return 1;
    }
    let per_node = per_node.max(1);
    gpus / per_node + i64::from(gpus % per_node != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_even_and_bounded() {
        for (g, n) in [(1, 8), (8, 8), (12, 8), (20, 8), (128, 8), (0, 8), (7, 3)] {
            assert_eq!(split_pods(g, n), split_gpus(g, n).len() as i64);
        }
        assert_eq!(split_gpus(1, 8), vec![1]);
        assert_eq!(split_gpus(8, 8), vec![8]);
        assert_eq!(split_gpus(12, 8), vec![6, 6]);
        assert_eq!(split_gpus(20, 8), vec![7, 7, 6]);
        assert_eq!(split_gpus(128, 8), vec![8; 16]);
        assert_eq!(split_gpus(0, 8), vec![0]);
    }

    #[test]
    fn builder_makes_groups_for_multi_pod_jobs() {
        let mut b = TraceBuilder::new();
        b.node("n1", 8000, gib(64), 8, &[(RACK_LABEL, "r1")]);
        b.priority_class("high", 1000);
        b.job(JobSpec {
            name: "g".into(),
            arrival: 5,
            duration: Some(10),
            priority_class: Some("high".into()),
            pods: vec![PodShape::new(1000, gib(1), 2); 3],
            gang: true,
            topology_key: Some(RACK_LABEL.into()),
        });
        b.job(JobSpec {
            name: "s".into(),
            arrival: 1,
            duration: None,
            priority_class: None,
            pods: vec![PodShape::new(1000, gib(1), 0)],
            gang: false,
            topology_key: None,
        });
        let t = b.finish("test");
        assert_eq!(t.jobs[0].name, "s");
        assert_eq!(t.jobs[1].gpus, 6);
        assert_eq!(t.jobs[1].min_pods, 3);
        assert_eq!(t.cluster.pod_groups.len(), 1);
        assert_eq!(t.cluster.pods[0].priority, 1000);
        assert_eq!(t.cluster.pods[0].pod_group.as_deref(), Some("g"));
        assert_eq!(t.capacity(GPU), 8);
        assert_eq!(
            t.priority_classes(),
            vec!["high".to_string(), "(none)".into()]
        );
    }
}
