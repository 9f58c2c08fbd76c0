//! The Tiresias simulator's inputs: a job CSV (`job_id,num_gpu,submit_time,...,duration,...`)
//! and a cluster spec CSV (`num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,
//! mem_p_node`, memory in GiB).
//!
//! Nodes are `switch-SS-node-NNN`, labelled with their switch as the rack. A job becomes one
//! pod when it fits on a node, else a gang of pods of at most `num_gpu_p_node` GPUs (split
//! evenly). Each GPU brings its node's share of CPU and memory.

use std::path::Path;

use crate::readers::table::{Table, read_file};
use crate::trace::{
    JobSpec, PodShape, RACK_LABEL, Trace, TraceBuilder, TraceError, gib, limits, split_gpus,
    split_pods,
};

/// The cluster of a Tiresias cluster spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterSpec {
    pub switches: usize,
    pub nodes_per_switch: usize,
    pub gpus_per_node: i64,
    pub cpus_per_node: i64,
    pub memory_gib_per_node: i64,
}

impl Default for ClusterSpec {
    /// The Tiresias example's `cluster_spec.csv`: 1 switch x 16 nodes x 4 GPUs.
    fn default() -> Self {
        ClusterSpec {
            switches: 1,
            nodes_per_switch: 16,
            gpus_per_node: 4,
            cpus_per_node: 128,
            memory_gib_per_node: 254,
        }
    }
}

pub fn read_cluster_spec(path: &Path) -> Result<ClusterSpec, TraceError> {
    let text = read_file(path)?;
    parse_cluster_spec(&path.display().to_string(), &text)
}

pub fn parse_cluster_spec(file: &str, text: &str) -> Result<ClusterSpec, TraceError> {
    let table = Table::parse(file, text)?;
    let cols = [
        table.column("num_switch")?,
        table.column("num_node_p_switch")?,
        table.column("num_gpu_p_node")?,
        table.column("num_cpu_p_node")?,
        table.column("mem_p_node")?,
    ];
    let row = match table.rows.as_slice() {
        [row] => row,
        [] => return Err(TraceError::new(file, 0, "no cluster row after the header")),
        [_, extra, ..] => {
            return Err(table.error(extra, "a cluster spec has exactly one row"));
        }
    };
    let nodes_limit = limits::NODES as i64;
    let switches = table.bounded(
        row,
        cols[0],
        "a whole number",
        nodes_limit,
        "the most nodes a cluster may have",
    )?;
    let per_switch = table.bounded(
        row,
        cols[1],
        "a whole number",
        nodes_limit,
        "the most nodes a cluster may have",
    )?;
    let gpus = table.bounded(
        row,
        cols[2],
        "a whole number",
        limits::GPUS_PER_NODE,
        "the most GPUs a node may have",
    )?;
    let cpus = table.bounded(
        row,
        cols[3],
        "a whole number",
        limits::CPU_MILLI / 1000,
        "the most CPUs a node may have",
    )?;
    let memory = table.bounded(
        row,
        cols[4],
        "a whole number",
        limits::MEMORY >> 30,
        "the most GiB of memory a node may have, 64 TiB",
    )?;
    if switches == 0 || per_switch == 0 || gpus == 0 {
        return Err(table.error(
            row,
            "switches, nodes per switch and GPUs per node must be > 0",
        ));
    }
    if switches * per_switch > nodes_limit {
        return Err(table.error(
            row,
            format!(
                "{switches} switches x {per_switch} nodes is {} nodes, more than {nodes_limit}, \
                 the most nodes a cluster may have (see \"Limits\" in README.md)",
                switches * per_switch
            ),
        ));
    }
    if switches * per_switch * gpus > limits::GPUS {
        return Err(table.error(
            row,
            format!(
                "{} nodes x {gpus} GPUs is {} GPUs, more than {}, the most a cluster may have \
                 (see \"Limits\" in README.md)",
                switches * per_switch,
                switches * per_switch * gpus,
                limits::GPUS
            ),
        ));
    }
    Ok(ClusterSpec {
        switches: switches as usize,
        nodes_per_switch: per_switch as usize,
        gpus_per_node: gpus,
        cpus_per_node: cpus,
        memory_gib_per_node: memory,
    })
}

pub fn read_tiresias(jobs: &Path, cluster: &ClusterSpec) -> Result<Trace, TraceError> {
    let text = read_file(jobs)?;
    parse_tiresias(&jobs.display().to_string(), &text, cluster)
}

