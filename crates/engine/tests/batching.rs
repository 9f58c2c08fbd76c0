//! Opportunistic batching: a batched run places every pod where an unbatched run does (on
//! clusters below 100 nodes, where every node is evaluated), and it actually batches.

use lockstep_engine::{Decisions, Options, Scheduler};
use lockstep_model::{Cluster, HostPort, TaintEffect, Toleration, TolerationOperator};
use lockstep_testkit::{self as testkit, GI};
use proptest::prelude::*;

fn run(cluster: &Cluster, batching: bool) -> (Decisions, (u64, u64)) {
    run_with(cluster, &Options::default(), batching)
}

/// Runs `cluster` with `options` and batching on or off; the decisions and the (batched,
/// full) cycle counts.
fn run_with(cluster: &Cluster, options: &Options, batching: bool) -> (Decisions, (u64, u64)) {
    let mut s = Scheduler::new(
        cluster,
        Options {
            batching,
            ..options.clone()
        },
    )
    .unwrap();
    let d = s.run();
    (d, s.cycle_counts())
}

#[derive(Debug, Clone)]
struct Shape {
    cpu: i64,
    mem_gi: i64,
    zone: Option<u8>,
    tolerates: bool,
    port: Option<i32>,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        1i64..=8,
        1i64..=4,
        proptest::option::weighted(0.2, 0u8..2),
        any::<bool>(),
        proptest::option::weighted(0.1, 8000i32..8002),
    )
        .prop_map(|(cpu, mem_gi, zone, tolerates, port)| Shape {
            cpu: cpu * 250,
            mem_gi,
            zone,
            tolerates,
            port,
        })
}

fn build(
    nodes: &[(i64, i64, bool, bool)],
    shapes: &[Shape],
    stream: &[(usize, i32)],
    gang: Option<(usize, u32)>,
) -> Cluster {
    let mut c = Cluster::default();
    for (i, (cpu, mem, tainted, soft)) in nodes.iter().enumerate() {
        let mut n = testkit::node(&mut c, &format!("n{i:02}"), *cpu, mem * GI, 30);
        n.labels.insert("zone".into(), format!("z{}", i % 2));
        if *tainted {
            n.taints
                .push(testkit::taint("dedicated", "x", TaintEffect::NoSchedule));
        }
        if *soft {
            n.taints
                .push(testkit::taint("soft", "x", TaintEffect::PreferNoSchedule));
        }
        c.nodes.push(n);
    }
    for (i, (s, priority)) in stream.iter().enumerate() {
        let sh = &shapes[*s % shapes.len()];
        let mut p = testkit::pod(&mut c, &format!("p{i:03}"), sh.cpu, sh.mem_gi * GI);
        p.priority = *priority;
        if let Some(z) = sh.zone {
            p.node_selector.push(("zone".into(), format!("z{z}")));
        }
        if sh.tolerates {
            p.tolerations.push(Toleration {
                key: "dedicated".into(),
                operator: TolerationOperator::Exists,
                value: String::new(),
                effect: None,
            });
        }
        if let Some(port) = sh.port {
            p.host_ports.push(HostPort {
                protocol: "TCP".into(),
                host_ip: String::new(),
                port,
            });
        }
        c.pods.push(p);
    }
    if let Some((size, min)) = gang {
        c.pod_groups.push(testkit::gang("g", min, Some("zone")));
        testkit::members(&mut c, "g", size, 500, GI);
    }
    testkit::finish(c)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn batched_run_equals_unbatched_run(
        nodes in proptest::collection::vec((1i64..=8, 1i64..=16, proptest::bool::weighted(0.2), proptest::bool::weighted(0.1)), 1..20)
            .prop_map(|v| v.into_iter().map(|(c, m, t, s)| (c * 1000, m, t, s)).collect::<Vec<_>>()),
        shapes in proptest::collection::vec(shape(), 1..4),
        stream in proptest::collection::vec((0usize..4, 0i32..2), 0..80),
        gang in proptest::option::of((1usize..8, 1u32..8)),
    ) {
        let cluster = build(&nodes, &shapes, &stream, gang);
        let (batched, _) = run(&cluster, true);
        let (plain, _) = run(&cluster, false);
        prop_assert_eq!(batched, plain);
    }
}

#[test]
fn identical_pods_are_batched() {
    let cluster = testkit::scheduling_basic(50, 400);
    let (batched, (hits, full)) = run(&cluster, true);
    let (plain, (hits_off, full_off)) = run(&cluster, false);
    assert_eq!(batched, plain);
    assert_eq!((hits, full), (399, 1), "one full cycle, then batching");
    assert_eq!((hits_off, full_off), (0, 400));
}

