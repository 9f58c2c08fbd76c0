//! Random small clusters for the differential check: 3-20 nodes with labels,
//! zones, taints and cordons; 5-50 pods with requests, node selectors, node
//! affinity, tolerations, pod (anti-)affinity, topology spread, host ports and
//! priorities, some of them already running.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const TIERS: [&str; 2] = ["gold", "silver"];
const APPS: [&str; 4] = ["web", "db", "cache", "batch"];

fn pick<'a, R: RngExt>(rng: &mut R, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

fn chance<R: RngExt>(rng: &mut R, p: f64) -> bool {
    rng.random_bool(p)
}

/// The objects of random cluster number `index` of the sequence seeded by `seed`.
pub fn cluster(seed: u64, index: u64) -> Vec<Value> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut objects = vec![
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": "low"}, "value": 100}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": "high"}, "value": 1000}),
    ];
    let num_nodes = rng.random_range(3..=20);
    let mut nodes = Vec::new();
    for i in 0..num_nodes {
        let name = format!("node-{i:02}");
        let zone = ZONES[i % ZONES.len()];
        let cpu = [2000, 4000, 8000][rng.random_range(0..3)] + rng.random_range(0..8) * 125;
        let memory_mi = [4096, 8192, 16384][rng.random_range(0..3)];
        let pods = if chance(&mut rng, 0.1) { 4 } else { 110 };
        let mut node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone,
                "tier": pick(&mut rng, &TIERS),
            }},
            "spec": {},
            "status": {
                "capacity": {"cpu": format!("{cpu}m"), "memory": format!("{memory_mi}Mi"), "pods": pods.to_string()},
                "allocatable": {"cpu": format!("{cpu}m"), "memory": format!("{memory_mi}Mi"), "pods": pods.to_string()},
            }
        });
        if chance(&mut rng, 0.2) {
            let effect = if chance(&mut rng, 0.7) {
                "NoSchedule"
            } else {
                "PreferNoSchedule"
            };
            node["spec"]["taints"] = json!([{"key": "dedicated", "value": pick(&mut rng, &["gpu", "infra"]), "effect": effect}]);
        }
        if chance(&mut rng, 0.05) {
            node["spec"]["unschedulable"] = json!(true);
        }
        nodes.push(name);
        objects.push(node);
    }
    let num_pods = rng.random_range(5..=50);
    let running = rng.random_range(0..=num_pods / 3);
    for j in 0..num_pods {
        let mut pod = random_pod(&mut rng, j);
        if j < running {
            pod["spec"]["nodeName"] = json!(nodes[rng.random_range(0..nodes.len())]);
            pod["status"] = json!({"phase": "Running"});
        }
        objects.push(pod);
    }
    objects
}

fn label_selector(app: &str) -> Value {
    json!({"matchLabels": {"app": app}})
}

