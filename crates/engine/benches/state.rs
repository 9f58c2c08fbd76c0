//! The cluster state changed in place: one change at a time on a cluster of 500 and of 5000
//! nodes with 10 bound pods per node (a tenth with pod affinity and topology spread terms):
//! a pod add, a pod delete, a bind and a node update, each timed alone; the whole state
//! built from scratch; and, printed once, the memory the state holds per bound pod.
//! `cargo bench -p lockstep-engine --bench state`.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use lockstep_engine::{Change, ClusterState, Key, Kind, Object};
use lockstep_model::{
    Cluster, LabelSelector, Labels, PodAffinityTerm, PodPhase, TopologySpreadConstraint,
    WhenUnsatisfiable,
};
use lockstep_testkit::{self as testkit, GI};

#[global_allocator]
static ALLOCATOR: testkit::counting::Counting = testkit::counting::Counting;

const PODS_PER_NODE: usize = 10;

/// `nodes` nodes in 10 zones, 10 bound pods on each; every tenth pod has a required
/// anti-affinity term and a zone spread constraint.
fn cluster(nodes: usize) -> Cluster {
    let mut c = Cluster::default();
    for i in 0..nodes {
        let mut n = testkit::node(&mut c, &format!("node-{i:05}"), 32_000, 128 * GI, 110);
        n.labels.insert(
            "topology.kubernetes.io/zone".into(),
            format!("zone-{}", i % 10),
        );
        c.nodes.push(n);
    }
    for i in 0..nodes * PODS_PER_NODE {
        let mut p = running_pod(&mut c, &format!("pod-{i:06}"), i / PODS_PER_NODE);
        if i % 10 == 0 {
            let selector = LabelSelector {
                match_labels: vec![("app".into(), format!("app-{}", i % 50))],
                ..LabelSelector::default()
            };
            p.pod_anti_affinity.required.push(PodAffinityTerm {
                selector: Some(selector.clone()),
                namespaces: Vec::new(),
                namespace_selector: None,
                topology_key: "kubernetes.io/hostname".into(),
            });
            p.topology_spread.push(TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "topology.kubernetes.io/zone".into(),
                when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
                selector: Some(selector),
                min_domains: None,
                node_affinity_policy: lockstep_model::InclusionPolicy::Honor,
                node_taints_policy: lockstep_model::InclusionPolicy::Ignore,
            });
        }
        c.pods.push(p);
    }
    testkit::finish(c)
}

fn running_pod(c: &mut Cluster, name: &str, node: usize) -> lockstep_model::Pod {
    let mut p = testkit::pod(c, name, 500, GI);
    p.labels = Labels::from([("app".to_string(), format!("app-{}", node % 50))]);
    p.node_name = Some(format!("node-{node:05}"));
    p.phase = PodPhase::Running;
    p
}

/// Times `timed` alone, with `before` and `after` run around it untimed.
fn time_alone(
    state: &mut ClusterState,
    iters: u64,
    mut before: impl FnMut(&mut ClusterState, u64),
    mut timed: impl FnMut(&mut ClusterState, u64),
    mut after: impl FnMut(&mut ClusterState, u64),
) -> Duration {
    let mut total = Duration::ZERO;
    for i in 0..iters {
        before(state, i);
        let t = Instant::now();
        timed(state, i);
        total += t.elapsed();
        after(state, i);
    }
    total
}

