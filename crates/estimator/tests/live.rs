//! `lockstep estimator --kubeconfig` against a real kube-apiserver v1.37 (testenv/): the
//! answers follow the cluster as it changes, and GetUnschedulableReplicas counts the pods
//! of a workload pending longer than the threshold.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::Api;
use kube::{Client, ResourceExt};
use lockstep_estimator::live::Live;
use lockstep_estimator::proto::pb;
use lockstep_estimator::proto::quantity::Quantity;
use lockstep_estimator::proto::service::estimator_client::EstimatorClient;
use lockstep_estimator::service::State;
use lockstep_testenv::objects::{create_all, parse_documents};
use lockstep_testenv::{ControlPlane, Options as PlaneOptions};
use prost::Message;
use serde_json::json;

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

async fn create(client: &Client, objects: &str) {
    let objects = parse_documents(objects).unwrap();
    create_all(client, &objects)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

fn cpu(n: &str) -> pb::ReplicaRequirements {
    pb::ReplicaRequirements {
        namespace: "web".into(),
        resource_request_bytes: [(
            "cpu".to_string(),
            Quantity {
                string: Some(n.into()),
            }
            .encode_to_vec(),
        )]
        .into(),
        ..Default::default()
    }
}

const CLUSTER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: a}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: running, namespace: web}
spec:
  nodeName: a
  containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
  namespace: web
  annotations: {deployment.kubernetes.io/revision: "2"}
spec:
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers: [{name: c, image: i}]
"#;

fn replica_set(name: &str, revision: &str, owner: &str) -> String {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "web",
            "annotations": {"deployment.kubernetes.io/revision": revision},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop",
                "uid": owner, "controller": true}]},
        "spec": {"selector": {"matchLabels": {"app": "shop"}},
            "template": {"metadata": {"labels": {"app": "shop"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    })
    .to_string()
}

/// A pending pod of `owner`, unschedulable since `ago` seconds (none: no condition).
fn pending(name: &str, rs: &str, owner: &str, ago: Option<i64>) -> String {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "web", "labels": {"app": "shop"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                "uid": owner, "controller": true}]},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "100"}}}]},
    });
    if let Some(ago) = ago {
        let at =
            k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(ago);
        pod["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable",
            "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}]});
    }
    pod.to_string()
}

#[tokio::test]
async fn live_cluster_answers() {
    let plane = ControlPlane::start(PlaneOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let client = plane.client().await.unwrap_or_else(|e| panic!("{e}"));
    create(&client, CLUSTER).await;
    let deployment = Api::<Deployment>::namespaced(client.clone(), "web")
        .get("shop")
        .await
        .unwrap();
    let uid = deployment.uid().unwrap();
    create(
        &client,
        &format!(
            "{}\n---\n{}",
            replica_set("shop-new", "2", &uid),
            replica_set("shop-old", "1", &uid)
        ),
    )
    .await;
    let sets = Api::<ReplicaSet>::namespaced(client.clone(), "web");
    let new = sets.get("shop-new").await.unwrap().uid().unwrap();
    let old = sets.get("shop-old").await.unwrap().uid().unwrap();
    create(
        &client,
        &[
            pending("shop-1", "shop-new", &new, Some(600)),
            pending("shop-2", "shop-new", &new, Some(300)),
            pending("shop-3", "shop-new", &new, Some(20)),
            pending("shop-4", "shop-new", &new, None),
            pending("shop-old-1", "shop-old", &old, Some(600)),
        ]
        .join("\n---\n"),
    )
    .await;

    let live = Live::start(client.clone()).await.unwrap();
    let mut state = State::new("member1", None);
    state.unschedulable = Some(live.clone());
    let state = Arc::new(state);
    let follow = tokio::spawn(live.follow(state.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(lockstep_estimator::server::serve(
        state,
        listener,
        None,
        async {
            let _ = stopped.await;
        },
    ));
    let c = tokio::time::timeout(
        Duration::from_secs(10),
        EstimatorClient::connect(format!("http://{address}")),
    )
    .await
    .unwrap()
    .unwrap();

    // 4 cpu, 1 taken by the running pod (pending pods hold nothing).
    let ask = |r: pb::ReplicaRequirements| pb::MaxAvailableReplicasRequest {
        cluster: "member1".into(),
        replica_requirements: Some(r),
        assumed_workloads: vec![],
    };
    let c2 = c.clone();
    eventually("3 replicas of 1 cpu", || {
        let mut c = c2.clone();
        let req = ask(cpu("1"));
        async move {
            let n = c
                .max_available_replicas(req)
                .await
                .ok()?
                .into_inner()
                .max_replicas;
            (n == 3).then_some(())
        }
    })
    .await;
    // The cluster changes: another pod takes 2 cpu.
    create(
        &client,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: more, namespace: web}\nspec:\n  nodeName: a\n  containers: [{name: c, image: i, resources: {requests: {cpu: \"2\"}}}]\n",
    )
    .await;
    eventually("1 replica after the cluster changed", || {
        let mut c = c2.clone();
        let req = ask(cpu("1"));
        async move {
            let n = c
                .max_available_replicas(req)
                .await
                .ok()?
                .into_inner()
                .max_replicas;
            (n == 1).then_some(())
        }
    })
    .await;

    let unschedulable =
        |threshold: Duration, kind: &str, name: &str| pb::UnschedulableReplicasRequest {
            cluster: "member1".into(),
            resource: Some(pb::ObjectReference {
                api_version: "apps/v1".into(),
                kind: kind.into(),
                namespace: "web".into(),
                name: name.into(),
            }),
            unschedulable_threshold: threshold.as_nanos() as i64,
        };
    let count = |r: pb::UnschedulableReplicasRequest| {
        let mut c = c2.clone();
        async move {
            c.get_unschedulable_replicas(r)
                .await
                .map(|r| r.into_inner().unschedulable_replicas)
        }
    };
    // The current ReplicaSet's pods: unschedulable for 600 s, 300 s, 20 s, and one without
    // the condition; the old ReplicaSet's pod does not count.
    assert_eq!(
        count(unschedulable(Duration::from_secs(60), "Deployment", "shop"))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        count(unschedulable(Duration::from_secs(1), "Deployment", "shop"))
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        count(unschedulable(
            Duration::from_secs(3600),
            "Deployment",
            "shop"
        ))
        .await
        .unwrap(),
        0
    );
    assert_eq!(
        count(unschedulable(
            Duration::from_secs(60),
            "ReplicaSet",
            "shop-old"
        ))
        .await
        .unwrap(),
        1
    );
    let e = count(unschedulable(
        Duration::from_secs(60),
        "Deployment",
        "absent",
    ))
    .await
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    let e = count(unschedulable(Duration::from_secs(60), "DaemonSet", "shop"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    follow.abort();
    drop(c);
}
