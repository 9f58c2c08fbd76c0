//! Workload objects: the objects people write (RayCluster and RayJob, batch/v1 Job, JobSet,
//! Deployment, ReplicaSet, StatefulSet, LeaderWorkerSet), expanded into the Pods, Workloads,
//! PodGroups and CompositePodGroups their controllers would create. One module per kind
//! holds its rules; this one holds what they share: the expansion driver, pod naming, and
//! the builders of Workload API objects.
//!
//! Expansion runs once every file is read, before conversion, so the objects it makes are
//! converted and validated exactly like objects given in the input (an error names the
//! generated object and the workload object it came from). Pods given in the input that a
//! controller would count as its own (by ownerReferences, labels or names, as each
//! controller counts them) reduce the number of pods created.
//!
//! Names. A controller that names its pods itself (StatefulSet `<name>-<ordinal>`,
//! LeaderWorkerSet) gets those names. A controller that asks the API server for a generated
//! name (`metadata.generateName`: KubeRay's `<cluster>-<group>-worker-`, the Job controller's
//! `<job>-` and `<job>-<index>-`, a ReplicaSet's `<name>-`) gets, in place of the API
//! server's five random characters, the smallest number from 0 that makes the name unused
//! in its namespace: `rc-gpu-worker-0`, `web-0`; the pod of an Indexed Job's completion
//! index drops the suffix while the name is unused (`train-3`, then `train-3-0`).

mod apps;
mod job;
mod jobset;
mod lws;
mod ray;
mod sha1;

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::scheduling::v1beta1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value as Json;

use crate::convert::pod::Draft;
use crate::error::{LoadError, Origin};
use crate::route::{Collected, Entry, dns1123_subdomain_error};
use crate::workload_api::{self, GroupStatus};

pub(crate) use apps::{Deployment, ReplicaSet, StatefulSet};
pub(crate) use jobset::JobSet;
pub(crate) use lws::LeaderWorkerSet;
pub(crate) use ray::{RayCluster, RayJob};

/// A workload object as read.
pub(crate) enum Object {
    RayCluster(Box<RayCluster>),
    RayJob(Box<RayJob>),
    Job(Box<batch::Job>),
    JobSet(Box<JobSet>),
    Deployment(Box<Deployment>),
    ReplicaSet(Box<ReplicaSet>),
    StatefulSet(Box<StatefulSet>),
    LeaderWorkerSet(Box<LeaderWorkerSet>),
}

/// The workload kinds read: (apiVersion, kind).
pub(crate) const KINDS: &[(&str, &str)] = &[
    ("ray.io/v1", "RayCluster"),
    ("ray.io/v1", "RayJob"),
    ("batch/v1", "Job"),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
];

/// The object being expanded, for names, ownership and messages.
pub(crate) struct Owner<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// e.g. `RayCluster ml/rc`.
    pub object: &'a str,
    pub origin: &'a Origin,
    pub uid: String,
}

