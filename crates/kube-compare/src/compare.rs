//! One case, decision by decision: the pending pods are handed to the real
//! kube-scheduler one scheduling unit at a time (a pod, or every member of a
//! PodGroup together) in PrioritySort order; before each unit, lockstep is asked
//! the same question on the same state (the objects as the API server holds them,
//! with every earlier decision of kube-scheduler applied), and the two answers are
//! compared pod by pod.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::discovery::{ApiResource, Discovery, Scope};
use serde::Serialize;
use serde_json::{Value, json};

use lockstep_testenv::objects::Loader;

/// A manifest set to compare on.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub objects: Vec<Value>,
}

/// What one scheduler decided for one pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Outcome {
    Bound {
        node: String,
    },
    Unschedulable {
        message: String,
    },
    /// No decision within the bound (kube-scheduler), or waiting (lockstep).
    Undecided {
        message: String,
    },
}

/// How two answers for one pod relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// The same node (or both unschedulable with the same message) and the same victims.
    Same,
    /// Different nodes with the same top score in lockstep (kube-scheduler breaks such
    /// ties at random), or preemptions on different nodes whose victims kube-scheduler's
    /// rules cannot tell apart (same count, priorities and start times).
    Tie,
    /// Both unschedulable, with different messages.
    Message,
    /// The same node, different preemption victims.
    Victims,
    /// One bound and the other did not, or different nodes that do not tie.
    Placement,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub pod: String,
    pub verdict: Verdict,
    pub kube: Outcome,
    pub lockstep: Outcome,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tied: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kube_victims: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lockstep_victims: Vec<String>,
    /// For a decision that differs: the manifests lockstep was given (the state and the
    /// unit), to reproduce it with `lockstep schedule -f`.
    #[serde(skip)]
    pub input: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseReport {
    pub name: String,
    pub decisions: Vec<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How long kube-scheduler may take for one scheduling unit.
const DECISION_TIMEOUT: Duration = Duration::from_secs(20);
/// How long kube-scheduler's informers get to see objects created outside it.
const SETTLE: Duration = Duration::from_millis(300);

fn kind(o: &Value) -> &str {
    o.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn key(o: &Value) -> String {
    let name = o
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ns = o
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    format!("{ns}/{name}")
}

fn is_pending_for_default_scheduler(o: &Value) -> bool {
    if kind(o) != "Pod" || o.pointer("/spec/nodeName").is_some() {
        return false;
    }
    if matches!(
        o.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    ) {
        return false;
    }
    matches!(
        o.pointer("/spec/schedulerName").and_then(Value::as_str),
        None | Some("" | "default-scheduler")
    )
}

/// Resources emptied between cases (cluster-scoped and namespaced), in this order.
const RESET: &[(&str, &str, &str, &str)] = &[
    ("", "v1", "Pod", "pods"),
    ("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"),
    (
        "resource.k8s.io",
        "v1",
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
    ),
    ("resource.k8s.io", "v1", "ResourceSlice", "resourceslices"),
    ("resource.k8s.io", "v1", "DeviceClass", "deviceclasses"),
    ("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups"),
    ("scheduling.k8s.io", "v1beta1", "Workload", "workloads"),
    (
        "scheduling.k8s.io",
        "v1alpha3",
        "CompositePodGroup",
        "compositepodgroups",
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    ),
    ("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses"),
    ("", "v1", "Node", "nodes"),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
    ),
];

fn api_resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Deletes every object a case may have created (grace period 0) and waits until
/// pods and nodes are gone.
pub async fn reset(client: &kube::Client, discovery: &Discovery) -> Result<(), String> {
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for &(group, version, kind, plural) in RESET {
        let ar = api_resource(group, version, kind, plural);
        let namespaced = discovery
            .resolve_gvk(&kube::api::GroupVersionKind::gvk(group, version, kind))
            .map(|(_, caps)| caps.scope == Scope::Namespaced)
            .unwrap_or(true);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing {plural}: {e}"))?;
        for o in list.items {
            let name = o.metadata.name.clone().unwrap_or_default();
            if kind == "PriorityClass" && name.starts_with("system-") {
                continue;
            }
            let api: Api<DynamicObject> = match (&o.metadata.namespace, namespaced) {
                (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &ar),
                _ => Api::all_with(client.clone(), &ar),
            };
            if o.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                // No controller here removes finalizers (e.g. PodGroup protection).
                let patch = json!({"metadata": {"finalizers": null}});
                api.patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .map_err(|e| format!("clearing finalizers of {kind} {name}: {e}"))?;
            }
            match api.delete(&name, &now).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(format!("deleting {kind} {name}: {e}")),
            }
        }
    }
    for (kind, plural) in [("Pod", "pods"), ("Node", "nodes")] {
        let api: Api<DynamicObject> =
            Api::all_with(client.clone(), &api_resource("", "v1", kind, plural));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = api
                .list(&ListParams::default())
                .await
                .map_err(|e| format!("listing {plural}: {e}"))?
                .items
                .len();
            if left == 0 {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("{left} {plural} still there 30 s after deletion"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    tokio::time::sleep(SETTLE).await;
    Ok(())
}

/// The priority of a pod as the API server's Priority admission gives it.
fn priority(o: &Value, classes: &BTreeMap<String, i64>, default: i64) -> i64 {
    if let Some(p) = o.pointer("/spec/priority").and_then(Value::as_i64) {
        return p;
    }
    match o.pointer("/spec/priorityClassName").and_then(Value::as_str) {
        Some(c) => classes.get(c).copied().unwrap_or(0),
        None => default,
    }
}

/// The pending pods grouped into scheduling units, in PrioritySort order (priority
/// descending, then creation time, then name); a PodGroup's members (all the
/// PodGroups of a CompositePodGroup tree) form one unit at its first member's place.
fn units(objects: &[Value]) -> Vec<Vec<Value>> {
    let mut classes = BTreeMap::new();
    let mut default = 0;
    for o in objects.iter().filter(|o| kind(o) == "PriorityClass") {
        let name = o
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let value = o.get("value").and_then(Value::as_i64).unwrap_or(0);
        classes.insert(name.to_string(), value);
        if o.get("globalDefault").and_then(Value::as_bool) == Some(true) {
            default = value;
        }
    }
    let mut pending: Vec<&Value> = objects
        .iter()
        .filter(|o| is_pending_for_default_scheduler(o))
        .collect();
    pending.sort_by(|a, b| {
        let ta = a
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str);
        let tb = b
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str);
        priority(b, &classes, default)
            .cmp(&priority(a, &classes, default))
            .then_with(|| match (ta, tb) {
                (Some(x), Some(y)) => x.cmp(y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
            .then_with(|| key(a).cmp(&key(b)))
    });
    // A PodGroup under a CompositePodGroup belongs to the unit of its tree's root.
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    for o in objects
        .iter()
        .filter(|o| matches!(kind(o), "PodGroup" | "CompositePodGroup"))
    {
        if let Some(p) = o
            .pointer("/spec/parentCompositePodGroupName")
            .and_then(Value::as_str)
        {
            let ns = key(o).split_once('/').map(|(n, _)| n.to_string());
            parent.insert(
                format!("{}:{}", kind(o), key(o)),
                format!("CompositePodGroup:{}/{p}", ns.unwrap_or_default()),
            );
        }
    }
    let root = |group: String| {
        let mut at = format!("PodGroup:{group}");
        // The API bounds the tree's depth; the bound here only guards against a cycle.
        for _ in 0..8 {
            match parent.get(&at) {
                Some(p) => at = p.clone(),
                None => break,
            }
        }
        at
    };
    let mut out: Vec<Vec<Value>> = Vec::new();
    let mut group_unit: BTreeMap<String, usize> = BTreeMap::new();
    for p in pending {
        let group = p
            .pointer("/spec/schedulingGroup/podGroupName")
            .and_then(Value::as_str)
            .map(|g| {
                let ns = p
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("default");
                root(format!("{ns}/{g}"))
            });
        match group {
            Some(g) => match group_unit.get(&g) {
                Some(&i) => out[i].push(p.clone()),
                None => {
                    group_unit.insert(g, out.len());
                    out.push(vec![p.clone()]);
                }
            },
            // Pods without a group never share a unit.
            None => out.push(vec![p.clone()]),
        }
    }
    out
}

/// The API server's Priority admission refuses a pod that sets `spec.priority`
/// itself: such a pod gets a PriorityClass of that value (`priority-<value>`, added
/// to the case) instead, which both schedulers read the same way. A pod that names
/// a class keeps only the class.
fn with_priority_classes(objects: Vec<Value>) -> Vec<Value> {
    let mut values = BTreeSet::new();
    let mut out: Vec<Value> = objects
        .into_iter()
        .map(|mut o| {
            if kind(&o) != "Pod" {
                return o;
            }
            let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else {
                return o;
            };
            if let Some(p) = spec.remove("priority").and_then(|p| p.as_i64())
                && !spec.contains_key("priorityClassName")
            {
                spec.insert("priorityClassName".into(), json!(format!("priority-{p}")));
                values.insert(p);
            }
            o
        })
        .collect();
    for v in values {
        out.push(
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": format!("priority-{v}")}, "value": v}),
        );
    }
    out
}

/// The API server's RuntimeClass admission refuses a pod naming a RuntimeClass that does
/// not exist, and a pod whose `spec.overhead` differs from its class's: each class the
/// pods name and the case lacks is added, with the overhead its first pod (in case
/// order) gives. lockstep reads `spec.overhead` from the pod, as admission leaves it.
fn with_runtime_classes(mut objects: Vec<Value>) -> Vec<Value> {
    let defined: BTreeSet<String> = objects
        .iter()
        .filter(|o| kind(o) == "RuntimeClass")
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .map(String::from)
        .collect();
    let mut added: BTreeMap<String, Value> = BTreeMap::new();
    for o in objects.iter().filter(|o| kind(o) == "Pod") {
        let Some(class) = o.pointer("/spec/runtimeClassName").and_then(Value::as_str) else {
            continue;
        };
        if defined.contains(class) || added.contains_key(class) {
            continue;
        }
        let mut rc = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                            "metadata": {"name": class}, "handler": class});
        if let Some(overhead) = o.pointer("/spec/overhead") {
            rc["overhead"] = json!({ "podFixed": overhead });
        }
        added.insert(class.to_string(), rc);
    }
    objects.extend(added.into_values());
    objects
}

/// Strips what the API server adds that a manifest author would not write.
fn clean(mut o: Value) -> Value {
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["managedFields", "resourceVersion", "uid", "generation"] {
            meta.remove(k);
        }
    }
    o
}

