//! What a watch cache would hold per pod, typed or as JSON, for BENCHMARKS.md:
//! `cargo run --release -p lockstep-live --example cache_footprint`
//!
//! The pod is the SchedulingBasic shape as the API server serves it once bound (defaults,
//! the two default tolerations, a PodScheduled condition). A counting allocator measures
//! the bytes each form holds, 50,000 pods at a time.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use lockstep_testkit::counting::{Counting, live_bytes};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-000123","namespace":"default","uid":"0b0f6f4e-8a33-4a6f-9a0d-1f2e3d4c5b6a","resourceVersion":"123456","creationTimestamp":"2026-11-26T19:00:00Z"},"spec":{"schedulerName":"lockstep","containers":[{"name":"pause","image":"registry.k8s.io/pause:3.10","resources":{"requests":{"cpu":"100m","memory":"500Mi"}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority","nodeName":"node-00012"},"status":{"phase":"Pending","qosClass":"Burstable","conditions":[{"type":"PodScheduled","status":"True","lastTransitionTime":"2026-11-26T19:00:01Z"}]}}"#;

const PODS: usize = 50_000;

/// Bytes per item that `make` leaves allocated when called `PODS` times.
fn per_pod<T>(make: impl Fn() -> T) -> isize {
    let before = live_bytes();
    let held: Vec<T> = (0..PODS).map(|_| make()).collect();
    let bytes = live_bytes() - before;
    drop(held);
    bytes / PODS as isize
}

fn main() {
    let typed: Pod = serde_json::from_str(POD).expect("the pod parses");
    println!(
        "typed Pod: {} bytes inline, {} bytes per pod held (Arc<Pod>)",
        std::mem::size_of::<Pod>(),
        per_pod(|| Arc::new(typed.clone()))
    );
    let json: Arc<[u8]> = serde_json::to_vec(&typed)
        .expect("the pod serialises")
        .into();
    println!(
        "JSON: {} bytes per pod held (Arc<[u8]>)",
        per_pod(|| -> Arc<[u8]> { Arc::from(&json[..]) })
    );
}
