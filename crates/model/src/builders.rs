//! Builders for objects in code: a node, a pending pod, a taint, a claim template. The trace
//! readers build their clusters with them; tests and benchmarks too (through
//! `lockstep-testkit`). Front ends that read manifests do not need them.

use crate::{
    Cluster, Labels, Node, NodeAffinity, Pod, PodAffinity, PodPhase, PreemptionPolicy,
    ResourceList, Taint, TaintEffect,
};

/// Kube-scheduler's per-container defaults for scoring when a request is unset.
pub const DEFAULT_CPU_MILLI: i64 = 100;
pub const DEFAULT_MEMORY: i64 = 200 * 1024 * 1024;

pub const GI: i64 = 1024 * 1024 * 1024;

/// A node with `cpu_milli`, `memory` bytes and `pods` slots.
pub fn node(cluster: &mut Cluster, name: &str, cpu_milli: i64, memory: i64, pods: i64) -> Node {
    let mut allocatable = ResourceList::new();
    allocatable.set(cluster.resources.intern("cpu"), cpu_milli);
    allocatable.set(cluster.resources.intern("memory"), memory);
    allocatable.set(cluster.resources.intern("pods"), pods);
    Node {
        name: name.into(),
        labels: Labels::from([("kubernetes.io/hostname".to_string(), name.to_string())]),
        taints: Vec::new(),
        unschedulable: false,
        allocatable,
    }
}

/// A pending pod in namespace `default` requesting `cpu_milli` and `memory`.
pub fn pod(cluster: &mut Cluster, name: &str, cpu_milli: i64, memory: i64) -> Pod {
    let mut requests = ResourceList::new();
    requests.set(cluster.resources.intern("cpu"), cpu_milli);
    requests.set(cluster.resources.intern("memory"), memory);
    Pod {
        namespace: "default".into(),
        name: name.into(),
        labels: Labels::new(),
        priority: 0,
        priority_class_name: None,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        creation_timestamp: None,
        start_time: None,
        node_name: None,
        nominated_node_name: None,
        scheduler_name: "default-scheduler".into(),
        phase: PodPhase::Pending,
        requests,
        non_zero_cpu: if cpu_milli == 0 {
            DEFAULT_CPU_MILLI
        } else {
            cpu_milli
        },
        non_zero_memory: if memory == 0 { DEFAULT_MEMORY } else { memory },
        node_selector: Vec::new(),
        node_affinity: NodeAffinity::default(),
        pod_affinity: PodAffinity::default(),
        pod_anti_affinity: PodAffinity::default(),
        tolerations: Vec::new(),
        host_ports: Vec::new(),
        topology_spread: Vec::new(),
        pod_group: None,
        resource_claims: Vec::new(),
        terminating: false,
    }
}

pub fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
    Taint {
        key: key.into(),
        value: value.into(),
        effect,
    }
}

/// Sorts nodes by name, as the manifest loader does.
pub fn finish(mut cluster: Cluster) -> Cluster {
    cluster.nodes.sort_by(|a, b| a.name.cmp(&b.name));
    cluster
}

/// A ResourceClaimTemplate in `default` with one request `gpu` for `count` devices of `class`
/// (with the given CEL selectors and capacity requests) and no constraints.
pub fn claim_template(
    name: &str,
    class: &str,
    count: u32,
    selectors: Vec<String>,
    capacity_requests: std::collections::BTreeMap<String, i64>,
) -> crate::dra::ResourceClaimTemplate {
    use crate::dra::*;
    ResourceClaimTemplate {
        namespace: "default".into(),
        name: name.into(),
        spec: ResourceClaimSpec {
            requests: vec![DeviceRequest {
                name: "gpu".into(),
                kind: DeviceRequestKind::Exactly(ExactDeviceRequest {
                    device_class_name: class.into(),
                    selectors,
                    allocation_mode: AllocationMode::ExactCount(count),
                    capacity_requests,
                    ..ExactDeviceRequest::default()
                }),
            }],
            constraints: Vec::new(),
            config: Vec::new(),
        },
    }
}
