//! Remembered gang failures: a PodGroup identical to one that just failed against the same
//! cluster state is answered with that failure. Runs with and without it decide the same.

use lockstep_engine::{Decisions, Options, Scheduler};
use lockstep_model::Cluster;
use lockstep_testkit::{self as testkit, GI};
use proptest::prelude::*;

/// A gang shape: pods, CPU per pod (milli), minCount below the size or not, priority,
/// whether it asks for one rack.
type GangShape = (usize, i64, bool, i32, bool);

fn build(
    nodes: &[i64],
    running: &[(usize, i64, i32)],
    gangs: &[(usize, usize)],
    shapes: &[GangShape],
) -> Cluster {
    let mut c = Cluster::default();
    for (i, cpu) in nodes.iter().enumerate() {
        let mut n = testkit::node(&mut c, &format!("n{i:02}"), *cpu, 32 * GI, 110);
        n.labels
            .insert("topology.kubernetes.io/rack".into(), format!("r{}", i % 2));
        c.nodes.push(n);
    }
    for (i, (node, cpu, priority)) in running.iter().enumerate() {
        let node = format!("n{:02}", node % nodes.len());
        let p = testkit::running(&mut c, &format!("run-{i:02}"), &node, *cpu, *priority, None);
        c.pods.push(p);
    }
    for (g, (shape, copies)) in gangs.iter().enumerate() {
        let (size, cpu, partial, priority, rack) = shapes[shape % shapes.len()];
        for k in 0..*copies {
            let name = format!("g{g}-{k}");
            let min = if partial && size > 1 { size - 1 } else { size };
            let mut pg = testkit::gang(
                &name,
                min as u32,
                rack.then_some("topology.kubernetes.io/rack"),
            );
            pg.priority = Some(priority);
            c.pod_groups.push(pg);
            testkit::members(&mut c, &name, size, cpu, GI);
        }
    }
    testkit::finish(c)
}

fn run(cluster: &Cluster, remember: bool) -> (Decisions, u64) {
    let mut s = Scheduler::new(
        cluster,
        Options {
            explain: false,
            remember_failed_gangs: remember,
            ..Options::default()
        },
    )
    .unwrap();
    let d = s.run();
    (d, s.gang_failures_reused())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn remembering_failed_gangs_changes_no_decision(
        nodes in proptest::collection::vec(prop_oneof![Just(2000i64), Just(4000), Just(8000)], 1..6),
        running in proptest::collection::vec((0usize..6, 500i64..3000, 0i32..3), 0..8),
        shapes in proptest::collection::vec(
            (1usize..5, prop_oneof![Just(500i64), Just(1000), Just(2000), Just(3000)], any::<bool>(), 0i32..10, any::<bool>()),
            1..4,
        ),
        gangs in proptest::collection::vec((0usize..4, 1usize..4), 1..6),
    ) {
        let cluster = build(&nodes, &running, &gangs, &shapes);
        let (with, _) = run(&cluster, true);
        let (without, reused) = run(&cluster, false);
        prop_assert_eq!(reused, 0);
        // Messages differ by design (a remembered failure names the gang it copies).
        let strip = |d: &Decisions| {
            let mut d = d.clone();
            for (_, m) in d.unschedulable.iter_mut() {
                m.clear();
            }
            for g in d.pod_groups.iter_mut() {
                g.message.clear();
            }
            d
        };
        prop_assert_eq!(strip(&with), strip(&without));
    }
}

#[test]
fn identical_gangs_that_do_not_fit_are_tried_once() {
    // One 4-CPU node; five identical gangs of two 3-CPU pods: none fits, and after the
    // first each is answered from memory.
    let shapes = [(2usize, 3000i64, false, 5i32, false)];
    let cluster = build(&[4000], &[], &[(0, 5)], &shapes);
    let (d, reused) = run(&cluster, true);
    assert_eq!(reused, 4);
    assert_eq!(d.unschedulable.len(), 10);
    assert!(d.bindings.is_empty());
    // With messages nothing is remembered: each gang says why it failed.
    let mut s = Scheduler::new(&cluster, Options::default()).unwrap();
    let d = s.run();
    assert_eq!(s.gang_failures_reused(), 0);
    assert!(
        d.unschedulable
            .iter()
            .all(|(_, m)| m.contains("of minCount 2 pods fit"))
    );
}
