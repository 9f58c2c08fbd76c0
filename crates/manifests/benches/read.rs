//! Reading manifests: text in, the validated model out (`lockstep_manifests::load_str`), for
//! two shapes of input at 5000 nodes + 5000 pods:
//! - `compact`: short hand-written objects (a node's name, labels and allocatable; a pending
//!   pod with labels, one container and its requests), about 270 bytes each;
//! - `dump`: what `kubectl get nodes,pods -o yaml` writes for a running cluster (uids,
//!   timestamps, owner references, conditions, images, env, volume mounts, tolerations),
//!   about 2 KB each, with every pod bound.
//!
//! Each as YAML and as JSON. objects/s = 10,000 / the median. The allocator is mimalloc, as
//! in the `lockstep` binary.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const NODES: usize = 5000;
const PODS: usize = 5000;

fn compact_yaml() -> String {
    let mut out = String::new();
    for i in 0..NODES {
        out.push_str(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-{i:05}\n  labels:\n    \
             kubernetes.io/hostname: node-{i:05}\n    topology.kubernetes.io/zone: zone-{}\n\
             status:\n  allocatable: {{cpu: \"16\", memory: 64Gi, pods: \"110\"}}\n---\n",
            i % 10
        ));
    }
    for i in 0..PODS {
        out.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-{i:06}\n  namespace: default\n  \
             labels: {{app: app-{:04}}}\nspec:\n  containers:\n  - name: c\n    image: pause\n    \
             resources:\n      requests: {{cpu: 100m, memory: 500Mi}}\n---\n",
            i % 1000
        ));
    }
    out
}

fn dump_node(i: usize) -> String {
    format!(
        r#"apiVersion: v1
kind: Node
metadata:
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
    volumes.kubernetes.io/controller-managed-attach-detach: "true"
  creationTimestamp: "2026-10-01T08:00:00Z"
  labels:
    beta.kubernetes.io/arch: amd64
    beta.kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: node-{i:05}
    kubernetes.io/os: linux
    node.kubernetes.io/instance-type: m5.4xlarge
    topology.kubernetes.io/region: us-east-1
    topology.kubernetes.io/zone: us-east-1{zone}
  name: node-{i:05}
  resourceVersion: "{rv}"
  uid: 6c7d8e9f-0a1b-4c2d-8e3f-{i:012}
spec:
  podCIDR: 10.{a}.{b}.0/24
  providerID: aws:///us-east-1{zone}/i-{i:017}
status:
  addresses:
  - address: 10.0.{a}.{b}
    type: InternalIP
  - address: node-{i:05}
    type: Hostname
  allocatable:
    cpu: 15890m
    ephemeral-storage: "95491281146"
    hugepages-1Gi: "0"
    hugepages-2Mi: "0"
    memory: 63221164Ki
    pods: "110"
  capacity:
    cpu: "16"
    ephemeral-storage: 101430960Ki
    hugepages-1Gi: "0"
    hugepages-2Mi: "0"
    memory: 65271724Ki
    pods: "110"
  conditions:
  - lastHeartbeatTime: "2026-11-27T03:00:00Z"
    lastTransitionTime: "2026-10-01T08:01:00Z"
    message: kubelet has sufficient memory available
    reason: KubeletHasSufficientMemory
    status: "False"
    type: MemoryPressure
  - lastHeartbeatTime: "2026-11-27T03:00:00Z"
    lastTransitionTime: "2026-10-01T08:01:00Z"
    message: kubelet has no disk pressure
    reason: KubeletHasNoDiskPressure
    status: "False"
    type: DiskPressure
  - lastHeartbeatTime: "2026-11-27T03:00:00Z"
    lastTransitionTime: "2026-10-01T08:01:30Z"
    message: kubelet is posting ready status
    reason: KubeletReady
    status: "True"
    type: Ready
  nodeInfo:
    architecture: amd64
    bootID: 0f1e2d3c-4b5a-6978-8796-{i:012}
    containerRuntimeVersion: containerd://2.1.4
    kernelVersion: 6.8.0-1019-aws
    kubeProxyVersion: v1.37.2
    kubeletVersion: v1.37.2
    machineID: ec2{i:029}
    operatingSystem: linux
    osImage: Ubuntu 24.04.3 LTS
    systemUUID: ec2{i:029}
---
"#,
        zone = ["a", "b", "c"][i % 3],
        rv = 1000 + i,
        a = i / 250,
        b = i % 250,
    )
}

