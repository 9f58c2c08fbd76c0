//! Whole-cycle behaviour on clusters built in code.

use lockstep_engine::{Options, schedule};
use lockstep_model::{
    Cluster, HostPort, InclusionPolicy, LabelSelector, NodeSelectorTerm, Operator, PodAffinityTerm,
    Requirement, TaintEffect, Toleration, TolerationOperator, TopologySpreadConstraint,
    WhenUnsatisfiable,
};
use lockstep_testkit::{self as testkit, GI};

fn names(c: &Cluster, d: &lockstep_engine::Decisions) -> Vec<(String, String)> {
    d.bindings
        .iter()
        .map(|(p, n)| {
            (
                c.pods[p.index()].name.clone(),
                c.nodes[n.index()].name.clone(),
            )
        })
        .collect()
}

#[test]
fn least_allocated_spreads_and_ties_go_to_first_name() {
    let mut c = Cluster::default();
    for n in ["b", "a", "c"] {
        let node = testkit::node(&mut c, n, 4000, 8 * GI, 110);
        c.nodes.push(node);
    }
    for p in ["p1", "p2", "p3"] {
        let pod = testkit::pod(&mut c, p, 1000, GI);
        c.pods.push(pod);
    }
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(
        names(&c, &d),
        vec![
            ("p1".into(), "a".into()),
            ("p2".into(), "b".into()),
            ("p3".into(), "c".into())
        ]
    );
}

