//! Pods: identity, priority, effective requests and scheduling constraints.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1 as core;
use lockstep_model::{
    HostPort, InclusionPolicy, LabelSelector, Labels, NodeAffinity, Operator, Pod, PodAffinity,
    PodAffinityTerm, PodPhase, PodResourceClaim, PreemptionPolicy, Requirement, ResourceList,
    ResourceNames, Toleration, TolerationOperator, TopologySpreadConstraint, WhenUnsatisfiable,
};

use super::policy::{Priorities, preemption_policy};
use super::requests::{
    Amounts, EffectiveRequests, PodResources, effective_requests, is_pod_level_resource,
};
use super::{Ctx, dra::dns_label, node::taint_effect, selectors};
use crate::error::LoadError;
use crate::route::Entry;
use crate::workloads::{InputPod, PodFacts, Unconverted};

fn resource_names(pod: &core::Pod, names: &mut BTreeSet<String>) {
    let Some(spec) = &pod.spec else { return };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let maps = containers
        .filter_map(|c| c.resources.as_ref())
        .chain(spec.resources.as_ref())
        .flat_map(|r| r.requests.iter().chain(r.limits.iter()))
        .chain(spec.overhead.iter());
    for map in maps {
        names.extend(map.keys().cloned());
    }
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// A pod converted as far as it can be while the input is still being read, so its typed
/// object can be freed at once: everything but its priority (the PriorityClasses may come
/// later in the input) and the ids of its requests (resource names are interned in name
/// order once every name is known). [`finish`] completes it.
pub(crate) struct Draft {
    stage: Stage,
    /// `spec.priority`, `spec.priorityClassName` (when not empty), `spec.preemptionPolicy`.
    priority: Option<i32>,
    class: Option<String>,
    preemption_policy: Option<PreemptionPolicy>,
    /// The effective requests by resource name.
    requests: Vec<(String, i64)>,
    /// The other resource names the pod's spec mentions (limits, overhead), interned as the
    /// requested ones are.
    other_names: Vec<String>,
    /// What workload controllers read of a pod given in the input.
    facts: PodFacts,
}

/// How far a draft's conversion went. Nearly always `Converted`, in a draft that is boxed:
/// the pod is not boxed again.
#[allow(clippy::large_enum_variant)]
enum Stage {
    /// An error met before the priority check (no spec, no containers).
    Early(Box<Failure>),
    /// The first error met after it.
    Failed(Box<Failure>),
    /// The pod with an empty `requests` and priority 0.
    Converted(Pod),
}

/// A pod that could not be converted: the error, and what controllers read of it instead of
/// the converted pod.
struct Failure {
    error: LoadError,
    unconverted: Unconverted,
}

impl Draft {
    /// Every resource name the pod's spec mentions.
    pub(crate) fn resource_names(&self) -> impl Iterator<Item = &str> {
        self.requests
            .iter()
            .map(|(name, _)| name.as_str())
            .chain(self.other_names.iter().map(String::as_str))
    }

    /// The pod as workload controllers see it when they count the pods they own.
    pub(crate) fn input_pod<'a>(&'a self, name: &'a str) -> InputPod<'a> {
        match &self.stage {
            Stage::Converted(pod) => InputPod::converted(name, pod, &self.facts),
            Stage::Early(f) | Stage::Failed(f) => {
                InputPod::unconverted(name, &f.unconverted, &self.facts)
            }
        }
    }
}

/// Converts everything of `p` that does not need the rest of the input.
pub(crate) fn draft(entry: &Entry<()>, p: core::Pod) -> Draft {
    let ctx = Ctx {
        origin: &entry.origin,
        object: &entry.object,
    };
    let mut names = BTreeSet::new();
    resource_names(&p, &mut names);
    let spec = p.spec.as_ref();
    let mut preemption = None;
    let mut requests = Vec::new();
    let failure = |error| {
        Box::new(Failure {
            error,
            unconverted: Unconverted::of(&p),
        })
    };
    let stage = match spec {
        None => Stage::Early(failure(
            ctx.invalid("spec", "a pod needs spec.containers; add a spec"),
        )),
        Some(spec) if spec.containers.is_empty() => Stage::Early(failure(ctx.invalid(
            "spec.containers",
            "a pod needs at least one container; add one",
        ))),
        Some(spec) => {
            let converted = preemption_policy(
                &ctx,
                "spec.preemptionPolicy",
                spec.preemption_policy.as_deref(),
            )
            .and_then(|policy| Ok((policy, convert(&ctx, entry, &p)?)));
            match converted {
                Ok((policy, (pod, effective))) => {
                    preemption = policy;
                    names.retain(|n| !effective.requests.contains_key(n));
                    requests = effective.requests.into_iter().collect();
                    Stage::Converted(pod)
                }
                Err(e) => Stage::Failed(failure(e)),
            }
        }
    };
    let facts = PodFacts::of(&p);
    Draft {
        stage,
        priority: spec.and_then(|s| s.priority),
        class: spec
            .and_then(|s| non_empty(&s.priority_class_name))
            .map(str::to_string),
        preemption_policy: preemption,
        requests,
        other_names: names.into_iter().collect(),
        facts,
    }
}

/// Completes a draft: its priority from the PriorityClasses (an error when it names a class
/// that does not exist) and its requests' ids from `names`. The errors come in the order a
/// pod's checks run: spec and containers, the priority class, then the rest.
pub(crate) fn finish(
    entry: Entry<Draft>,
    priorities: &Priorities,
    names: &mut ResourceNames,
) -> Result<Pod, LoadError> {
    let Entry {
        origin,
        namespace,
        name,
        value,
        ..
    } = entry;
    let draft = *value;
    if let Stage::Early(f) = draft.stage {
        return Err(f.error);
    }
    // Priority: spec.priority, else the named class, else the global default class, else 0.
    let (priority, class_name, class) = match (draft.priority, draft.class) {
        (Some(value), name) => {
            let class = name.as_deref().and_then(|n| priorities.get(n));
            (value, name, class)
        }
        (None, Some(class_name)) => match priorities.get(&class_name) {
            Some(class) => (class.value, Some(class_name), Some(class)),
            None => {
                return Err(LoadError::UndefinedPriorityClass {
                    pod: format!("{}/{name}", namespace.unwrap_or_default()),
                    origin,
                    class: class_name,
                });
            }
        },
        (None, None) => match priorities.global_default() {
            Some(class) => (class.value, Some(class.name.clone()), Some(class)),
            None => (0, None, None),
        },
    };
    let mut pod = match draft.stage {
        Stage::Converted(pod) => pod,
        Stage::Early(f) | Stage::Failed(f) => return Err(f.error),
    };
    pod.priority = priority;
    pod.preemption_policy = match draft.preemption_policy {
        Some(policy) => policy,
        None => class
            .map(|c| c.preemption_policy)
            .unwrap_or(PreemptionPolicy::PreemptLowerPriority),
    };
    pod.priority_class_name = class_name;
    let mut requests = ResourceList::new();
    for (name, value) in &draft.requests {
        requests.set(names.intern(name), *value);
    }
    pod.requests = requests;
    Ok(pod)
}

/// The checks and conversions of a pod after its priority, returning the pod (priority and
/// requests to be set by [`finish`]) and its effective requests by name.
fn convert(
    ctx: &Ctx,
    entry: &Entry<()>,
    p: &core::Pod,
) -> Result<(Pod, EffectiveRequests), LoadError> {
    let spec = p.spec.as_ref().expect("checked by the caller");
    let namespace = entry.namespace.clone().unwrap_or_default();
    let labels: Labels = p.metadata.labels.clone().unwrap_or_default();
    let phase = match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        None | Some("") | Some("Pending") => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        Some(other) => {
            return Err(ctx.invalid(
                "status.phase",
                format!(
                    "invalid phase {other:?}; use Pending, Running, Succeeded, Failed or Unknown"
                ),
            ));
        }
    };

    let mut resource_claims = resource_claims(ctx, spec)?;
    generated_claims(ctx, p, &mut resource_claims)?;
    let resources = pod_resources(ctx, spec)?;
    let effective = effective_requests(&resources);

    let mut node_affinity = NodeAffinity::default();
    let mut pod_affinity = PodAffinity::default();
    let mut pod_anti_affinity = PodAffinity::default();
    if let Some(affinity) = &spec.affinity {
        if let Some(na) = &affinity.node_affinity {
            node_affinity = convert_node_affinity(ctx, na)?;
        }
        if let Some(pa) = &affinity.pod_affinity {
            pod_affinity = convert_pod_affinity(
                ctx,
                "spec.affinity.podAffinity",
                pa.required_during_scheduling_ignored_during_execution
                    .as_deref(),
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
                &labels,
            )?;
        }
        if let Some(pa) = &affinity.pod_anti_affinity {
            pod_anti_affinity = convert_pod_affinity(
                ctx,
                "spec.affinity.podAntiAffinity",
                pa.required_during_scheduling_ignored_during_execution
                    .as_deref(),
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
                &labels,
            )?;
        }
    }

    let pod = Pod {
        namespace,
        name: entry.name.clone(),
        priority: 0,
        priority_class_name: None,
        preemption_policy: PreemptionPolicy::PreemptLowerPriority,
        creation_timestamp: p
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
        start_time: p
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_second()),
        node_name: non_empty(&spec.node_name).map(str::to_string),
        nominated_node_name: p
            .status
            .as_ref()
            .and_then(|s| non_empty(&s.nominated_node_name))
            .map(str::to_string),
        scheduler_name: non_empty(&spec.scheduler_name)
            .unwrap_or("default-scheduler")
            .to_string(),
        phase,
        requests: ResourceList::new(),
        non_zero_cpu: effective.non_zero_cpu,
        non_zero_memory: effective.non_zero_memory,
        node_selector: spec
            .node_selector
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        node_affinity,
        pod_affinity,
        pod_anti_affinity,
        tolerations: tolerations(ctx, spec)?,
        host_ports: host_ports(ctx, spec)?,
        topology_spread: topology_spread(ctx, spec, &labels)?,
        pod_group: spec
            .scheduling_group
            .as_ref()
            .and_then(|g| non_empty(&g.pod_group_name))
            .map(str::to_string),
        resource_claims,
        terminating: p.metadata.deletion_timestamp.is_some(),
        labels,
    };
    Ok((pod, effective))
}

