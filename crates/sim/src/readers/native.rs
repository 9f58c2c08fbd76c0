//! The native trace format: Kubernetes manifests (anything `lockstep schedule` reads: Nodes,
//! Pods, PriorityClasses, PodGroups, ...) whose Pods and PodGroups carry two annotations:
//!
//! - `lockstep.dev/arrival`: when the pod (or the PodGroup's pods) arrive, in seconds from
//!   the start (`90`, `1.5`, or with a unit: `15m`, `2h`, `1d`); default 0;
//! - `lockstep.dev/duration`: how long it runs once bound; default: until the run ends.
//!
//! On a workload object (RayCluster, Job, JobSet, Deployment, ...) the annotations time every
//! pod it expands into that has none of its own.
//!
//! Jobs: the pending pods of one PodGroup are one job (the PodGroup's annotations win, else
//! the latest arrival and the longest duration among its pods); every other pending pod is a
//! job of its own. Pods bound in the input (`nodeName`) run from the start, each as its own
//! job, and finish after their `duration` if they have one. Pods that already finished and
//! pods for another `schedulerName` are counted as skipped. Every job's pods (and PodGroup)
//! get their arrival as `creationTimestamp`, so the queue is first-come first-served within
//! a priority.
//!
//! The manifests are loaded with `lockstep_manifests::load` (same validation and messages as
//! `lockstep schedule`); the model does not keep annotations, so this module reads them from
//! the same files itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lockstep_manifests::Source;
use lockstep_model::{GroupPolicy, PodId};
use serde::Deserialize;

use crate::trace::{GPU, Job, NO_PRIORITY_CLASS, Skipped, Trace, TraceError, limits};

pub const ARRIVAL: &str = "lockstep.dev/arrival";
pub const DURATION: &str = "lockstep.dev/duration";

#[derive(Debug, Clone, Copy, Default)]
struct Timing {
    arrival: Option<u64>,
    duration: Option<u64>,
}

/// Parses a number of seconds: `90`, `1.5` (rounded), `15m`, `2h`, `1d`, `30s`.
pub fn parse_seconds(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c),
        _ => (s, 's'),
    };
    let factor = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        'd' => 86400.0,
        _ => return None,
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * factor).round() as u64)
}

/// An annotation's seconds, at most [`limits::SECONDS`]; the error says what is wrong.
fn annotation_seconds(raw: &str) -> Result<u64, String> {
    match parse_seconds(raw) {
        Some(v) if v <= limits::SECONDS => Ok(v),
        Some(_) => Err(format!(
            "{raw:?} is more than {} seconds, the longest time a trace may span \
             (100 years; see \"Limits\" in README.md)",
            limits::SECONDS
        )),
        None => Err(format!(
            "{raw:?} is not a number of seconds (write e.g. \"90\", \"15m\", \"2h\")"
        )),
    }
}

