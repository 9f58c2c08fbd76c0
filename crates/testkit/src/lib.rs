//! `lockstep-testkit`: clusters built in code for tests and benchmarks (scheduler_perf
//! shapes, gangs, racks, DRA GPU nodes), the exhaustive preemption oracle, the exhaustive
//! gang placement oracle (`placement`) and a counting allocator (`counting`). A development-only crate: no product crate depends
//! on it.

pub mod counting;
pub mod oracle;
pub mod perf_shapes;
pub mod placement;

pub use lockstep_model::builders::*;
use lockstep_model::{Cluster, Pod, PodPhase, PreemptionPolicy};

/// scheduler_perf's SchedulingBasic shape: `nodes` nodes of 4 CPU / 32Gi / 110 pods and
/// `pods` pending pods of one shape (100m CPU, 500Mi, as its pod template).
pub fn scheduling_basic(nodes: usize, pods: usize) -> Cluster {
    let mut c = Cluster::default();
    for i in 0..nodes {
        let n = node(&mut c, &format!("node-{i:05}"), 4000, 32 * GI, 110);
        c.nodes.push(n);
    }
    for i in 0..pods {
        let p = pod(&mut c, &format!("pod-{i:06}"), 100, 500 * 1024 * 1024);
        c.pods.push(p);
    }
    finish(c)
}

/// A gang PodGroup in namespace `default`.
pub fn gang(name: &str, min: u32, topology_key: Option<&str>) -> lockstep_model::PodGroup {
    lockstep_model::PodGroup {
        namespace: "default".into(),
        name: name.into(),
        policy: lockstep_model::GroupPolicy::Gang { min },
        topology_key: topology_key.map(str::to_string),
        priority: None,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        disruption_mode: lockstep_model::DisruptionMode::Single,
        parent: None,
        resource_claims: Vec::new(),
        creation_timestamp: None,
        initially_scheduled: false,
    }
}

/// `pods` members of group `group`, each requesting `cpu_milli` and `memory`.
pub fn members(cluster: &mut Cluster, group: &str, pods: usize, cpu_milli: i64, memory: i64) {
    for i in 0..pods {
        let mut p = pod(cluster, &format!("{group}-{i:04}"), cpu_milli, memory);
        p.pod_group = Some(group.into());
        cluster.pods.push(p);
    }
}

/// `racks` racks of `per_rack` nodes (4 CPU, 32Gi, 110 pods), labelled
/// `topology.kubernetes.io/rack=rack-NNN`.
pub fn racks(cluster: &mut Cluster, racks: usize, per_rack: usize) {
    for r in 0..racks {
        for i in 0..per_rack {
            let mut n = node(
                cluster,
                &format!("rack-{r:03}-node-{i:03}"),
                4000,
                32 * GI,
                110,
            );
            n.labels
                .insert("topology.kubernetes.io/rack".into(), format!("rack-{r:03}"));
            cluster.nodes.push(n);
        }
    }
}

/// scheduler_perf's ResourceSaturation shape: `nodes` nodes of 4 CPU and `pods` pods of 3 CPU,
/// so every pod fills a node.
pub fn resource_saturation(nodes: usize, pods: usize) -> Cluster {
    let mut c = Cluster::default();
    for i in 0..nodes {
        let n = node(&mut c, &format!("node-{i:05}"), 4000, 32 * GI, 110);
        c.nodes.push(n);
    }
    for i in 0..pods {
        let p = pod(&mut c, &format!("pod-{i:06}"), 3000, GI);
        c.pods.push(p);
    }
    finish(c)
}

/// Host port conflicts: `nodes` nodes and `pods` pods that all want host port 8080, so each
/// node takes one.
pub fn host_port_conflict(nodes: usize, pods: usize) -> Cluster {
    let mut c = scheduling_basic(nodes, pods);
    for p in &mut c.pods {
        p.host_ports.push(lockstep_model::HostPort {
            protocol: "TCP".into(),
            host_ip: String::new(),
            port: 8080,
        });
    }
    c
}

/// A running pod on `node` requesting `cpu_milli`, with `priority`, optionally in `group`.
pub fn running(
    cluster: &mut Cluster,
    name: &str,
    node: &str,
    cpu_milli: i64,
    priority: i32,
    group: Option<&str>,
) -> Pod {
    let mut p = pod(cluster, name, cpu_milli, GI);
    p.node_name = Some(node.into());
    p.phase = PodPhase::Running;
    p.priority = priority;
    p.pod_group = group.map(str::to_string);
    p
}