async fn list_all(client: &kube::Client, ar: &ApiResource) -> Result<Vec<Value>, String> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing {}: {e}", ar.plural))?;
    Ok(list
        .items
        .into_iter()
        .map(|mut o| {
            let mut v = serde_json::to_value(&o).unwrap_or(Value::Null);
            if let Some(t) = o.types.take() {
                v["apiVersion"] = json!(t.api_version);
                v["kind"] = json!(t.kind);
            } else {
                v["apiVersion"] = json!(ar.api_version);
                v["kind"] = json!(ar.kind);
            }
            clean(v)
        })
        .collect())
}

fn pods_ar() -> ApiResource {
    api_resource("", "v1", "Pod", "pods")
}

fn claims_ar() -> ApiResource {
    api_resource("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims")
}

/// lockstep's answer for `unit` on `state` (the cluster objects, bound pods and
/// claims as the API server holds them).
/// lockstep's answers by pod (`namespace/name`): the outcome and the nodes that tied
/// with the chosen one; and its victims, each with its preemptor.
struct LockstepAnswer {
    outcomes: BTreeMap<String, (Outcome, Vec<String>)>,
    victims: BTreeMap<String, String>,
}

fn lockstep_decide(state: &[Value], unit: &[Value]) -> Result<LockstepAnswer, String> {
    let mut objects: Vec<Value> = state.to_vec();
    objects.extend(unit.iter().cloned());
    let text = crate::generate::to_yaml(&objects);
    let loaded = lockstep_manifests::load_str("state.yaml", &text)
        .map_err(|e| format!("lockstep cannot load the state: {e}"))?;
    let cluster = &loaded.cluster;
    // Gangs pod by pod, as kube-scheduler places them: the whole-gang search would add
    // differences by design (README, "Differences from kube-scheduler").
    let options = lockstep_engine::Options {
        batching: false,
        record_ties: true,
        profile: lockstep_engine::Profile {
            gang_placement: lockstep_engine::GangPlacement::PodByPod,
            ..lockstep_engine::Profile::default()
        },
        ..lockstep_engine::Options::default()
    };
    let d = lockstep_engine::schedule(cluster, options).map_err(|e| format!("lockstep: {e}"))?;
    let pod_key = |id: lockstep_model::PodId| cluster.pods[id.index()].key();
    let node_name = |id: lockstep_model::NodeId| cluster.nodes[id.index()].name.clone();
    let mut out = BTreeMap::new();
    for (p, n) in &d.bindings {
        let tied = d
            .ties
            .iter()
            .find(|(q, _)| q == p)
            .map(|(_, t)| t.iter().map(|&n| node_name(n)).collect())
            .unwrap_or_default();
        out.insert(
            pod_key(*p),
            (
                Outcome::Bound {
                    node: node_name(*n),
                },
                tied,
            ),
        );
    }
    for (p, m) in &d.unschedulable {
        out.insert(
            pod_key(*p),
            (Outcome::Unschedulable { message: m.clone() }, Vec::new()),
        );
    }
    for (p, m) in &d.waiting {
        out.insert(
            pod_key(*p),
            (Outcome::Undecided { message: m.clone() }, Vec::new()),
        );
    }
    let victims = d
        .evictions
        .iter()
        .map(|e| (pod_key(e.pod), e.preemptor.clone()))
        .collect();
    Ok(LockstepAnswer {
        outcomes: out,
        victims,
    })
}