/// Files under the sources, in the order the manifest loader reads them.
fn files(sources: &[PathBuf]) -> Result<Vec<PathBuf>, TraceError> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), TraceError> {
        let rd = std::fs::read_dir(dir).map_err(|e| {
            TraceError::new(dir.display().to_string(), 0, format!("cannot read: {e}"))
        })?;
        let mut entries: Vec<PathBuf> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            let hidden = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            if hidden {
                continue;
            }
            if p.is_dir() {
                walk(&p, out)?;
            } else if p
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
            {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for s in sources {
        if s.is_dir() {
            walk(s, &mut out)?;
        } else {
            out.push(s.clone());
        }
    }
    Ok(out)
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Object {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    metadata: Option<Meta>,
    #[serde(default)]
    items: Vec<serde_json::Value>,
}

type Key = (String, String, String);

/// Workload objects whose annotations time the pods they expand into (a pod's own
/// annotations win).
const WORKLOAD_KINDS: &[&str] = &[
    "RayCluster",
    "RayJob",
    "Job",
    "JobSet",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "LeaderWorkerSet",
];

fn scan_object(
    value: serde_json::Value,
    file: &str,
    doc: usize,
    out: &mut BTreeMap<Key, Timing>,
) -> Result<(), TraceError> {
    let Ok(obj) = serde_json::from_value::<Object>(value) else {
        return Ok(()); // the manifest loader reports malformed objects
    };
    let kind = obj.kind.unwrap_or_default();
    if kind == "List" || kind.ends_with("List") {
        for item in obj.items {
            scan_object(item, file, doc, out)?;
        }
        return Ok(());
    }
    if kind != "Pod" && kind != "PodGroup" && !WORKLOAD_KINDS.contains(&kind.as_str()) {
        return Ok(());
    }
    let Some(meta) = obj.metadata else {
        return Ok(());
    };
    let name = meta.name.unwrap_or_default();
    let namespace = meta.namespace.unwrap_or_else(|| "default".into());
    let mut timing = Timing::default();
    for (key, slot) in [
        (ARRIVAL, &mut timing.arrival),
        (DURATION, &mut timing.duration),
    ] {
        if let Some(raw) = meta.annotations.get(key) {
            *slot = Some(annotation_seconds(raw).map_err(|why| {
                TraceError::new(
                    file,
                    0,
                    format!("document {doc} ({kind} {namespace}/{name}): annotation {key}: {why}"),
                )
            })?);
        }
    }
    out.insert((kind, namespace, name), timing);
    Ok(())
}

fn scan(path: &Path, out: &mut BTreeMap<Key, Timing>) -> Result<(), TraceError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| TraceError::new(&file, 0, format!("cannot read: {e}")))?;
    let json = path.extension().and_then(|e| e.to_str()) == Some("json")
        || (path.extension().is_none() && text.trim_start().starts_with('{'));
    scan_text(&file, &text, json, out)
}

fn scan_text(
    file: &str,
    text: &str,
    json: bool,
    out: &mut BTreeMap<Key, Timing>,
) -> Result<(), TraceError> {
    if json {
        for (i, v) in serde_json::Deserializer::from_str(text)
            .into_iter::<serde_json::Value>()
            .enumerate()
        {
            let Ok(v) = v else { break };
            scan_object(v, file, i + 1, out)?;
        }
    } else {
        for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
            let Ok(v) = serde_json::Value::deserialize(doc) else {
                continue;
            };
            if v.is_null() {
                continue;
            }
            scan_object(v, file, i + 1, out)?;
        }
    }
    Ok(())
}

/// A trace read from manifests, with what the loader had to say about them.
pub struct Manifests {
    pub trace: Trace,
    /// One line each, starting with `warning: ` (also among the trace's notes).
    pub warnings: Vec<String>,
    /// Fields the Kubernetes API does not define (each also a warning).
    pub unknown_fields: Vec<lockstep_manifests::UnknownField>,
}

/// The warning for manifests without any arrival or duration annotation: every job arrives
/// at 0 and runs to the end, so the run is over at 0 simulated seconds.
pub const NO_TIMING_WARNING: &str = "warning: no Pod or PodGroup has a lockstep.dev/arrival or      lockstep.dev/duration annotation, so every job arrives at 0 s and runs until the end, and      the simulation ends at 0 simulated seconds; add annotations such as      lockstep.dev/arrival: '90' and lockstep.dev/duration: '15m' to the Pods or PodGroups";

/// Loads manifests with arrival and duration annotations as a trace.
pub fn read_manifests(sources: &[PathBuf]) -> Result<Trace, TraceError> {
    let sources: Vec<Source> = sources.iter().map(|p| Source::Path(p.clone())).collect();
    Ok(load_manifests(&sources, &mut std::io::empty())?.trace)
}

