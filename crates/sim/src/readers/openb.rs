//! The Alibaba GPU cluster trace (cluster-trace-gpu-v2023, "openb"): a node list CSV
//! (`sn,cpu_milli,memory_mib,gpu,model`) and a pod list CSV (`name,cpu_milli,memory_mib,
//! num_gpu,gpu_milli` and, in most files, `gpu_spec,qos,pod_phase,creation_time,
//! deletion_time,scheduled_time`).
//!
//! Mapping:
//! - GPUs are Dynamic Resource Allocation devices of driver [`DRIVER`]
//!   ([`TraceBuilder::dra_gpus`]): a node's `gpu` GPUs become one ResourceSlice with a device
//!   per GPU (attribute `model` from the `model` column, also the node label
//!   `nvidia.com/gpu.product`), each shareable (`allowMultipleAllocations`) with a consumable
//!   capacity `milli` of 1000; one DeviceClass `gpu` selects the driver;
//! - a pod asking for whole GPUs (`gpu_milli` 1000) claims `num_gpu` devices through a
//!   ResourceClaimTemplate, naming no capacity: each device's whole 1000 milli is consumed, so
//!   a device already shared by a fractional pod cannot be taken whole;
//! - a pod asking for a fraction of one GPU (`gpu_milli` < 1000) claims one device with a
//!   capacity request `milli: <gpu_milli>`, sharing it with other fractional pods;
//! - a non-empty `gpu_spec` (`A|B`) becomes a CEL selector on the device's `model` in the
//!   template (templates are shared by pods of the same GPUs, milli and `gpu_spec`);
//! - `qos` becomes a PriorityClass: `LS` and `Guaranteed` -> `latency-sensitive` (1000),
//!   `Burstable` -> `burstable` (500), `BE` -> `best-effort` (0);
//! - a pod arrives at `creation_time` and runs `deletion_time - scheduled_time` seconds
//!   (`deletion_time - creation_time` when it was never scheduled). Files without times
//!   (`multigpu*`) have every pod arrive at 0 and never finish.

use std::path::Path;

use crate::readers::table::{Row, Table, read_file};
use crate::trace::{
    GPU_MODEL_LABEL, JobSpec, PodShape, Trace, TraceBuilder, TraceError, limits, mib,
};

/// The DRA driver the trace's GPUs are published under.
pub const DRIVER: &str = "gpu.alibaba.example";

pub const QOS_CLASSES: [(&str, i32); 3] = [
    ("latency-sensitive", 1000),
    ("burstable", 500),
    ("best-effort", 0),
];

/// Reads the node list and the pod list.
pub fn read_openb(nodes: &Path, pods: &Path) -> Result<Trace, TraceError> {
    let node_text = read_file(nodes)?;
    let pod_text = read_file(pods)?;
    parse_openb(
        &nodes.display().to_string(),
        &node_text,
        &pods.display().to_string(),
        &pod_text,
    )
}