/// kube-scheduler's answer for one pod, read from the API server: bound, or
/// `PodScheduled=False` without a nominated node (with one, preemption is under way
/// and the pod is waited for).
fn kube_outcome(pod: &Value) -> Option<Outcome> {
    if let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str) {
        return Some(Outcome::Bound {
            node: node.to_string(),
        });
    }
    let nominated = pod
        .pointer("/status/nominatedNodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let conditions = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)?;
    let c = conditions.iter().find(|c| c["type"] == "PodScheduled")?;
    // A pod still behind a scheduling gate (the harness's, until its status is written)
    // has no decision yet.
    let gated = c["reason"] == "SchedulingGated";
    (c["status"] == "False" && !nominated && !gated).then(|| Outcome::Unschedulable {
        message: c["message"].as_str().unwrap_or("").to_string(),
    })
}

/// Whether two preemptions on different nodes evict victims kube-scheduler cannot tell
/// apart: the same number, with the same priorities and start times. DefaultPreemption's
/// node choice then falls to the first candidate of a list that starts at a random offset;
/// lockstep takes the node whose name sorts first.
fn equivalent_victims(state: &[Value], kube: &[String], lockstep: &[String]) -> bool {
    let describe = |victims: &[String]| -> Option<Vec<(i64, String)>> {
        let mut out = victims
            .iter()
            .map(|v| {
                let pod = state.iter().find(|o| kind(o) == "Pod" && key(o) == *v)?;
                let priority = pod
                    .pointer("/spec/priority")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let start = pod
                    .pointer("/status/startTime")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                Some((priority, start))
            })
            .collect::<Option<Vec<_>>>()?;
        out.sort();
        Some(out)
    };
    !kube.is_empty() && describe(kube).is_some_and(|k| describe(lockstep) == Some(k))
}

