//! `lockstep federate` at scale: 1000 clusters and 10,000 bindings of mixed strategies
//! (Duplicated over a few clusters, StaticWeight, Aggregated, DynamicWeight; half held to one
//! region of 100 clusters), one preemption decision over 100 clusters full of 1000
//! running bindings, and the same decision with three of the clusters given as `--member`
//! clusters of 1000 nodes each (exact estimates with the engine). BENCHMARKS.md has the
//! numbers.

use std::path::PathBuf;

/// The allocator of the `lockstep` binary (`crates/cli/src/main.rs`), so that the numbers are
/// close to those of `lockstep federate` (the binary also returns freed memory at once,
/// which changes its peak memory more than its time).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use lockstep_federation::model::Federation;
use lockstep_federation::{Options, load, load_members, schedule, schedule_with};
use lockstep_manifests::Source;

fn cluster(i: usize, cpu: i64) -> String {
    format!(
        "---\napiVersion: cluster.karmada.io/v1alpha1\nkind: Cluster\nmetadata: {{name: c{i:04}, \
         labels: {{region: r{}}}}}\nspec: {{syncMode: Push, region: r{}}}\nstatus:\n  conditions: \
         [{{type: Ready, status: \"True\", reason: r, message: m, lastTransitionTime: \
         \"2026-01-01T00:00:00Z\"}}]\n  apiEnablements: [{{groupVersion: apps/v1, resources: \
         [{{name: deployments, kind: Deployment}}]}}]\n  resourceSummary: {{allocatable: {{cpu: \
         \"{cpu}\", memory: 1Ti, pods: \"5000\"}}}}\n",
        i % 10,
        i % 10
    )
}

fn binding(i: usize, placement: &str, replicas: i64, extra: &str) -> String {
    format!(
        "---\napiVersion: work.karmada.io/v1alpha2\nkind: ResourceBinding\nmetadata: {{name: \
         b{i:05}, namespace: default, creationTimestamp: \"2026-01-01T00:00:00Z\"}}\nspec:\n  \
         resource: {{apiVersion: apps/v1, kind: Deployment, name: b{i}, uid: u{i}}}\n  replicas: \
         {replicas}\n  replicaRequirements: {{resourceRequest: {{cpu: 500m, memory: 1Gi}}}}\n{extra}  \
         placement:\n{placement}"
    )
}

fn write(name: &str, text: &str) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("lockstep-bench-{}-{name}.yaml", std::process::id()));
    std::fs::write(&path, text).expect("write the bench input");
    path
}

fn large() -> String {
    let mut text = String::new();
    for i in 0..1000 {
        text += &cluster(i, 2000);
    }
    for i in 0..10_000 {
        let region = if i % 2 == 0 {
            format!(
                "    clusterAffinity: {{labelSelector: {{matchLabels: {{region: r{}}}}}}}\n",
                i % 10
            )
        } else {
            String::new()
        };
        let placement = match i % 4 {
            0 => format!(
                "    clusterAffinity: {{clusterNames: [c{:04}, c{:04}, c{:04}]}}\n",
                i % 1000,
                (i + 1) % 1000,
                (i + 2) % 1000
            ),
            1 => format!(
                "{region}    replicaScheduling: {{replicaSchedulingType: Divided, \
                 replicaDivisionPreference: Weighted, weightPreference: {{staticWeightList: \
                 [{{targetCluster: {{clusterNames: [c{:04}]}}, weight: 2}}, {{targetCluster: \
                 {{clusterNames: [c{:04}]}}, weight: 1}}]}}}}\n",
                i % 1000,
                (i + 7) % 1000
            ),
            2 => format!(
                "{region}    replicaScheduling: {{replicaSchedulingType: Divided, \
                 replicaDivisionPreference: Aggregated}}\n"
            ),
            _ => format!(
                "{region}    replicaScheduling: {{replicaSchedulingType: Divided, \
                 replicaDivisionPreference: Weighted, weightPreference: {{dynamicWeight: \
                 AvailableReplicas}}}}\n"
            ),
        };
        text += &binding(i, &placement, 1 + (i % 8) as i64, "");
    }
    text
}

/// 100 clusters of 100 CPUs, each full with 10 running bindings of 10 replicas × 1 CPU
/// (priority 0..9), and one preemptor of priority 100 needing 20 CPUs on one cluster.
fn preemption() -> String {
    let mut text = String::new();
    for i in 0..100 {
        text += &cluster(i, 100);
    }
    let agg = "    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}\n";
    for i in 0..1000 {
        let extra = format!(
            "  schedulePriority: {{priority: {}}}\n  clusters: [{{name: c{:04}, replicas: 20}}]\n",
            i % 10,
            i / 10
        );
        text += &binding(i, agg, 20, &extra);
    }
    text += &binding(
        1000,
        "    spreadConstraints: [{spreadByField: cluster, maxGroups: 1, minGroups: 1}]\n    replicaScheduling: {replicaSchedulingType: Divided, replicaDivisionPreference: Aggregated}\n",
        40,
        "  schedulePriority: {priority: 100, preemptionPolicy: PreemptLowerPriority}\n",
    );
    text
}