impl Owner<'_> {
    pub(crate) fn invalid(&self, path: impl Into<String>, message: impl Into<String>) -> LoadError {
        LoadError::InvalidValue {
            origin: self.origin.clone(),
            object: self.object.to_string(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// An ownerReference to this object as the controller of what it creates.
    pub(crate) fn controller_ref(&self) -> OwnerReference {
        controller_ref(self.api_version, self.kind, self.name, &self.uid)
    }
}

pub(crate) fn controller_ref(
    api_version: &str,
    kind: &str,
    name: &str,
    uid: &str,
) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// How a new pod is named.
pub(crate) enum PodName {
    /// Exactly this name (StatefulSet ordinals).
    Fixed(String),
    /// `metadata.generateName`: the prefix, ending in `-`, of a name the API server completes.
    Generate(String),
    /// The pod of one completion index (`<job>-<index>-` as generateName): named
    /// `<job>-<index>` while that is unused, so an indexed Job `j` gives `j-0`, `j-1`, ...
    /// (the `schedule` contract), then `<job>-<index>-0`, ...
    Indexed(String),
}

/// A pod a controller would create.
pub(crate) struct NewPod {
    pub name: PodName,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub spec: core::PodSpec,
    /// The PodGroup the pod joins (`spec.schedulingGroup.podGroupName`).
    pub group: Option<String>,
    /// The ownerReference of the pod's controller (the Job of a JobSet's pod, say).
    pub owner: OwnerReference,
    /// Where its template is in the workload object, e.g. `spec.workerGroupSpecs[0].template`.
    pub source: String,
}

impl NewPod {
    /// A pod from a template, with the template's labels and annotations.
    pub(crate) fn from_template(
        template: &core::PodTemplateSpec,
        name: PodName,
        owner: OwnerReference,
        source: String,
    ) -> NewPod {
        let meta = template.metadata.clone().unwrap_or_default();
        NewPod {
            name,
            labels: meta.labels.unwrap_or_default(),
            annotations: meta.annotations.unwrap_or_default(),
            spec: template.spec.clone().unwrap_or_default(),
            group: None,
            owner,
            source,
        }
    }
}

/// What one workload object expands into.
#[derive(Default)]
pub(crate) struct Expansion {
    pub pods: Vec<NewPod>,
    pub workloads: Vec<api::Workload>,
    pub pod_groups: Vec<api::PodGroup>,
    pub composites: Vec<workload_api::CompositePodGroup>,
    pub warnings: Vec<String>,
    /// Pods of the input the controller counts as its own, by name.
    pub adopted: Vec<String>,
}

/// The input's pods, for the controllers' counting.
pub(crate) struct Existing<'a> {
    pods: &'a [Entry<Draft>],
}

impl<'a> Existing<'a> {
    /// Pods of `namespace` that are not finished (phase Succeeded or Failed) and not being
    /// deleted: the pods controllers count as active.
    pub(crate) fn active(&self, namespace: &'a str) -> impl Iterator<Item = InputPod<'a>> + 'a {
        self.all(namespace).filter(InputPod::is_active)
    }

    /// Every pod of `namespace`.
    pub(crate) fn all(&self, namespace: &'a str) -> impl Iterator<Item = InputPod<'a>> + 'a {
        self.pods
            .iter()
            .filter(move |e| e.namespace.as_deref() == Some(namespace))
            .map(|e| e.value.input_pod(&e.name))
    }
}

/// What controllers read of a pod of the input beyond its converted form, kept from the
/// typed object (which is freed as soon as the pod is converted).
pub(crate) struct PodFacts {
    /// The kind and name of the controller ownerReference.
    controller: Option<Box<(String, String)>>,
    /// The Job completion index annotation.
    index_annotation: Option<Box<str>>,
}

impl PodFacts {
    pub(crate) fn of(pod: &core::Pod) -> PodFacts {
        let meta = &pod.metadata;
        PodFacts {
            controller: controller_of(meta).map(|r| Box::new((r.kind.clone(), r.name.clone()))),
            index_annotation: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(job::INDEX_KEY))
                .map(|v| v.as_str().into()),
        }
    }
}

/// What controllers read of a pod that could not be converted (the converted pod holds it
/// otherwise): its labels, phase and deletion as given.
pub(crate) struct Unconverted {
    labels: lockstep_model::Labels,
    phase: Option<String>,
    deleting: bool,
}

impl Unconverted {
    pub(crate) fn of(pod: &core::Pod) -> Unconverted {
        Unconverted {
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            phase: pod.status.as_ref().and_then(|s| s.phase.clone()),
            deleting: pod.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// A pod of the input as controllers see it.
#[derive(Clone, Copy)]
pub(crate) struct InputPod<'a> {
    name: &'a str,
    labels: &'a lockstep_model::Labels,
    phase: Option<&'a str>,
    deleting: bool,
    facts: &'a PodFacts,
}

impl<'a> InputPod<'a> {
    pub(crate) fn converted(
        name: &'a str,
        pod: &'a lockstep_model::Pod,
        facts: &'a PodFacts,
    ) -> InputPod<'a> {
        InputPod {
            name,
            labels: &pod.labels,
            phase: Some(phase_name(pod.phase)),
            deleting: pod.terminating,
            facts,
        }
    }

    pub(crate) fn unconverted(
        name: &'a str,
        pod: &'a Unconverted,
        facts: &'a PodFacts,
    ) -> InputPod<'a> {
        InputPod {
            name,
            labels: &pod.labels,
            phase: pod.phase.as_deref(),
            deleting: pod.deleting,
            facts,
        }
    }

