//! Invariants of a federate run over random federations: no cluster holds more than its
//! resource summary allows (for the strategies that consult room), victims always have lower
//! priority than their preemptor, nothing is evicted unless the preemptor is placed, every
//! binding has exactly one outcome, and the output does not depend on input order; and
//! preemption across clusters evicts on as few clusters as needed, the least important
//! bindings first.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use lockstep_federation::{Options, load, schedule};
use lockstep_manifests::Source;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Spec {
    /// CPUs per cluster.
    clusters: Vec<i64>,
    /// (priority, preempts, cpu per replica, replicas, aggregated, placed on cluster).
    bindings: Vec<(i64, bool, i64, i64, bool, Option<usize>)>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec(2i64..12, 1..5),
        prop::collection::vec(
            (
                0i64..4,
                any::<bool>(),
                1i64..4,
                1i64..5,
                any::<bool>(),
                prop::option::of(0usize..4),
            ),
            1..9,
        ),
    )
        .prop_map(|(clusters, bindings)| Spec { clusters, bindings })
}

/// Cluster `c{i}`: ready, with Deployments, `cpu` CPUs and 100 pods.
fn cluster(i: usize, cpu: i64) -> String {
    format!(
        "---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: c{i}}}\n\
         spec: {{syncMode: Push}}\nstatus:\n  conditions: [{{type: Ready, status: \"True\", reason: r, \
         message: m, lastTransitionTime: \"2026-01-01T00:00:00Z\"}}]\n  apiEnablements: \
         [{{groupVersion: apps/v1, resources: [{{name: deployments, kind: Deployment}}]}}]\n  \
         resourceSummary: {{allocatable: {{cpu: \"{cpu}\", pods: \"100\"}}}}\n"
    )
}

/// Writes the federation as Karmada YAML; placed bindings are placed only where they fit,
/// so the input itself never overcommits a cluster.
fn yaml(spec: &Spec, reverse: bool) -> (String, BTreeMap<String, i64>) {
    let mut out = String::new();
    let mut free: Vec<i64> = spec.clusters.clone();
    let mut cpu_of = BTreeMap::new();
    for (i, cpu) in spec.clusters.iter().enumerate() {
        out += &cluster(i, *cpu);
    }
    let mut docs = Vec::new();
    for (i, (priority, preempts, cpu, replicas, aggregated, placed)) in
        spec.bindings.iter().enumerate()
    {
        cpu_of.insert(format!("default/b{i}"), *cpu);
        let placed = placed
            .filter(|c| *c < spec.clusters.len() && free[*c] >= cpu * replicas)
            .inspect(|c| free[*c] -= cpu * replicas);
        let clusters = placed
            .map(|c| format!("  clusters: [{{name: c{c}, replicas: {replicas}}}]\n"))
            .unwrap_or_default();
        let division = if *aggregated {
            "replicaDivisionPreference: Aggregated".to_string()
        } else {
            "replicaDivisionPreference: Weighted, weightPreference: {dynamicWeight: AvailableReplicas}"
                .to_string()
        };
        let policy = if *preempts {
            ", preemptionPolicy: PreemptLowerPriority"
        } else {
            ""
        };
        docs.push(format!(
            "---\napiVersion: work.karmada.io/v1alpha2\nkind: ResourceBinding\nmetadata: \
             {{name: b{i}, namespace: default, creationTimestamp: \"2026-01-01T00:00:{:02}Z\"}}\n\
             spec:\n  resource: {{apiVersion: apps/v1, kind: Deployment, name: b{i}}}\n  \
             replicas: {replicas}\n  replicaRequirements: {{resourceRequest: {{cpu: \"{cpu}\"}}}}\n  \
             schedulePriority: {{priority: {priority}{policy}}}\n{clusters}  placement:\n    \
             replicaScheduling: {{replicaSchedulingType: Divided, {division}}}\n",
            i % 60
        ));
    }
    if reverse {
        docs.reverse();
    }
    out += &docs.concat();
    (out, cpu_of)
}

static SERIAL: AtomicUsize = AtomicUsize::new(0);

