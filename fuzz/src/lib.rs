//! What each fuzz target does with one input, shared by the libFuzzer targets
//! (`fuzz/fuzz_targets/`) and by the replay of their corpora under `cargo test`
//! (`crates/cli/tests/fuzz_corpus.rs`, which includes this file).
//!
//! Every function takes arbitrary bytes and returns normally for any of them: bad input is
//! an error value (what the command line turns into exit code 2), never a panic. The engine
//! target panics only when an invariant of the scheduler fails.

#[path = "../../crates/cli/tests/support/random_cluster.rs"]
pub mod random_cluster;

use std::collections::{BTreeMap, BTreeSet};

use lockstep_engine::{Decisions, GangPreemption, Options};
use lockstep_model::Cluster;

/// Largest input a target reads; libFuzzer is run with `-max_len` below it anyway.
const MAX_INPUT: usize = 1 << 20;

fn text(data: &[u8]) -> Option<String> {
    (data.len() <= MAX_INPUT).then(|| String::from_utf8_lossy(data).into_owned())
}

/// Splits an input of two files at the first NUL byte (the second is empty without one).
fn two_files(data: &[u8]) -> Option<(String, String)> {
    let text = text(data)?;
    Some(match text.split_once('\0') {
        Some((a, b)) => (a.to_string(), b.to_string()),
        None => (text, String::new()),
    })
}

/// Manifest loading as `lockstep schedule` does it: documents, kinds, conversion,
/// validation, then the scheduler's setup (DRA objects, CEL selectors). An error is fine;
/// its message must say something.
pub fn manifests(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match lockstep_manifests::load_str("fuzz.yaml", &text) {
        Ok(loaded) => {
            if let Err(e) = lockstep_engine::Scheduler::new(&loaded.cluster, Options::default()) {
                assert!(!e.to_string().is_empty(), "a setup error without a message");
            }
        }
        Err(e) => assert!(!e.to_string().is_empty(), "a load error without a message"),
    }
}

/// A CEL device selector: compiled, then evaluated against a few devices. The first line is
/// the expression.
pub fn cel(data: &[u8]) {
    use lockstep_dra::selector::{CelAttribute, CelDevice, CelEnvironment};
    let Some(text) = text(data) else { return };
    let expression = text.lines().next().unwrap_or_default();
    thread_local! {
        static ENV: CelEnvironment = CelEnvironment::new();
    }
    ENV.with(|env| {
        let Ok(compiled) = env.compile(expression) else {
            return;
        };
        let version =
            lockstep_dra::selector::semver::Semver::parse("1.2.3-rc.1").expect("a valid version");
        let devices = [
            CelDevice::default(),
            CelDevice {
                driver: "gpu.example.com",
                attributes: vec![
                    ("gpu.example.com", "model", CelAttribute::String("a100")),
                    ("gpu.example.com", "index", CelAttribute::Int(3)),
                    ("gpu.example.com", "healthy", CelAttribute::Bool(true)),
                    (
                        "gpu.example.com",
                        "driverVersion",
                        CelAttribute::Version(&version),
                    ),
                    ("other.example.com", "numa", CelAttribute::Int(i64::MIN)),
                ],
                capacity: vec![
                    ("gpu.example.com", "memory", 40 << 30),
                    ("gpu.example.com", "cores", i64::MAX),
                ],
                allow_multiple_allocations: true,
            },
        ];
        for device in &devices {
            let _ = env.evaluate(&compiled, device);
        }
    });
}

/// The Philly trace reader (one CSV file).
pub fn philly(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let options = lockstep_sim::readers::philly::PhillyOptions::default();
    let _ = lockstep_sim::readers::philly::parse_philly("philly.csv", &text, &options);
}

