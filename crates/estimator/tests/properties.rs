//! On random clusters, replicas placed one after another add up to the engine's per-node
//! estimate (`lockstep_engine::estimate`) whenever replicas on different nodes cannot
//! interact (no shared devices), including node-local DRA claims; and a request leaves the
//! member as it found it.

use lockstep_estimator::member::Member;
use lockstep_estimator::request::{ClaimRef, Requirements};
use lockstep_model::{PodId, TaintEffect};
use lockstep_testkit as testkit;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    nodes: Vec<(i64, i64, i64, bool)>,
    running: Vec<(usize, i64)>,
    cpu: i64,
    memory_mi: i64,
    tolerate: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((1000i64..16_000, 1i64..64, 1i64..40, any::<bool>()), 1..12),
        prop::collection::vec((0usize..12, 100i64..4000), 0..20),
        0i64..3000,
        0i64..4096,
        any::<bool>(),
    )
        .prop_map(|(nodes, running, cpu, memory_mi, tolerate)| Case {
            nodes,
            running,
            cpu,
            memory_mi,
            tolerate,
        })
}

fn cluster(case: &Case) -> lockstep_model::Cluster {
    let mut c = lockstep_model::Cluster::default();
    for (i, (cpu, gi, pods, tainted)) in case.nodes.iter().enumerate() {
        let mut n = testkit::node(&mut c, &format!("n{i:02}"), *cpu, gi * testkit::GI, *pods);
        if *tainted {
            n.taints
                .push(testkit::taint("dedicated", "x", TaintEffect::NoSchedule));
        }
        c.nodes.push(n);
    }
    for (k, (node, cpu)) in case.running.iter().enumerate() {
        let node = format!("n{:02}", node % case.nodes.len());
        let p = testkit::running(&mut c, &format!("r{k}"), &node, *cpu, 0, None);
        c.pods.push(p);
    }
    testkit::finish(c)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn placing_one_after_another_equals_the_per_node_estimate(case in case()) {
        let base = cluster(&case);
        let mut with_shape = base.clone();
        let mut shape = testkit::pod(&mut with_shape, "shape", case.cpu, case.memory_mi * 1024 * 1024);
        if case.tolerate {
            shape.tolerations.push(lockstep_model::Toleration {
                key: "dedicated".into(),
                operator: lockstep_model::TolerationOperator::Equal,
                value: "x".into(),
                effect: Some(TaintEffect::NoSchedule),
            });
        }
        with_shape.pods.push(shape);
        let id = PodId((with_shape.pods.len() - 1) as u32);
        let expected = lockstep_engine::estimate(&with_shape, lockstep_engine::Options::default(), id)
            .unwrap()
            .total;
        let mut requirements = Requirements {
            namespace: "default".into(),
            requests: [
                ("cpu".to_string(), format!("{}m", case.cpu)),
                ("memory".to_string(), format!("{}Mi", case.memory_mi)),
            ]
            .into(),
            ..Requirements::default()
        };
        if case.tolerate {
            requirements.tolerations = vec![serde_json::json!(
                {"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"})];
        }
        let mut member = Member::new(base).unwrap();
        prop_assert_eq!(member.max_replicas(&requirements, &[]).unwrap(), expected);
        // Asked again (the snapshot is reused), the answer is the same.
        prop_assert_eq!(member.max_replicas(&requirements, &[]).unwrap(), expected);
    }

    #[test]
    fn node_local_devices_match_the_per_node_estimate(nodes in 1usize..6, singles in 0usize..30, quads in 0usize..6, four in any::<bool>()) {
        // dra_gpus: 8 GPUs per node; its pods are pending, so they hold nothing; keep them
        // out and count one shape.
        let mut base = testkit::dra_gpus(nodes, singles, quads);
        // Some GPUs are taken by running pods of the one-GPU template.
        for (i, p) in base.pods.iter_mut().enumerate() {
            p.node_name = Some(format!("node-{:04}", i % nodes));
            p.phase = lockstep_model::PodPhase::Running;
        }
        let template = if four { "four-same-root" } else { "one-40gi" };
        let mut with_shape = base.clone();
        let mut shape = testkit::pod(&mut with_shape, "shape", 1000, testkit::GI);
        shape.resource_claims.push(lockstep_model::PodResourceClaim {
            name: "gpu".into(),
            resource_claim_name: None,
            resource_claim_template_name: Some(template.into()),
            generated_claim: None,
        });
        with_shape.pods.push(shape);
        let id = PodId((with_shape.pods.len() - 1) as u32);
        let expected = lockstep_engine::estimate(&with_shape, lockstep_engine::Options::default(), id)
            .unwrap()
            .total;
        let requirements = Requirements {
            namespace: "default".into(),
            requests: [("cpu".to_string(), "1".to_string()), ("memory".to_string(), "1Gi".to_string())].into(),
            claims: vec![ClaimRef::Template(template.into())],
            ..Requirements::default()
        };
        let mut member = Member::new(base).unwrap();
        prop_assert_eq!(member.max_replicas(&requirements, &[]).unwrap(), expected);
        prop_assert_eq!(member.max_replicas(&requirements, &[]).unwrap(), expected);
    }
}