    pub(crate) fn name(&self) -> String {
        self.name.to_string()
    }

    pub(crate) fn labels(&self) -> &'a lockstep_model::Labels {
        self.labels
    }

    pub(crate) fn label(&self, key: &str) -> Option<&'a str> {
        self.labels.get(key).map(String::as_str)
    }

    /// `status.phase` as given (a converted pod's phase by its name).
    pub(crate) fn phase(&self) -> Option<&'a str> {
        self.phase
    }

    /// Not finished (phase Succeeded or Failed) and not being deleted.
    pub(crate) fn is_active(&self) -> bool {
        !matches!(self.phase, Some("Succeeded" | "Failed")) && !self.deleting
    }

    /// The kind and name of its controller.
    pub(crate) fn controller(&self) -> Option<(&'a str, &'a str)> {
        self.facts
            .controller
            .as_deref()
            .map(|(kind, name)| (kind.as_str(), name.as_str()))
    }

    /// Whether its controller is the object `kind`/`name`.
    pub(crate) fn controlled_by(&self, kind: &str, name: &str) -> bool {
        self.controller() == Some((kind, name))
    }

    /// The Job completion index annotation.
    pub(crate) fn index_annotation(&self) -> Option<&'a str> {
        self.facts.index_annotation.as_deref()
    }
}

fn phase_name(phase: lockstep_model::PodPhase) -> &'static str {
    use lockstep_model::PodPhase;
    match phase {
        PodPhase::Pending => "Pending",
        PodPhase::Running => "Running",
        PodPhase::Succeeded => "Succeeded",
        PodPhase::Failed => "Failed",
        PodPhase::Unknown => "Unknown",
    }
}

/// The controller ownerReference of an object, if it has one.
pub(crate) fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// A gang policy of `min_count`.
pub(crate) fn gang(min_count: i32) -> api::PodGroupSchedulingPolicy {
    api::PodGroupSchedulingPolicy {
        gang: Some(api::GangSchedulingPolicy { min_count }),
        basic: None,
    }
}

/// The basic policy (pods placed one by one).
pub(crate) fn basic() -> api::PodGroupSchedulingPolicy {
    api::PodGroupSchedulingPolicy {
        basic: Some(api::BasicSchedulingPolicy(Json::Object(Default::default()))),
        gang: None,
    }
}

pub(crate) fn topology(key: Option<&str>) -> Option<api::PodGroupSchedulingConstraints> {
    key.map(|key| api::PodGroupSchedulingConstraints {
        topology: Some(vec![api::TopologyConstraint {
            key: key.to_string(),
        }]),
    })
}

/// A PodGroupTemplate of a Workload.
pub(crate) fn template(
    name: &str,
    policy: api::PodGroupSchedulingPolicy,
    topology_key: Option<&str>,
) -> api::PodGroupTemplate {
    api::PodGroupTemplate {
        name: name.to_string(),
        scheduling_policy: policy,
        scheduling_constraints: topology(topology_key),
        ..Default::default()
    }
}

/// A Workload controlled by `owner`.
pub(crate) fn workload(
    owner: &Owner,
    api_group: &str,
    name: &str,
    templates: Vec<api::PodGroupTemplate>,
) -> api::Workload {
    api::Workload {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(owner.namespace.to_string()),
            owner_references: Some(vec![owner.controller_ref()]),
            ..Default::default()
        },
        spec: api::WorkloadSpec {
            controller_ref: Some(api::TypedLocalObjectReference {
                api_group: Some(api_group.to_string()),
                kind: owner.kind.to_string(),
                name: owner.name.to_string(),
            }),
            pod_group_templates: Some(templates),
            ..Default::default()
        },
    }
}