/// The Tiresias readers: the cluster spec, a NUL byte, then the job list.
pub fn tiresias(data: &[u8]) {
    use lockstep_sim::readers::tiresias;
    let Some((spec, jobs)) = two_files(data) else {
        return;
    };
    if let Ok(spec) = tiresias::parse_cluster_spec("cluster_spec.csv", &spec) {
        let _ = tiresias::parse_tiresias("jobs.csv", &jobs, &spec);
    }
}

/// The openb readers: the node list, a NUL byte, then the pod list.
pub fn openb(data: &[u8]) {
    let Some((nodes, pods)) = two_files(data) else {
        return;
    };
    let _ = lockstep_sim::readers::openb::parse_openb("nodes.csv", &nodes, "pods.csv", &pods);
}

/// Annotated manifests as a `simulate -f -` trace (read from stdin).
pub fn annotated_manifests(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let mut input = data;
    let _ = lockstep_sim::readers::native::load_manifests(
        &[lockstep_manifests::Source::Stdin],
        &mut input,
    );
}

/// The engine on a small random cluster made from the bytes (`random_cluster`), with its
/// invariants checked: no node over capacity for what the run placed, no device held by two
/// claims unless it allows multiple allocations, gangs all or nothing, victims of strictly
/// lower priority that were running, every pending pod reported once, and the same
/// decisions for the documents in reverse order.
pub fn engine(data: &[u8]) {
    let (docs, facts) = random_cluster::cluster(&mut random_cluster::Choices::new(data));
    let mode = match facts.gang_preemption {
        "off" => GangPreemption::Off,
        "atomic" => GangPreemption::Atomic,
        _ => GangPreemption::Minimal,
    };
    let run = |docs: &[String]| {
        let loaded = lockstep_manifests::load_str("cluster.yaml", &docs.join("---\n"))
            .unwrap_or_else(|e| panic!("a generated cluster does not load: {e}"));
        let options = Options {
            gang_preemption: mode,
            ..Options::default()
        };
        let decisions = lockstep_engine::schedule(&loaded.cluster, options)
            .unwrap_or_else(|e| panic!("a generated cluster is refused: {e}"));
        (loaded.cluster, decisions)
    };
    let (cluster, decisions) = run(&docs);
    check_invariants(&cluster, &decisions, &facts);
    let mut reversed = docs.clone();
    reversed.reverse();
    let (cluster2, decisions2) = run(&reversed);
    assert_eq!(
        summary(&cluster, &decisions),
        summary(&cluster2, &decisions2),
        "the documents in reverse order gave other decisions"
    );
}

