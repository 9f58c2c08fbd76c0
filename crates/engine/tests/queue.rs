//! The scheduling queue's hints: offering only the pods a change may have helped decides
//! exactly what offering every pending pod decides (without preemption, where every
//! failure the queue parks until a fitting node is freed is exact), whether the changes
//! are releases or object changes through `Scheduler::apply` (nodes added, relabelled and
//! deleted, running pods added and deleted, pods bound).

use std::collections::BTreeSet;

use lockstep_engine::{Change, Key, Kind, Object, Options, Queue, Scheduler};
use lockstep_model::{
    Cluster, LabelSelector, NodeId, PodAffinityTerm, PodId, TaintEffect, Toleration,
    TolerationOperator,
};
use lockstep_testkit::{self as testkit, GI};
use proptest::prelude::*;

/// A unit: (pods, cpu per pod, kind) where kind 0 plain, 1 needs `disk=ssd`, 2 required
/// anti-affinity to its own app on the host, 3 a gang in one rack, 4 a gang anywhere,
/// 5 tolerates the taint; plus its priority.
type UnitShape = (usize, i64, u8, i32);

struct Plan {
    cluster: Cluster,
    /// Per round: units arriving (their pods), and picks of bound pods to release.
    rounds: Vec<(Vec<Vec<PodId>>, Vec<usize>)>,
}

fn build(
    nodes: &[(i64, bool, bool)],
    units: &[UnitShape],
    arrive: &[usize],
    rounds: usize,
) -> Plan {
    let mut c = Cluster::default();
    for (i, &(cpu, ssd, tainted)) in nodes.iter().enumerate() {
        let mut n = testkit::node(&mut c, &format!("n{i}"), cpu, 64 * GI, 110);
        n.labels
            .insert("topology.kubernetes.io/rack".into(), format!("r{}", i % 2));
        if ssd {
            n.labels.insert("disk".into(), "ssd".into());
        }
        if tainted {
            n.taints
                .push(testkit::taint("dedicated", "x", TaintEffect::NoSchedule));
        }
        c.nodes.push(n);
    }
    let mut per_round: Vec<Vec<Vec<PodId>>> = vec![Vec::new(); rounds];
    for (u, &(size, cpu, kind, priority)) in units.iter().enumerate() {
        let first = c.pods.len();
        if kind == 3 || kind == 4 {
            let name = format!("g{u}");
            let rack = (kind == 3).then_some("topology.kubernetes.io/rack");
            let mut pg = testkit::gang(&name, size as u32, rack);
            pg.priority = Some(priority);
            c.pod_groups.push(pg);
            testkit::members(&mut c, &name, size, cpu, GI);
            for p in &mut c.pods[first..] {
                p.priority = priority;
            }
        } else {
            for k in 0..size {
                let mut p = testkit::pod(&mut c, &format!("u{u}-{k}"), cpu, GI);
                p.priority = priority;
                match kind {
                    1 => p.node_selector.push(("disk".into(), "ssd".into())),
                    2 => {
                        p.labels.insert("app".into(), format!("a{}", u % 2));
                        let selector = LabelSelector {
                            match_labels: vec![("app".into(), format!("a{}", u % 2))],
                            match_expressions: Vec::new(),
                        };
                        p.pod_anti_affinity.required.push(PodAffinityTerm {
                            selector: Some(selector),
                            namespaces: Vec::new(),
                            namespace_selector: None,
                            topology_key: "kubernetes.io/hostname".into(),
                        });
                    }
                    5 => p.tolerations.push(Toleration {
                        key: "dedicated".into(),
                        operator: TolerationOperator::Exists,
                        value: String::new(),
                        effect: None,
                    }),
                    _ => {}
                }
                c.pods.push(p);
            }
        }
        let ids: Vec<PodId> = (first..c.pods.len()).map(|i| PodId(i as u32)).collect();
        per_round[arrive[u % arrive.len()] % rounds].push(ids);
    }
    Plan {
        cluster: testkit::finish(c),
        rounds: per_round.into_iter().map(|a| (a, Vec::new())).collect(),
    }
}

type Round = (Vec<(PodId, NodeId)>, Vec<PodId>);