fn verdict(kube: &Outcome, lockstep: &Outcome, tied: &[String], same_victims: bool) -> Verdict {
    match (kube, lockstep) {
        (Outcome::Bound { node: a }, Outcome::Bound { node: b }) if a == b => {
            if same_victims {
                Verdict::Same
            } else {
                Verdict::Victims
            }
        }
        (Outcome::Bound { node: a }, Outcome::Bound { .. }) if tied.contains(a) => {
            if same_victims {
                Verdict::Tie
            } else {
                Verdict::Victims
            }
        }
        (Outcome::Unschedulable { message: a }, Outcome::Unschedulable { message: b }) => {
            if a == b {
                Verdict::Same
            } else {
                Verdict::Message
            }
        }
        // Neither placed the pod; one found it unschedulable, the other waits (for its
        // gang's members, a PodGroup, a claim): the same placement, other words.
        (
            Outcome::Unschedulable { .. } | Outcome::Undecided { .. },
            Outcome::Unschedulable { .. } | Outcome::Undecided { .. },
        ) => Verdict::Message,
        _ => Verdict::Placement,
    }
}

/// Runs one case on a control plane whose kube-scheduler runs the default profile.
/// The cluster is emptied first.
pub async fn run_case(loader: &Loader, case: &Case) -> CaseReport {
    let mut report = CaseReport {
        name: case.name.clone(),
        decisions: Vec::new(),
        error: None,
    };
    if let Err(e) = run_case_inner(loader, case, &mut report).await {
        report.error = Some(e);
    }
    report
}

