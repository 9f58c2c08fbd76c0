//! Decisions do not depend on the order of the input: the same objects in any order of
//! documents, and split across files given in any order, give byte-identical
//! `lockstep schedule -o json` output. Every tie (nodes, domains, victims, queue, devices)
//! is broken by names.
//!
//! The clusters come from `support/random_cluster.rs`: priorities and preemption, gangs with
//! rack and zone topology constraints, PodDisruptionBudgets, and DRA devices and claims.
//! Cases that once showed an order dependence are kept below as fixed regression tests.

#[path = "support/random_cluster.rs"]
mod random_cluster;

use std::path::Path;
use std::process::Command;

use proptest::prelude::*;

/// Runs `lockstep schedule -o json` on `files` (each a list of documents), written under
/// `dir` and given in order; returns stdout, failing on any error.
fn schedule(dir: &Path, files: &[Vec<&str>], gang_preemption: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockstep"));
    cmd.args([
        "schedule",
        "--strict",
        "-o",
        "json",
        "--gang-preemption",
        gang_preemption,
    ]);
    for (i, docs) in files.iter().enumerate() {
        let path = dir.join(format!("part-{i}.yaml"));
        std::fs::write(&path, docs.join("---\n")).unwrap();
        cmd.arg("-f").arg(&path);
    }
    let out = cmd.output().expect("run lockstep");
    assert!(
        out.status.success(),
        "lockstep failed on a generated cluster: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        files
            .iter()
            .flatten()
            .copied()
            .collect::<Vec<_>>()
            .join("---\n")
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// A permutation of `0..n` from sort keys (a missing key is 0; equal keys keep their
/// order), so that shrinking the keys towards 0 shrinks towards the identity.
fn permutation(n: usize, keys: &[u8]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| keys.get(i).copied().unwrap_or(0));
    order
}

/// The documents in `order`, cut into `files` contiguous parts, the parts listed last first.
fn split<'a>(docs: &[&'a str], order: &[usize], files: usize) -> Vec<Vec<&'a str>> {
    let per = order.len().div_ceil(files.max(1)).max(1);
    let mut parts: Vec<Vec<&str>> = order
        .chunks(per)
        .map(|c| c.iter().map(|&i| docs[i]).collect())
        .collect();
    parts.reverse();
    parts
}

/// The check itself: natural order in one file, the reverse order, and a permutation split
/// across files all give the same output.
fn check_order_independent(docs: &[String], keys: &[u8], files: usize, gang_preemption: &str) {
    let dir = tempdir();
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let natural = schedule(
        &dir.join("natural"),
        std::slice::from_ref(&docs),
        gang_preemption,
    );
    let mut reversed = docs.clone();
    reversed.reverse();
    let backwards = schedule(
        &dir.join("reversed"),
        std::slice::from_ref(&reversed),
        gang_preemption,
    );
    let order = permutation(docs.len(), keys);
    let parts = split(&docs, &order, files);
    let shuffled = schedule(&dir.join("shuffled"), &parts, gang_preemption);
    let _ = std::fs::remove_dir_all(&dir);
    let show = |d: &[&str]| d.join("---\n");
    assert_eq!(
        natural,
        backwards,
        "reversing the documents changed the decisions; input:\n{}",
        show(&docs)
    );
    assert_eq!(
        natural,
        shuffled,
        "reordering the documents changed the decisions; input in the changed order:\n{}",
        parts
            .iter()
            .map(|p| show(p))
            .collect::<Vec<_>>()
            .join("\n--- (next file)\n")
    );
}

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "lockstep-determinism-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES=N for a longer search.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(160),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_document_order_gives_the_same_decisions(
        choices in proptest::collection::vec(any::<u8>(), 0..200),
        keys in proptest::collection::vec(any::<u8>(), 0..64),
        files in 1usize..4,
    ) {
        let (docs, facts) = random_cluster::cluster(&mut random_cluster::Choices::new(&choices));
        check_order_independent(&docs, &keys, files, facts.gang_preemption);
    }
}

/// Runs the check on fixed documents, in every rotation as well as reversed.
fn check_fixed(docs: &[&str]) {
    let docs: Vec<String> = docs.iter().map(|d| d.to_string()).collect();
    for shift in 0..docs.len() {
        let keys: Vec<u8> = (0..docs.len())
            .map(|i| ((i + docs.len() - shift) % docs.len()) as u8)
            .collect();
        check_order_independent(&docs, &keys, 1 + shift % 3, "minimal");
    }
}

const GPU_CLASS: &str = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec:\n  selectors:\n  - cel:\n      expression: 'device.driver == \"gpu.example.com\"'\n";

fn gpu_node(name: &str, devices: &str) -> [String; 2] {
    [
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}\nstatus: {{allocatable: {{cpu: \"4\", memory: 32Gi, pods: \"110\"}}}}\n"
        ),
        format!(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {name}}}\nspec:\n  driver: gpu.example.com\n  nodeName: {name}\n  pool: {{name: {name}, generation: 1, resourceSliceCount: 1}}\n  devices:\n{devices}"
        ),
    ]
}