pub fn parse_tiresias(file: &str, text: &str, spec: &ClusterSpec) -> Result<Trace, TraceError> {
    let table = Table::parse(file, text)?;
    let c_id = table.column("job_id")?;
    let c_gpus = table.column("num_gpu")?;
    let c_submit = table.column("submit_time")?;
    let c_duration = table.column("duration")?;
    let mut b = TraceBuilder::new();
    for s in 0..spec.switches {
        let rack = format!("switch-{s:02}");
        for n in 0..spec.nodes_per_switch {
            b.node(
                &format!("{rack}-node-{n:03}"),
                spec.cpus_per_node * 1000,
                gib(spec.memory_gib_per_node),
                spec.gpus_per_node,
                &[(RACK_LABEL, &rack)],
            );
        }
    }
    let cpu_per_gpu = spec.cpus_per_node * 1000 / spec.gpus_per_node;
    let mem_per_gpu = gib(spec.memory_gib_per_node) / spec.gpus_per_node;
    let per_node = spec.gpus_per_node.clamp(1, limits::GPUS_PER_NODE);
    let mut pods_total: i64 = 0;
    let mut names = std::collections::BTreeSet::new();
    for row in &table.rows {
        let id = table.object_name(row, c_id)?;
        if !names.insert(id.to_string()) {
            return Err(table.error(row, format!("job_id {id:?} appears twice")));
        }
        let gpus = table.bounded(
            row,
            c_gpus,
            "a whole number of GPUs",
            limits::JOB_PODS * per_node,
            &format!(
                "the most GPUs one job may ask for, {} pods of {per_node} GPUs",
                limits::JOB_PODS
            ),
        )?;
        let submit = table.seconds(row, c_submit)?;
        let duration = table.seconds(row, c_duration)?;
        pods_total += split_pods(gpus, per_node);
        if pods_total > limits::PODS as i64 {
            return Err(table.error(
                row,
                format!(
                    "the trace has more than {} pods here, the most lockstep simulates; \
                     replay fewer or smaller jobs (see \"Limits\" in README.md)",
                    limits::PODS
                ),
            ));
        }
        let pods: Vec<PodShape> = split_gpus(gpus, spec.gpus_per_node)
            .into_iter()
            .map(|g| PodShape::new(cpu_per_gpu * g.max(1), mem_per_gpu * g.max(1), g))
            .collect();
        let gang = pods.len() > 1;
        b.job(JobSpec {
            name: format!("tiresias-{id}"),
            arrival: submit,
            duration: Some(duration),
            priority_class: None,
            pods,
            gang,
            topology_key: None,
        });
    }
    b.note(format!(
        "cluster: {} switch{} x {} nodes x {} GPUs",
        spec.switches,
        if spec.switches == 1 { "" } else { "es" },
        spec.nodes_per_switch,
        spec.gpus_per_node
    ));
    Ok(b.finish(file.rsplit('/').next().unwrap_or(file).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_shape() {
        let spec = parse_cluster_spec(
            "n32g4.csv",
            "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,32,4,40,256",
        )
        .expect("valid spec");
        assert_eq!(spec.nodes_per_switch, 32);
        let t = parse_tiresias(
            "60_job.csv",
            "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n\
             0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n",
            &spec,
        )
        .expect("valid jobs");
        assert_eq!(t.cluster.nodes.len(), 32);
        assert_eq!(t.jobs[1].pods.len(), 2);
        assert!(t.jobs[1].gang);
        assert_eq!(t.jobs[1].arrival, 30);
        assert_eq!(
            t.cluster.pods[0]
                .requests
                .get(lockstep_model::ResourceId::CPU),
            10_000
        );
    }

    #[test]
    fn bad_rows() {
        let err = parse_tiresias(
            "jobs.csv",
            "job_id,num_gpu,submit_time,duration\n0,1,0,10\n1,1,x,10\n",
            &ClusterSpec::default(),
        )
        .expect_err("bad row");
        assert_eq!(
            err.to_string(),
            "jobs.csv:3: submit_time: \"x\" is not a whole number of seconds"
        );
        let err = parse_tiresias(
            "jobs.csv",
            "job_id,num_gpu,submit_time,duration\n0,1,0,10\n0,1,0,10\n",
            &ClusterSpec::default(),
        )
        .expect_err("duplicate");
        assert_eq!(err.to_string(), "jobs.csv:3: job_id \"0\" appears twice");
        let err = parse_cluster_spec(
            "spec.csv",
            "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,0,4,40,256\n",
        )
        .expect_err("zero nodes");
        assert!(err.to_string().starts_with("spec.csv:2: "), "{err}");
        let err = parse_cluster_spec(
            "spec.csv",
            "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n\
             100,1000,128,40,256\n",
        )
        .expect_err("too many GPUs");
        assert_eq!(
            err.to_string(),
            "spec.csv:2: 100000 nodes x 128 GPUs is 12800000 GPUs, more than 1000000, the most \
             a cluster may have (see \"Limits\" in README.md)"
        );
    }
}