pub fn parse_openb(
    node_file: &str,
    node_text: &str,
    pod_file: &str,
    pod_text: &str,
) -> Result<Trace, TraceError> {
    let mut b = TraceBuilder::new();
    b.dra_gpus(DRIVER);
    for (name, value) in QOS_CLASSES {
        b.priority_class(name, value);
    }
    let nodes = Table::parse(node_file, node_text)?;
    let (c_sn, c_cpu, c_mem, c_gpu) = (
        nodes.column("sn")?,
        nodes.column("cpu_milli")?,
        nodes.column("memory_mib")?,
        nodes.column("gpu")?,
    );
    let c_model = nodes.optional_column("model");
    let mut seen = std::collections::BTreeSet::new();
    let mut total_gpus = 0i64;
    let mut node_rows = Vec::new();
    for row in &nodes.rows {
        let name = &row.fields[c_sn];
        if name.is_empty() {
            return Err(nodes.error(row, "sn: empty node name"));
        }
        let name = nodes.object_name(row, c_sn)?;
        if !seen.insert(name.to_string()) {
            return Err(nodes.error(row, format!("sn: node {name:?} appears twice")));
        }
        if seen.len() > limits::NODES {
            return Err(nodes.error(
                row,
                format!(
                    "more than {} nodes, the most a cluster may have (see \"Limits\" in README.md)",
                    limits::NODES
                ),
            ));
        }
        let (cpu, memory) = cpu_memory(&nodes, row, c_cpu, c_mem, "node")?;
        let gpus = nodes.bounded(
            row,
            c_gpu,
            "a whole number of GPUs",
            limits::GPUS_PER_NODE,
            "the most GPUs a node may have",
        )?;
        total_gpus += gpus;
        if total_gpus > limits::GPUS {
            return Err(nodes.error(
                row,
                format!(
                    "more than {} GPUs in the node list here, the most a cluster may have \
                     (see \"Limits\" in README.md)",
                    limits::GPUS
                ),
            ));
        }
        let model = c_model.map(|c| &row.fields[c]).filter(|m| !m.is_empty());
        if let (Some(m), Some(c)) = (model, c_model) {
            nodes.label_value(row, c, m)?;
        }
        node_rows.push((name, cpu, memory, gpus, model));
    }
    // Built only once every row is checked: GPUs become device objects.
    for (name, cpu, memory, gpus, model) in node_rows {
        let labels: Vec<(&str, &str)> = model.iter().map(|m| (GPU_MODEL_LABEL, *m)).collect();
        b.node(name, cpu, memory, gpus, &labels);
    }

    let pods = Table::parse(pod_file, pod_text)?;
    let (c_name, c_cpu, c_mem, c_num, c_milli) = (
        pods.column("name")?,
        pods.column("cpu_milli")?,
        pods.column("memory_mib")?,
        pods.column("num_gpu")?,
        pods.column("gpu_milli")?,
    );
    let c_spec = pods.optional_column("gpu_spec");
    let c_qos = pods.optional_column("qos");
    let c_created = pods.optional_column("creation_time");
    let c_deleted = pods.optional_column("deletion_time");
    let c_scheduled = pods.optional_column("scheduled_time");
    let timed = c_created.is_some() && c_deleted.is_some();
    let mut names = std::collections::BTreeSet::new();
    let mut jobs = Vec::new();
    for row in &pods.rows {
        let name = &row.fields[c_name];
        if name.is_empty() {
            return Err(pods.error(row, "name: empty pod name"));
        }
        let name = pods.object_name(row, c_name)?;
        if !names.insert(name.to_string()) {
            return Err(pods.error(row, format!("name: pod {name:?} appears twice")));
        }
        if names.len() > limits::PODS {
            return Err(pods.error(
                row,
                format!(
                    "more than {} pods, the most lockstep simulates (see \"Limits\" in README.md)",
                    limits::PODS
                ),
            ));
        }
        let (cpu, memory) = cpu_memory(&pods, row, c_cpu, c_mem, "pod")?;
        let num_gpu = pods.bounded(
            row,
            c_num,
            "a whole number of GPUs",
            limits::GPUS_PER_NODE,
            "the most GPUs a node may have, so the most one pod may ask for",
        )?;
        let milli = pods.int(row, c_milli, "a whole number of milli-GPUs")?;
        if milli > 1000 {
            return Err(pods.error(
                row,
                format!("gpu_milli: {milli} is more than one GPU (1000); use num_gpu for more"),
            ));
        }
        if num_gpu > 0 && milli == 0 {
            return Err(pods.error(
                row,
                format!("num_gpu {num_gpu} with gpu_milli 0; a GPU pod asks for 1..1000 milli-GPUs per GPU"),
            ));
        }
        if num_gpu > 1 && milli < 1000 {
            return Err(pods.error(
                row,
                format!(
                    "num_gpu {num_gpu} with gpu_milli {milli}; only single-GPU pods can share a GPU"
                ),
            ));
        }
        let class = match c_qos.map(|c| &row.fields[c]) {
            None | Some("") => None,
            Some("LS") | Some("Guaranteed") => Some(QOS_CLASSES[0].0),
            Some("Burstable") => Some(QOS_CLASSES[1].0),
            Some("BE") => Some(QOS_CLASSES[2].0),
            Some(other) => {
                return Err(pods.error(
                    row,
                    format!("qos: {other:?} is not one of LS, Guaranteed, Burstable, BE"),
                ));
            }
        };
        let (arrival, duration) = if timed {
            let created = pods.seconds(row, c_created.unwrap_or(0))?;
            let deleted = pods.seconds(row, c_deleted.unwrap_or(0))?;
            let started = match c_scheduled.map(|c| &row.fields[c]) {
                None | Some("") => created,
                Some(_) => pods.seconds(row, c_scheduled.unwrap_or(0))?,
            };
            if deleted < started || started < created {
                return Err(pods.error(
                    row,
                    format!(
                        "times out of order: creation {created}, scheduled {started}, deletion {deleted}"
                    ),
                ));
            }
            (created, Some(deleted - started))
        } else {
            (0, None)
        };
        let mut shape = PodShape::new(cpu, memory, num_gpu);
        if num_gpu > 0 {
            shape.gpu_milli = milli;
        }
        if num_gpu > 0
            && let Some(spec) = c_spec.map(|c| &row.fields[c]).filter(|s| !s.is_empty())
        {
            for model in spec.split('|') {
                pods.label_value(row, c_spec.unwrap_or(0), model)?;
            }
            shape.gpu_models = spec.split('|').map(str::to_string).collect();
        }
        jobs.push(JobSpec {
            name: name.to_string(),
            arrival,
            duration,
            priority_class: class.map(str::to_string),
            pods: vec![shape],
            gang: false,
            topology_key: None,
        });
    }
    let start = jobs.iter().map(|j| j.arrival).min().unwrap_or(0);
    let count = jobs.len();
    for mut j in jobs {
        j.arrival -= start;
        b.job(j);
    }
    if !timed {
        b.note("no creation/deletion times: every pod arrives at 0 and never finishes");
    }
    b.note(format!("{count} pods replayed, one job each"));
    let short = |f: &str| f.rsplit('/').next().unwrap_or(f).to_string();
    Ok(b.finish(format!("{} on {}", short(pod_file), short(node_file))))
}