fn changes(c: &mut Criterion) {
    let mut group = c.benchmark_group("ClusterState");
    for nodes in [500usize, 5000] {
        let mut base = cluster(nodes);
        let label = format!("{nodes}nodes_{}pods", nodes * PODS_PER_NODE);
        let mut state = ClusterState::new(&base).expect("state");
        let extra_bound = running_pod(&mut base, "extra", nodes / 2);
        let mut extra_pending = extra_bound.clone();
        extra_pending.node_name = None;
        extra_pending.phase = PodPhase::Pending;
        let key = Key::namespaced("default", "extra");
        let node_name = format!("node-{:05}", nodes / 3);
        let node = match state.object(Kind::Node, &Key::cluster(&node_name)) {
            Some(Object::Node(n)) => n,
            _ => unreachable!("the node exists"),
        };

        group.bench_function(BenchmarkId::new("pod_add", &label), |b| {
            b.iter_custom(|iters| {
                time_alone(
                    &mut state,
                    iters,
                    |_, _| {},
                    |s, _| {
                        s.apply(Change::Add(Object::Pod(extra_bound.clone())))
                            .unwrap();
                    },
                    |s, _| {
                        s.apply(Change::Delete(Kind::Pod, key.clone())).unwrap();
                    },
                )
            })
        });
        group.bench_function(BenchmarkId::new("pod_delete", &label), |b| {
            b.iter_custom(|iters| {
                time_alone(
                    &mut state,
                    iters,
                    |s, _| {
                        s.apply(Change::Add(Object::Pod(extra_bound.clone())))
                            .unwrap();
                    },
                    |s, _| {
                        s.apply(Change::Delete(Kind::Pod, key.clone())).unwrap();
                    },
                    |_, _| {},
                )
            })
        });
        group.bench_function(BenchmarkId::new("bind", &label), |b| {
            b.iter_custom(|iters| {
                time_alone(
                    &mut state,
                    iters,
                    |s, _| {
                        s.apply(Change::Add(Object::Pod(extra_pending.clone())))
                            .unwrap();
                    },
                    |s, _| {
                        s.apply(Change::Bind {
                            pod: key.clone(),
                            node: node_name.clone(),
                        })
                        .unwrap();
                    },
                    |s, _| {
                        s.apply(Change::Delete(Kind::Pod, key.clone())).unwrap();
                    },
                )
            })
        });
        group.bench_function(BenchmarkId::new("node_update", &label), |b| {
            b.iter_custom(|iters| {
                time_alone(
                    &mut state,
                    iters,
                    |_, _| {},
                    |s, i| {
                        // Labels, taints and allocatable all change.
                        let mut n = node.clone();
                        n.labels.insert("generation".into(), i.to_string());
                        if i % 2 == 0 {
                            n.taints.push(testkit::taint(
                                "maintenance",
                                "soon",
                                lockstep_model::TaintEffect::PreferNoSchedule,
                            ));
                        }
                        let cpu = n.allocatable.get(lockstep_model::ResourceId::CPU);
                        n.allocatable
                            .set(lockstep_model::ResourceId::CPU, cpu - (i % 2) as i64 * 1000);
                        s.apply(Change::Update(Object::Node(n))).unwrap();
                    },
                    |_, _| {},
                )
            })
        });
    }
    group.finish();
}

fn build(c: &mut Criterion) {
    let mut group = c.benchmark_group("ClusterState");
    group.sample_size(10);
    let base = cluster(5000);
    // From objects the caller hands over (as `schedule` does with what it loaded); the copy
    // made for each run and the drop of the state are not timed.
    group.bench_function("build_5000nodes_50000pods", |b| {
        b.iter_batched(
            || base.clone(),
            |objects| ClusterState::from_cluster(objects).expect("state"),
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
    // Memory: the objects, then the state built from them (which takes them, keeping no
    // copy).
    for nodes in [500usize, 5000] {
        let before = testkit::counting::live_bytes();
        let objects = cluster(nodes);
        let pods = objects.pods.len() as isize;
        let objects_only = testkit::counting::live_bytes() - before;
        let state = ClusterState::from_cluster(objects).expect("state");
        let total = testkit::counting::live_bytes() - before;
        eprintln!(
            "ClusterState memory, {nodes} nodes and {pods} bound pods: {} bytes per bound pod \
             ({} the objects as loaded, {} the state's own indexes)",
            total / pods,
            objects_only / pods,
            (total - objects_only) / pods,
        );
        drop(state);
    }
}

criterion_group!(benches, changes, build);
criterion_main!(benches);