/// A PodGroup controlled by `owner`, made from template `template` of Workload `workload`
/// when given.
pub(crate) fn pod_group(
    owner: &Owner,
    name: &str,
    workload: Option<(&str, &str)>,
    policy: api::PodGroupSchedulingPolicy,
    topology_key: Option<&str>,
) -> api::PodGroup {
    api::PodGroup {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(owner.namespace.to_string()),
            owner_references: Some(vec![owner.controller_ref()]),
            ..Default::default()
        },
        spec: api::PodGroupSpec {
            scheduling_policy: policy,
            scheduling_constraints: topology(topology_key),
            workload_ref: workload.map(|(w, t)| api::WorkloadReference {
                workload_name: w.to_string(),
                template_name: t.to_string(),
            }),
            ..Default::default()
        },
        status: None,
    }
}

/// Expands every workload object of `collected` into the objects its controller creates and
/// adds them to `collected`. The input's own objects keep their places; generated ones follow.
pub(crate) fn expand(collected: &mut Collected) -> Result<(), LoadError> {
    let objects = std::mem::take(&mut collected.workload_objects);
    if objects.is_empty() {
        return Ok(());
    }
    let mut taken: HashSet<(String, String)> = collected
        .pods
        .iter()
        .map(|p| (p.namespace.clone().unwrap_or_default(), p.name.clone()))
        .collect();
    let mut new_pods = Vec::new();
    for entry in &objects {
        let namespace = entry.namespace.clone().unwrap_or_default();
        let (api_version, kind, meta) = match &*entry.value {
            Object::RayCluster(o) => ("ray.io/v1", "RayCluster", &o.metadata),
            Object::RayJob(o) => ("ray.io/v1", "RayJob", &o.metadata),
            Object::Job(o) => ("batch/v1", "Job", &o.metadata),
            Object::JobSet(o) => ("jobset.x-k8s.io/v1alpha2", "JobSet", &o.metadata),
            Object::Deployment(o) => ("apps/v1", "Deployment", &o.metadata),
            Object::ReplicaSet(o) => ("apps/v1", "ReplicaSet", &o.metadata),
            Object::StatefulSet(o) => ("apps/v1", "StatefulSet", &o.metadata),
            Object::LeaderWorkerSet(o) => (
                "leaderworkerset.x-k8s.io/v1",
                "LeaderWorkerSet",
                &o.metadata,
            ),
        };
        let owner = Owner {
            api_version,
            kind,
            namespace: &namespace,
            name: &entry.name,
            object: &entry.object,
            origin: &entry.origin,
            uid: meta.uid.clone().unwrap_or_default(),
        };
        let existing = Existing {
            pods: &collected.pods,
        };
        let expansion = match &*entry.value {
            Object::RayCluster(o) => ray::expand_cluster(&owner, o, &existing)?,
            Object::RayJob(o) => ray::expand_job(&owner, o, &existing)?,
            Object::Job(o) => job::expand(&owner, o, &existing)?,
            Object::JobSet(o) => jobset::expand(&owner, o, &existing)?,
            Object::Deployment(o) => apps::expand_deployment(&owner, o, &existing)?,
            Object::ReplicaSet(o) => apps::expand_replica_set(&owner, o, &existing)?,
            Object::StatefulSet(o) => apps::expand_stateful_set(&owner, o, &existing)?,
            Object::LeaderWorkerSet(o) => lws::expand(&owner, o, &existing)?,
        };
        add_expansion(collected, &owner, expansion, &mut taken, &mut new_pods)?;
        check_pod_count(
            &owner,
            "(all workload objects so far)",
            new_pods.len() as i64,
        )?;
    }
    let drafts = crate::map_in_order(new_pods, |e: Entry<core::Pod>| {
        let (head, pod) = e.split();
        let draft = crate::convert::pod::draft(&head, *pod);
        head.with(draft)
    });
    collected.pods.extend(drafts);
    Ok(())
}

