//! One scheduling pass: the cached objects (with the decisions not yet visible in the
//! caches laid over them) go through the same manifest conversion and the same engine as
//! `lockstep schedule`.
//!
//! An object the conversion or the engine refuses is left out of the pass and reported,
//! and the pass is tried again without it, so one bad object stops only what depends on it.

use std::collections::{BTreeMap, BTreeSet};

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
    pub cluster: Cluster,
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

/// Lays the assumed decisions over the cached objects, and leaves out the pending pods in
/// `held` (backing off, or waiting for their victims to go).
pub fn overlay(values: &mut Vec<(String, Value)>, assumed: &Assumed, held: &BTreeSet<String>) {
    values.retain(|(_, v)| {
        if kind(v) != "Pod" || v.pointer("/spec/nodeName").is_some() {
            return true;
        }
        let (ns, name) = name_of(v);
        !held.contains(&format!("{ns}/{name}"))
    });
    for (_, v) in values.iter_mut() {
        let (ns, name) = name_of(v);
        let key = format!("{ns}/{name}");
        match kind(v) {
            "Pod" if v.pointer("/spec/nodeName").is_none() => {
                if let Some(node) = assumed.bound.get(&key) {
                    v["spec"]["nodeName"] = json!(node);
                }
            }
            "ResourceClaim" if v.pointer("/status/allocation").is_none() => {
                if let Some(status) = assumed.claims.get(&key) {
                    v["status"] = status.clone();
                }
            }
            _ => {}
        }
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

/// Converts `values` and schedules their pending pods once, leaving out (and reporting)
/// each object that cannot be read.
pub fn plan(mut values: Vec<(String, Value)>, options: &Options) -> Result<Pass, String> {
    let mut excluded: Vec<(String, String)> = Vec::new();
    loop {
        let fault = match lockstep_manifests::load_objects(values.clone()) {
            Ok(loaded) => match Scheduler::new(&loaded.cluster, options.clone()) {
                Ok(mut scheduler) => {
                    let decisions = scheduler.run();
                    return Ok(Pass {
                        batched_cycles: scheduler.cycle_counts().0,
                        gang_search: scheduler.gang_search_counts(),
                        cluster: loaded.cluster,
                        decisions,
                        excluded,
                    });
                }
                Err(e) => match setup_error_object(&e) {
                    Some(object) => (object, e.to_string()),
                    None => return Err(e.to_string()),
                },
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

/// Converts `values` into a cluster, leaving out (and reporting) each object that cannot be
/// read, as [`plan`] does, without scheduling.
pub fn load_leaving_out(
    mut values: Vec<(String, Value)>,
) -> Result<(Cluster, Vec<(String, String)>), String> {
    let mut excluded: Vec<(String, String)> = Vec::new();
    loop {
        let e = match lockstep_manifests::load_objects(values.clone()) {
            Ok(loaded) => return Ok((loaded.cluster, excluded)),
            Err(e) => e,
        };
        let Some(object) = e.inputs().first().map(|o| o.to_string()) else {
            return Err(e.to_string());
        };
        let before = values.len();
        values.retain(|(name, _)| *name != object);
        if values.len() == before || excluded.len() >= MAX_EXCLUDED {
            return Err(e.to_string());
        }
        excluded.push((object, e.to_string()));
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
    fn assumed_bindings_hold_their_room_and_held_pods_wait() {
        let mut values = vec![node("n1"), pod("a", None), pod("b", None), pod("c", None)];
        let assumed = Assumed {
            bound: BTreeMap::from([("ml/a".to_string(), "n1".to_string())]),
            ..Assumed::default()
        };
        let held = BTreeSet::from(["ml/c".to_string()]);
        overlay(&mut values, &assumed, &held);
        assert_eq!(values.len(), 3, "the held pod is left out");
        let pass = plan(values, &Options::default()).unwrap();
        let bound: Vec<String> = pass
            .decisions
            .bindings
            .iter()
            .map(|(p, _)| pass.cluster.pods[p.index()].key())
            .collect();
        assert_eq!(bound, ["ml/b"], "a is already on n1; b takes the last cpu");
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
        let pass = plan(values, &Options::default()).unwrap();
        assert_eq!(pass.excluded.len(), 1);
        assert_eq!(pass.excluded[0].0, "PodGroup ml/broken");
        assert!(
            pass.excluded[0].1.contains("minCount"),
            "{}",
            pass.excluded[0].1
        );
        assert_eq!(pass.decisions.bindings.len(), 1);
    }
}
