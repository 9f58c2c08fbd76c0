//! The real control plane: kube-apiserver v1.37 serves every API lockstep uses,
//! and the real kube-scheduler binds plain pods, gangs and pods with claims.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use lockstep_testenv::objects::{create_all, parse_documents};
use lockstep_testenv::{ControlPlane, Options};

const CLUSTER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status:
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: a100}}
"#;

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
---
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: train}
spec:
  podGroupTemplates:
  - name: workers
    schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train-workers}
spec:
  workloadRef: {workloadName: train, templateName: workers}
  schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: v1
kind: Pod
metadata: {name: worker-0}
spec:
  schedulingGroup: {podGroupName: train-workers}
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: worker-1}
spec:
  schedulingGroup: {podGroupName: train-workers}
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
---
apiVersion: v1
kind: Pod
metadata: {name: with-claim}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: one-gpu}]
  containers: [{name: c, image: x, resources: {claims: [{name: gpu}]}}]
"#;

async fn wait_bound(pods: &Api<Pod>, names: &[&str], timeout: Duration) -> Vec<(String, String)> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let list = pods.list(&ListParams::default()).await.expect("list pods");
        let bound: Vec<(String, String)> = list
            .items
            .iter()
            .filter_map(|p| {
                let name = p.metadata.name.clone()?;
                let node = p.spec.as_ref()?.node_name.clone()?;
                names.contains(&name.as_str()).then_some((name, node))
            })
            .collect();
        if bound.len() == names.len() {
            let mut bound = bound;
            bound.sort();
            return bound;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pods not bound within {timeout:?}: bound so far {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_scheduler_binds_pods_gangs_and_claims() {
    let plane = ControlPlane::start(Options {
        kube_scheduler: true,
        ..Options::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let client = plane.client().await.unwrap_or_else(|e| panic!("{e}"));
    let mut objects = parse_documents(CLUSTER).unwrap();
    objects.extend(parse_documents(PODS).unwrap());
    create_all(&client, &objects)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plane.log_tail(20)));

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let bound = wait_bound(
        &pods,
        &["plain", "worker-0", "worker-1", "with-claim"],
        Duration::from_secs(60),
    )
    .await;
    assert!(bound.iter().all(|(_, node)| node == "node-a"), "{bound:?}");

    // The gang's PodGroup gets kube-scheduler's condition.
    let pg = ApiResource {
        group: "scheduling.k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "scheduling.k8s.io/v1beta1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    };
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &pg);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let group = groups.get("train-workers").await.expect("get PodGroup");
        let conditions = group.data["status"]["conditions"].as_array().cloned();
        let scheduled = conditions
            .iter()
            .flatten()
            .any(|c| c["type"] == "PodGroupInitiallyScheduled" && c["status"] == "True");
        if scheduled {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "PodGroup condition not written: {:?}",
            group.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The claim is allocated on the node's only GPU.
    let claims_ar = ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1".into(),
        api_version: "resource.k8s.io/v1".into(),
        kind: "ResourceClaim".into(),
        plural: "resourceclaims".into(),
    };
    let claims: Api<DynamicObject> = Api::namespaced_with(client, "default", &claims_ar);
    let claim = claims.get("one-gpu").await.expect("get claim");
    let results = &claim.data["status"]["allocation"]["devices"]["results"];
    assert_eq!(results[0]["device"], "gpu-0", "{:?}", claim.data["status"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_composite_pod_groups() {
    let plane = ControlPlane::start(Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let client = plane.client().await.unwrap_or_else(|e| panic!("{e}"));
    let objects = parse_documents(
        r#"
apiVersion: scheduling.k8s.io/v1alpha3
kind: Workload
metadata: {name: job}
spec:
  compositePodGroupTemplates:
  - name: job
    schedulingPolicy: {gang: {minGroupCount: 2}}
    podGroupTemplates:
    - name: leaders
      schedulingPolicy: {gang: {minCount: 1}}
---
apiVersion: scheduling.k8s.io/v1alpha3
kind: CompositePodGroup
metadata: {name: job}
spec:
  workloadRef: {workloadName: job, templateName: job}
  schedulingPolicy: {gang: {minGroupCount: 2}}
---
apiVersion: scheduling.k8s.io/v1alpha3
kind: PodGroup
metadata: {name: job-leaders}
spec:
  parentCompositePodGroupName: job
  workloadRef: {workloadName: job, templateName: leaders}
  schedulingPolicy: {gang: {minCount: 1}}
"#,
    )
    .unwrap();
    create_all(&client, &objects)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plane.log_tail(20)));
}

#[test]
fn a_taken_port_is_reported() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let err = match ControlPlane::start(Options {
        port: Some(port),
        ..Options::default()
    }) {
        Ok(_) => panic!("started on a taken port"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("already taken"), "{err}");
    assert!(err.contains(&port.to_string()), "{err}");
}

#[test]
fn dropping_the_control_plane_stops_it() {
    let plane = ControlPlane::start(Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let kubeconfig = std::fs::read_to_string(plane.kubeconfig()).unwrap();
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("server in kubeconfig")
        .to_string();
    let addr = server.trim_start_matches("https://").to_string();
    assert!(std::net::TcpStream::connect(&addr).is_ok());
    drop(plane);
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "{addr} still answers after the control plane was dropped"
    );
}
