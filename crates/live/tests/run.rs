//! `lockstep run` against a real kube-apiserver v1.37 (testenv/, built from Go modules; no
//! kube-scheduler runs there, so every binding comes from lockstep).

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1beta1::PodGroup;
use kube::Client;
use kube::api::{Api, DeleteParams};
use lockstep_engine::Options;
use lockstep_live::{Config, Error};
use lockstep_testenv::objects::{create_all, parse_documents};
use lockstep_testenv::{ControlPlane, Options as PlaneOptions};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Waits (at most 30 s) for `check` to give a value.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn config(plane: &ControlPlane) -> Config {
    Config {
        kubeconfig: Some(plane.kubeconfig().to_path_buf()),
        options: Options {
            scheduler_names: vec!["lockstep".into()],
            ..Options::default()
        },
        metrics_address: Some("127.0.0.1:0".parse().unwrap()),
        bind_concurrency: 8,
        initial_backoff: Duration::from_millis(200),
        max_backoff: Duration::from_secs(1),
        leader_election: None,
    }
}

/// A running `lockstep run`; stopped (and its result checked) by `stop`.
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), Error>>,
}

impl Running {
    fn start(config: Config) -> Running {
        // The scheduler's log goes to the test's output (shown when a test fails).
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
            )
            .with_test_writer()
            .try_init();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(lockstep_live::run(config, async {
            let _ = stopped.await;
        }));
        Running { stop, task }
    }

    /// Ends it at once, as a kill would: nothing in flight finishes.
    async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let r = tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("lockstep run stops within 20 s")
            .expect("the task did not panic");
        r.expect("lockstep run ended without error");
    }
}

async fn setup(objects: &str) -> (ControlPlane, Client) {
    let plane = ControlPlane::start(PlaneOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let client = plane.client().await.unwrap_or_else(|e| panic!("{e}"));
    create(&client, objects).await;
    (plane, client)
}

async fn create(client: &Client, objects: &str) {
    let objects = parse_documents(objects).unwrap();
    create_all(client, &objects)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

async fn node_of(client: &Client, ns: &str, name: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.get(name).await.ok()?.spec?.node_name
}

const NODES: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: node-b, labels: {kubernetes.io/hostname: node-b}}
status: {allocatable: {cpu: "2", memory: 16Gi, pods: "110"}}
"#;

/// The message of a pod's `PodScheduled=False` condition with reason `Unschedulable`.
async fn unschedulable(pods: &Api<Pod>, name: &str) -> Option<String> {
    let c = pods
        .get(name)
        .await
        .ok()?
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")?;
    (c.status == "False" && c.reason.as_deref() == Some("Unschedulable")).then_some(c.message?)
}

/// A node with `cpu` CPUs, 16Gi and 110 pods.
fn node(name: &str, cpu: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: \
         {{kubernetes.io/hostname: {name}}}}}\nstatus: {{allocatable: {{cpu: \"{cpu}\", \
         memory: 16Gi, pods: \"110\"}}}}\n"
    )
}

fn pod(name: &str, scheduler: &str, cpu: &str, extra: &str) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: {scheduler}
{extra}  containers:
  - {{name: app, image: app, resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}}}
"#
    )
}