async fn run_case_inner(
    loader: &Loader,
    case: &Case,
    report: &mut CaseReport,
) -> Result<(), String> {
    let client = loader.client();
    reset(client, loader.discovery()).await?;
    // Pods disappear at once when deleted (no kubelet finishes them).
    let objects: Vec<Value> = case
        .objects
        .iter()
        .cloned()
        .map(|mut o| {
            if kind(&o) == "Pod" && o.pointer("/spec/terminationGracePeriodSeconds").is_none() {
                o["spec"]["terminationGracePeriodSeconds"] = json!(0);
            }
            o
        })
        .collect();
    let objects = with_runtime_classes(with_priority_classes(objects));
    let base: Vec<Value> = objects
        .iter()
        .filter(|o| !is_pending_for_default_scheduler(o))
        .cloned()
        .collect();
    loader
        .create_namespaces(&objects)
        .await
        .map_err(|e| e.to_string())?;
    loader.create_all(&base).await.map_err(|e| e.to_string())?;
    tokio::time::sleep(SETTLE).await;
    // Cluster objects lockstep reads from the case; pods and claims from the server.
    let fixed: Vec<Value> = base
        .iter()
        .filter(|o| !matches!(kind(o), "Pod" | "ResourceClaim"))
        .cloned()
        .collect();
    for unit in units(&objects) {
        let mut state = fixed.clone();
        let pods_before = list_all(client, &pods_ar()).await?;
        let bound_before: BTreeSet<String> = pods_before
            .iter()
            .filter(|p| {
                p.pointer("/spec/nodeName").is_some()
                    && p.pointer("/metadata/deletionTimestamp").is_none()
            })
            .map(key)
            .collect();
        state.extend(pods_before.into_iter().filter(|p| {
            p.pointer("/spec/nodeName").is_some() || !is_pending_for_default_scheduler(p)
        }));
        state.extend(list_all(client, &claims_ar()).await?);
        let LockstepAnswer {
            outcomes: answers,
            victims: lockstep_victims,
        } = lockstep_decide(&state, &unit)?;

        loader.create_all(&unit).await.map_err(|e| e.to_string())?;
        for p in &unit {
            let (ns, name) = key(p)
                .split_once('/')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .expect("namespace/name");
            loader
                .create_claims_from_templates(&ns, &name)
                .await
                .map_err(|e| e.to_string())?;
        }
        let keys: Vec<String> = unit.iter().map(key).collect();
        let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
        let started = tokio::time::Instant::now();
        let deadline = started + DECISION_TIMEOUT;
        while outcomes.len() < keys.len() && tokio::time::Instant::now() < deadline {
            for k in &keys {
                if outcomes.contains_key(k) {
                    continue;
                }
                let (ns, name) = k.split_once('/').expect("namespace/name");
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &pods_ar());
                let pod = api
                    .get(name)
                    .await
                    .map_err(|e| format!("reading pod {k}: {e}"))?;
                let v = serde_json::to_value(&pod).unwrap_or(Value::Null);
                if let Some(o) = kube_outcome(&v) {
                    outcomes.insert(k.clone(), o);
                }
            }
            if outcomes.len() < keys.len() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        if std::env::var_os("LOCKSTEP_COMPARE_TRACE").is_some() {
            eprintln!(
                "{} {:?}: kube-scheduler answered in {:?}",
                case.name,
                keys,
                started.elapsed()
            );
        }
        // Victims: pods bound before the unit that are gone or going now.
        let after = list_all(client, &pods_ar()).await?;
        let alive: BTreeSet<String> = after
            .iter()
            .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
            .map(key)
            .collect();
        let kube_victims: Vec<String> = bound_before.difference(&alive).cloned().collect();
        let unit_start = report.decisions.len();
        for k in &keys {
            let kube = outcomes.get(k).cloned().unwrap_or(Outcome::Undecided {
                message: format!("no decision within {} s", DECISION_TIMEOUT.as_secs()),
            });
            let (lockstep, tied) = answers.get(k).cloned().unwrap_or((
                Outcome::Undecided {
                    message: "not in lockstep's decisions".into(),
                },
                Vec::new(),
            ));
            let lv: Vec<String> = lockstep_victims
                .iter()
                .filter(|(_, preemptor)| *preemptor == k || keys.len() > 1)
                .map(|(v, _)| v.clone())
                .collect();
            let kv = if keys.len() > 1 || matches!(kube, Outcome::Bound { .. }) {
                kube_victims.clone()
            } else {
                Vec::new()
            };
            let mut v = verdict(&kube, &lockstep, &tied, lv == kv);
            if matches!(v, Verdict::Placement | Verdict::Victims)
                && matches!(
                    (&kube, &lockstep),
                    (Outcome::Bound { .. }, Outcome::Bound { .. })
                )
                && equivalent_victims(&state, &kv, &lv)
            {
                v = Verdict::Tie;
            }
            let input = matches!(v, Verdict::Placement | Verdict::Victims).then(|| {
                let mut all = state.clone();
                all.extend(unit.iter().cloned());
                crate::generate::to_yaml(&all)
            });
            report.decisions.push(Decision {
                pod: k.clone(),
                verdict: v,
                kube: kube.clone(),
                lockstep,
                tied,
                kube_victims: kv,
                lockstep_victims: lv,
                input,
            });
            // A pod kube-scheduler did not place leaves, so it cannot take room later
            // and every later pod sees exactly the state lockstep is given.
            if !matches!(kube, Outcome::Bound { .. }) {
                let (ns, name) = k.split_once('/').expect("namespace/name");
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &pods_ar());
                let _ = api
                    .delete(
                        name,
                        &DeleteParams {
                            grace_period_seconds: Some(0),
                            ..DeleteParams::default()
                        },
                    )
                    .await;
            }
        }
        unit_ties(&mut report.decisions[unit_start..]);
    }
    Ok(())
}