/// `spec.resourceClaims`: each with a unique DNS-label name and exactly one of
/// `resourceClaimName` and `resourceClaimTemplateName`; every `resources.claims` entry of a
/// container must name one of them. Whether the claim or template exists is not checked: in
/// Kubernetes the pod waits for it, so that is the engine's business.
fn resource_claims(ctx: &Ctx, spec: &core::PodSpec) -> Result<Vec<PodResourceClaim>, LoadError> {
    let mut out: Vec<PodResourceClaim> = Vec::new();
    for (i, c) in spec.resource_claims.iter().flatten().enumerate() {
        let path = format!("spec.resourceClaims[{i}]");
        dns_label(
            ctx,
            &format!("{path}.name"),
            &c.name,
            "pod resource claim name",
        )?;
        if let Some(first) = out.iter().position(|o| o.name == c.name) {
            return Err(ctx.invalid(
                format!("{path}.name"),
                format!(
                    "claim name {:?} is also used by spec.resourceClaims[{first}]; give each \
                     claim its own name",
                    c.name
                ),
            ));
        }
        let claim = non_empty(&c.resource_claim_name).map(str::to_string);
        let template = non_empty(&c.resource_claim_template_name).map(str::to_string);
        if claim.is_some() == template.is_some() {
            return Err(ctx.invalid(
                path,
                "set exactly one of resourceClaimName and resourceClaimTemplateName",
            ));
        }
        out.push(PodResourceClaim {
            name: c.name.clone(),
            resource_claim_name: claim,
            resource_claim_template_name: template,
            generated_claim: None,
        });
    }
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}]"), c))
        .chain(
            spec.init_containers
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, c)| (format!("spec.initContainers[{i}]"), c)),
        );
    for (path, c) in containers {
        let used = c.resources.as_ref().and_then(|r| r.claims.as_deref());
        for (j, used) in used.into_iter().flatten().enumerate() {
            if !out.iter().any(|o| o.name == used.name) {
                return Err(ctx.invalid(
                    format!("{path}.resources.claims[{j}].name"),
                    format!(
                        "{:?} is not in spec.resourceClaims; add a pod resource claim of that \
                         name or remove this entry",
                        used.name
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// `status.resourceClaimStatuses`: the ResourceClaim made for each claim from a template.
/// Each entry must name a claim of `spec.resourceClaims`.
fn generated_claims(
    ctx: &Ctx,
    p: &core::Pod,
    claims: &mut [PodResourceClaim],
) -> Result<(), LoadError> {
    let statuses = p
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_deref())
        .unwrap_or_default();
    for (i, st) in statuses.iter().enumerate() {
        let path = format!("status.resourceClaimStatuses[{i}]");
        let Some(c) = claims.iter_mut().find(|c| c.name == st.name) else {
            return Err(ctx.invalid(
                format!("{path}.name"),
                format!(
                    "{:?} is not in spec.resourceClaims; name a pod resource claim or remove \
                     this entry",
                    st.name
                ),
            ));
        };
        let Some(generated) = non_empty(&st.resource_claim_name) else {
            continue;
        };
        // A claim that names an existing ResourceClaim uses that one.
        if c.resource_claim_template_name.is_some() {
            c.generated_claim = Some(generated.to_string());
        }
    }
    Ok(())
}

/// A container's requests after API-server defaulting: a resource with a limit but no
/// request is requested at its limit.
fn container_requests(ctx: &Ctx, path: &str, c: &core::Container) -> Result<Amounts, LoadError> {
    let Some(resources) = &c.resources else {
        return Ok(Amounts::new());
    };
    for (field, map) in [
        ("requests", &resources.requests),
        ("limits", &resources.limits),
    ] {
        if map.as_ref().is_some_and(|m| m.contains_key("pods")) {
            return Err(ctx.invalid(
                format!("{path}.resources.{field}.pods"),
                "pods is not a container resource; remove it",
            ));
        }
    }
    let mut requests = ctx.amounts(
        &format!("{path}.resources.requests"),
        resources.requests.as_ref(),
    )?;
    let limits = ctx.amounts(
        &format!("{path}.resources.limits"),
        resources.limits.as_ref(),
    )?;
    for (name, value) in limits {
        requests.entry(name).or_insert(value);
    }
    Ok(requests)
}

fn pod_resources(ctx: &Ctx, spec: &core::PodSpec) -> Result<PodResources, LoadError> {
    let mut out = PodResources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        out.containers.push(container_requests(
            ctx,
            &format!("spec.containers[{i}]"),
            c,
        )?);
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let path = format!("spec.initContainers[{i}]");
        let restartable = match c.restart_policy.as_deref() {
            None | Some("") => false,
            Some("Always") => true,
            Some(other) => {
                return Err(ctx.invalid(
                    format!("{path}.restartPolicy"),
                    format!(
                        "invalid restartPolicy {other:?} for an init container; use Always \
                         (a sidecar) or leave it out"
                    ),
                ));
            }
        };
        out.init_containers
            .push((container_requests(ctx, &path, c)?, restartable));
    }
    if let Some(resources) = &spec.resources {
        for (field, map) in [
            ("requests", &resources.requests),
            ("limits", &resources.limits),
        ] {
            if let Some(name) = map
                .iter()
                .flatten()
                .map(|(k, _)| k)
                .find(|k| !is_pod_level_resource(k))
            {
                return Err(ctx.invalid(
                    format!("spec.resources.{field}.{name}"),
                    "only cpu, memory and hugepages-* can be set at pod level; set other \
                     resources on the containers",
                ));
            }
        }
        out.pod_requests = ctx.amounts("spec.resources.requests", resources.requests.as_ref())?;
        out.pod_limits = ctx.amounts("spec.resources.limits", resources.limits.as_ref())?;
    }
    if spec
        .overhead
        .as_ref()
        .is_some_and(|m| m.contains_key("pods"))
    {
        return Err(ctx.invalid(
            "spec.overhead.pods",
            "pods is not an overhead resource; remove it",
        ));
    }
    out.overhead = ctx.amounts("spec.overhead", spec.overhead.as_ref())?;
    Ok(out)
}

fn convert_node_affinity(ctx: &Ctx, na: &core::NodeAffinity) -> Result<NodeAffinity, LoadError> {
    let base = "spec.affinity.nodeAffinity";
    let required = match &na.required_during_scheduling_ignored_during_execution {
        None => None,
        Some(selector) => {
            if selector.node_selector_terms.is_empty() {
                return Err(ctx.invalid(
                    format!(
                        "{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
                    ),
                    "must have at least one node selector term; add a term or remove \
                     requiredDuringSchedulingIgnoredDuringExecution",
                ));
            }
            let mut terms = Vec::new();
            for (i, t) in selector.node_selector_terms.iter().enumerate() {
                let path = format!(
                    "{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
                );
                terms.push(selectors::node_selector_term(ctx, &path, t)?);
            }
            Some(terms)
        }
    };
    let mut preferred = Vec::new();
    for (i, t) in na
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .flatten()
        .enumerate()
    {
        let path = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        check_weight(ctx, &path, t.weight)?;
        let term =
            selectors::node_selector_term(ctx, &format!("{path}.preference"), &t.preference)?;
        preferred.push((t.weight, term));
    }
    Ok(NodeAffinity {
        required,
        preferred,
    })
}

fn check_weight(ctx: &Ctx, path: &str, weight: i32) -> Result<(), LoadError> {
    if (1..=100).contains(&weight) {
        Ok(())
    } else {
        Err(ctx.invalid(
            format!("{path}.weight"),
            format!("weight {weight} is out of range; use 1 to 100"),
        ))
    }
}

/// Adds `key In [value]` (or `NotIn`) for each key that the pod's labels have, as the API
/// server does for `matchLabelKeys` / `mismatchLabelKeys`.
fn merge_label_keys(
    selector: &mut LabelSelector,
    keys: Option<&Vec<String>>,
    operator: Operator,
    labels: &Labels,
) {
    for key in keys.into_iter().flatten() {
        if let Some(value) = labels.get(key) {
            selector.match_expressions.push(Requirement {
                key: key.clone(),
                operator,
                values: vec![value.clone()],
            });
        }
    }
}

fn affinity_term(
    ctx: &Ctx,
    path: &str,
    t: &core::PodAffinityTerm,
    labels: &Labels,
) -> Result<PodAffinityTerm, LoadError> {
    if t.topology_key.is_empty() {
        return Err(ctx.invalid(
            format!("{path}.topologyKey"),
            "a pod affinity term needs a topologyKey (a node label such as \
             kubernetes.io/hostname); add it",
        ));
    }
    if let Some(why) = crate::route::label_key_error(&t.topology_key) {
        return Err(ctx.invalid(
            format!("{path}.topologyKey"),
            format!("{:?} is not a valid topology key: {why}", t.topology_key),
        ));
    }
    let selector = match &t.label_selector {
        None => None,
        Some(s) => {
            let mut selector = selectors::label_selector(ctx, &format!("{path}.labelSelector"), s)?;
            merge_label_keys(
                &mut selector,
                t.match_label_keys.as_ref(),
                Operator::In,
                labels,
            );
            merge_label_keys(
                &mut selector,
                t.mismatch_label_keys.as_ref(),
                Operator::NotIn,
                labels,
            );
            Some(selector)
        }
    };
    let namespace_selector = t
        .namespace_selector
        .as_ref()
        .map(|s| selectors::label_selector(ctx, &format!("{path}.namespaceSelector"), s))
        .transpose()?;
    Ok(PodAffinityTerm {
        selector,
        namespaces: t.namespaces.clone().unwrap_or_default(),
        namespace_selector,
        topology_key: t.topology_key.clone(),
    })
}

fn convert_pod_affinity(
    ctx: &Ctx,
    base: &str,
    required: Option<&[core::PodAffinityTerm]>,
    preferred: Option<&[core::WeightedPodAffinityTerm]>,
    labels: &Labels,
) -> Result<PodAffinity, LoadError> {
    let mut out = PodAffinity::default();
    for (i, t) in required.into_iter().flatten().enumerate() {
        let path = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.required.push(affinity_term(ctx, &path, t, labels)?);
    }
    for (i, w) in preferred.into_iter().flatten().enumerate() {
        let path = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        check_weight(ctx, &path, w.weight)?;
        let term = affinity_term(
            ctx,
            &format!("{path}.podAffinityTerm"),
            &w.pod_affinity_term,
            labels,
        )?;
        out.preferred.push((w.weight, term));
    }
    Ok(out)
}

/// A toleration (a pod's or a device request's) from its key, operator and value, checked as
/// the API server checks them, and its effect (parsed by the caller: pods and devices allow
/// different ones). `path` names the toleration.
pub(crate) fn toleration(
    ctx: &Ctx,
    path: &str,
    key: Option<&str>,
    operator: Option<&str>,
    value: Option<&str>,
    effect: Option<lockstep_model::TaintEffect>,
) -> Result<Toleration, LoadError> {
    let operator = match operator {
        None | Some("") | Some("Equal") => TolerationOperator::Equal,
        Some("Exists") => TolerationOperator::Exists,
        Some(other) => {
            return Err(ctx.invalid(
                format!("{path}.operator"),
                format!("invalid operator {other:?}; use Equal or Exists"),
            ));
        }
    };
    let key = key.unwrap_or_default().to_string();
    let value = value.unwrap_or_default().to_string();
    if key.is_empty() && operator == TolerationOperator::Equal {
        return Err(ctx.invalid(
            format!("{path}.operator"),
            "a toleration without a key must use operator Exists; add operator: Exists or a key",
        ));
    }
    if operator == TolerationOperator::Exists && !value.is_empty() {
        return Err(ctx.invalid(
            format!("{path}.value"),
            "a toleration with operator Exists takes no value; remove value",
        ));
    }
    Ok(Toleration {
        key,
        operator,
        value,
        effect,
    })
}

fn tolerations(ctx: &Ctx, spec: &core::PodSpec) -> Result<Vec<Toleration>, LoadError> {
    let mut out = Vec::new();
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let path = format!("spec.tolerations[{i}]");
        let effect = taint_effect(
            ctx,
            &format!("{path}.effect"),
            t.effect.as_deref().unwrap_or(""),
        )?;
        out.push(toleration(
            ctx,
            &path,
            t.key.as_deref(),
            t.operator.as_deref(),
            t.value.as_deref(),
            effect,
        )?);
    }
    Ok(out)
}

/// Host ports of regular containers and of sidecars (restartable init containers), as
/// kube-scheduler's NodePorts plugin counts them. With `hostNetwork` every container port is
/// also a host port.
fn host_ports(ctx: &Ctx, spec: &core::PodSpec) -> Result<Vec<HostPort>, LoadError> {
    let host_network = spec.host_network.unwrap_or(false);
    let regular = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}]"), c));
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| c.restart_policy.as_deref() == Some("Always"))
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c));
    let mut out = Vec::new();
    for (path, c) in regular.chain(sidecars) {
        for (j, port) in c.ports.iter().flatten().enumerate() {
            let path = format!("{path}.ports[{j}]");
            if !(1..=65535).contains(&port.container_port) {
                return Err(ctx.invalid(
                    format!("{path}.containerPort"),
                    format!(
                        "port {} is out of range; use 1 to 65535",
                        port.container_port
                    ),
                ));
            }
            if let Some(p) = port.host_port
                && !(0..=65535).contains(&p)
            {
                return Err(ctx.invalid(
                    format!("{path}.hostPort"),
                    format!("port {p} is out of range; use 1 to 65535, or 0 for none"),
                ));
            }
            let mut host_port = port.host_port.unwrap_or(0);
            if host_network && host_port == 0 {
                host_port = port.container_port;
            }
            if host_port <= 0 {
                continue;
            }
            if host_port > 65535 {
                return Err(ctx.invalid(
                    format!("{path}.hostPort"),
                    format!("port {host_port} is out of range; use 1 to 65535"),
                ));
            }
            let protocol = match port.protocol.as_deref() {
                None | Some("") => "TCP",
                Some(p @ ("TCP" | "UDP" | "SCTP")) => p,
                Some(other) => {
                    return Err(ctx.invalid(
                        format!("{path}.protocol"),
                        format!("invalid protocol {other:?}; use TCP, UDP or SCTP"),
                    ));
                }
            };
            out.push(HostPort {
                protocol: protocol.to_string(),
                host_ip: port.host_ip.clone().unwrap_or_default(),
                port: host_port,
            });
        }
    }
    Ok(out)
}