/// An object change between rounds: (what, a pick, a size). What: 0 adds a node (CPU from
/// the size, `disk=ssd` when the pick is even), 1 toggles `disk=ssd` on a node, 2 adds a
/// running pod (app `a0`/`a1`) on a node, 3 deletes a bound pod, 4 deletes a node (its
/// pods stay, holding nothing), 5 binds a pending pod to a node through `Change::Bind`.
type ObjectChange = (u8, usize, i64);

/// Applies one object change; `bound` and `pending` follow it.
fn change(
    s: &mut Scheduler,
    (what, pick, size): ObjectChange,
    tag: &str,
    bound: &mut Vec<PodId>,
    pending: &mut BTreeSet<PodId>,
) {
    let nodes: Vec<String> = s
        .state()
        .nodes()
        .iter()
        .map(|&n| s.state().node(n).name.clone())
        .collect();
    let pick_node = || nodes.get(pick % nodes.len().max(1)).cloned();
    let mut scratch = Cluster::default();
    match what {
        0 => {
            let mut n = testkit::node(&mut scratch, &format!("x{tag}"), size, 64 * GI, 110);
            n.labels.insert(
                "topology.kubernetes.io/rack".into(),
                format!("r{}", pick % 2),
            );
            if pick % 2 == 0 {
                n.labels.insert("disk".into(), "ssd".into());
            }
            s.apply(Change::Add(Object::Node(n))).unwrap();
        }
        1 => {
            let Some(name) = pick_node() else { return };
            let id = s.state().node_id(&name).unwrap();
            let mut n = s.state().node(id).clone();
            if n.labels.remove("disk").is_none() {
                n.labels.insert("disk".into(), "ssd".into());
            }
            s.apply(Change::Update(Object::Node(n))).unwrap();
        }
        2 => {
            let Some(name) = pick_node() else { return };
            let mut p = testkit::running(&mut scratch, &format!("r{tag}"), &name, size, 0, None);
            p.labels.insert("app".into(), format!("a{}", pick % 2));
            if let lockstep_engine::Applied::Pod(id) = s.apply(Change::Add(Object::Pod(p))).unwrap()
            {
                bound.push(id);
            }
        }
        3 => {
            if bound.is_empty() {
                return;
            }
            let id = bound.remove(pick % bound.len());
            let p = s.state().pod(id);
            let key = Key::namespaced(&p.namespace, &p.name);
            s.apply(Change::Delete(Kind::Pod, key)).unwrap();
        }
        4 => {
            let Some(name) = pick_node() else { return };
            s.apply(Change::Delete(Kind::Node, Key::cluster(name)))
                .unwrap();
        }
        _ => {
            let Some(name) = pick_node() else { return };
            // A pending pod that is not in a group (a gang is bound by its cycle).
            let Some(&id) = pending
                .iter()
                .filter(|&&p| s.state().pod(p).pod_group.is_none())
                .nth(pick % pending.len().max(1))
            else {
                return;
            };
            let p = s.state().pod(id);
            let key = Key::namespaced(&p.namespace, &p.name);
            s.apply(Change::Bind {
                pod: key,
                node: name,
            })
            .unwrap();
            pending.remove(&id);
            bound.push(id);
        }
    }
}

/// Runs the plan: each round releases some bound pods, then the units arriving become
/// pending, then one `schedule` call. `hints`: offer the arrivals and what the queue wakes;
/// otherwise every pending pod.
fn drive(
    plan: &Plan,
    releases: &[Vec<usize>],
    changes: &[Vec<ObjectChange>],
    hints: bool,
    preemption: bool,
) -> Vec<Round> {
    let mut s = Scheduler::new(
        &plan.cluster,
        Options {
            explain: false,
            preemption,
            ..Options::default()
        },
    )
    .unwrap();
    let mut queue = Queue::new();
    let mut pending: BTreeSet<PodId> = BTreeSet::new();
    let mut bound: Vec<PodId> = Vec::new();
    // Victims come back as new arrivals in the next round.
    let mut returning: Vec<PodId> = Vec::new();
    let mut out = Vec::new();
    for (r, (arrivals, _)) in plan.rounds.iter().enumerate() {
        for &pick in releases.get(r).map(Vec::as_slice).unwrap_or(&[]) {
            if bound.is_empty() {
                break;
            }
            let p = bound.remove(pick % bound.len());
            s.release(p);
        }
        for (k, &c) in changes
            .get(r)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            change(&mut s, c, &format!("{r}-{k}"), &mut bound, &mut pending);
        }
        let mut fresh: Vec<PodId> = arrivals.iter().flatten().copied().collect();
        fresh.append(&mut returning);
        pending.extend(&fresh);
        let mut offered: Vec<PodId> = if hints {
            let mut o = queue.wake(&mut s);
            o.extend(&fresh);
            o
        } else {
            pending.iter().copied().collect()
        };
        offered.retain(|p| pending.contains(p));
        offered.sort_unstable();
        offered.dedup();
        let position = s.change_position();
        let d = s.schedule(&offered);
        let mut evicted: Vec<PodId> = d.evictions.iter().map(|e| e.pod).collect();
        evicted.sort_unstable();
        for &p in &evicted {
            bound.retain(|b| *b != p);
            s.release(p);
            pending.insert(p);
        }
        let mut bindings = d.bindings.clone();
        bindings.sort_unstable();
        for &(p, _) in &bindings {
            pending.remove(&p);
            bound.push(p);
        }
        let mut unproven: Vec<PodId> = s.unproven_failures().to_vec();
        unproven.extend(d.waiting.iter().map(|(p, _)| *p));
        for p in offered {
            if pending.contains(&p) {
                queue.park(&s, p, position, !unproven.contains(&p));
            }
        }
        returning.extend(&evicted);
        out.push((bindings, evicted));
    }
    out
}

