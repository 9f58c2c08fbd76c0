//! One scheduling pass: the cached objects (with the decisions not yet visible in the
//! caches laid over them) go through the same manifest conversion and the same engine as
//! `lockstep schedule`.
//!
//! An object the conversion or the engine refuses is left out of the pass and reported,
//! and the pass is tried again without it, so one bad object stops only what depends on it.

use std::collections::BTreeMap;
use std::sync::Arc;

use lockstep_engine::{Decisions, GangSearchCounts, Options, Scheduler, SetupError};
use lockstep_model::Cluster;
use serde_json::{Value, json};

/// Decisions made but not yet seen in the caches: assumed, as kube-scheduler's assume
/// cache does, until the watch shows them or the API server refuses them.
#[derive(Debug, Default, Clone)]
pub struct Assumed {
    /// Pods bound (or being bound): `namespace/name` -> node.
    pub bound: BTreeMap<String, String>,
    /// Claims allocated: `namespace/name` -> their `status` as written.
    pub claims: BTreeMap<String, Value>,
}

/// What a pass decided, with the cluster its ids index.
pub struct Pass {
    pub cluster: Arc<Cluster>,
    pub decisions: Decisions,
    /// Objects left out of the pass, each with the reason.
    pub excluded: Vec<(String, String)>,
    /// Pod cycles answered by batching in the pass.
    pub batched_cycles: u64,
    /// The whole-gang searches of the pass.
    pub gang_search: GangSearchCounts,
}

/// At most this many bad objects are left out of one pass before it gives up.
const MAX_EXCLUDED: usize = 1000;

fn name_of(v: &Value) -> (String, String) {
    let ns = v
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    (ns.to_string(), name.to_string())
}

fn kind(v: &Value) -> &str {
    v.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// Lays the assumed decisions over the cached objects.
pub fn overlay(values: &mut [(String, Value)], assumed: &Assumed) {
    for (_, v) in values.iter_mut() {
        let (ns, name) = name_of(v);
        let kind = kind(v).to_string();
        overlay_one(&kind, &format!("{ns}/{name}"), v, assumed);
    }
}

/// Lays the assumed decisions over one cached object of `kind` (`namespace/name` `key`): a
/// pod bound by lockstep whose binding the cache does not show yet is on its node; a claim
/// allocated by lockstep has the status written for it.
pub fn overlay_one(kind: &str, key: &str, v: &mut Value, assumed: &Assumed) {
    match kind {
        "Pod" if v.pointer("/spec/nodeName").is_none() => {
            if let Some(node) = assumed.bound.get(key) {
                v["spec"]["nodeName"] = json!(node);
            }
        }
        "ResourceClaim" if v.pointer("/status/allocation").is_none() => {
            if let Some(status) = assumed.claims.get(key) {
                v["status"] = status.clone();
            }
        }
        _ => {}
    }
}

/// The object an engine setup error is about, when it names one.
fn setup_error_object(e: &SetupError) -> Option<String> {
    match e {
        SetupError::Dra(lockstep_dra::DraError::InvalidSelector { object, .. })
        | SetupError::Dra(lockstep_dra::DraError::Invalid { object, .. }) => Some(object.clone()),
        _ => None,
    }
}

/// Converts `values` and sets the engine up on them, leaving out (and reporting) each
/// object that cannot be read.
pub fn build(
    values: Vec<(String, Value)>,
    options: &Options,
) -> Result<(Scheduler, Vec<(String, String)>), String> {
    leaving_out(values, |cluster| {
        Scheduler::from_cluster(cluster, options.clone())
            .map_err(|e| (setup_error_object(&e), e.to_string()))
    })
}

/// Converts `values` into a cluster, leaving out (and reporting) each object that cannot be
/// read, as [`build`] does, without setting the engine up.
pub fn load_leaving_out(
    values: Vec<(String, Value)>,
) -> Result<(Cluster, Vec<(String, String)>), String> {
    leaving_out(values, Ok)
}

/// Loads `values` and hands the cluster to `take`; an object the loader or `take` names as
/// the fault (`take`'s error: the object, when it names one, and the message) is left out
/// and everything tried again, at most [`MAX_EXCLUDED`] times.
fn leaving_out<R>(
    mut values: Vec<(String, Value)>,
    take: impl Fn(Cluster) -> Result<R, (Option<String>, String)>,
) -> Result<(R, Vec<(String, String)>), String> {
    let mut excluded: Vec<(String, String)> = Vec::new();
    loop {
        let fault = match lockstep_manifests::load_objects(values.clone()) {
            Ok(loaded) => match take(loaded.cluster) {
                Ok(r) => return Ok((r, excluded)),
                Err((Some(object), message)) => (object, message),
                Err((None, message)) => return Err(message),
            },
            Err(e) => match e.inputs().first() {
                Some(object) => (object.to_string(), e.to_string()),
                None => return Err(e.to_string()),
            },
        };
        let before = values.len();
        values.retain(|(name, _)| *name != fault.0);
        if values.len() == before || excluded.len() >= MAX_EXCLUDED {
            return Err(fault.1);
        }
        excluded.push(fault);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>) -> (String, Value) {
        let mut v = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "1"}}}]}});
        if let Some(n) = node {
            v["spec"]["nodeName"] = json!(n);
        }
        (format!("Pod ml/{name}"), v)
    }

    fn node(name: &str) -> (String, Value) {
        (
            format!("Node {name}"),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}),
        )
    }

    #[test]
    fn assumed_bindings_hold_their_room() {
        let mut values = vec![node("n1"), pod("a", None), pod("b", None), pod("c", None)];
        let assumed = Assumed {
            bound: BTreeMap::from([("ml/a".to_string(), "n1".to_string())]),
            ..Assumed::default()
        };
        overlay(&mut values, &assumed);
        let (mut scheduler, excluded) = build(values, &Options::default()).unwrap();
        assert!(excluded.is_empty());
        let state = scheduler.state();
        let a = state.pod_id("ml", "a").unwrap();
        assert_eq!(
            state.node_of(a),
            state.node_id("n1"),
            "a is on n1 as assumed"
        );
        let b = state.pod_id("ml", "b").unwrap();
        let d = scheduler.schedule(&[b]);
        assert_eq!(
            d.bindings.len(),
            1,
            "b takes the last cpu; c is not offered"
        );
    }

    #[test]
    fn a_bad_object_is_left_out_and_the_rest_is_scheduled() {
        let bad = (
            "PodGroup ml/broken".to_string(),
            json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "broken", "namespace": "ml"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}}),
        );
        let values = vec![node("n1"), bad, pod("a", None)];
        let (mut scheduler, excluded) = build(values, &Options::default()).unwrap();
        assert_eq!(excluded.len(), 1);
        assert_eq!(excluded[0].0, "PodGroup ml/broken");
        assert!(excluded[0].1.contains("minCount"), "{}", excluded[0].1);
        assert_eq!(scheduler.run().bindings.len(), 1);
    }
}
