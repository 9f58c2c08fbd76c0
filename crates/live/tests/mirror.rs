//! The state `lockstep run` keeps, changed object by object from the watch caches of a real
//! kube-apiserver (testenv/), equals the state built from scratch from the same caches, and
//! decides the same — without being rebuilt for pod, node, claim, budget or PodGroup changes.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lockstep_engine::{Options, Scheduler};
use lockstep_live::cache::Caches;
use lockstep_live::cycle::Assumed;
use lockstep_live::mirror::Mirror;

/// A mirror and the scheduler it keeps.
struct Kept {
    mirror: Mirror,
    scheduler: Option<Scheduler>,
}

impl Kept {
    fn new() -> Kept {
        Kept {
            mirror: Mirror::new(options()),
            scheduler: None,
        }
    }

    fn sync(&mut self, caches: &Caches) -> lockstep_live::mirror::Synced {
        self.mirror
            .sync(&mut self.scheduler, caches, &Assumed::default())
            .unwrap()
    }

    fn scheduler(&mut self) -> &mut Scheduler {
        self.scheduler.as_mut().expect("synced")
    }
}
use lockstep_testenv::objects::{create_all, parse_documents};
use lockstep_testenv::{ControlPlane, Options as PlaneOptions};
use serde_json::{Value, json};

fn options() -> Options {
    Options {
        scheduler_names: vec!["lockstep".into()],
        ..Options::default()
    }
}