fn node_shape() -> impl Strategy<Value = (i64, bool, bool)> {
    (
        prop::sample::select(vec![2000i64, 4000, 8000]),
        any::<bool>(),
        prop::bool::weighted(0.2),
    )
}

fn unit_shape() -> impl Strategy<Value = UnitShape> {
    (
        1usize..4,
        prop::sample::select(vec![500i64, 1000, 2000, 3000, 5000]),
        0u8..6,
        prop::sample::select(vec![0i32, 10]),
    )
}

fn object_change() -> impl Strategy<Value = ObjectChange> {
    (
        0u8..6,
        0usize..20,
        prop::sample::select(vec![500i64, 1000, 2000, 4000]),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn hints_decide_as_offering_everything(
        nodes in prop::collection::vec(node_shape(), 2..6),
        units in prop::collection::vec(unit_shape(), 2..14),
        arrive in prop::collection::vec(0usize..6, 1..14),
        releases in prop::collection::vec(prop::collection::vec(0usize..20, 0..4), 6),
        changes in prop::collection::vec(prop::collection::vec(object_change(), 0..3), 6),
    ) {
        let plan = build(&nodes, &units, &arrive, 6);
        let all = drive(&plan, &releases, &changes, false, false);
        let hinted = drive(&plan, &releases, &changes, true, false);
        prop_assert_eq!(all, hinted);
    }
}

/// A pod too large for the node that was freed stays parked; it wakes when a node where it
/// fits is freed.
#[test]
fn a_pod_wakes_only_when_a_node_it_fits_is_freed() {
    let mut c = Cluster::default();
    let o = testkit::node(&mut c, "big", 8000, 64 * GI, 110);
    c.nodes.push(o);
    let o = testkit::node(&mut c, "small", 2000, 64 * GI, 110);
    c.nodes.push(o);
    let o = testkit::running(&mut c, "fill-big", "big", 8000, 0, None);
    c.pods.push(o);
    let o = testkit::running(&mut c, "fill-small", "small", 2000, 0, None);
    c.pods.push(o);
    let o = testkit::pod(&mut c, "wide", 6000, GI);
    c.pods.push(o);
    let c = testkit::finish(c);
    let id = |name: &str| PodId(c.pods.iter().position(|p| p.name == name).unwrap() as u32);
    let mut s = Scheduler::new(&c, no_preemption()).unwrap();
    let mut queue = Queue::new();
    let position = s.change_position();
    let d = s.schedule(&[id("wide")]);
    assert!(d.bindings.is_empty());
    queue.park(&s, id("wide"), position, true);

    s.release(id("fill-small"));
    assert!(
        queue.wake(&mut s).is_empty(),
        "a 6-CPU pod cannot use 2 CPUs"
    );
    assert_eq!(queue.len(), 1);

    s.release(id("fill-big"));
    assert_eq!(queue.wake(&mut s), vec![id("wide")]);
    assert!(queue.is_empty());
}

/// Pods taken out of the queue are gone from it whatever their place; the others wake in id
/// order however they were parked.
#[test]
fn removed_pods_leave_and_the_rest_wake_in_id_order() {
    let mut c = Cluster::default();
    let o = testkit::node(&mut c, "n", 4000, 64 * GI, 110);
    c.nodes.push(o);
    let o = testkit::running(&mut c, "fill", "n", 4000, 0, None);
    c.pods.push(o);
    for name in ["p0", "p1", "p2", "p3"] {
        let o = testkit::pod(&mut c, name, 1000, GI);
        c.pods.push(o);
    }
    let c = testkit::finish(c);
    let id = |name: &str| PodId(c.pods.iter().position(|p| p.name == name).unwrap() as u32);
    let mut s = Scheduler::new(&c, no_preemption()).unwrap();
    let mut queue = Queue::new();
    let position = s.change_position();
    let pods = [id("p3"), id("p0"), id("p2"), id("p1")];
    assert!(s.schedule(&pods).bindings.is_empty());
    for p in pods {
        queue.park(&s, p, position, true);
    }
    // Parking a parked pod again keeps one entry.
    queue.park(&s, id("p2"), position, true);
    assert_eq!(queue.len(), 4);
    // The first parked: the last one takes its place.
    queue.remove(id("p3"));
    assert!(!queue.contains(id("p3")));
    assert!(queue.contains(id("p1")));
    queue.remove(id("p3"));
    assert_eq!(queue.len(), 3);
    queue.remove(id("p2"));
    assert_eq!(queue.len(), 2);
    s.release(id("fill"));
    assert_eq!(queue.wake(&mut s), vec![id("p0"), id("p1")]);
    assert!(queue.is_empty() && !queue.contains(id("p0")));
}

/// A gang's pods wake together; a node added through `apply` wakes the pods that fit on
/// it, and a change of another kind wakes every pod.
#[test]
fn gangs_wake_whole_and_object_changes_wake_who_they_may_help() {
    let mut c = Cluster::default();
    let o = testkit::node(&mut c, "a", 4000, 64 * GI, 110);
    c.nodes.push(o);
    let o = testkit::running(&mut c, "fill", "a", 3000, 0, None);
    c.pods.push(o);
    c.pod_groups.push(testkit::gang("g", 2, None));
    testkit::members(&mut c, "g", 2, 2000, GI);
    let o = testkit::pod(&mut c, "lone", 3000, GI);
    c.pods.push(o);
    let c = testkit::finish(c);
    let ids: Vec<PodId> = (0..c.pods.len() as u32).map(PodId).collect();
    let fill = ids[0];
    let members: Vec<PodId> = ids[1..3].to_vec();
    let lone = ids[3];
    let mut s = Scheduler::new(&c, no_preemption()).unwrap();
    let mut queue = Queue::new();
    let position = s.change_position();
    let d = s.schedule(&ids[1..]);
    assert!(d.bindings.is_empty());
    for &p in &ids[1..] {
        queue.park(&s, p, position, !s.unproven_failures().contains(&p));
    }
    // Freeing 3 CPUs lets one member fit (4000 free): both members wake, and the 3-CPU pod.
    s.release(fill);
    let woken = queue.wake(&mut s);
    assert_eq!(woken, vec![members[0], members[1], lone]);

    let position = s.change_position();
    queue.park(&s, lone, position, true);
    assert!(queue.wake(&mut s).is_empty(), "nothing changed");
    let small = testkit::node(&mut Cluster::default(), "b", 1000, GI, 110);
    s.apply(Change::Add(Object::Node(small))).unwrap();
    assert!(
        queue.wake(&mut s).is_empty(),
        "a 3-CPU pod cannot use a 1-CPU node"
    );
    let big = testkit::node(&mut Cluster::default(), "c", 4000, 64 * GI, 110);
    s.apply(Change::Add(Object::Node(big))).unwrap();
    assert_eq!(queue.wake(&mut s), vec![lone]);

    let position = s.change_position();
    queue.park(&s, lone, position, true);
    let budget = lockstep_model::PodDisruptionBudget {
        namespace: "default".into(),
        name: "b".into(),
        selector: None,
        disruptions_allowed: None,
        min_available: None,
        max_unavailable: None,
    };
    s.apply(Change::Add(Object::PodDisruptionBudget(budget)))
        .unwrap();
    assert_eq!(queue.wake(&mut s), vec![lone], "other kinds wake every pod");
}

fn no_preemption() -> Options {
    Options {
        preemption: false,
        ..Options::default()
    }
}