/// Adds one object's expansion: Workload API objects at once (an object of the same name in
/// the input is used instead when `owner` controls it, and is an error otherwise), pods to
/// `new_pods` under their resolved names.
fn add_expansion(
    collected: &mut Collected,
    owner: &Owner,
    expansion: Expansion,
    taken: &mut HashSet<(String, String)>,
    new_pods: &mut Vec<Entry<core::Pod>>,
) -> Result<(), LoadError> {
    let ns = owner.namespace.to_string();
    collected.warnings.extend(expansion.warnings);
    for name in expansion.adopted {
        collected
            .owners
            .push((format!("{ns}/{name}"), owner.object.to_string()));
    }
    let entry = |kind: &str, name: &str| Entry {
        origin: owner.origin.clone(),
        object: format!("{kind} {ns}/{name} (from {})", owner.object),
        namespace: Some(ns.clone()),
        name: name.to_string(),
        value: Box::new(()),
    };
    for w in expansion.workloads {
        let name = w.metadata.name.clone().unwrap_or_default();
        let found = collected
            .workloads
            .iter()
            .find(|e| e.namespace.as_deref() == Some(&ns) && e.name == name);
        if resolve_clash(
            owner,
            "Workload",
            &name,
            found.map(|e| (&e.origin, &e.value.metadata)),
        )? {
            collected
                .origins
                .push((format!("Workload {ns}/{name}"), owner.origin.clone()));
            collected.workloads.push(entry("Workload", &name).with(w));
        }
    }
    for g in expansion.composites {
        let name = g.metadata.name.clone().unwrap_or_default();
        let found = collected
            .composite_pod_groups
            .iter()
            .find(|e| e.namespace.as_deref() == Some(&ns) && e.name == name);
        if resolve_clash(
            owner,
            "CompositePodGroup",
            &name,
            found.map(|e| (&e.origin, &e.value.metadata)),
        )? {
            collected.origins.push((
                format!("CompositePodGroup {ns}/{name}"),
                owner.origin.clone(),
            ));
            collected
                .composite_pod_groups
                .push(entry("CompositePodGroup", &name).with(g));
        }
    }
    for g in expansion.pod_groups {
        let name = g.metadata.name.clone().unwrap_or_default();
        let found = collected
            .pod_groups
            .iter()
            .find(|e| e.namespace.as_deref() == Some(&ns) && e.name == name);
        if resolve_clash(
            owner,
            "PodGroup",
            &name,
            found.map(|e| (&e.origin, &e.value.0.metadata)),
        )? {
            collected
                .origins
                .push((format!("PodGroup {ns}/{name}"), owner.origin.clone()));
            collected
                .pod_groups
                .push(entry("PodGroup", &name).with((g, GroupStatus::default())));
        }
    }
    for p in expansion.pods {
        let name = match p.name {
            PodName::Fixed(name) => {
                if taken.contains(&(ns.clone(), name.clone())) {
                    return Err(owner.invalid(
                        p.source,
                        format!(
                            "the controller would create Pod {ns}/{name}, but a Pod of that name \
                             that it does not own is already in the input; rename one of them"
                        ),
                    ));
                }
                name
            }
            PodName::Generate(prefix) => (0u64..)
                .map(|n| format!("{prefix}{n}"))
                .find(|n| !taken.contains(&(ns.clone(), n.clone())))
                .expect("an unused name exists"),
            PodName::Indexed(prefix) => {
                let base = prefix.trim_end_matches('-').to_string();
                std::iter::once(base)
                    .chain((0u64..).map(|n| format!("{prefix}{n}")))
                    .find(|n| !taken.contains(&(ns.clone(), n.clone())))
                    .expect("an unused name exists")
            }
        };
        if let Some(why) = dns1123_subdomain_error(&name) {
            return Err(owner.invalid(
                p.source,
                format!("the pods made from it would be named {name:?}, which is not a valid name: {why}"),
            ));
        }
        taken.insert((ns.clone(), name.clone()));
        let mut spec = p.spec;
        if let Some(group) = p.group {
            spec.scheduling_group = Some(core::PodSchedulingGroup {
                pod_group_name: Some(group),
            });
        }
        let pod = core::Pod {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns.clone()),
                labels: (!p.labels.is_empty()).then_some(p.labels),
                annotations: (!p.annotations.is_empty()).then_some(p.annotations),
                owner_references: Some(vec![p.owner]),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        };
        collected
            .origins
            .push((format!("Pod {ns}/{name}"), owner.origin.clone()));
        collected
            .owners
            .push((format!("{ns}/{name}"), owner.object.to_string()));
        let mut e = entry("Pod", &name);
        e.object = format!("Pod {ns}/{name} (from {} {})", owner.object, p.source);
        new_pods.push(e.with(pod));
    }
    Ok(())
}