async fn create(client: &Client, objects: &str) {
    let objects = parse_documents(objects).unwrap();
    create_all(client, &objects)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

fn node(name: &str, zone: &str, cpu: u32) -> String {
    format!(
        "---\napiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: \
         {{kubernetes.io/hostname: {name}, zone: {zone}}}}}\nstatus: {{allocatable: \
         {{cpu: \"{cpu}\", memory: 16Gi, pods: \"110\"}}}}\n"
    )
}

fn pod(name: &str, cpu: &str, node: Option<&str>, extra: &str) -> String {
    let node = node
        .map(|n| format!("  nodeName: {n}\n"))
        .unwrap_or_default();
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, labels: \
         {{app: {name}}}}}\nspec:\n  schedulerName: lockstep\n{node}{extra}  containers:\n  - \
         {{name: c, image: i, resources: {{requests: {{cpu: \"{cpu}\", memory: 1Gi}}}}}}\n"
    )
}

/// The pending pods' bindings (pod, node) when every pending pod is offered.
fn decide(mirror: &mut Kept) -> Vec<(String, String)> {
    let scheduler = mirror.scheduler();
    let state = scheduler.state();
    let pending: Vec<_> = state
        .pod_ids()
        .filter(|&p| state.node_of(p).is_none() && state.pod(p).is_pending())
        .collect();
    let d = scheduler.schedule(&pending);
    let state = scheduler.state();
    let mut out: Vec<(String, String)> = d
        .bindings
        .iter()
        .map(|(p, n)| (state.pod(*p).key(), state.node(*n).name.clone()))
        .collect();
    out.sort();
    out
}

/// Both states decide the same for every pending pod; then the decided pods, assumed in
/// `mirror`'s state only, are read again from the caches (as `lockstep run` does for
/// decisions it does not carry out).
async fn decide_alike(mirror: &mut Kept, caches: &Caches) {
    let ours = decide(mirror);
    let mut fresh = from_scratch(caches).0;
    assert_eq!(ours, decide(&mut fresh));
    assert!(!ours.is_empty(), "the scenario places pods");
    mirror.mirror.resync(ours.into_iter().map(|(pod, _)| pod));
    agrees(mirror, caches).await;
}

/// A scheduler built from every cached object (not through a mirror: a mirror takes the
/// caches' notes of what changed), and the objects left out.
fn from_scratch(caches: &Caches) -> (Kept, BTreeMap<String, String>) {
    let (scheduler, excluded) = lockstep_live::cycle::build(caches.values(), &options()).unwrap();
    let kept = Kept {
        mirror: Mirror::new(options()),
        scheduler: Some(scheduler),
    };
    (kept, excluded.into_iter().collect())
}

/// Syncs `mirror` and compares it with a state built from scratch from the same caches,
/// until they agree (the caches may be mid-update) or 20 s pass. Returns how many objects
/// the last sync applied one by one.
async fn agrees(mirror: &mut Kept, caches: &Caches) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut applied = 0;
    loop {
        let synced = mirror.sync(caches);
        assert!(
            !synced.rebuilt,
            "pod, node, claim, budget and PodGroup changes are applied in place"
        );
        applied += synced.applied;
        let (mut fresh, excluded) = from_scratch(caches);
        let ours = mirror.scheduler().state().describe();
        let theirs = fresh.scheduler().state().describe();
        if ours == theirs && mirror.mirror.excluded == excluded {
            return applied;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the state kept in place differs from the state built from scratch:\n\
             in place:\n{ours}\nfrom scratch:\n{theirs}\nleft out: {:?} vs {:?}",
            mirror.mirror.excluded,
            excluded
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_changed_in_place_equals_the_state_built_from_scratch() {
    let plane = ControlPlane::start(PlaneOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let client = plane.client().await.unwrap_or_else(|e| panic!("{e}"));
    create(
        &client,
        &format!(
            "{}{}{}",
            node("n1", "a", 4),
            node("n2", "a", 4),
            pod("running", "1", Some("n1"), "")
        ),
    )
    .await;
    let caches = Caches::start(&client).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), caches.ready())
        .await
        .expect("the caches sync")
        .unwrap();
    let mut mirror = Kept::new();
    assert!(mirror.sync(&caches).rebuilt);

    // Nodes and pods arrive, pending and bound.
    let spread = "  topologySpreadConstraints:\n  - {maxSkew: 1, topologyKey: zone, \
                  whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}\n";
    create(
        &client,
        &format!(
            "{}{}{}{}{}",
            node("n3", "b", 8),
            pod("web", "1", None, spread),
            pod("bound", "2", Some("n3"), ""),
            pod("big", "6", None, ""),
            pod("on-missing-node", "1", Some("n9"), ""),
        ),
    )
    .await;
    assert!(agrees(&mut mirror, &caches).await > 0);
    decide_alike(&mut mirror, &caches).await;

    // A node's labels and allocatable change; a pod is bound; another is deleted; the node
    // a bound pod names arrives; a budget and a PodGroup appear.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            "n2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"zone": "b"}}})),
        )
        .await
        .unwrap();
    nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocatable": {"cpu": "2"}}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "web", "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n2"}});
    let _: Value = pods
        .create_subresource("binding", "web", &PostParams::default(), &binding)
        .await
        .unwrap();
    pods.delete("running", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    create(
        &client,
        &format!(
            "{}---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: web, \
             namespace: default}}\nspec: {{minAvailable: 1, selector: {{matchLabels: {{app: \
             web}}}}}}\n---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: \
             {{name: team, namespace: default}}\nspec:\n  schedulingPolicy: {{gang: {{minCount: \
             2}}}}\n{}{}",
            node("n9", "b", 2),
            pod(
                "member-0",
                "1",
                None,
                "  schedulingGroup: {podGroupName: team}\n"
            ),
            pod(
                "member-1",
                "1",
                None,
                "  schedulingGroup: {podGroupName: team}\n"
            ),
        ),
    )
    .await;
    assert!(agrees(&mut mirror, &caches).await > 0);

    // Deletes: a node with a pod on it, a pending pod, the budget.
    nodes.delete("n3", &DeleteParams::default()).await.unwrap();
    pods.delete("big", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), "default");
    budgets
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    agrees(&mut mirror, &caches).await;
    decide_alike(&mut mirror, &caches).await;

    // A bad object is left out with its previous version removed, and taken back once
    // it is fixed.
    nodes
        .patch_status(
            "n2",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocatable": null}})),
        )
        .await
        .unwrap();
    let why = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            mirror.sync(&caches);
            if let Some(why) = mirror.mirror.excluded.get("Node n2") {
                return why.clone();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the node without allocatable resources is left out");
    assert!(why.contains("allocatable"), "{why}");
    assert!(mirror.scheduler().state().node_id("n2").is_none());
    agrees(&mut mirror, &caches).await;
    nodes
        .patch_status(
            "n2",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"allocatable": {"cpu": "4", "memory": "16Gi",
                "pods": "110"}}}),
            ),
        )
        .await
        .unwrap();
    // The watch delivers the fix in its own time: until it does, the mirror and the caches
    // agree on the node still being left out.
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            mirror.sync(&caches);
            if mirror.mirror.excluded.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the fixed node is taken back");
    assert!(mirror.scheduler().state().node_id("n2").is_some());
    agrees(&mut mirror, &caches).await;
    drop(caches);
    let mut plane = plane;
    plane.stop();
}