fn random_pod(rng: &mut ChaCha8Rng, j: usize) -> Value {
    let app = pick(rng, &APPS);
    let cpu = rng.random_range(1..=16) * 125;
    let memory = rng.random_range(1..=16) * 256;
    let mut spec = json!({
        "containers": [{"name": "app", "image": "app",
            "resources": {"requests": {"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")}}}],
    });
    if chance(rng, 0.05) {
        spec["containers"][0]["ports"] =
            json!([{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]);
    }
    if chance(rng, 0.4) {
        spec["priorityClassName"] = json!(pick(rng, &["low", "high"]));
    }
    if chance(rng, 0.15) {
        spec["nodeSelector"] = if chance(rng, 0.5) {
            json!({"tier": pick(rng, &TIERS)})
        } else {
            json!({"topology.kubernetes.io/zone": pick(rng, &ZONES)})
        };
    }
    let mut affinity = serde_json::Map::new();
    let mut node_affinity = serde_json::Map::new();
    if chance(rng, 0.1) {
        let op = if chance(rng, 0.5) { "In" } else { "NotIn" };
        node_affinity.insert(
            "requiredDuringSchedulingIgnoredDuringExecution".into(),
            json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": op, "values": [pick(rng, &ZONES)]}]}]}),
        );
    }
    if chance(rng, 0.15) {
        node_affinity.insert(
            "preferredDuringSchedulingIgnoredDuringExecution".into(),
            json!([{"weight": rng.random_range(1..=100), "preference": {"matchExpressions": [
                {"key": "tier", "operator": "In", "values": [pick(rng, &TIERS)]}]}}]),
        );
    }
    if !node_affinity.is_empty() {
        affinity.insert("nodeAffinity".into(), Value::Object(node_affinity));
    }
    let mut pod_affinity = serde_json::Map::new();
    let mut pod_anti_affinity = serde_json::Map::new();
    if chance(rng, 0.05) {
        pod_affinity.insert(
            "requiredDuringSchedulingIgnoredDuringExecution".into(),
            json!([{"labelSelector": label_selector(pick(rng, &APPS)), "topologyKey": "topology.kubernetes.io/zone"}]),
        );
    }
    if chance(rng, 0.1) {
        pod_affinity.insert(
            "preferredDuringSchedulingIgnoredDuringExecution".into(),
            json!([{"weight": rng.random_range(1..=100), "podAffinityTerm":
                {"labelSelector": label_selector(pick(rng, &APPS)), "topologyKey": "topology.kubernetes.io/zone"}}]),
        );
    }
    if chance(rng, 0.1) {
        pod_anti_affinity.insert(
            "requiredDuringSchedulingIgnoredDuringExecution".into(),
            json!([{"labelSelector": label_selector(app), "topologyKey": "kubernetes.io/hostname"}]),
        );
    }
    if chance(rng, 0.1) {
        pod_anti_affinity.insert(
            "preferredDuringSchedulingIgnoredDuringExecution".into(),
            json!([{"weight": rng.random_range(1..=100), "podAffinityTerm":
                {"labelSelector": label_selector(pick(rng, &APPS)), "topologyKey": "kubernetes.io/hostname"}}]),
        );
    }
    if !pod_affinity.is_empty() {
        affinity.insert("podAffinity".into(), Value::Object(pod_affinity));
    }
    if !pod_anti_affinity.is_empty() {
        affinity.insert("podAntiAffinity".into(), Value::Object(pod_anti_affinity));
    }
    if !affinity.is_empty() {
        spec["affinity"] = Value::Object(affinity);
    }
    if chance(rng, 0.3) {
        spec["tolerations"] = if chance(rng, 0.5) {
            json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}])
        } else {
            json!([{"key": "dedicated", "operator": "Exists"}])
        };
    }
    if chance(rng, 0.15) {
        let key = if chance(rng, 0.5) {
            "topology.kubernetes.io/zone"
        } else {
            "kubernetes.io/hostname"
        };
        let when = if chance(rng, 0.6) {
            "DoNotSchedule"
        } else {
            "ScheduleAnyway"
        };
        spec["topologySpreadConstraints"] = json!([{
            "maxSkew": rng.random_range(1..=2), "topologyKey": key,
            "whenUnsatisfiable": when, "labelSelector": label_selector(app)}]);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{j:02}"), "namespace": "default", "labels": {"app": app}},
        "spec": spec,
    })
}

/// A cluster as multi-document YAML, for `lockstep schedule -f` and for reading.
pub fn to_yaml(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| serde_norway::to_string(o).expect("JSON values serialise"))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_are_reproducible_and_within_bounds() {
        for i in 0..50 {
            let a = cluster(7, i);
            assert_eq!(a, cluster(7, i));
            let nodes = a.iter().filter(|o| o["kind"] == "Node").count();
            let pods = a.iter().filter(|o| o["kind"] == "Pod").count();
            assert!((3..=20).contains(&nodes), "{nodes} nodes");
            assert!((5..=50).contains(&pods), "{pods} pods");
            lockstep_manifests::load_str("random.yaml", &to_yaml(&a))
                .unwrap_or_else(|e| panic!("cluster {i} does not load: {e}"));
        }
        assert_ne!(cluster(7, 1), cluster(7, 2));
    }
}