/// Loads manifests (files, directories or `stdin` for [`Source::Stdin`]) with arrival and
/// duration annotations as a trace.
pub fn load_manifests(
    sources: &[Source],
    stdin: &mut dyn std::io::Read,
) -> Result<Manifests, TraceError> {
    let names: Vec<String> = sources
        .iter()
        .map(|s| match s {
            Source::Path(p) => p.display().to_string(),
            Source::Stdin => STDIN.to_string(),
        })
        .collect();
    // Stdin is read once, for the loader and for the annotations.
    let mut stdin_text = None;
    if sources.contains(&Source::Stdin) {
        let mut text = String::new();
        stdin
            .read_to_string(&mut text)
            .map_err(|e| TraceError::new(STDIN, 0, format!("cannot read: {e}")))?;
        stdin_text = Some(text);
    }
    let loaded = lockstep_manifests::load_with_stdin(
        sources,
        &mut stdin_text.as_deref().unwrap_or_default().as_bytes(),
    )
    .map_err(|e| TraceError::new(names.join(", "), 0, e.to_string()))?;
    // The objects the engine checks when it starts (CEL selectors, DRA objects) are checked
    // here too, so an error names the file and document as `lockstep schedule` does rather
    // than surfacing later without a place.
    if let Err(e) = lockstep_engine::Scheduler::new(&loaded.cluster, Default::default()) {
        use lockstep_dra::DraError;
        let text = e.to_string();
        let origin = match &e {
            lockstep_engine::SetupError::Dra(
                DraError::InvalidSelector { object, .. } | DraError::Invalid { object, .. },
            ) => loaded.origins.get(object).cloned(),
            _ => None,
        };
        return Err(TraceError::new(
            origin.unwrap_or_else(|| names.join(", ")),
            0,
            text,
        ));
    }
    check_limits(&loaded)?;
    let mut timings = BTreeMap::new();
    for source in sources {
        match source {
            Source::Path(path) => {
                for f in files(std::slice::from_ref(path))? {
                    scan(&f, &mut timings)?;
                }
            }
            Source::Stdin => {
                let text = stdin_text.as_deref().unwrap_or_default();
                let json = text.trim_start().starts_with('{');
                scan_text(STDIN, text, json, &mut timings)?;
            }
        }
    }
    // Pods made from a workload object take its timing unless they have their own.
    for (pod, owner) in &loaded.owners {
        let (Some((ns, name)), Some((kind, owner_key))) =
            (pod.split_once('/'), owner.split_once(' '))
        else {
            continue;
        };
        let Some((owner_ns, owner_name)) = owner_key.split_once('/') else {
            continue;
        };
        let owner_timing = timings
            .get(&(
                kind.to_string(),
                owner_ns.to_string(),
                owner_name.to_string(),
            ))
            .copied();
        let key = ("Pod".to_string(), ns.to_string(), name.to_string());
        let own = timings.get(&key).copied().unwrap_or_default();
        if let Some(t) = owner_timing
            && own.arrival.is_none()
            && own.duration.is_none()
        {
            timings.insert(key, t);
        }
    }
    let mut warnings = loaded.warnings;
    let timed = timings
        .values()
        .any(|t| t.arrival.is_some() || t.duration.is_some());
    if !timed && !loaded.cluster.pods.is_empty() {
        warnings.push(NO_TIMING_WARNING.to_string());
    }
    let mut trace = build(
        loaded.cluster,
        &timings,
        format!("manifests {}", names.join(", ")),
    );
    trace.notes.extend(warnings.iter().cloned());
    Ok(Manifests {
        trace,
        warnings,
        unknown_fields: loaded.unknown_fields,
    })
}

/// The name standard input goes by in messages, as the manifest loader names it.
const STDIN: &str = "<stdin>";

