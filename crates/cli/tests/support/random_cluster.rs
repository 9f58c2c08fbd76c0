#![allow(dead_code)] // each user reads only part of it
//! Random small clusters as Kubernetes manifests, one YAML document per object, driven by a
//! stream of bytes: each decision reads the next byte, and a missing byte reads as 0, which
//! always means "fewer" or "without". A shorter or smaller stream therefore gives a smaller
//! cluster, so a failing case shrinks well under proptest (a `Vec<u8>`) and a fuzzer's input
//! maps onto it directly.
//!
//! The clusters are made to have ties: few distinct pod shapes, equal priorities, equal or
//! missing start times, nodes of equal size in several racks and zones, identical devices.
//! What they hold: PriorityClasses (one with `preemptionPolicy: Never`), nodes with rack and
//! zone labels and an extended GPU resource, running and pending pods (priorities, start
//! times, host ports, anti-affinity), PodGroups (gang `minCount`, rack or zone topology
//! constraints, `disruptionMode`, running members, a CompositePodGroup over two of them),
//! the gang preemption mode, a PodDisruptionBudget, and Dynamic
//! Resource Allocation (a DeviceClass, a ResourceSlice per GPU node with exclusive and
//! shareable devices, ResourceClaimTemplates, a shared ResourceClaim).
//!
//! Used by `crates/cli/tests/determinism.rs` and by the fuzz targets under `fuzz/`.

/// The decisions of one generated cluster, read from bytes.
pub struct Choices<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Choices<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Choices { bytes, at: 0 }
    }

    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// A number in `0..n` (0 when the bytes have run out).
    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        usize::from(self.byte()) % n
    }

    /// True with about `percent`% probability on random bytes; false for a 0 byte.
    pub fn chance(&mut self, percent: u32) -> bool {
        let b = u32::from(self.byte());
        b * 100 / 256 >= 100 - percent.min(100)
    }
}

/// What the generator decided, besides the documents: for the fuzz targets' invariant
/// checks.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    /// Gang PodGroups `namespace/name` with their minCount.
    pub gangs: Vec<(String, u32)>,
    /// Devices that allow multiple allocations (`pool/device`).
    pub shareable: Vec<String>,
    /// `--gang-preemption` for the run: `minimal` (the default), `off` or `atomic`.
    pub gang_preemption: &'static str,
}

const NAMESPACE: &str = "ml";
const CLASSES: [(&str, i32); 3] = [("low", 100), ("mid", 500), ("high", 1000)];
/// Start times of running pods: few values, so that they tie.
const START_TIMES: [&str; 2] = ["2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z"];

struct NodeSpec {
    name: String,
    devices: u32,
    shared_device: bool,
}

/// A pod's shape: cpu (whole CPUs), extended GPUs, and the claim template it uses.
#[derive(Clone, Copy)]
struct Shape {
    cpu: u32,
    memory_gi: u32,
    gpus: u32,
    claim: Option<&'static str>,
}

fn shape(c: &mut Choices, dra: bool, uniform: bool) -> Shape {
    let (cpu, memory_gi) = if uniform {
        ([4, 2][c.below(2)], 1)
    } else {
        ([1, 2, 1, 4][c.below(4)], [1, 4, 1, 8][c.below(4)])
    };
    let gpus = if c.chance(25) {
        1 + c.below(2) as u32
    } else {
        0
    };
    let claim = if dra && c.chance(50) {
        Some(["one-gpu", "two-gpu", "shared-gpu", "common"][c.below(4)])
    } else {
        None
    };
    Shape {
        cpu,
        memory_gi,
        gpus,
        claim,
    }
}