/// A node of 10 CPU whose memory and pod count leave CPU the only limit.
fn big_node(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nstatus: {{allocatable: \
         {{cpu: \"10\", memory: 64Gi, pods: \"110\"}}}}\n"
    )
}

/// A gang PodGroup in namespace default.
fn pod_group(name: &str, min_count: u32) -> String {
    format!(
        "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: {name}, \
         namespace: default}}\nspec:\n  schedulingPolicy:\n    gang: {{minCount: {min_count}}}\n"
    )
}

/// A pod of `lockstep` in PodGroup `group`.
fn member(name: &str, group: &str, cpu: &str) -> String {
    pod(
        name,
        "lockstep",
        cpu,
        &format!("  schedulingGroup: {{podGroupName: {group}}}\n"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_its_own_pods_and_leaves_the_others_alone() {
    let (plane, client) = setup(NODES).await;
    let run = Running::start(config(&plane));
    create(
        &client,
        &(pod("mine", "lockstep", "3", "") + &pod("theirs", "default-scheduler", "1", "")),
    )
    .await;
    let node = eventually("pod mine to be bound", || {
        node_of(&client, "default", "mine")
    })
    .await;
    assert_eq!(node, "node-a", "the only node with 3 free cpu");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(node_of(&client, "default", "theirs").await, None);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_fits_nowhere_says_why_and_is_placed_when_a_node_joins() {
    let (plane, client) = setup(NODES).await;
    let run = Running::start(config(&plane));
    create(&client, &pod("big", "lockstep", "6", "")).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let message = eventually("PodScheduled=False", || unschedulable(&pods, "big")).await;
    assert!(
        message.starts_with("0/2 nodes are available: 2 Insufficient cpu."),
        "{message}"
    );
    create(&client, &node("node-c", "8")).await;
    let node = eventually("pod big to be bound on the new node", || {
        node_of(&client, "default", "big")
    })
    .await;
    assert_eq!(node, "node-c");
    run.stop().await;
}

/// Pods created many at a time while passes run are all bound: none is lost between the
/// watch events and the state kept in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_created_many_at_a_time_are_all_bound() {
    use futures::StreamExt;
    let nodes: String = (0..20)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i:02}}}\nstatus: \
                 {{allocatable: {{cpu: \"4\", memory: 32Gi, pods: \"110\"}}}}\n"
            )
        })
        .collect();
    let (plane, client) = setup(&nodes).await;
    let run = Running::start(config(&plane));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let made: Vec<Pod> = (0..400)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{i:03}"), "namespace": "default"},
                "spec": {"schedulerName": "lockstep", "containers": [{"name": "c",
                    "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}}))
            .unwrap()
        })
        .collect();
    futures::stream::iter(made)
        .map(|p| {
            let pods = pods.clone();
            async move {
                pods.create(&kube::api::PostParams::default(), &p)
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    eventually("every pod to be bound", || {
        let pods = pods.clone();
        async move {
            let list = pods
                .list_metadata(&kube::api::ListParams::default().fields("spec.nodeName="))
                .await
                .ok()?;
            list.items.is_empty().then_some(())
        }
    })
    .await;
    run.stop().await;
}

/// A free loopback port for the metrics of one test.
fn free_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// The value of a counter or gauge line of `lockstep run`'s `/metrics` (0 when absent).
async fn metric(address: std::net::SocketAddr, line_start: &str) -> f64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut text))
        .await
        .expect("metrics within 5 s")
        .unwrap();
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// A pod that did not fit is tried again only after a change that may help it: other
/// pods arriving and status writes do not retry it, a node where it fits does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unschedulable_pod_is_retried_only_by_a_change_that_may_help_it() {
    let (plane, client) = setup(NODES).await;
    let address = free_port();
    let run = Running::start(Config {
        metrics_address: Some(address),
        ..config(&plane)
    });
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    create(&client, &pod("wide", "lockstep", "5", "")).await;
    eventually("wide to be unschedulable", || unschedulable(&pods, "wide")).await;
    for name in ["tall-0", "tall-1", "tall-2"] {
        create(&client, &pod(name, "lockstep", "7", "")).await;
    }
    for name in ["tall-0", "tall-1", "tall-2"] {
        eventually("the tall pods to be unschedulable", || {
            unschedulable(&pods, name)
        })
        .await;
    }
    // Several backoff periods (200 ms doubling to 1 s) pass with watch events (the pods'
    // own status writes) but no change that could help any of them.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let attempts = metric(
        address,
        "lockstep_schedule_attempts_total{result=\"unschedulable\"}",
    )
    .await;
    assert_eq!(attempts, 4.0, "each pod tried once");
    let parked = metric(address, "lockstep_pending_pods{queue=\"unschedulable\"}").await;
    assert_eq!(parked, 4.0);
    create(&client, &node("node-c", "6")).await;
    let node = eventually("wide to be bound on the new node", || {
        node_of(&client, "default", "wide")
    })
    .await;
    assert_eq!(node, "node-c");
    let changes = metric(address, "lockstep_state_changes_total").await;
    assert!(changes > 0.0, "changes are applied in place");
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_bound_only_when_all_its_members_fit() {
    let (plane, client) = setup(NODES).await;
    create(&client, &pod_group("trio", 3)).await;
    let run = Running::start(config(&plane));
    let trio = |name: &str| member(name, "trio", "1");
    create(&client, &(trio("m-0") + &trio("m-1"))).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        node_of(&client, "default", "m-0").await,
        None,
        "2 of 3 members"
    );
    create(&client, &trio("m-2")).await;
    for m in ["m-0", "m-1", "m-2"] {
        eventually(&format!("{m} to be bound"), || {
            node_of(&client, "default", m)
        })
        .await;
    }
    let groups: Api<PodGroup> = Api::namespaced(client.clone(), "default");
    eventually("PodGroupInitiallyScheduled=True", || async {
        let g = groups.get("trio").await.ok()?;
        g.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodGroupInitiallyScheduled" && c.status == "True")
            .map(|_| ())
    })
    .await;
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_whose_devices_must_be_chosen_together_is_bound() {
    // node-b has one NVLink GPU and one without; a-any accepts either, b-nvlink only the
    // NVLink one. Pod by pod, a-any would take gpu-0 and strand b-nvlink.
    let (plane, client) = setup(
        &(NODES.to_string()
            + r#"
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-b-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-b
  pool: {name: node-b, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {nvlink: {bool: true}}
  - name: gpu-1
    attributes: {nvlink: {bool: false}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: any-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: nvlink-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          - cel: {expression: 'device.attributes["gpu.example.com"].nvlink == true'}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: pair, namespace: default}
spec:
  schedulingPolicy:
    gang: {minCount: 2}
"#),
    )
    .await;
    let run = Running::start(config(&plane));
    let member = |name: &str, template: &str| {
        format!(
            r#"---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: lockstep
  schedulingGroup: {{podGroupName: pair}}
  resourceClaims:
  - {{name: gpu, resourceClaimTemplateName: {template}}}
  containers:
  - name: app
    image: app
    resources:
      requests: {{cpu: "1", memory: 1Gi}}
      claims: [{{name: gpu}}]
"#
        )
    };
    create(
        &client,
        &(member("a-any", "any-gpu") + &member("b-nvlink", "nvlink-gpu")),
    )
    .await;
    for m in ["a-any", "b-nvlink"] {
        let node = eventually(&format!("{m} to be bound"), || {
            node_of(&client, "default", m)
        })
        .await;
        assert_eq!(node, "node-b");
    }
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    for (claim, device) in [("a-any-gpu", "gpu-1"), ("b-nvlink-gpu", "gpu-0")] {
        let c = claims.get(claim).await.expect("the claim was made");
        let results = c
            .status
            .and_then(|s| s.allocation)
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .expect("allocated");
        assert_eq!(results[0].device, device, "{claim}");
    }
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_from_a_template_is_made_allocated_and_reserved_before_binding() {
    let (plane, client) = setup(
        &(NODES.to_string()
            + r#"
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-b-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-b
  pool: {name: node-b, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
"#),
    )
    .await;
    let run = Running::start(config(&plane));
    create(
        &client,
        r#"
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  schedulerName: lockstep
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-gpu}
  containers:
  - name: app
    image: app
    resources:
      requests: {cpu: "1", memory: 1Gi}
      claims: [{name: gpu}]
"#,
    )
    .await;
    let node = eventually("trainer to be bound", || {
        node_of(&client, "default", "trainer")
    })
    .await;
    assert_eq!(node, "node-b", "the node with the GPU");
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "default");
    let claim = claims.get("trainer-gpu").await.expect("the claim was made");
    let status = claim.status.expect("allocated");
    let allocation = status.allocation.expect("allocated");
    let results = allocation.devices.unwrap().results.unwrap();
    assert_eq!(results[0].device, "gpu-0");
    assert_eq!(results[0].pool, "node-b");
    let reserved = status.reserved_for.expect("reserved");
    assert_eq!(reserved[0].name, "trainer");
    assert!(
        claim
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == "resource.kubernetes.io/delete-protection")
    );
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_marks_and_deletes_the_victim_then_binds_the_preemptor() {
    let (plane, client) = setup(
        &(NODES.to_string()
            + r#"
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: v1
kind: Pod
metadata: {name: low-a, namespace: default}
spec:
  nodeName: node-a
  containers:
  - {name: app, image: app, resources: {requests: {cpu: "3", memory: 1Gi}}}
status: {phase: Running, startTime: "2026-01-01T00:00:00Z"}
---
apiVersion: v1
kind: Pod
metadata: {name: low-b, namespace: default}
spec:
  nodeName: node-b
  containers:
  - {name: app, image: app, resources: {requests: {cpu: "1500m", memory: 1Gi}}}
status: {phase: Running, startTime: "2026-01-01T00:00:00Z"}
"#),
    )
    .await;
    let run = Running::start(config(&plane));
    create(
        &client,
        &pod("urgent", "lockstep", "2", "  priorityClassName: high\n"),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // One victim is enough: node-a frees 3 cpu with low-a, node-b 1.5 with low-b (and
    // has 0.5 free): both make room for 2 cpu; kube-scheduler's rules pick one.
    let (victim, nominated) = eventually("a victim marked and being deleted", || async {
        for v in ["low-a", "low-b"] {
            let p = pods.get(v).await.ok()?;
            let marked = p.status.as_ref()?.conditions.as_ref()?.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some("PreemptionByScheduler")
            });
            if marked && p.metadata.deletion_timestamp.is_some() {
                let n = pods.get("urgent").await.ok()?.status?.nominated_node_name?;
                return Some((v.to_string(), n));
            }
        }
        None
    })
    .await;
    let victim_node = node_of(&client, "default", &victim).await.unwrap();
    assert_eq!(nominated, victim_node);
    assert_eq!(
        node_of(&client, "default", "urgent").await,
        None,
        "not bound while its victim is still there"
    );
    // What the kubelet would do once the victim's containers stopped.
    pods.delete(&victim, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let node = eventually("urgent to be bound", || {
        node_of(&client, "default", "urgent")
    })
    .await;
    assert_eq!(node, victim_node);
    let other = if victim == "low-a" { "low-b" } else { "low-a" };
    assert!(
        pods.get(other)
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none(),
        "only one victim"
    );
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_scheduler_rebuilds_its_state_and_does_not_redecide() {
    let (plane, client) = setup(NODES).await;
    let run = Running::start(config(&plane));
    create(&client, &pod("first", "lockstep", "3", "")).await;
    eventually("first to be bound", || node_of(&client, "default", "first")).await;
    run.stop().await;
    create(&client, &pod("second", "lockstep", "2", "")).await;
    let run = Running::start(config(&plane));
    let node = eventually("second to be bound", || {
        node_of(&client, "default", "second")
    })
    .await;
    assert_eq!(node, "node-b", "node-a holds first's 3 cpu");
    assert_eq!(
        node_of(&client, "default", "first").await.as_deref(),
        Some("node-a")
    );
    run.stop().await;
}

/// lockstep killed while it binds a burst of pods: a new instance rebuilds its state from
/// the API server, binds the rest, and neither re-decides a bound pod nor gives room twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_killed_mid_run_is_replaced_without_binding_twice() {
    use futures::StreamExt;
    // Two nodes hold exactly 40 pods of 500m (cpu is the only limit).
    let (plane, client) = setup(&format!("{}---\n{}", big_node("n1"), big_node("n2"))).await;
    let first = Running::start(config(&plane));
    futures::stream::iter(0..40)
        .map(|i| {
            let client = client.clone();
            async move { create(&client, &pod(&format!("p-{i:02}"), "lockstep", "500m", "")).await }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    eventually("some pods to be bound", || async {
        let bound = placements(&client)
            .await
            .iter()
            .filter(|(_, n)| n.is_some())
            .count();
        (bound >= 5).then_some(())
    })
    .await;
    first.kill().await;
    let second = Running::start(config(&plane));
    let all = eventually("every pod to be bound by the new instance", || async {
        let all = placements(&client).await;
        all.iter().all(|(_, n)| n.is_some()).then_some(all)
    })
    .await;
    for n in ["n1", "n2"] {
        let on = all.iter().filter(|(_, p)| p.as_deref() == Some(n)).count();
        assert_eq!(on, 20, "{n} holds {on} pods: {all:?}");
    }
    let events = scheduled_events(&client).await;
    assert!(
        events.values().all(|&c| c <= 1),
        "a pod reported bound twice: {events:?}"
    );
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_is_a_setup_error() {
    let dir = std::env::temp_dir().join(format!("lockstep-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}\n\
             users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let mut cfg = Config {
        kubeconfig: Some(kubeconfig),
        options: Options::default(),
        metrics_address: None,
        bind_concurrency: 1,
        initial_backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(10),
        leader_election: None,
    };
    let err = lockstep_live::run(cfg.clone(), std::future::pending())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Setup(_)), "{err}");
    assert!(
        err.to_string().contains("cannot reach the API server"),
        "{err}"
    );
    cfg.kubeconfig = Some(dir.join("missing"));
    let err = lockstep_live::run(cfg, std::future::pending())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--kubeconfig"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_manifests_are_accepted_by_the_api_server() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/lockstep.yaml"),
    )
    .unwrap();
    let (_plane, client) = setup(&text).await;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), "kube-system");
    let d = deployments.get("lockstep").await.unwrap();
    let d = serde_json::to_value(&d).unwrap();
    let args = &d["spec"]["template"]["spec"]["containers"][0]["args"];
    assert_eq!(args[0], "run", "{args}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_leader_election_one_instance_schedules_and_another_takes_over() {
    let (plane, client) = setup(NODES).await;
    let elected = |identity: &str| Config {
        leader_election: Some(lockstep_live::LeaderElection {
            namespace: "default".into(),
            name: "lockstep".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(3),
        }),
        ..config(&plane)
    };
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    let holder = || async {
        leases
            .get("lockstep")
            .await
            .ok()?
            .spec?
            .holder_identity
            .filter(|h| !h.is_empty())
    };
    let first = Running::start(elected("first"));
    assert_eq!(eventually("a leader", holder).await, "first");
    let second = Running::start(elected("second"));
    create(&client, &pod("one", "lockstep", "1", "")).await;
    eventually("one to be bound", || node_of(&client, "default", "one")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        holder().await.as_deref(),
        Some("first"),
        "the leader keeps its lease"
    );
    // The leader stops; the other takes the lease and schedules.
    first.stop().await;
    let taken = eventually("the second instance to lead", || async {
        holder().await.filter(|h| h == "second")
    })
    .await;
    assert_eq!(taken, "second");
    create(&client, &pod("two", "lockstep", "1", "")).await;
    eventually("two to be bound by the new leader", || {
        node_of(&client, "default", "two")
    })
    .await;
    second.stop().await;
}

/// An object the engine cannot read (here a node whose status has no allocatable
/// resources) is left out and reported with a FailedScheduling event on it; everything
/// else is scheduled, and once the object is fixed it is read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_object_is_reported_and_everything_else_is_scheduled() {
    use k8s_openapi::api::core::v1::{Event, Node};
    use kube::api::{ListParams, Patch, PatchParams};
    let bare = r#"
apiVersion: v1
kind: Node
metadata: {name: node-bare, labels: {kubernetes.io/hostname: node-bare}}
"#;
    let (plane, client) = setup(&format!("{NODES}---\n{bare}")).await;
    let run = Running::start(config(&plane));
    create(&client, &pod("small", "lockstep", "1", "")).await;
    let node = eventually("pod small to be bound", || {
        node_of(&client, "default", "small")
    })
    .await;
    assert!(node == "node-a" || node == "node-b", "{node}");
    let events: Api<Event> = Api::all(client.clone());
    let message = eventually("a FailedScheduling event on node-bare", || async {
        events
            .list(&ListParams::default().fields("involvedObject.name=node-bare"))
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
            .and_then(|e| e.message)
    })
    .await;
    assert!(
        message.contains("cannot be read") && message.contains("allocatable"),
        "{message}"
    );
    // Fixed, the node is read again and takes a pod no other node can hold.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch_status(
            "node-bare",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"allocatable":
                {"cpu": "8", "memory": "16Gi", "pods": "110"}}})),
        )
        .await
        .unwrap();
    create(&client, &pod("big", "lockstep", "6", "")).await;
    let node = eventually("pod big to be bound on the fixed node", || {
        node_of(&client, "default", "big")
    })
    .await;
    assert_eq!(node, "node-bare");
    run.stop().await;
}

/// Every pod of the namespace with the node it is bound to (`None` while pending).
async fn placements(client: &Client) -> Vec<(String, Option<String>)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = pods
        .list(&kube::api::ListParams::default())
        .await
        .expect("listing pods");
    list.items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.spec.and_then(|s| s.node_name),
            )
        })
        .collect()
}