/// A unit of several pods (a gang) that both schedulers bound whole, without victims,
/// kube-scheduler only on nodes lockstep chose or found tied for one of them: it breaks
/// each pod's tie at random and the later pods follow from the earlier ones, so a pod
/// judged alone can land elsewhere while the unit's placement is one lockstep could have
/// drawn. Its placement differences are ties.
fn unit_ties(unit: &mut [Decision]) {
    if unit.len() < 2 {
        return;
    }
    let mut kube_nodes: Vec<&str> = Vec::new();
    let mut allowed: BTreeSet<&str> = BTreeSet::new();
    for d in unit.iter() {
        let (k, l) = match (&d.kube, &d.lockstep) {
            (Outcome::Bound { node: k }, Outcome::Bound { node: l }) => (k, l),
            // A pod of the gang both left unschedulable (beyond minCount, no room left)
            // takes no node in either placement.
            (Outcome::Unschedulable { .. }, Outcome::Unschedulable { .. }) => continue,
            _ => return,
        };
        if !d.kube_victims.is_empty() || !d.lockstep_victims.is_empty() {
            return;
        }
        kube_nodes.push(k);
        allowed.insert(l);
        allowed.extend(d.tied.iter().map(String::as_str));
    }
    if !kube_nodes.iter().all(|n| allowed.contains(n)) {
        return;
    }
    for d in unit.iter_mut() {
        if d.verdict == Verdict::Placement {
            d.verdict = Verdict::Tie;
            d.input = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(pod: &str, kube: &str, lockstep: &str, tied: &[&str]) -> Decision {
        let bound = |n: &str| Outcome::Bound { node: n.into() };
        Decision {
            pod: pod.into(),
            verdict: if kube == lockstep || tied.contains(&kube) {
                Verdict::Tie
            } else {
                Verdict::Placement
            },
            kube: bound(kube),
            lockstep: bound(lockstep),
            tied: tied.iter().map(|t| t.to_string()).collect(),
            kube_victims: Vec::new(),
            lockstep_victims: Vec::new(),
            input: None,
        }
    }

    #[test]
    fn a_gang_drawn_among_tied_nodes_is_a_tie_and_one_off_them_is_not() {
        // w-0 tied on n2, n3, n4; kube-scheduler drew n3, so w-1 went to n2.
        let mut drawn = vec![
            decision("ml/w-0", "n3", "n2", &["n3", "n4"]),
            decision("ml/w-1", "n2", "n3", &["n4"]),
        ];
        unit_ties(&mut drawn);
        assert!(drawn.iter().all(|d| d.verdict == Verdict::Tie));

        let mut elsewhere = vec![
            decision("ml/w-0", "n2", "n2", &["n3"]),
            decision("ml/w-1", "n9", "n3", &[]),
        ];
        unit_ties(&mut elsewhere);
        assert_eq!(elsewhere[1].verdict, Verdict::Placement);

        // minCount below the size: the pod left over is unschedulable in both, the others
        // were drawn among tied nodes.
        let mut left_over = vec![
            decision("ml/w-0", "n1", "n1", &["n2", "n3"]),
            decision("ml/w-1", "n3", "n2", &["n3"]),
            decision("ml/w-2", "n2", "n3", &[]),
            Decision {
                kube: Outcome::Unschedulable {
                    message: "0/3 nodes are available: 3 Insufficient cpu.".into(),
                },
                lockstep: Outcome::Unschedulable {
                    message: "0/3 nodes are available: 3 Insufficient cpu.".into(),
                },
                verdict: Verdict::Same,
                ..decision("ml/w-3", "n1", "n1", &[])
            },
        ];
        unit_ties(&mut left_over);
        assert_eq!(left_over[2].verdict, Verdict::Tie);

        let mut alone = vec![decision("ml/p", "n3", "n2", &[])];
        unit_ties(&mut alone);
        assert_eq!(alone[0].verdict, Verdict::Placement);
    }
}