#[test]
fn pods_that_cannot_be_signed_get_full_cycles() {
    let mut c = testkit::scheduling_basic(10, 0);
    for i in 0..5 {
        let mut p = testkit::pod(&mut c, &format!("spread-{i}"), 100, GI);
        p.labels.insert("app".into(), "x".into());
        p.topology_spread
            .push(lockstep_model::TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "kubernetes.io/hostname".into(),
                when_unsatisfiable: lockstep_model::WhenUnsatisfiable::ScheduleAnyway,
                selector: None,
                min_domains: None,
                node_affinity_policy: lockstep_model::InclusionPolicy::Honor,
                node_taints_policy: lockstep_model::InclusionPolicy::Ignore,
            });
        c.pods.push(p);
    }
    let (_, (hits, full)) = run(&c, true);
    assert_eq!((hits, full), (0, 5));
}

#[test]
fn pods_with_template_claims_on_node_local_devices_batch_identically() {
    let cluster = testkit::dra_gpus(40, 200, 30);
    let (batched, (hits, _)) = run(&cluster, true);
    let (plain, _) = run(&cluster, false);
    assert_eq!(batched, plain);
    assert!(hits > 150, "batched {hits} cycles");
    assert_eq!(batched.bindings.len(), 230);
}

#[test]
fn device_score_batches_identically_and_follows_the_strategy() {
    use lockstep_engine::config::ScoringStrategyType;
    let cluster = testkit::dra_gpus(40, 150, 20);
    let nodes_used = |kind: ScoringStrategyType| {
        let mut options = Options::default();
        options.profile.scores.push(("DynamicResources".into(), 5));
        options.profile.scoring_strategy.kind = kind;
        let (batched, _) = run_with(&cluster, &options, true);
        assert_eq!(batched, run_with(&cluster, &options, false).0, "{kind:?}");
        let mut nodes: Vec<_> = batched.bindings.iter().map(|(_, n)| *n).collect();
        nodes.sort();
        nodes.dedup();
        nodes.len()
    };
    // 150 single-GPU and 20 four-GPU pods need 230 of 320 GPUs.
    // MostAllocated packs devices: nodes fill one after another (230 GPUs on 29 nodes).
    let packed = nodes_used(ScoringStrategyType::MostAllocated);
    assert!(packed <= 30, "{packed} nodes used");
    // LeastAllocated spreads them: every node gets some.
    assert_eq!(nodes_used(ScoringStrategyType::LeastAllocated), 40);
}

#[test]
fn identical_pods_that_fit_nowhere_fail_once_per_snapshot() {
    // 10 nodes of 4 CPU; 40 pods of 1 CPU fit, the 20 of 8 CPU after them fit nowhere.
    let mut cluster = Cluster::default();
    for i in 0..10 {
        let n = testkit::node(&mut cluster, &format!("node-{i:02}"), 4000, 16 * GI, 110);
        cluster.nodes.push(n);
    }
    for i in 0..40 {
        let p = testkit::pod(&mut cluster, &format!("small-{i:02}"), 1000, GI);
        cluster.pods.push(p);
    }
    for i in 0..20 {
        let p = testkit::pod(&mut cluster, &format!("big-{i:02}"), 8000, GI);
        cluster.pods.push(p);
    }
    let cluster = testkit::finish(cluster);
    let (batched, (hits, full)) = run(&cluster, true);
    let (plain, _) = run(&cluster, false);
    assert_eq!(batched, plain);
    assert_eq!(batched.bindings.len(), 40);
    assert_eq!(batched.unschedulable.len(), 20);
    // One full cycle finds that a big pod fits nowhere; the other 19 reuse it.
    assert!(hits >= 19 + 39 - 10, "{hits} batched, {full} full");
    assert!(full <= 12, "{full} full cycles");
}

#[test]
fn fragmentation_device_score_places_the_same_with_and_without_batching() {
    use lockstep_engine::config::DeviceScoring;
    // GPU pods and pods without claims: the fragmentation score ranks nodes for both,
    // normalised over the feasible nodes, so no pod may reuse another's scores.
    let mut cluster = testkit::dra_gpus(30, 120, 15);
    for i in 0..60 {
        let p = testkit::pod(&mut cluster, &format!("cpu-{i:03}"), 6000, 8 * GI);
        cluster.pods.push(p);
    }
    let cluster = testkit::finish(cluster);
    let mut options = Options::default();
    options.profile.scores = vec![("DynamicResources".into(), 1)];
    options.profile.device_scoring = DeviceScoring::Fragmentation;
    let (batched, _) = run_with(&cluster, &options, true);
    assert_eq!(batched, run_with(&cluster, &options, false).0);
    assert!(batched.bindings.len() > 150, "{}", batched.bindings.len());
}