fn check_invariants(cluster: &Cluster, d: &Decisions, facts: &random_cluster::Facts) {
    let key = |p: lockstep_model::PodId| cluster.pods[p.index()].key();
    let evicted: BTreeSet<usize> = d.evictions.iter().map(|e| e.pod.index()).collect();
    // Where every pod is once the run is over.
    let mut on_node: Vec<Vec<usize>> = vec![Vec::new(); cluster.nodes.len()];
    for (i, pod) in cluster.pods.iter().enumerate() {
        if !pod.is_bound() || evicted.contains(&i) {
            continue;
        }
        if let Some(n) = cluster
            .nodes
            .iter()
            .position(|n| Some(n.name.as_str()) == pod.node_name.as_deref())
        {
            on_node[n].push(i);
        }
    }
    for &(p, n) in &d.bindings {
        assert!(
            cluster.pods[p.index()].is_pending(),
            "{} was bound but was not pending",
            key(p)
        );
        on_node[n.index()].push(p.index());
    }
    // No overcommit: a resource a pod placed by the run requests fits its node in the end
    // (later placements checked it again; evictions only free).
    for &(p, n) in &d.bindings {
        let node = &cluster.nodes[n.index()];
        for (r, v) in cluster.pods[p.index()].requests.iter() {
            if v == 0 {
                continue;
            }
            let used: i64 = on_node[n.index()]
                .iter()
                .map(|&q| cluster.pods[q].requests.get(r))
                .sum();
            assert!(
                used <= node.allocatable.get(r),
                "node {} is over capacity in {} ({used} > {}) after placing {}",
                node.name,
                cluster.resources.name(r),
                node.allocatable.get(r),
                key(p)
            );
        }
    }
    // No device held by two claims unless it allows multiple allocations.
    let mut holders: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for a in &d.allocations {
        for dev in &a.devices {
            holders
                .entry((dev.pool.clone(), dev.device.clone()))
                .or_default()
                .insert(a.claim.clone());
        }
    }
    for ((pool, device), claims) in &holders {
        let shareable = facts.shareable.contains(&format!("{pool}/{device}"));
        assert!(
            claims.len() <= 1 || shareable,
            "device {pool}/{device} allocated to several claims: {claims:?}"
        );
    }
    // Gangs: all or nothing.
    for (group, min) in &facts.gangs {
        let (ns, name) = group.split_once('/').expect("namespace/name");
        let member = |i: usize| {
            let p = &cluster.pods[i];
            p.namespace == ns && p.pod_group.as_deref() == Some(name)
        };
        let bound_now = d.bindings.iter().filter(|(p, _)| member(p.index())).count();
        let running = (0..cluster.pods.len())
            .filter(|&i| member(i) && cluster.pods[i].is_bound())
            .count();
        assert!(
            bound_now == 0 || bound_now + running >= *min as usize,
            "gang {group} bound {bound_now} pods (with {running} running) below minCount {min}"
        );
    }
    // Victims: running before, strictly lower priority than their preemptor.
    for e in &d.evictions {
        let victim = &cluster.pods[e.pod.index()];
        assert!(
            victim.is_bound(),
            "{} was evicted but was not running",
            victim.key()
        );
        let preemptor = cluster
            .pods
            .iter()
            .find(|p| p.key() == e.preemptor)
            .map(|p| p.priority)
            .or_else(|| {
                let g = cluster
                    .pod_groups
                    .iter()
                    .find(|g| format!("{}/{}", g.namespace, g.name) == e.preemptor)?;
                Some(g.priority.unwrap_or_else(|| {
                    cluster
                        .pods
                        .iter()
                        .filter(|p| {
                            p.namespace == g.namespace && p.pod_group.as_ref() == Some(&g.name)
                        })
                        .map(|p| p.priority)
                        .max()
                        .unwrap_or(0)
                }))
            });
        if let Some(priority) = preemptor {
            assert!(
                victim.priority < priority,
                "{} (priority {}) evicted by {} (priority {priority})",
                victim.key(),
                victim.priority,
                e.preemptor
            );
        }
    }
    // Every pending pod is reported exactly once.
    let mut reported: BTreeMap<String, u32> = BTreeMap::new();
    let lists = [&d.unschedulable, &d.waiting, &d.skipped];
    for p in d
        .bindings
        .iter()
        .map(|(p, _)| *p)
        .chain(lists.iter().flat_map(|l| l.iter().map(|(p, _)| *p)))
    {
        *reported.entry(key(p)).or_default() += 1;
    }
    for pod in cluster.pods.iter().filter(|p| p.is_pending()) {
        assert_eq!(
            reported.get(&pod.key()).copied(),
            Some(1),
            "pending pod {} reported {:?} times",
            pod.key(),
            reported.get(&pod.key())
        );
    }
}