/// The trace limits that manifests can reach: nodes, pods, and whole GPUs (the
/// `nvidia.com/gpu` extended resource) per node, per pod and in all.
fn check_limits(loaded: &lockstep_manifests::Loaded) -> Result<(), TraceError> {
    let cluster = &loaded.cluster;
    let at = |object: String, message: String| {
        let file = loaded
            .origins
            .get(&object)
            .cloned()
            .unwrap_or_else(|| "manifests".to_string());
        TraceError::new(file, 0, format!("{object}: {message}"))
    };
    let see = "(see \"Limits\" in README.md)";
    if let Some(n) = cluster.nodes.get(limits::NODES) {
        return Err(at(
            format!("Node {}", n.name),
            format!(
                "more than {} nodes, the most a cluster may have {see}",
                limits::NODES
            ),
        ));
    }
    if let Some(p) = cluster.pods.get(limits::PODS) {
        return Err(at(
            format!("Pod {}", p.key()),
            format!(
                "more than {} pods, the most lockstep simulates {see}",
                limits::PODS
            ),
        ));
    }
    let Some(gpu) = cluster.resources.get(GPU) else {
        return Ok(());
    };
    let mut total = 0i64;
    for n in &cluster.nodes {
        let gpus = n.allocatable.get(gpu);
        total = total.saturating_add(gpus);
        if gpus > limits::GPUS_PER_NODE || total > limits::GPUS {
            return Err(at(
                format!("Node {}", n.name),
                format!(
                    "{GPU} {gpus}: more than {} GPUs on a node, or more than {} in the cluster, \
                     the most lockstep simulates {see}",
                    limits::GPUS_PER_NODE,
                    limits::GPUS
                ),
            ));
        }
    }
    for p in &cluster.pods {
        let gpus = p.requests.get(gpu);
        if gpus > limits::GPUS_PER_NODE {
            return Err(at(
                format!("Pod {}", p.key()),
                format!(
                    "{GPU} {gpus}: more than {}, the most GPUs a node may have, so the most one \
                     pod may ask for {see}",
                    limits::GPUS_PER_NODE
                ),
            ));
        }
    }
    Ok(())
}