#[test]
fn insufficient_and_taint_message() {
    let mut c = Cluster::default();
    for (i, n) in ["n1", "n2", "n3", "n4", "n5"].iter().enumerate() {
        let mut node = testkit::node(&mut c, n, if i < 3 { 500 } else { 8000 }, 8 * GI, 110);
        if i >= 3 {
            node.taints
                .push(testkit::taint("dedicated", "gpu", TaintEffect::NoSchedule));
        }
        c.nodes.push(node);
    }
    let pod = testkit::pod(&mut c, "big", 1000, GI);
    c.pods.push(pod);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert!(d.bindings.is_empty());
    assert_eq!(
        d.unschedulable[0].1,
        "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient cpu. \
         preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    );
}

#[test]
fn toleration_admits_tainted_node_and_prefer_no_schedule_is_avoided() {
    let mut c = Cluster::default();
    let mut a = testkit::node(&mut c, "a", 4000, 8 * GI, 110);
    a.taints
        .push(testkit::taint("soft", "x", TaintEffect::PreferNoSchedule));
    let mut b = testkit::node(&mut c, "b", 4000, 8 * GI, 110);
    b.taints
        .push(testkit::taint("gpu", "true", TaintEffect::NoSchedule));
    let plain = testkit::node(&mut c, "c", 4000, 8 * GI, 110);
    c.nodes.extend([a, b, plain]);
    let mut p = testkit::pod(&mut c, "p", 100, GI);
    p.tolerations.push(Toleration {
        key: "gpu".into(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
    });
    p.node_selector
        .push(("kubernetes.io/hostname".into(), "b".into()));
    c.pods.push(p);
    let mut q = testkit::pod(&mut c, "q", 100, GI);
    q.node_affinity.required = Some(vec![NodeSelectorTerm {
        match_expressions: vec![Requirement {
            key: "kubernetes.io/hostname".into(),
            operator: Operator::In,
            values: vec!["a".into(), "c".into()],
        }],
        match_fields: vec![],
    }]);
    c.pods.push(q);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(
        names(&c, &d),
        vec![("p".into(), "b".into()), ("q".into(), "c".into())]
    );
}

#[test]
fn host_ports_conflict() {
    let mut c = Cluster::default();
    let n = testkit::node(&mut c, "only", 4000, 8 * GI, 110);
    c.nodes.push(n);
    for name in ["a", "b"] {
        let mut p = testkit::pod(&mut c, name, 100, GI);
        p.host_ports.push(HostPort {
            protocol: "TCP".into(),
            host_ip: String::new(),
            port: 8080,
        });
        c.pods.push(p);
    }
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(d.bindings.len(), 1);
    assert_eq!(
        d.unschedulable[0].1,
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. \
         preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
}

fn app_selector(app: &str) -> LabelSelector {
    LabelSelector {
        match_labels: vec![("app".into(), app.into())],
        match_expressions: vec![],
    }
}

#[test]
fn topology_spread_do_not_schedule_balances_zones() {
    let mut c = Cluster::default();
    for (n, zone) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        let mut node = testkit::node(&mut c, n, 8000, 8 * GI, 110);
        node.labels.insert("zone".into(), zone.into());
        c.nodes.push(node);
    }
    for i in 0..4 {
        let mut p = testkit::pod(&mut c, &format!("w{i}"), 100, GI);
        p.labels.insert("app".into(), "web".into());
        p.topology_spread.push(TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "zone".into(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            selector: Some(app_selector("web")),
            min_domains: None,
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
        });
        c.pods.push(p);
    }
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    let zone_of = |node: &str| if node.starts_with('a') { "a" } else { "b" };
    let mut per_zone = std::collections::BTreeMap::new();
    for (_, n) in names(&c, &d) {
        *per_zone.entry(zone_of(&n)).or_insert(0) += 1;
    }
    assert_eq!(per_zone.get("a"), Some(&2));
    assert_eq!(per_zone.get("b"), Some(&2));
}

#[test]
fn pod_anti_affinity_one_per_host_and_affinity_follows() {
    let mut c = Cluster::default();
    for n in ["n1", "n2"] {
        let node = testkit::node(&mut c, n, 8000, 8 * GI, 110);
        c.nodes.push(node);
    }
    for i in 0..3 {
        let mut p = testkit::pod(&mut c, &format!("db{i}"), 100, GI);
        p.labels.insert("app".into(), "db".into());
        p.pod_anti_affinity.required.push(PodAffinityTerm {
            selector: Some(app_selector("db")),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: "kubernetes.io/hostname".into(),
        });
        c.pods.push(p);
    }
    let mut cache = testkit::pod(&mut c, "cache", 100, GI);
    cache.priority = -1;
    cache.pod_affinity.required.push(PodAffinityTerm {
        selector: Some(app_selector("db")),
        namespaces: vec![],
        namespace_selector: None,
        topology_key: "kubernetes.io/hostname".into(),
    });
    c.pods.push(cache);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(d.bindings.len(), 3, "{d:?}");
    assert_eq!(
        d.unschedulable[0].1,
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. \
         preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
}

#[test]
fn reason_fragments_sort_as_strings_counts_included() {
    // 10 nodes short of CPU and 2 tainted: "10 ..." sorts before "2 ...", as kube-scheduler
    // sorts the "COUNT reason" strings. No node has the CPU the pod asks for, so preemption
    // cannot help anywhere.
    let mut c = Cluster::default();
    for i in 0..12 {
        let mut node = testkit::node(&mut c, &format!("n{i:02}"), 500, 8 * GI, 110);
        if i >= 10 {
            node.taints
                .push(testkit::taint("dedicated", "gpu", TaintEffect::NoSchedule));
        }
        c.nodes.push(node);
    }
    let pod = testkit::pod(&mut c, "big", 1000, GI);
    c.pods.push(pod);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(
        d.unschedulable[0].1,
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint(s). \
         preemption: 0/12 nodes are available: 12 Preemption is not helpful for scheduling."
    );
}

#[test]
fn a_cluster_without_nodes_has_no_nodes_available() {
    let mut c = Cluster::default();
    let pod = testkit::pod(&mut c, "p", 100, GI);
    c.pods.push(pod);
    let d = schedule(&testkit::finish(c), Options::default()).unwrap();
    assert_eq!(d.unschedulable[0].1, "no nodes available to schedule pods");
}

#[test]
fn a_pre_filter_rejection_before_dynamic_resources_ends_post_filter_with_not_found() {
    let mut c = Cluster::default();
    let node = testkit::node(&mut c, "a", 4000, 8 * GI, 110);
    c.nodes.push(node);
    let mut p = testkit::pod(&mut c, "conflict", 100, GI);
    let name_in = |n: &str| Requirement {
        key: "metadata.name".into(),
        operator: Operator::In,
        values: vec![n.into()],
    };
    p.node_affinity.required = Some(vec![NodeSelectorTerm {
        match_expressions: vec![],
        match_fields: vec![name_in("a"), name_in("b")],
    }]);
    c.pods.push(p);
    let c = testkit::finish(c);
    let d = schedule(&c, Options::default()).unwrap();
    assert_eq!(
        d.unschedulable[0].1,
        "0/1 nodes are available: pod affinity terms conflict. not found"
    );
    // Without DynamicResources, DefaultPreemption has its say.
    let mut options = Options::default();
    options.profile.filters.retain(|f| f != "DynamicResources");
    let d = schedule(&c, options).unwrap();
    assert_eq!(
        d.unschedulable[0].1,
        "0/1 nodes are available: pod affinity terms conflict. \
         preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
}

#[test]
fn pods_are_tried_by_priority_then_age_then_key_as_a_string() {
    // One node with room for one pod at a time; the pods that win show the order.
    let order = |pods: &[(&str, &str, i32, Option<i64>)]| -> String {
        let mut c = Cluster::default();
        let node = testkit::node(&mut c, "n", 1000, 8 * GI, 110);
        c.nodes.push(node);
        for &(ns, name, priority, created) in pods {
            let mut pod = testkit::pod(&mut c, name, 1000, GI);
            pod.namespace = ns.into();
            pod.priority = priority;
            pod.creation_timestamp = created;
            c.pods.push(pod);
        }
        let c = testkit::finish(c);
        let d = schedule(&c, Options::default()).unwrap();
        let p = d.bindings[0].0;
        c.pods[p.index()].key()
    };
    // "a-b/y" sorts before "a/x" as a string ('-' < '/'), though "a" < "a-b" as a namespace.
    assert_eq!(
        order(&[("a", "x", 0, Some(5)), ("a-b", "y", 0, Some(5))]),
        "a-b/y"
    );
    assert_eq!(
        order(&[("a-b", "y", 0, Some(5)), ("a", "x", 0, Some(5))]),
        "a-b/y"
    );
    assert_eq!(order(&[("a", "ab", 0, None), ("a", "a", 0, None)]), "a/a");
    // Age before the key, a pod without a creation time last; priority before both.
    assert_eq!(
        order(&[("a", "x", 0, Some(5)), ("z", "z", 0, Some(4))]),
        "z/z"
    );
    assert_eq!(order(&[("z", "z", 0, None), ("a", "x", 0, Some(9))]), "a/x");
    assert_eq!(order(&[("a", "x", 0, Some(1)), ("z", "z", 1, None)]), "z/z");
}