/// The documents of one random cluster, in a natural order (kinds grouped, names
/// ascending), and what was generated.
pub fn cluster(c: &mut Choices) -> (Vec<String>, Facts) {
    let mut docs = Vec::new();
    let mut facts = Facts::default();
    for (name, value) in CLASSES {
        docs.push(format!(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}\n"
        ));
    }
    docs.push(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: polite}\nvalue: 2000\npreemptionPolicy: Never\n"
            .to_string(),
    );
    let dra = c.chance(50);
    // Uniform clusters (every node 4 cpu, pods of half or a whole node) tie everywhere.
    let uniform = c.chance(40);
    let num_nodes = 2 + c.below(5);
    let racks = 1 + c.below(3);
    let mut nodes = Vec::new();
    for i in 0..num_nodes {
        let name = format!("node-{i}");
        let rack = i % racks;
        let zone = rack % 2;
        let (cpu, memory) = if uniform {
            (4, 16)
        } else {
            ([4, 8, 4, 2][c.below(4)], [32, 16, 8, 64][c.below(4)])
        };
        let gpus = if c.chance(40) { [2, 4][c.below(2)] } else { 0 };
        let gpu_line = if gpus > 0 {
            format!(", nvidia.com/gpu: \"{gpus}\"")
        } else {
            String::new()
        };
        docs.push(format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/rack: rack-{rack}, topology.kubernetes.io/zone: zone-{zone}}}\nstatus: {{allocatable: {{cpu: \"{cpu}\", memory: {memory}Gi, pods: \"110\"{gpu_line}}}}}\n"
        ));
        let (devices, shared_device) = if dra && c.chance(60) {
            (1 + c.below(3) as u32, c.chance(40))
        } else {
            (0, false)
        };
        nodes.push(NodeSpec {
            name,
            devices,
            shared_device,
        });
    }
    if dra {
        docs.push(
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\nspec:\n  selectors:\n  - cel:\n      expression: 'device.driver == \"gpu.example.com\"'\n"
                .to_string(),
        );
        for n in &nodes {
            if n.devices == 0 && !n.shared_device {
                continue;
            }
            let mut devices = String::new();
            for d in 0..n.devices {
                devices += &format!(
                    "  - name: gpu-{d}\n    attributes: {{model: {{string: a100}}}}\n    capacity: {{memory: {{value: 40Gi}}}}\n"
                );
            }
            if n.shared_device {
                devices += "  - name: shared-0\n    allowMultipleAllocations: true\n    attributes: {model: {string: a100}}\n    capacity: {memory: {value: 40Gi}}\n";
                facts.shareable.push(format!("{}/shared-0", n.name));
            }
            docs.push(format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {0}-gpus}}\nspec:\n  driver: gpu.example.com\n  nodeName: {0}\n  pool: {{name: {0}, generation: 1, resourceSliceCount: 1}}\n  devices:\n{devices}",
                n.name
            ));
        }
        for (name, count) in [("one-gpu", 1), ("two-gpu", 2)] {
            docs.push(format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: {name}, namespace: {NAMESPACE}}}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly:\n          deviceClassName: gpu.example.com\n          count: {count}\n          selectors:\n          - cel:\n              expression: 'device.attributes[\"gpu.example.com\"].model == \"a100\"'\n"
            ));
        }
        docs.push(format!(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: shared-gpu, namespace: {NAMESPACE}}}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly:\n          deviceClassName: gpu.example.com\n          capacity:\n            requests: {{memory: 10Gi}}\n"
        ));
        docs.push(format!(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: common, namespace: {NAMESPACE}}}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {{deviceClassName: gpu.example.com}}\n"
        ));
    }
    if c.chance(30) {
        docs.push(format!(
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: keep-db, namespace: {NAMESPACE}}}\nspec:\n  maxUnavailable: {}\n  selector:\n    matchLabels: {{app: db}}\n",
            c.below(2)
        ));
    }

    facts.gang_preemption = ["minimal", "off", "atomic"][c.below(3)];
    let mut pod_docs = Vec::new();
    // PodGroups and their members; the first two may be children of a CompositePodGroup.
    let num_groups = c.below(4);
    let composite = num_groups >= 2 && c.chance(30);
    if composite {
        let topology = if c.chance(50) {
            "\n  schedulingConstraints:\n    topology:\n    - key: topology.kubernetes.io/zone"
        } else {
            ""
        };
        docs.push(format!(
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: CompositePodGroup\nmetadata: {{name: job, namespace: {NAMESPACE}}}\nspec:\n  schedulingPolicy:\n    gang: {{minGroupCount: {}}}{topology}\n",
            1 + c.below(2)
        ));
    }
    for g in 0..num_groups {
        let name = format!("g{g}");
        let size = 1 + c.below(4);
        let min = 1 + c.below(size);
        let class = CLASSES[c.below(3)].0;
        let topology = match c.below(3) {
            1 => {
                "\n  schedulingConstraints:\n    topology:\n    - key: topology.kubernetes.io/rack"
            }
            2 => {
                "\n  schedulingConstraints:\n    topology:\n    - key: topology.kubernetes.io/zone"
            }
            _ => "",
        };
        let mode = if c.chance(30) { "all" } else { "single" };
        let parent = if composite && g < 2 {
            "\n  parentCompositePodGroupName: job"
        } else {
            ""
        };
        docs.push(format!(
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: {NAMESPACE}}}\nspec:\n  priorityClassName: {class}\n  disruptionMode: {{{mode}: {{}}}}\n  schedulingPolicy:\n    gang: {{minCount: {min}}}{topology}{parent}\n"
        ));
        facts
            .gangs
            .push((format!("{NAMESPACE}/{name}"), min as u32));
        let member_shapes = [shape(c, dra, uniform), shape(c, dra, uniform)];
        // A group runs already (all of it, on random nodes) or is pending.
        let running = c.chance(40);
        for m in 0..size {
            let pod = PodSpec {
                name: format!("{name}-{m}"),
                class,
                shape: member_shapes[usize::from(m > 0 && c.chance(40))],
                group: Some(name.clone()),
                node: running.then(|| nodes[c.below(nodes.len())].name.clone()),
                start: running.then(|| START_TIMES[c.below(2)]),
                app: "train",
                port: false,
                anti_affinity: false,
            };
            pod_docs.push(pod.render());
        }
    }
    // Pods outside any group.
    let num_pods = c.below(9);
    let shapes = [shape(c, dra, uniform), shape(c, dra, uniform)];
    for p in 0..num_pods {
        let running = c.chance(50);
        let class = if c.chance(10) {
            "polite"
        } else {
            CLASSES[c.below(3)].0
        };
        let pod = PodSpec {
            name: format!("p{p}"),
            class,
            shape: shapes[c.below(2)],
            group: None,
            node: running.then(|| nodes[c.below(nodes.len())].name.clone()),
            start: if running && c.chance(70) {
                Some(START_TIMES[c.below(2)])
            } else {
                None
            },
            app: ["web", "db"][c.below(2)],
            port: c.chance(10),
            anti_affinity: c.chance(10),
        };
        pod_docs.push(pod.render());
    }
    docs.extend(pod_docs);
    (docs, facts)
}