/// How many `Scheduled` events name each pod.
async fn scheduled_events(client: &Client) -> std::collections::BTreeMap<String, usize> {
    use k8s_openapi::api::core::v1::Event;
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut counts = std::collections::BTreeMap::new();
    for e in events
        .list(&kube::api::ListParams::default())
        .await
        .expect("listing events")
        .items
    {
        if e.reason.as_deref() == Some("Scheduled") {
            *counts
                .entry(e.involved_object.name.unwrap_or_default())
                .or_default() += 1;
        }
    }
    counts
}

/// kube-apiserver restarts while lockstep binds a burst of pods and a gang: every
/// connection and watch drops. lockstep's watches resume, it goes on, and the cluster
/// ends exactly full: no pod is bound twice, no room is counted twice or given twice,
/// the gang is whole, and a node added after the restart is seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restarted_mid_run_loses_nothing_and_binds_nothing_twice() {
    use futures::StreamExt;
    let nodes = format!(
        "{}---\n{}---\n{}---\n{}",
        big_node("n1"),
        big_node("n2"),
        big_node("n3"),
        pod_group("dozen", 12)
    );
    let (plane, client) = setup(&nodes).await;
    let run = Running::start(config(&plane));
    // 3 nodes of 10 cpu hold exactly 60 pods of 500m: 8 first, then a burst of 40 and
    // a gang of 12.
    let before: String = (0..8)
        .map(|i| pod(&format!("before-{i}"), "lockstep", "500m", ""))
        .collect();
    create(&client, &before).await;
    for i in 0..8 {
        let name = format!("before-{i}");
        eventually("the first pods to be bound", || {
            node_of(&client, "default", &name)
        })
        .await;
    }
    let burst: Vec<String> = (0..40)
        .map(|i| pod(&format!("burst-{i:02}"), "lockstep", "500m", ""))
        .chain((0..12).map(|i| member(&format!("dozen-{i:02}"), "dozen", "500m")))
        .collect();
    futures::stream::iter(burst)
        .map(|text| {
            let client = client.clone();
            async move { create(&client, &text).await }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    // The binds of the burst are in flight now.
    tokio::task::block_in_place(|| plane.restart_api_server()).unwrap_or_else(|e| panic!("{e}"));
    // The test's own connections dropped too.
    let client = plane.client().await.unwrap_or_else(|e| panic!("{e}"));

    create(
        &client,
        &(node("n4", "2") + &pod("late", "lockstep", "2", "")),
    )
    .await;
    let all = eventually("every pod to be bound after the restart", || async {
        let all = placements(&client).await;
        all.iter().all(|(_, n)| n.is_some()).then_some(all)
    })
    .await;
    assert_eq!(all.len(), 61);
    let on = |node: &str| -> Vec<&str> {
        all.iter()
            .filter(|(_, n)| n.as_deref() == Some(node))
            .map(|(p, _)| p.as_str())
            .collect()
    };
    assert_eq!(
        on("n4"),
        ["late"],
        "the node added after the restart is seen"
    );
    // Each of n1-n3 holds exactly its 20 pods: no room was given twice, and none was
    // kept for a pod counted on two nodes (then some pod would still be pending).
    for n in ["n1", "n2", "n3"] {
        assert_eq!(on(n).len(), 20, "{n} holds {:?}", on(n));
    }
    let events = scheduled_events(&client).await;
    assert!(
        events.values().all(|&c| c <= 1),
        "a pod reported bound twice: {events:?}"
    );
    run.stop().await;
}

/// Binds pod `name` (namespace default) to `node` through `pods/binding`.
async fn bind_as(client: Client, name: &str, node: &str) -> Result<serde_json::Value, kube::Error> {
    let binding = serde_json::json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    Api::<Pod>::namespaced(client, "default")
        .create_subresource("binding", name, &kube::api::PostParams::default(), &binding)
        .await
}

/// Makes the API server refuse the admin user's (lockstep's) bindings of the pods named
/// `names` with the message "held back", through a ValidatingAdmissionPolicy; other
/// users may bind them. Returns once the policy is in effect.
async fn hold_bindings(client: &Client, names: &[&str]) {
    let list = names
        .iter()
        .chain(&["probe"])
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    create(
        client,
        &format!(
            r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: hold-bindings}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods/binding]}}
  validations:
  - expression: "request.userInfo.username != 'lockstep-admin' || !(object.metadata.name in [{list}])"
    message: held back
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: hold-bindings}}
spec: {{policyName: hold-bindings, validationActions: [Deny]}}
"#
        ),
    )
    .await;
    // The policy takes effect a moment after it is created: wait until it refuses a
    // binding of a probe pod (made again while the policy still lets it be bound).
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    eventually("the admission policy to refuse a binding", || async {
        if pods.get_opt("probe").await.ok()?.is_none() {
            create(client, &pod("probe", "nobody", "1", "")).await;
        }
        match bind_as(client.clone(), "probe", "node-a").await {
            Err(kube::Error::Api(s)) if s.message.contains("held back") => Some(()),
            Ok(_) => {
                let _ = pods
                    .delete("probe", &DeleteParams::default().grace_period(0))
                    .await;
                None
            }
            Err(_) => None,
        }
    })
    .await;
    pods.delete("probe", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
}