/// Whether a generated Workload API object is to be added: not when the input already holds
/// one of that name that `owner` controls (the controller made it earlier); an error when the
/// input holds one that `owner` does not control, as the controller would refuse to adopt it.
fn resolve_clash(
    owner: &Owner,
    kind: &str,
    name: &str,
    found: Option<(&Origin, &ObjectMeta)>,
) -> Result<bool, LoadError> {
    if let Some(why) = dns1123_subdomain_error(name) {
        return Err(owner.invalid(
            "metadata.name",
            format!(
                "the controller would create {kind} {name:?}, which is not a valid name: {why}; \
                 rename the object (or the group it is named after)"
            ),
        ));
    }
    let Some((origin, meta)) = found else {
        return Ok(true);
    };
    if controller_of(meta).is_some_and(|r| r.kind == owner.kind && r.name == owner.name) {
        return Ok(false);
    }
    Err(owner.invalid(
        "metadata.name",
        format!(
            "the controller would create {kind} {}/{name}, but {origin} already defines one \
             that {} does not own (no controller ownerReference to it); rename one of them",
            owner.namespace, owner.object
        ),
    ))
}

/// The most pods workload objects may expand into, together (as many as a trace may hold).
pub(crate) const MAX_PODS: i64 = 1_000_000;

/// Refuses an object that asks for more than [`MAX_PODS`] pods (`count`, from the field at
/// `path`) before any is made.
pub(crate) fn check_pod_count(owner: &Owner, path: &str, count: i64) -> Result<(), LoadError> {
    if count > MAX_PODS {
        return Err(LoadError::Limit {
            origin: owner.origin.clone(),
            message: format!(
                "{}: field {path}: {count} pods; workload objects may expand into at most \
                 {MAX_PODS} pods; ask for fewer",
                owner.object
            ),
        });
    }
    Ok(())
}

/// Requires `value` to be at least 0 (an `int32` count of the API).
pub(crate) fn non_negative(owner: &Owner, path: &str, value: Option<i32>) -> Result<(), LoadError> {
    match value {
        Some(v) if v < 0 => Err(owner.invalid(
            path,
            format!("{v}: must be greater than or equal to 0; give a count of zero or more"),
        )),
        _ => Ok(()),
    }
}

/// `<prefix>` truncated as the API server truncates a `generateName` (so that the generated
/// name fits 63 characters), the way controllers' prefixes reach it.
pub(crate) fn generate_name(prefix: &str) -> String {
    const MAX_PREFIX: usize = 58;
    cut(prefix, MAX_PREFIX).to_string()
}

/// The longest start of `s` of at most `max` bytes that ends on a character boundary
/// (names are ASCII once validated, but they are cut before validation reports them).
pub(crate) fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// SHA-1 of `text` in lower-case hex, as JobSet and LeaderWorkerSet compute their job and
/// group keys.
pub(crate) fn sha1_hex(text: &str) -> String {
    sha1::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_name_keeps_short_prefixes_and_truncates_long_ones() {
        assert_eq!(generate_name("web-"), "web-");
        let long = format!("{}-", "a".repeat(70));
        assert_eq!(generate_name(&long).len(), 58);
        // A name that is not ASCII (invalid, reported later) is cut between characters.
        let wide = "\u{b4}".repeat(40);
        assert_eq!(generate_name(&wide).len(), 58);
        assert_eq!(cut("ab\u{b4}", 3), "ab");
    }

    #[test]
    fn sha1_matches_known_digests() {
        assert_eq!(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
    }
}