/// Member cluster `c` of the preemption input: 1000 nodes of 1 CPU; the 200 replicas of its
/// 10 bindings (500m each) two to a node on the first 100 nodes, and pods of the member's own
/// taking the other nodes whole, so the member is as full as its summary says.
fn member(c: usize) -> String {
    let mut text = String::new();
    for n in 0..1000 {
        text += &format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{n:04}}}\nstatus: {{allocatable: \
             {{cpu: \"1\", memory: 64Gi, pods: \"110\"}}}}\n"
        );
    }
    for b in c * 10..c * 10 + 10 {
        for r in 0..20 {
            let node = (b - c * 10) * 10 + r / 2;
            text += &format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: b{b:05}-{r}, namespace: default, \
                 labels: {{resourcebinding.karmada.io/namespace: default, \
                 resourcebinding.karmada.io/name: b{b:05}}}}}\nspec: {{nodeName: n{node:04}, \
                 containers: [{{name: c, image: app, resources: {{requests: {{cpu: 500m, memory: \
                 1Gi}}}}}}]}}\nstatus: {{phase: Running}}\n"
            );
        }
    }
    for n in 100..1000 {
        text += &format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: filler-{n}, namespace: \
             kube-system}}\nspec: {{nodeName: n{n:04}, containers: [{{name: c, image: f, \
             resources: {{requests: {{cpu: \"1\"}}}}}}]}}\nstatus: {{phase: Running}}\n"
        );
    }
    text
}

fn options() -> Options {
    Options {
        preemption: true,
        ..Options::default()
    }
}

fn federation(name: &str, text: &str) -> Federation {
    let path = write(name, text);
    let fed = load(&[Source::Path(path.clone())])
        .expect("valid")
        .federation;
    let _ = std::fs::remove_file(path);
    fed
}

/// The run as `lockstep federate` makes it on its input once read: the federation handed
/// over and the members loaded (both untimed; the run changes them, so each iteration gets
/// its own).
fn run_owned(b: &mut criterion::Bencher, fed: &Federation, options: &Options) {
    b.iter_batched(
        || (fed.clone(), load_members(fed, options).expect("loads")),
        |(fed, members)| schedule_with(fed, options, members).expect("schedules"),
        BatchSize::PerIteration,
    )
}

fn large_run(c: &mut Criterion) {
    let fed = federation("large", &large());
    let mut group = c.benchmark_group("federate");
    group.sample_size(10);
    group.bench_function("1000 clusters x 10000 bindings", |b| {
        run_owned(b, &fed, &options())
    });
    group.finish();
}

fn preemption_run(c: &mut Criterion) {
    let fed = federation("preemption", &preemption());
    // The two lowest-priority bindings of the first cluster make the 20 CPUs.
    let d = schedule(&fed, &options()).expect("schedules");
    let victims: Vec<&str> = d.preemptions.iter().map(|p| p.binding.as_str()).collect();
    assert_eq!(victims, ["default/b00000", "default/b00001"]);
    let mut group = c.benchmark_group("federate");
    group.sample_size(10);
    group.bench_function("one preemption over 100 clusters x 1000 bindings", |b| {
        run_owned(b, &fed, &options())
    });
    group.finish();
}

fn members_run(c: &mut Criterion) {
    let fed = federation("members", &preemption());
    let paths: Vec<PathBuf> = (0..3)
        .map(|i| write(&format!("member{i}"), &member(i)))
        .collect();
    let options = Options {
        members: paths
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("c{i:04}"), vec![Source::Path(p.clone())]))
            .collect(),
        ..options()
    };
    // The members agree with their summaries: the same two victims on the first cluster.
    let d = schedule(&fed, &options).expect("schedules");
    let victims: Vec<&str> = d.preemptions.iter().map(|p| p.binding.as_str()).collect();
    assert_eq!(victims, ["default/b00000", "default/b00001"]);
    assert!(d.estimates.iter().any(|e| e.source == "member"));
    let mut group = c.benchmark_group("federate");
    group.sample_size(10);
    group.bench_function(
        "one preemption over 100 clusters x 1000 bindings, 3 members of 1000 nodes",
        |b| b.iter(|| schedule(&fed, &options).expect("schedules")),
    );
    // The same decision on members loaded beforehand (a run changes its members, so each
    // iteration gets a fresh load, untimed), as the 100-cluster run above has its Karmada
    // input parsed beforehand.
    group.bench_function(
        "one preemption over 100 clusters x 1000 bindings, 3 members of 1000 nodes already loaded",
        |b| run_owned(b, &fed, &options),
    );
    // What the first of these runs spends reading the members' manifests (and the bindings'
    // shapes).
    group.bench_function("3 members of 1000 nodes loaded", |b| {
        b.iter(|| load_members(&fed, &options).expect("loads"))
    });
    group.finish();
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
}

criterion_group!(benches, preemption_run, members_run, large_run);
criterion_main!(benches);