/// The decisions by name, sorted: what `schedule -o json` would print, less formatting.
fn summary(cluster: &Cluster, d: &Decisions) -> Vec<String> {
    let key = |p: lockstep_model::PodId| cluster.pods[p.index()].key();
    let node = |n: lockstep_model::NodeId| cluster.nodes[n.index()].name.clone();
    let mut lines: Vec<String> = Vec::new();
    lines.extend(
        d.bindings
            .iter()
            .map(|&(p, n)| format!("bind {} {}", key(p), node(n))),
    );
    lines.extend(d.evictions.iter().map(|e| {
        format!(
            "evict {} {} {} {}",
            key(e.pod),
            node(e.node),
            e.preemptor,
            e.reason
        )
    }));
    for (what, list) in [
        ("unschedulable", &d.unschedulable),
        ("waiting", &d.waiting),
        ("skipped", &d.skipped),
    ] {
        lines.extend(list.iter().map(|(p, m)| format!("{what} {} {m}", key(*p))));
    }
    lines.extend(
        d.pod_groups
            .iter()
            .map(|g| format!("group {} {} {}", g.name, g.scheduled, g.message)),
    );
    lines.extend(
        d.disrupted_groups
            .iter()
            .map(|(g, m)| format!("disrupted {g} {m}")),
    );
    lines.extend(d.allocations.iter().map(|a| {
        let devices: Vec<String> = a
            .devices
            .iter()
            .map(|x| format!("{}:{}/{}/{}", x.request, x.driver, x.pool, x.device))
            .collect();
        format!(
            "allocate {} {} {} {}",
            key(a.pod),
            a.claim,
            node(a.node),
            devices.join(",")
        )
    }));
    lines.sort();
    lines
}

/// Karmada objects as `lockstep federate` reads them (`lockstep_federation::load_str`, the
/// same documents, validation and defaults as files), then, when they load, the placement
/// run on them without and with preemption. An error names the input; a run gives every
/// binding exactly one outcome and places replicas only on clusters of the input.
pub fn federation(data: &[u8]) {
    const NAME: &str = "federation.yaml";
    let Some(text) = text(data) else { return };
    let loaded = match lockstep_federation::load_str(NAME, &text) {
        Ok(loaded) => loaded,
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains(NAME),
                "a load error that does not name its input: {message:?}"
            );
            return;
        }
    };
    let fed = &loaded.federation;
    let clusters: BTreeSet<&str> = fed.clusters.iter().map(|c| c.name.as_str()).collect();
    let mut keys: Vec<&str> = fed.bindings.iter().map(|b| b.key.as_str()).collect();
    keys.sort_unstable();
    for preemption in [false, true] {
        let options = lockstep_federation::Options {
            preemption,
            ..Default::default()
        };
        let d = lockstep_federation::schedule(fed, &options)
            .unwrap_or_else(|e| panic!("a federation without --member is refused: {e}"));
        let mut outcomes: Vec<&str> = d
            .placements
            .iter()
            .chain(&d.unchanged)
            .map(|p| p.binding.as_str())
            .chain(d.unschedulable.iter().map(|u| u.binding.as_str()))
            .collect();
        outcomes.sort_unstable();
        assert_eq!(outcomes, keys, "not one outcome per binding");
        for p in &d.placements {
            for t in &p.clusters {
                assert!(
                    clusters.contains(t.name.as_str()) && t.replicas >= 0,
                    "{} placed {} replicas on {:?}",
                    p.binding,
                    t.replicas,
                    t.name
                );
            }
        }
        for u in &d.unschedulable {
            assert!(
                !u.message.is_empty(),
                "{} unschedulable without a message",
                u.binding
            );
        }
    }
}