/// Two running pods share a ResourceClaim without an allocation in its status, on different
/// nodes. The claim can hold devices on one node only: the running pod placed first gets
/// them. Running pods are placed in name order (ml/a first, on node-a), so the claim holds
/// node-a's first GPU whatever the input order, and the pending pod's device follows from
/// that. (Placed in input order, the pending pod got node-a's gpu-0 or its shared-0.)
#[test]
fn a_contested_claim_of_running_pods_goes_by_pod_name() {
    let [na, sa] = gpu_node(
        "node-a",
        "  - name: gpu-0\n  - name: shared-0\n    allowMultipleAllocations: true\n    capacity: {memory: {value: 40Gi}}\n",
    );
    let [nb, sb] = gpu_node("node-b", "  - name: gpu-0\n");
    let claim = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: common, namespace: ml}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: gpu}\n";
    let template = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: one, namespace: ml}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: {deviceClassName: gpu}\n";
    let running = |name: &str, node: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  nodeName: {node}\n  resourceClaims:\n  - {{name: gpu, resourceClaimName: common}}\n  containers:\n  - {{name: w, image: w, resources: {{requests: {{cpu: \"1\"}}, claims: [{{name: gpu}}]}}}}\nstatus: {{phase: Running}}\n"
        )
    };
    let (a, b) = (running("a", "node-a"), running("b", "node-b"));
    let pending = "apiVersion: v1\nkind: Pod\nmetadata: {name: c, namespace: ml}\nspec:\n  resourceClaims:\n  - {name: gpu, resourceClaimTemplateName: one}\n  containers:\n  - {name: w, image: w, resources: {requests: {cpu: \"1\"}, claims: [{name: gpu}]}}\n";
    check_fixed(&[
        GPU_CLASS, &na, &sa, &nb, &sb, claim, template, &a, &b, pending,
    ]);
}

fn node(name: &str, rack: &str, cpu: u32, memory: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/rack: {rack}}}}}\nstatus: {{allocatable: {{cpu: \"{cpu}\", memory: {memory}, pods: \"110\"}}}}\n"
    )
}

fn pod(name: &str, extra: &str, cpu: u32, memory: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n{extra}  containers:\n  - {{name: w, image: w, resources: {{requests: {{cpu: \"{cpu}\", memory: {memory}}}}}}}\n"
    )
}

const GANG_OF_TWO: &str = "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec:\n  priority: 1000\n  schedulingPolicy:\n    gang: {minCount: 2}\n";

/// A gang of two whole-node pods needs two of three equivalent running pods evicted: no
/// single victim is enough, and the three pairs tie on every part of the objective. The
/// pair goes by the victims' names (ml/a and ml/b), not by their input positions.
#[test]
fn equivalent_victim_pairs_go_by_name() {
    let nodes: Vec<String> = ["n0", "n1", "n2"]
        .iter()
        .map(|n| node(n, "r", 4, "16Gi"))
        .collect();
    let running: Vec<String> = [("a", "n0"), ("b", "n1"), ("c", "n2")]
        .iter()
        .map(|(p, n)| {
            pod(p, &format!("  nodeName: {n}\n  priority: 10\n"), 4, "1Gi")
                + "status: {phase: Running}\n"
        })
        .collect();
    let member = |name: &str| {
        pod(
            name,
            "  priority: 1000\n  schedulingGroup: {podGroupName: g}\n",
            4,
            "1Gi",
        )
    };
    let (g0, g1) = (member("g-0"), member("g-1"));
    let mut docs: Vec<&str> = nodes.iter().map(String::as_str).collect();
    docs.extend(running.iter().map(String::as_str));
    docs.extend([GANG_OF_TWO, &g0, &g1]);
    check_fixed(&docs);
}

/// A gang with minCount 1 of two pods with the same dominant share (2 of 12 cpu) but
/// different memory (8Gi and 1Gi of 64Gi): the demand a rack must hold is the pod that
/// comes first among equal shares. g-big first: rack-a (3Gi) cannot hold it, the gang goes
/// to rack-b; g-small first: rack-a is the tightest rack and g-small is bound there. Members
/// are in name order (g-big), whatever their input order.
#[test]
fn a_gang_domain_does_not_depend_on_member_order() {
    let docs = [
        node("a-0", "rack-a", 4, "3Gi"),
        node("b-0", "rack-b", 8, "61Gi"),
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec:\n  schedulingPolicy:\n    gang: {minCount: 1}\n  schedulingConstraints:\n    topology:\n    - key: topology.kubernetes.io/rack\n".to_string(),
        pod("g-big", "  schedulingGroup: {podGroupName: g}\n", 2, "8Gi"),
        pod("g-small", "  schedulingGroup: {podGroupName: g}\n", 2, "1Gi"),
    ];
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    check_fixed(&docs);
}