fn dump_pod(i: usize) -> String {
    let app = i % 1000;
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: "2026-11-20T10:00:00Z"
  generateName: app-{app:04}-7d9f8c6b5-
  labels:
    app: app-{app:04}
    pod-template-hash: 7d9f8c6b5
    tier: backend
  name: app-{app:04}-7d9f8c6b5-{i:06}
  namespace: team-{team}
  ownerReferences:
  - apiVersion: apps/v1
    blockOwnerDeletion: true
    controller: true
    kind: ReplicaSet
    name: app-{app:04}-7d9f8c6b5
    uid: 1a2b3c4d-5e6f-4a7b-8c9d-{app:012}
  resourceVersion: "{rv}"
  uid: 9e8d7c6b-5a49-4382-a1b0-{i:012}
spec:
  containers:
  - env:
    - name: APP
      value: app-{app:04}
    - name: POD_NAME
      valueFrom:
        fieldRef:
          apiVersion: v1
          fieldPath: metadata.name
    image: registry.example.com/team-{team}/app:1.4.{app}
    imagePullPolicy: IfNotPresent
    name: main
    ports:
    - containerPort: 8080
      name: http
      protocol: TCP
    resources:
      limits:
        memory: 1Gi
      requests:
        cpu: 250m
        memory: 512Mi
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
    volumeMounts:
    - mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      name: kube-api-access-{i:05}
      readOnly: true
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  nodeName: node-{node:05}
  preemptionPolicy: PreemptLowerPriority
  priority: 0
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {{}}
  serviceAccount: default
  serviceAccountName: default
  terminationGracePeriodSeconds: 30
  tolerations:
  - effect: NoExecute
    key: node.kubernetes.io/not-ready
    operator: Exists
    tolerationSeconds: 300
  - effect: NoExecute
    key: node.kubernetes.io/unreachable
    operator: Exists
    tolerationSeconds: 300
  volumes:
  - name: kube-api-access-{i:05}
    projected:
      defaultMode: 420
      sources:
      - serviceAccountToken:
          expirationSeconds: 3607
          path: token
      - configMap:
          items:
          - key: ca.crt
            path: ca.crt
          name: kube-root-ca.crt
status:
  conditions:
  - lastTransitionTime: "2026-11-20T10:00:05Z"
    status: "True"
    type: Ready
  - lastTransitionTime: "2026-11-20T10:00:00Z"
    status: "True"
    type: PodScheduled
  containerStatuses:
  - containerID: containerd://{i:064}
    image: registry.example.com/team-{team}/app:1.4.{app}
    imageID: registry.example.com/team-{team}/app@sha256:{app:064}
    lastState: {{}}
    name: main
    ready: true
    restartCount: 0
    started: true
    state:
      running:
        startedAt: "2026-11-20T10:00:04Z"
  hostIP: 10.0.{a}.{b}
  phase: Running
  podIP: 10.{a}.{b}.{c}
  qosClass: Burstable
  startTime: "2026-11-20T10:00:00Z"
---
"#,
        team = app % 20,
        rv = 200_000 + i,
        node = i % NODES,
        a = (i % NODES) / 250,
        b = (i % NODES) % 250,
        c = 2 + i / NODES,
    )
}

fn dump_yaml() -> String {
    let mut out = String::new();
    for i in 0..NODES {
        out.push_str(&dump_node(i));
    }
    for i in 0..PODS {
        out.push_str(&dump_pod(i));
    }
    out
}

/// The same objects as a JSON stream, one object after another.
fn as_json(yaml: &str) -> String {
    let (documents, _) = lockstep_manifests::read_documents_str("in.yaml", yaml).expect("parses");
    let mut out = String::with_capacity(yaml.len() * 2);
    for document in documents {
        out.push_str(&serde_json::to_string(&document.value).expect("serializes"));
        out.push('\n');
    }
    out
}

fn read(c: &mut Criterion) {
    let mut group = c.benchmark_group("read");
    group.sample_size(10);
    group.throughput(Throughput::Elements((NODES + PODS) as u64));
    // Only the shapes a filter on the command line names are made (profiling one shape
    // then sees nothing else).
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |shape: &str| filters.is_empty() || filters.iter().any(|f| f.contains(shape));
    type Make = fn() -> String;
    let shapes: [(&str, Make); 2] = [("compact", compact_yaml), ("dump", dump_yaml)];
    for (shape, make) in shapes {
        if !wanted(shape) {
            continue;
        }
        let yaml = make();
        let json = as_json(&yaml);
        for (format, name, text) in [("yaml", "in.yaml", &yaml), ("json", "in.json", &json)] {
            let loaded = lockstep_manifests::load_str(name, text).expect("loads");
            assert_eq!(loaded.cluster.nodes.len(), NODES);
            assert_eq!(loaded.cluster.pods.len(), PODS);
            group.bench_function(
                format!(
                    "{shape} {format} 5000 nodes + 5000 pods ({} KiB)",
                    text.len() / 1024
                ),
                |b| b.iter(|| lockstep_manifests::load_str(name, text).expect("loads")),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