/// The member cluster the `estimator` target asks: three nodes with CPU and memory (one
/// tainted, with two GPUs described by DRA), a claim template and a shared claim, a priority
/// class, and two running pods of Karmada bindings (victims for SelectVictims). Few pod
/// slots, so no answer takes long.
pub const ESTIMATOR_MEMBER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: a, labels: {zone: z1, kubernetes.io/hostname: a}}
status: {allocatable: {cpu: "8", memory: 32Gi, pods: "12"}}
---
apiVersion: v1
kind: Node
metadata: {name: b, labels: {zone: z2, kubernetes.io/hostname: b}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "12"}}
---
apiVersion: v1
kind: Node
metadata: {name: gpu, labels: {zone: z2, kubernetes.io/hostname: gpu}}
spec:
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "12"}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-gpus}
spec:
  driver: gpu.example.com
  nodeName: gpu
  pool: {name: gpu, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: A100}}
    capacity: {memory: {value: 80Gi}}
  - name: gpu-1
    attributes: {model: {string: T4}}
    capacity: {memory: {value: 16Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          - cel: {expression: 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: ml}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: v1
kind: Pod
metadata:
  name: low-0
  namespace: ml
  labels: {resourcebinding.karmada.io/permanent-id: low}
spec:
  nodeName: a
  containers:
  - {name: c, image: i, resources: {requests: {cpu: "6"}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: batch-0
  namespace: default
  labels: {clusterresourcebinding.karmada.io/permanent-id: batch}
spec:
  nodeName: b
  containers:
  - {name: c, image: i, resources: {requests: {cpu: "2", memory: 4Gi}}}
"#;

/// The name the `estimator` target's member cluster serves under.
pub const ESTIMATOR_CLUSTER: &str = "member-1";

/// The top-level request fields an InvalidArgument message may start with.
const REQUEST_FIELDS: [&str; 7] = [
    "cluster",
    "replicaRequirements",
    "preemptorReplicaRequirements",
    "preemptorReplicas",
    "components",
    "assumedWorkloads",
    "candidates",
];

struct Estimator {
    runtime: tokio::runtime::Runtime,
    service: lockstep_estimator::service::Service,
    /// Replicas of a shape that asks for nothing and tolerates every taint: the free pod
    /// slots, a bound on any answer.
    empty: u64,
}

impl Estimator {
    fn new() -> Estimator {
        let loaded = lockstep_manifests::load_str("member.yaml", ESTIMATOR_MEMBER)
            .unwrap_or_else(|e| panic!("the estimator's member does not load: {e}"));
        let member = lockstep_estimator::member::Member::new(loaded.cluster)
            .unwrap_or_else(|e| panic!("the engine refuses the estimator's member: {e}"));
        let state = lockstep_estimator::service::State::new(ESTIMATOR_CLUSTER, Some(member));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let mut e = Estimator {
            runtime,
            service: lockstep_estimator::service::Service {
                state: std::sync::Arc::new(state),
            },
            empty: 0,
        };
        e.empty = e.empty_count();
        assert!(e.empty > 0, "the member has no free pod slot");
        e
    }

    fn empty_count(&self) -> u64 {
        let r = self
            .max_replicas(empty_shape_request())
            .unwrap_or_else(|s| panic!("the empty shape is refused: {}", s.message()));
        u64::try_from(r.max_replicas).expect("a count of zero or more")
    }

    fn max_replicas(
        &self,
        r: estimator_pb::MaxAvailableReplicasRequest,
    ) -> Result<estimator_pb::MaxAvailableReplicasResponse, tonic::Status> {
        use lockstep_estimator::proto::service::estimator_server::Estimator as _;
        self.runtime
            .block_on(self.service.max_available_replicas(tonic::Request::new(r)))
            .map(tonic::Response::into_inner)
    }
}

use lockstep_estimator::proto::pb as estimator_pb;

/// A MaxAvailableReplicas request for a replica that asks for nothing and tolerates every
/// taint.
fn empty_shape_request() -> estimator_pb::MaxAvailableReplicasRequest {
    use prost::Message;
    let tolerate_all = lockstep_estimator::proto::k8s::Toleration {
        operator: Some("Exists".into()),
        ..Default::default()
    };
    estimator_pb::MaxAvailableReplicasRequest {
        cluster: ESTIMATOR_CLUSTER.into(),
        replica_requirements: Some(estimator_pb::ReplicaRequirements {
            node_claim: Some(estimator_pb::NodeClaim {
                tolerations_bytes: vec![tolerate_all.encode_to_vec()],
                ..Default::default()
            }),
            ..Default::default()
        }),
        assumed_workloads: Vec::new(),
    }
}

/// The estimator service's request path: the first byte chooses the method
/// (MaxAvailableReplicas, MaxAvailableComponentSets, SelectVictims, by its value modulo 3),
/// the rest is the request message, decoded with prost as tonic decodes it, then checked and
/// answered on a fixed member cluster ([`ESTIMATOR_MEMBER`]). A request that decodes gets an
/// answer or InvalidArgument whose message starts with the request field at fault; a count
/// is at most the free pod slots (a replica takes one), whole component sets included; a
/// victim is one of the candidates, and none is chosen when the preemptor does not fit; and
/// every request leaves the member as it found it (the free pod slots are the same after).
pub fn estimator(data: &[u8]) {
    use lockstep_estimator::proto::service::estimator_server::Estimator as _;
    thread_local! {
        static ESTIMATOR: Estimator = Estimator::new();
    }
    if data.len() > MAX_INPUT {
        return;
    }
    let Some(request) = EstimatorRequest::decode(data) else {
        return;
    };
    ESTIMATOR.with(|e| {
        let s = &e.service;
        let check = |status: tonic::Status| {
            assert_eq!(
                status.code(),
                tonic::Code::InvalidArgument,
                "a request refused as {:?}: {}",
                status.code(),
                status.message()
            );
            let m = status.message();
            assert!(
                REQUEST_FIELDS.iter().any(|f| m.starts_with(f)),
                "an InvalidArgument that does not start with a request field: {m:?}"
            );
        };
        match request {
            EstimatorRequest::Replicas(r) => match e.max_replicas(r) {
                Ok(a) => {
                    let n = u64::try_from(a.max_replicas).expect("a count of zero or more");
                    assert!(
                        n <= e.empty,
                        "{n} replicas, more than {} pod slots",
                        e.empty
                    );
                }
                Err(status) => check(status),
            },
            EstimatorRequest::Sets(r) => {
                let per_set: u128 = r
                    .components
                    .iter()
                    .map(|c| u128::try_from(c.replicas).unwrap_or(0))
                    .sum();
                let answer = e
                    .runtime
                    .block_on(s.max_available_component_sets(tonic::Request::new(r)));
                match answer.map(tonic::Response::into_inner) {
                    Ok(a) => {
                        let sets = u128::try_from(a.max_sets).expect("a count of zero or more");
                        assert!(
                            sets * per_set <= u128::from(e.empty),
                            "{sets} sets of {per_set} replicas, more than {} pod slots",
                            e.empty
                        );
                    }
                    Err(status) => check(status),
                }
            }
            EstimatorRequest::Victims(r) => {
                let candidates: BTreeSet<String> = r
                    .candidates
                    .iter()
                    .map(|c| c.binding_permanent_id.clone())
                    .collect();
                let answer = e.runtime.block_on(s.select_victims(tonic::Request::new(r)));
                match answer.map(tonic::Response::into_inner) {
                    Ok(a) => {
                        assert!(
                            a.feasible || a.selected_victims.is_empty(),
                            "victims chosen for a preemptor that does not fit"
                        );
                        let mut seen = BTreeSet::new();
                        for v in &a.selected_victims {
                            let id = &v.binding_permanent_id;
                            assert!(candidates.contains(id), "victim {id:?} not a candidate");
                            assert!(seen.insert(id), "victim {id:?} chosen twice");
                        }
                    }
                    Err(status) => check(status),
                }
            }
        }
        assert_eq!(
            e.empty_count(),
            e.empty,
            "the request changed the member's free pod slots"
        );
    });
}

/// An `estimator` input decoded: the method its first byte chooses (by its value modulo 3)
/// and the rest as that method's request message.
#[derive(Debug, Clone, PartialEq)]
pub enum EstimatorRequest {
    Replicas(estimator_pb::MaxAvailableReplicasRequest),
    Sets(estimator_pb::MaxAvailableComponentSetsRequest),
    Victims(estimator_pb::SelectVictimsRequest),
}

impl EstimatorRequest {
    /// `None` for an empty input or a message prost does not decode (tonic's transport
    /// refuses those before the service sees them).
    pub fn decode(data: &[u8]) -> Option<EstimatorRequest> {
        use prost::Message;
        let (&method, message) = data.split_first()?;
        Some(match method % 3 {
            0 => EstimatorRequest::Replicas(
                estimator_pb::MaxAvailableReplicasRequest::decode(message).ok()?,
            ),
            1 => EstimatorRequest::Sets(
                estimator_pb::MaxAvailableComponentSetsRequest::decode(message).ok()?,
            ),
            _ => {
                EstimatorRequest::Victims(estimator_pb::SelectVictimsRequest::decode(message).ok()?)
            }
        })
    }
}

/// The `estimator` target's seed inputs (`fuzz/corpus/estimator/`, checked against this
/// by `crates/cli/tests/fuzz_corpus.rs` as decoded requests: protobuf writes a map in the
/// order the map iterates, which a `HashMap` does not fix): valid requests of each method and
/// near misses.
pub fn estimator_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use lockstep_estimator::proto::k8s;
    use lockstep_estimator::proto::quantity::Quantity;
    use prost::Message;
    let quantity = |q: &str| {
        Quantity {
            string: Some(q.into()),
        }
        .encode_to_vec()
    };
    let requests = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), quantity(v)))
            .collect::<std::collections::HashMap<_, _>>()
    };
    let gpu_toleration = k8s::Toleration {
        key: Some("dedicated".into()),
        operator: Some("Equal".into()),
        value: Some("gpu".into()),
        effect: Some("NoSchedule".into()),
        toleration_seconds: None,
    }
    .encode_to_vec();
    let zone = |op: &str, values: &[&str]| {
        k8s::NodeSelector {
            node_selector_terms: vec![k8s::NodeSelectorTerm {
                match_expressions: vec![k8s::NodeSelectorRequirement {
                    key: Some("zone".into()),
                    operator: Some(op.into()),
                    values: values.iter().map(|v| v.to_string()).collect(),
                }],
                match_fields: Vec::new(),
            }],
        }
        .encode_to_vec()
    };
    let replica = |namespace: &str, pairs: &[(&str, &str)]| estimator_pb::ReplicaRequirements {
        namespace: namespace.into(),
        resource_request_bytes: requests(pairs),
        ..Default::default()
    };
    let max = |r: estimator_pb::ReplicaRequirements,
               assumed: Vec<estimator_pb::AssumedWorkload>| {
        estimator_pb::MaxAvailableReplicasRequest {
            cluster: ESTIMATOR_CLUSTER.into(),
            replica_requirements: Some(r),
            assumed_workloads: assumed,
        }
    };
    let component = |name: &str, replicas: i32, pairs: &[(&str, &str)]| estimator_pb::Component {
        name: name.into(),
        replicas,
        replica_requirements: Some(estimator_pb::ComponentReplicaRequirements {
            resource_request_bytes: requests(pairs),
            ..Default::default()
        }),
    };
    let with_method = |m: u8, body: Vec<u8>| [vec![m], body].concat();
    let mut out = Vec::new();
    out.push((
        "max-cpu-memory",
        with_method(
            0,
            max(replica("", &[("cpu", "1"), ("memory", "1Gi")]), vec![]).encode_to_vec(),
        ),
    ));
    let mut gpu = replica("ml", &[("cpu", "2")]);
    gpu.node_claim = Some(estimator_pb::NodeClaim {
        tolerations_bytes: vec![gpu_toleration.clone()],
        ..Default::default()
    });
    gpu.resource_claim_refs = vec![estimator_pb::ResourceClaimReference {
        resource_claim_template_name: "one-gpu".into(),
        resource_claim_name: String::new(),
    }];
    gpu.priority_class_name = "high".into();
    out.push((
        "max-gpu-template",
        with_method(0, max(gpu.clone(), vec![]).encode_to_vec()),
    ));
    let mut shared = gpu.clone();
    shared.resource_claim_refs = vec![estimator_pb::ResourceClaimReference {
        resource_claim_template_name: String::new(),
        resource_claim_name: "shared-gpu".into(),
    }];
    out.push((
        "max-gpu-shared-claim",
        with_method(0, max(shared, vec![]).encode_to_vec()),
    ));
    let mut affinity = replica("default", &[("cpu", "500m")]);
    affinity.node_claim = Some(estimator_pb::NodeClaim {
        node_selector: [("kubernetes.io/hostname".to_string(), "b".to_string())].into(),
        node_affinity_bytes: zone("In", &["z1", "z2"]),
        tolerations_bytes: Vec::new(),
    });
    out.push((
        "max-affinity",
        with_method(0, max(affinity, vec![]).encode_to_vec()),
    ));
    let assumed = vec![estimator_pb::AssumedWorkload {
        namespace: "ml".into(),
        components: vec![component("big", 2, &[("cpu", "3")])],
    }];
    out.push((
        "max-assumed",
        with_method(
            0,
            max(replica("ml", &[("cpu", "1")]), assumed.clone()).encode_to_vec(),
        ),
    ));
    out.push((
        "max-empty-tolerate-all",
        with_method(0, empty_shape_request().encode_to_vec()),
    ));
    let mut wrong = max(replica("", &[("cpu", "1")]), vec![]);
    wrong.cluster = "member-2".into();
    out.push(("max-wrong-cluster", with_method(0, wrong.encode_to_vec())));
    out.push((
        "max-negative-quantity",
        with_method(
            0,
            max(replica("", &[("cpu", "-1")]), vec![]).encode_to_vec(),
        ),
    ));
    let mut bad_operator = replica("", &[]);
    bad_operator.node_claim = Some(estimator_pb::NodeClaim {
        node_affinity_bytes: zone("Within", &["z1"]),
        ..Default::default()
    });
    out.push((
        "max-bad-affinity-operator",
        with_method(0, max(bad_operator, vec![]).encode_to_vec()),
    ));
    // Passes the decoder; the Pod the replica would be does not convert.
    out.push((
        "max-bad-namespace",
        with_method(
            0,
            max(replica("Not A Namespace", &[("cpu", "1")]), vec![]).encode_to_vec(),
        ),
    ));
    let sets = estimator_pb::MaxAvailableComponentSetsRequest {
        cluster: ESTIMATOR_CLUSTER.into(),
        components: vec![
            component("leader", 1, &[("cpu", "2"), ("memory", "2Gi")]),
            component("worker", 3, &[("cpu", "1")]),
        ],
        namespace: "ml".into(),
        assumed_workloads: assumed,
    };
    out.push(("sets-leader-workers", with_method(1, sets.encode_to_vec())));
    let mut none = sets.clone();
    none.components.iter_mut().for_each(|c| c.replicas = 0);
    out.push(("sets-no-replicas", with_method(1, none.encode_to_vec())));
    let victims = estimator_pb::SelectVictimsRequest {
        cluster: ESTIMATOR_CLUSTER.into(),
        preemptor_replica_requirements: Some(replica("ml", &[("cpu", "4")])),
        preemptor_replicas: 2,
        candidates: ["low", "batch", "low"]
            .iter()
            .map(|id| estimator_pb::VictimCandidate {
                binding_permanent_id: id.to_string(),
            })
            .collect(),
    };
    out.push((
        "victims-two-candidates",
        with_method(2, victims.encode_to_vec()),
    ));
    let mut empty_id = victims;
    empty_id
        .candidates
        .push(estimator_pb::VictimCandidate::default());
    out.push(("victims-empty-id", with_method(2, empty_id.encode_to_vec())));
    out
}