/// The preemption benchmark shape: `nodes` nodes of 4 CPU, full with `gangs` running
/// low-priority gangs of 1-CPU pods (each gang's pods on consecutive nodes), and, when
/// `preemptor` is set, one pending 8-pod gang of 1-CPU pods at high priority.
pub fn full_of_gangs(nodes: usize, gangs: usize, preemptor: bool) -> Cluster {
    let mut c = Cluster::default();
    for i in 0..nodes {
        let n = node(&mut c, &format!("node-{i:05}"), 4000, 32 * GI, 110);
        c.nodes.push(n);
    }
    let pods_per_gang = nodes * 4 / gangs;
    for g in 0..gangs {
        let name = format!("low-{g:05}");
        let mut pg = gang(&name, pods_per_gang as u32, None);
        pg.priority = Some(10);
        c.pod_groups.push(pg);
        for i in 0..pods_per_gang {
            let n = (g * pods_per_gang + i) % nodes;
            let p = running(
                &mut c,
                &format!("{name}-{i:02}"),
                &format!("node-{n:05}"),
                1000,
                10,
                Some(&name),
            );
            c.pods.push(p);
        }
    }
    if preemptor {
        let mut pg = gang("urgent", 8, None);
        pg.priority = Some(1000);
        c.pod_groups.push(pg);
        members(&mut c, "urgent", 8, 1000, GI);
    }
    finish(c)
}

/// The DRA benchmark shape: `nodes` nodes (64 CPU, 512Gi) with 8 GPUs each in a
/// ResourceSlice (attributes model, pcieRoot, numa; capacity memory: 80Gi on GPUs 0-3, 40Gi
/// on 4-7), a DeviceClass selecting the driver and model by CEL, `singles` pods claiming one
/// GPU with `memory >= 40Gi` and `quads` pods claiming four GPUs on one PCIe root, both
/// through ResourceClaimTemplates.
pub fn dra_gpus(nodes: usize, singles: usize, quads: usize) -> Cluster {
    use lockstep_model::dra::*;
    let mut c = Cluster::default();
    for i in 0..nodes {
        let n = node(&mut c, &format!("node-{i:04}"), 64_000, 512 * GI, 110);
        c.nodes.push(n);
    }
    let gpu = |i: usize| {
        let mut d = Device {
            name: format!("gpu-{i}"),
            ..Device::default()
        };
        let model = if i < 4 { "A100-80GB" } else { "A100-40GB" };
        d.attributes
            .insert("model".into(), AttributeValue::String(model.into()));
        d.attributes.insert(
            "pcieRoot".into(),
            AttributeValue::String(format!("pci-{}", i / 4)),
        );
        d.attributes
            .insert("numa".into(), AttributeValue::Int((i / 4) as i64));
        d.capacity.insert(
            "memory".into(),
            DeviceCapacity {
                value: if i < 4 { 80 * GI } else { 40 * GI },
                request_policy: None,
            },
        );
        d
    };
    for n in &c.nodes {
        c.resource_slices.push(ResourceSlice {
            name: format!("{}-gpus", n.name),
            driver: "gpu.example.com".into(),
            pool: ResourcePool {
                name: n.name.clone(),
                generation: 1,
                resource_slice_count: 1,
            },
            node_scope: SliceNodeScope::NodeName(n.name.clone()),
            devices: (0..8).map(gpu).collect(),
            shared_counters: Vec::new(),
        });
    }
    c.device_classes.push(DeviceClass {
        name: "gpu".into(),
        selectors: vec![
            "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].model.startsWith('A100')".into(),
        ],
        ..DeviceClass::default()
    });
    let template = |name: &str, count: u32, selectors: Vec<String>, same_root: bool| {
        let mut t = claim_template(name, "gpu", count, selectors, Default::default());
        if same_root {
            t.spec.constraints.push(DeviceConstraint {
                requests: Vec::new(),
                kind: ConstraintKind::MatchAttribute("gpu.example.com/pcieRoot".into()),
            });
        }
        t
    };
    c.resource_claim_templates.push(template(
        "one-40gi",
        1,
        vec!["device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0".into()],
        false,
    ));
    c.resource_claim_templates
        .push(template("four-same-root", 4, Vec::new(), true));
    for (count, tpl, prefix) in [
        (singles, "one-40gi", "single"),
        (quads, "four-same-root", "quad"),
    ] {
        for i in 0..count {
            let mut p = pod(&mut c, &format!("{prefix}-{i:05}"), 1000, GI);
            p.resource_claims.push(lockstep_model::PodResourceClaim {
                name: "gpu".into(),
                resource_claim_name: None,
                resource_claim_template_name: Some(tpl.into()),
                generated_claim: None,
            });
            c.pods.push(p);
        }
    }
    finish(c)
}