fn run(text: &str) -> lockstep_federation::Decisions {
    let path: PathBuf = std::env::temp_dir().join(format!(
        "lockstep-federation-{}-{}.yaml",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, text).expect("write the input");
    let loaded = load(&[Source::Path(path.clone())]);
    let _ = std::fs::remove_file(&path);
    let loaded = loaded.expect("a valid federation");
    schedule(
        &loaded.federation,
        &Options {
            preemption: true,
            ..Options::default()
        },
    )
    .expect("scheduling succeeds")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn federate_invariants(spec in spec()) {
        let (text, cpu_of) = yaml(&spec, false);
        let d = run(&text);

        // Exactly one outcome per binding.
        let mut seen = BTreeMap::new();
        for b in d.placements.iter().map(|p| &p.binding)
            .chain(d.unschedulable.iter().map(|u| &u.binding))
            .chain(d.unchanged.iter().map(|u| &u.binding))
        {
            *seen.entry(b.clone()).or_insert(0) += 1;
        }
        prop_assert_eq!(seen.len(), spec.bindings.len());
        prop_assert!(seen.values().all(|n| *n == 1), "{:?}", seen);

        // No cluster over its CPUs.
        let mut used = vec![0i64; spec.clusters.len()];
        for p in d.placements.iter().chain(&d.unchanged) {
            for c in &p.clusters {
                let i: usize = c.name[1..].parse().unwrap();
                used[i] += c.replicas * cpu_of[&p.binding];
            }
        }
        for (i, u) in used.iter().enumerate() {
            prop_assert!(*u <= spec.clusters[i], "c{} holds {} of {} CPUs\n{}", i, u, spec.clusters[i], text);
        }

        // Victims are of lower priority, and every preemptor was placed.
        let priority = |key: &str| -> i64 {
            let i: usize = key.trim_start_matches("default/b").parse().unwrap();
            spec.bindings[i].0
        };
        for p in &d.preemptions {
            prop_assert!(priority(&p.binding) < priority(&p.preemptor));
            prop_assert!(d.placements.iter().any(|x| x.binding == p.preemptor),
                "{} evicted for {}, which was not placed", p.binding, p.preemptor);
            let i: usize = p.preemptor.trim_start_matches("default/b").parse().unwrap();
            prop_assert!(spec.bindings[i].1, "{} preempted without PreemptLowerPriority", p.preemptor);
        }

        // Deterministic, and independent of input order.
        prop_assert_eq!(&run(&text), &d);
        let (reversed, _) = yaml(&spec, true);
        prop_assert_eq!(&run(&reversed), &d);
    }
}

/// The random federations above do exercise preemption (so its invariants are not vacuous).
#[test]
fn random_federations_include_preemptions() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut preemptions = 0;
    for _ in 0..100 {
        let spec = spec().new_tree(&mut runner).expect("a value").current();
        preemptions += run(&yaml(&spec, false).0).preemptions.len();
    }
    assert!(preemptions > 0, "no preemption in 100 random federations");
}

/// Preemption across clusters: one cluster of `capacity` CPUs per entry of `priorities`, each
/// full with one binding of `capacity` 1-CPU replicas at that priority (below 10), and a
/// preemptor of priority 10 needing `need` 1-CPU replicas, more than one cluster holds,
/// Aggregated.
fn across_input(capacity: i64, priorities: &[i64], need: i64) -> String {
    let mut text = String::new();
    for (c, priority) in priorities.iter().enumerate() {
        text += &cluster(c, capacity);
        text += &format!(
            "---\napiVersion: work.karmada.io/v1alpha2\nkind: ResourceBinding\nmetadata: \
             {{name: low{c}, namespace: default, creationTimestamp: \"2026-01-01T00:00:00Z\"}}\n\
             spec:\n  resource: {{apiVersion: apps/v1, kind: Deployment, name: low{c}}}\n  \
             replicas: {capacity}\n  replicaRequirements: {{resourceRequest: {{cpu: \"1\"}}}}\n  \
             schedulePriority: {{priority: {priority}}}\n  clusters: [{{name: c{c}, replicas: {capacity}}}]\n  \
             placement:\n    clusterAffinity: {{clusterNames: [c{c}]}}\n    replicaScheduling: \
             {{replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}}\n"
        );
    }
    text += &format!(
        "---\napiVersion: work.karmada.io/v1alpha2\nkind: ResourceBinding\nmetadata: \
         {{name: big, namespace: default, creationTimestamp: \"2026-01-02T00:00:00Z\"}}\n\
         spec:\n  resource: {{apiVersion: apps/v1, kind: Deployment, name: big}}\n  \
         replicas: {need}\n  replicaRequirements: {{resourceRequest: {{cpu: \"1\"}}}}\n  \
         schedulePriority: {{priority: 10, preemptionPolicy: PreemptLowerPriority}}\n  \
         placement:\n    replicaScheduling: {{replicaSchedulingType: Divided, \
         replicaDivisionPreference: Aggregated}}\n"
    );
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// When no single cluster can make room, victims are taken across clusters, on as few as
    /// the preemptor needs here (all clusters alike), and the least important go: no victim
    /// is more important than a binding left in place.
    #[test]
    fn preemption_across_clusters_takes_as_few_and_as_unimportant_as_needed(
        (capacity, priorities, need) in (2usize..6, 2i64..8).prop_flat_map(|(n, cap)| (
            Just(cap),
            prop::collection::vec(0i64..10, n),
            cap + 1..=cap * n as i64,
        ))
    ) {
        let d = run(&across_input(capacity, &priorities, need));
        let placed = d.placements.iter().find(|p| p.binding == "default/big");
        prop_assert!(placed.is_some(), "big was not placed: {:?}", d);
        let placed_sum: i64 = placed.unwrap().clusters.iter().map(|c| c.replicas).sum();
        prop_assert_eq!(placed_sum, need);
        let wanted = (need + capacity - 1) / capacity;
        prop_assert_eq!(d.preemptions.len() as i64, wanted, "{:?}", d.preemptions);
        let index = |key: &str| -> usize { key.trim_start_matches("default/low").parse().unwrap() };
        let victims: Vec<usize> = d.preemptions.iter().map(|p| index(&p.binding)).collect();
        for v in &victims {
            prop_assert_eq!(&d.preemptions.iter().find(|p| index(&p.binding) == *v).unwrap().cluster,
                &format!("c{v}"));
            for (c, p) in priorities.iter().enumerate() {
                if !victims.contains(&c) {
                    prop_assert!(priorities[*v] <= *p,
                        "low{} (priority {}) evicted while low{} (priority {}) stays",
                        v, priorities[*v], c, p);
                }
            }
        }
    }
}