fn inclusion_policy(
    ctx: &Ctx,
    path: &str,
    value: Option<&str>,
    default: InclusionPolicy,
) -> Result<InclusionPolicy, LoadError> {
    match value {
        None | Some("") => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(ctx.invalid(
            path,
            format!("invalid policy {other:?}; use Honor or Ignore"),
        )),
    }
}

fn topology_spread(
    ctx: &Ctx,
    spec: &core::PodSpec,
    labels: &Labels,
) -> Result<Vec<TopologySpreadConstraint>, LoadError> {
    let mut out = Vec::new();
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        let path = format!("spec.topologySpreadConstraints[{i}]");
        let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            other => {
                return Err(ctx.invalid(
                    format!("{path}.whenUnsatisfiable"),
                    format!("invalid value {other:?}; use DoNotSchedule or ScheduleAnyway"),
                ));
            }
        };
        if c.max_skew <= 0 {
            return Err(ctx.invalid(
                format!("{path}.maxSkew"),
                format!("maxSkew {} must be greater than zero", c.max_skew),
            ));
        }
        if c.topology_key.is_empty() {
            return Err(ctx.invalid(
                format!("{path}.topologyKey"),
                "a topology spread constraint needs a topologyKey (a node label such as \
                 topology.kubernetes.io/zone); add it",
            ));
        }
        if let Some(why) = crate::route::label_key_error(&c.topology_key) {
            return Err(ctx.invalid(
                format!("{path}.topologyKey"),
                format!("{:?} is not a valid topology key: {why}", c.topology_key),
            ));
        }
        if let Some(min) = c.min_domains {
            if min <= 0 {
                return Err(ctx.invalid(
                    format!("{path}.minDomains"),
                    format!("minDomains {min} must be greater than zero"),
                ));
            }
            if when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
                return Err(ctx.invalid(
                    format!("{path}.minDomains"),
                    "minDomains can be set only with whenUnsatisfiable: DoNotSchedule",
                ));
            }
        }
        let selector = match &c.label_selector {
            None => None,
            Some(s) => {
                let mut selector =
                    selectors::label_selector(ctx, &format!("{path}.labelSelector"), s)?;
                merge_label_keys(
                    &mut selector,
                    c.match_label_keys.as_ref(),
                    Operator::In,
                    labels,
                );
                Some(selector)
            }
        };
        out.push(TopologySpreadConstraint {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            when_unsatisfiable,
            selector,
            min_domains: c.min_domains,
            node_affinity_policy: inclusion_policy(
                ctx,
                &format!("{path}.nodeAffinityPolicy"),
                c.node_affinity_policy.as_deref(),
                InclusionPolicy::Honor,
            )?,
            node_taints_policy: inclusion_policy(
                ctx,
                &format!("{path}.nodeTaintsPolicy"),
                c.node_taints_policy.as_deref(),
                InclusionPolicy::Ignore,
            )?,
        });
    }
    Ok(out)
}