/// The message of a pod's `PodScheduled=False` condition with reason `SchedulerError`
/// (a refused binding).
async fn bind_refused(pods: &Api<Pod>, name: &str) -> Option<String> {
    let c = pods
        .get(name)
        .await
        .ok()?
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")?;
    (c.status == "False" && c.reason.as_deref() == Some("SchedulerError")).then_some(c.message?)
}

/// A bind the API server refuses (as when another scheduler bound the pod or it was
/// deleted meanwhile) only forgets that pod's assumption: the pod says why, it is left
/// to whoever bound it, the room assumed for it is free again, and everything else is
/// scheduled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_bind_is_forgotten_and_nothing_else_changes() {
    let (plane, client) = setup(NODES).await;
    hold_bindings(&client, &["held", "gone"]).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let address = free_port();
    let run = Running::start(Config {
        metrics_address: Some(address),
        ..config(&plane)
    });
    // `held` (3 cpu) fits only node-a; then `gone` (2 cpu) only node-b.
    create(&client, &pod("held", "lockstep", "3", "")).await;
    let message = eventually("held's bind to be refused", || bind_refused(&pods, "held")).await;
    assert!(
        message.starts_with("binding rejected: ") && message.contains("held back"),
        "{message}"
    );
    create(&client, &pod("gone", "lockstep", "2", "")).await;
    eventually("gone's bind to be refused", || bind_refused(&pods, "gone")).await;
    // Meanwhile: `gone` is deleted, and another scheduler (another user, impersonated
    // by the admin) binds `held` to node-a.
    pods.delete("gone", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let mut other = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(plane.kubeconfig()).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    other.auth_info.impersonate = Some("other-scheduler".into());
    other.auth_info.impersonate_groups = Some(vec!["system:masters".into()]);
    bind_as(Client::try_from(other).unwrap(), "held", "node-a")
        .await
        .unwrap();
    // The room lockstep assumed for them is free, and held counts once, on node-a:
    // 2 cpu fit only on node-b, then 1 cpu only on node-a.
    create(&client, &pod("fill-2", "lockstep", "2", "")).await;
    let fill_2 = eventually("fill-2 to be bound", || {
        node_of(&client, "default", "fill-2")
    })
    .await;
    create(&client, &pod("fill-1", "lockstep", "1", "")).await;
    let fill_1 = eventually("fill-1 to be bound", || {
        node_of(&client, "default", "fill-1")
    })
    .await;
    assert_eq!((fill_1.as_str(), fill_2.as_str()), ("node-a", "node-b"));
    assert_eq!(
        node_of(&client, "default", "held").await.as_deref(),
        Some("node-a")
    );
    // lockstep stops trying: no more refused binds over several backoff periods.
    let errors = metric(address, "lockstep_bind_errors_total").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        metric(address, "lockstep_bind_errors_total").await,
        errors,
        "a pod bound or deleted by others is not tried again"
    );
    let events = scheduled_events(&client).await;
    assert_eq!(events.get("held"), None, "lockstep did not bind held");
    run.stop().await;
}

/// A gang member whose bind is refused does not unbind the members already bound (their
/// containers may be starting); it says why, is tried again alone with backoff, and
/// once the API server accepts it the gang is whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_member_whose_bind_is_refused_is_bound_later_and_the_gang_completes() {
    let (plane, client) = setup(NODES).await;
    hold_bindings(&client, &["trio-2"]).await;
    create(&client, &pod_group("trio", 3)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let run = Running::start(config(&plane));
    let members: String = (0..3)
        .map(|i| member(&format!("trio-{i}"), "trio", "1"))
        .collect();
    create(&client, &members).await;
    eventually("trio-2's bind to be refused", || {
        bind_refused(&pods, "trio-2")
    })
    .await;
    for m in ["trio-0", "trio-1"] {
        eventually("the other members to be bound", || {
            node_of(&client, "default", m)
        })
        .await;
    }
    // The API server accepts the binding again.
    let bindings: Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    > = Api::all(client.clone());
    bindings
        .delete("hold-bindings", &DeleteParams::default())
        .await
        .unwrap();
    eventually("trio-2 to be bound", || {
        node_of(&client, "default", "trio-2")
    })
    .await;
    run.stop().await;
}