fn build(
    mut cluster: lockstep_model::Cluster,
    timings: &BTreeMap<Key, Timing>,
    name: String,
) -> Trace {
    let timing_of = |kind: &str, ns: &str, name: &str| {
        timings
            .get(&(kind.to_string(), ns.to_string(), name.to_string()))
            .copied()
            .unwrap_or_default()
    };
    let accepted = |s: &str| s.is_empty() || s == "default-scheduler" || s == "lockstep";
    let group_index: BTreeMap<(String, String), usize> = cluster
        .pod_groups
        .iter()
        .enumerate()
        .map(|(i, g)| ((g.namespace.clone(), g.name.clone()), i))
        .collect();
    let mut finished = 0;
    let mut other_scheduler = 0;
    let mut jobs: Vec<Job> = Vec::new();
    let mut group_pods: BTreeMap<usize, (Vec<PodId>, usize)> = BTreeMap::new();
    let gpu = cluster.resources.get(GPU);
    let gpus_of = |c: &lockstep_model::Cluster, pods: &[PodId]| -> i64 {
        gpu.map_or(0, |g| {
            pods.iter().fold(0i64, |a, p| {
                a.saturating_add(c.pods[p.index()].requests.get(g))
            })
        })
    };
    let class_of = |p: &lockstep_model::Pod| {
        p.priority_class_name
            .clone()
            .unwrap_or_else(|| NO_PRIORITY_CLASS.into())
    };
    for (i, pod) in cluster.pods.iter().enumerate() {
        let id = PodId(i as u32);
        let t = timing_of("Pod", &pod.namespace, &pod.name);
        if pod.is_bound() {
            jobs.push(Job {
                name: pod.key(),
                arrival: 0,
                duration: t.duration,
                pods: vec![id],
                min_pods: 1,
                gang: false,
                priority_class: class_of(pod),
                gpus: gpus_of(&cluster, &[id]),
                initially_running: true,
            });
            if let Some(g) = pod
                .pod_group
                .as_ref()
                .and_then(|g| group_index.get(&(pod.namespace.clone(), g.clone())))
            {
                group_pods.entry(*g).or_default().1 += 1;
            }
            continue;
        }
        if !pod.is_pending() {
            finished += 1;
            continue;
        }
        if !accepted(&pod.scheduler_name) {
            other_scheduler += 1;
            continue;
        }
        match pod
            .pod_group
            .as_ref()
            .and_then(|g| group_index.get(&(pod.namespace.clone(), g.clone())))
        {
            Some(&g) => group_pods.entry(g).or_default().0.push(id),
            None => jobs.push(Job {
                name: pod.key(),
                arrival: t.arrival.unwrap_or(0),
                duration: t.duration,
                pods: vec![id],
                min_pods: 1,
                gang: false,
                priority_class: class_of(pod),
                gpus: gpus_of(&cluster, &[id]),
                initially_running: false,
            }),
        }
    }
    for (g, (pods, bound)) in group_pods {
        if pods.is_empty() {
            continue;
        }
        let pg = &cluster.pod_groups[g];
        let own = timing_of("PodGroup", &pg.namespace, &pg.name);
        let member = |f: fn(&Timing) -> Option<u64>| {
            pods.iter()
                .filter_map(|p| {
                    let pod = &cluster.pods[p.index()];
                    f(&timing_of("Pod", &pod.namespace, &pod.name))
                })
                .max()
        };
        let (gang, min_pods) = match pg.policy {
            GroupPolicy::Gang { min } => (
                true,
                (min as usize).saturating_sub(bound).clamp(1, pods.len()),
            ),
            GroupPolicy::Basic => (false, pods.len()),
        };
        jobs.push(Job {
            name: format!("{}/{}", pg.namespace, pg.name),
            arrival: own.arrival.or_else(|| member(|t| t.arrival)).unwrap_or(0),
            duration: own.duration.or_else(|| member(|t| t.duration)),
            min_pods,
            gang,
            priority_class: class_of(&cluster.pods[pods[0].index()]),
            gpus: gpus_of(&cluster, &pods),
            pods,
            initially_running: false,
        });
    }
    jobs.sort_by(|a, b| a.arrival.cmp(&b.arrival).then_with(|| a.name.cmp(&b.name)));
    for job in &jobs {
        for p in &job.pods {
            let pod = &mut cluster.pods[p.index()];
            pod.creation_timestamp = Some(job.arrival as i64);
            // As for generated traces: the arrival stands in for a start time the
            // manifest does not give.
            pod.start_time = pod.start_time.or(Some(job.arrival as i64));
            if let Some(g) = cluster.pods[p.index()].pod_group.clone()
                && let Some(&gi) = group_index.get(&(cluster.pods[p.index()].namespace.clone(), g))
            {
                cluster.pod_groups[gi].creation_timestamp = Some(job.arrival as i64);
            }
        }
    }
    let mut skipped = Vec::new();
    if finished > 0 {
        skipped.push(Skipped {
            reason: format!("pods already Succeeded or Failed; {finished} skipped"),
            count: finished,
        });
    }
    if other_scheduler > 0 {
        skipped.push(Skipped {
            reason: format!("pods for another schedulerName; {other_scheduler} skipped"),
            count: other_scheduler,
        });
    }
    let (node_gpus, pod_gpu_milli) = Trace::extended_gpu_accounting(&cluster);
    Trace {
        name,
        cluster,
        jobs,
        skipped,
        notes: Vec::new(),
        node_gpus,
        pod_gpu_milli,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("90"), Some(90));
        assert_eq!(parse_seconds("1.5"), Some(2));
        assert_eq!(parse_seconds("15m"), Some(900));
        assert_eq!(parse_seconds("2h"), Some(7200));
        assert_eq!(parse_seconds("1d"), Some(86400));
        assert_eq!(parse_seconds("soon"), None);
        assert_eq!(parse_seconds("-1"), None);
        assert_eq!(parse_seconds("3w"), None);
        assert_eq!(annotation_seconds("100d"), Ok(8_640_000));
        assert!(
            annotation_seconds("18446744073709551615")
                .unwrap_err()
                .contains("is more than 3153600000 seconds"),
        );
    }
}