/// A row's `cpu_milli` and `memory_mib` (as bytes), each within its limit.
fn cpu_memory(
    table: &Table,
    row: &Row,
    c_cpu: usize,
    c_mem: usize,
    what: &str,
) -> Result<(i64, i64), TraceError> {
    let cpu = table.bounded(
        row,
        c_cpu,
        "a whole number of milli-CPU",
        limits::CPU_MILLI,
        &format!("the most milli-CPU a {what} may have, a million CPUs"),
    )?;
    let memory = table.bounded(
        row,
        c_mem,
        "a whole number of MiB",
        limits::MEMORY >> 20,
        &format!("the most MiB of memory a {what} may have, 64 TiB"),
    )?;
    Ok((cpu, mib(memory)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,32000,262144,0,
openb-node-0001,96000,786432,8,G2
openb-node-0002,64000,262144,2,T4
";
    const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,100,1100,100
openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
openb-pod-0002,4000,8192,0,0,,BE,Failed,200,260,210
openb-pod-0003,8000,8192,2,1000,T4|G2,Burstable,Pending,300,400,
";

    #[test]
    fn nodes_and_whole_gpu_pods() {
        let t = parse_openb("nodes.csv", NODES, "pods.csv", PODS).expect("valid");
        assert_eq!(t.cluster.nodes.len(), 3);
        assert_eq!(t.gpus(), 10);
        assert_eq!(t.capacity(crate::trace::GPU), 0, "GPUs are DRA devices");
        assert_eq!(t.cluster.resource_slices.len(), 2);
        assert_eq!(t.cluster.resource_slices[0].devices.len(), 8);
        assert_eq!(
            t.cluster.nodes[1]
                .labels
                .get(GPU_MODEL_LABEL)
                .map(String::as_str),
            Some("G2")
        );
        let jobs: Vec<_> = t
            .jobs
            .iter()
            .map(|j| {
                (
                    j.name.as_str(),
                    j.arrival,
                    j.duration,
                    j.gpus,
                    j.priority_class.as_str(),
                )
            })
            .collect();
        assert_eq!(
            jobs,
            vec![
                ("openb-pod-0000", 0, Some(1000), 1, "latency-sensitive"),
                ("openb-pod-0002", 100, Some(50), 0, "best-effort"),
                ("openb-pod-0003", 200, Some(100), 2, "burstable"),
                (
                    "openb-pod-0001",
                    426961,
                    Some(12475899),
                    0,
                    "latency-sensitive"
                ),
            ]
        );
        assert!(t.skipped.is_empty());
        let pod1 = t.jobs[3].pods[0].index();
        assert_eq!(t.pod_gpu_milli[pod1], 460);
        let pod3 = t.jobs[2].pods[0].index();
        assert_eq!(t.pod_gpu_milli[pod3], 2000);
        let template = |pod: usize| {
            let name = t.cluster.pods[pod].resource_claims[0]
                .resource_claim_template_name
                .as_deref()
                .expect("template claim");
            t.cluster
                .resource_claim_templates
                .iter()
                .find(|x| x.name == name)
                .expect("template")
        };
        let lockstep_model::dra::DeviceRequestKind::Exactly(r) =
            &template(pod3).spec.requests[0].kind
        else {
            panic!("exact request")
        };
        assert_eq!(
            r.allocation_mode,
            lockstep_model::dra::AllocationMode::ExactCount(2)
        );
        assert_eq!(
            r.selectors,
            vec![
                "device.attributes['gpu.alibaba.example'].model == 'T4' || device.attributes['gpu.alibaba.example'].model == 'G2'"
            ]
        );
        assert!(r.capacity_requests.is_empty());
        let lockstep_model::dra::DeviceRequestKind::Exactly(r) =
            &template(pod1).spec.requests[0].kind
        else {
            panic!("exact request")
        };
        assert_eq!(r.capacity_requests.get("milli"), Some(&460));
        assert!(t.cluster.pods[pod3].node_affinity.required.is_none());
    }

    /// Fractional pods share one GPU; a whole-GPU pod cannot take that GPU while any share
    /// is taken, nor can a fractional pod that does not fit in what is left of it.
    #[test]
    fn fractional_pods_share_a_gpu() {
        use crate::policy::Policy;
        use crate::sim::{SimOptions, simulate};
        let nodes = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,1,V100M16\n";
        let pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
a,1000,1024,1,600,V100M16|V100M32,LS,Running,0,100,0
b,1000,1024,1,400,,LS,Running,10,50,10
whole,1000,1024,1,1000,,LS,Running,20,30,20
c,1000,1024,1,300,,LS,Running,25,35,25
";
        let t = parse_openb("nodes.csv", nodes, "pods.csv", pods).expect("valid");
        assert_eq!(t.cluster.resource_claim_templates.len(), 4);
        let run = simulate(
            &t,
            Policy::from_profile(&crate::policy::gpu_aware(Default::default())),
            SimOptions::default(),
            &mut |_, _| {},
        )
        .expect("runs");
        let by_name = |n: &str| {
            let j = t.jobs.iter().position(|j| j.name == n).expect("job");
            run.jobs[j].clone()
        };
        // a (600) and b (400) share the GPU from 10 s.
        assert_eq!(by_name("a").first_start, Some(0));
        assert_eq!(by_name("b").first_start, Some(10));
        // b leaves at 50: c (300) waits until then, the whole-GPU pod until a leaves at 100.
        assert_eq!(by_name("c").first_start, Some(50));
        assert_eq!(by_name("whole").first_start, Some(100));
        let full = run
            .samples
            .iter()
            .find(|s| s.time == 10)
            .expect("sample at 10");
        assert_eq!(full.gpu_milli_allocated, 1000);
    }

    #[test]
    fn a_node_list_beyond_the_gpu_limit_is_refused() {
        let mut nodes = String::from("sn,cpu_milli,memory_mib,gpu\n");
        for i in 0..=limits::GPUS / 128 {
            nodes.push_str(&format!("n{i},1000,1024,128\n"));
        }
        let err = parse_openb(
            "nodes.csv",
            &nodes,
            "pods.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n",
        )
        .expect_err("too many GPUs");
        assert_eq!(
            err.to_string(),
            format!(
                "nodes.csv:{}: more than 1000000 GPUs in the node list here, the most a cluster \
                 may have (see \"Limits\" in README.md)",
                limits::GPUS / 128 + 2
            )
        );
    }

    #[test]
    fn files_without_times() {
        let t = parse_openb(
            "nodes.csv",
            NODES,
            "multigpu.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,8,1000\n",
        )
        .expect("valid");
        assert_eq!(t.jobs[0].arrival, 0);
        assert_eq!(t.jobs[0].duration, None);
    }

    #[test]
    fn bad_rows_name_file_and_line() {
        let header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n";
        let good = "p0,1000,1024,1,1000,,LS,Running,0,10,0\n";
        let cases = [
            (
                "p1,1000,1024,1,1500,,LS,Running,0,10,0\n",
                "pods.csv:3: gpu_milli: 1500 is more than one GPU (1000); use num_gpu for more",
            ),
            (
                "p1,lots,1024,1,1000,,LS,Running,0,10,0\n",
                "pods.csv:3: cpu_milli: \"lots\" is not a whole number of milli-CPU",
            ),
            (
                "p1,1000,1024,1,1000,,VIP,Running,0,10,0\n",
                "pods.csv:3: qos: \"VIP\" is not one of LS, Guaranteed, Burstable, BE",
            ),
            (
                "p1,1000,1024,1,1000,,LS,Running,50,10,50\n",
                "pods.csv:3: times out of order: creation 50, scheduled 50, deletion 10",
            ),
            (
                "p0,1000,1024,1,1000,,LS,Running,0,10,0\n",
                "pods.csv:3: name: pod \"p0\" appears twice",
            ),
            (
                "p1,1000,1024,2,500,,LS,Running,0,10,0\n",
                "pods.csv:3: num_gpu 2 with gpu_milli 500; only single-GPU pods can share a GPU",
            ),
            (
                "p1,1000,1024,1,1000,V100' == 'x,LS,Running,0,10,0\n",
                "pods.csv:3: gpu_spec: \"V100' == 'x\" is not a valid GPU model: use letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters",
            ),
            (
                "p\u{1b}[31m1,1000,1024,1,1000,,LS,Running,0,10,0\n",
                "pods.csv:3: name: \"p\\u{1b}[31m1\" is not a valid name: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters",
            ),
            (
                "p1,1000,1024,1\n",
                "pods.csv:3: 4 fields, but the header has 11 (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time)",
            ),
        ];
        for (row, want) in cases {
            let text = format!("{header}{good}{row}");
            let err = parse_openb("nodes.csv", NODES, "pods.csv", &text).expect_err("bad row");
            assert_eq!(err.to_string(), want);
        }
        let err = parse_openb(
            "nodes.csv",
            "sn,cpu_milli,memory_mib,gpu\nn0,1,1,x\n",
            "pods.csv",
            header,
        )
        .expect_err("bad node");
        assert_eq!(
            err.to_string(),
            "nodes.csv:2: gpu: \"x\" is not a whole number of GPUs"
        );
    }
}
