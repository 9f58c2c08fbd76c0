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