struct PodSpec {
    name: String,
    class: &'static str,
    shape: Shape,
    group: Option<String>,
    node: Option<String>,
    start: Option<&'static str>,
    app: &'static str,
    port: bool,
    anti_affinity: bool,
}

impl PodSpec {
    fn render(&self) -> String {
        let mut spec = format!("  priorityClassName: {}\n", self.class);
        if let Some(node) = &self.node {
            spec += &format!("  nodeName: {node}\n");
        }
        if let Some(g) = &self.group {
            spec += &format!("  schedulingGroup: {{podGroupName: {g}}}\n");
        }
        match self.shape.claim {
            Some("common") => {
                spec += "  resourceClaims:\n  - {name: gpu, resourceClaimName: common}\n";
            }
            Some(t) => {
                spec += &format!(
                    "  resourceClaims:\n  - {{name: gpu, resourceClaimTemplateName: {t}}}\n"
                );
            }
            None => {}
        }
        if self.anti_affinity {
            spec += &format!(
                "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n      - labelSelector: {{matchLabels: {{app: {}}}}}\n        topologyKey: kubernetes.io/hostname\n",
                self.app
            );
        }
        let mut requests = format!(
            "cpu: \"{}\", memory: {}Gi",
            self.shape.cpu, self.shape.memory_gi
        );
        if self.shape.gpus > 0 {
            requests += &format!(", nvidia.com/gpu: \"{}\"", self.shape.gpus);
        }
        let mut resources = format!("requests: {{{requests}}}");
        if self.shape.gpus > 0 {
            resources += &format!(", limits: {{nvidia.com/gpu: \"{}\"}}", self.shape.gpus);
        }
        if self.shape.claim.is_some() {
            resources += ", claims: [{name: gpu}]";
        }
        let ports = if self.port {
            ", ports: [{containerPort: 8080, hostPort: 8080}]"
        } else {
            ""
        };
        spec += &format!(
            "  containers:\n  - {{name: work, image: work, resources: {{{resources}}}{ports}}}\n"
        );
        let status = match (&self.node, self.start) {
            (Some(_), Some(t)) => format!("status: {{phase: Running, startTime: \"{t}\"}}\n"),
            (Some(_), None) => "status: {phase: Running}\n".to_string(),
            _ => String::new(),
        };
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {}, namespace: {NAMESPACE}, labels: {{app: {}}}}}\nspec:\n{spec}{status}",
            self.name, self.app
        )
    }
}
