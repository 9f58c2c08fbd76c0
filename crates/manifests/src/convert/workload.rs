//! The Workload API (`scheduling.k8s.io` v1beta1 and v1alpha3): PodGroups, CompositePodGroups
//! and Workloads, validated as the API server validates them, and the group tree they form.
//!
//! Per object: a scheduling policy is exactly one of `basic` and `gang` (`gang.minCount` or
//! `gang.minGroupCount` at least 1), at most one topology constraint with a non-empty key,
//! `disruptionMode` exactly one of `single` and `all`, a known `preemptionPolicy`, resource
//! claims with a unique name and exactly one source. A Workload holds exactly one of
//! `podGroupTemplates` and `compositePodGroupTemplates`, at most 8 templates per list, template
//! names unique in the whole Workload, every CompositePodGroupTemplate with at least one child,
//! and a template tree at most 4 levels deep.
//!
//! Across objects ([`check_group_tree`], once every file is loaded): a
//! `parentCompositePodGroupName` names a CompositePodGroup of the same namespace, parents do
//! not form a cycle, and the group tree is at most 4 levels deep.

use std::collections::HashMap;

use k8s_openapi::api::scheduling::v1beta1 as api;
use lockstep_model::{
    CompositePodGroup, DisruptionMode, GroupPolicy, PodGroup, PodGroupClaim, PreemptionPolicy,
    Workload,
};
use serde_json::Value as Json;

use super::Ctx;
use super::policy::{Priorities, preemption_policy};
use crate::error::LoadError;
use crate::route::Entry;
use crate::workload_api::{self, GroupStatus};

/// The most templates one list of a Workload may hold, and the most child templates of each
/// kind one CompositePodGroupTemplate may hold.
const MAX_TEMPLATES: usize = 8;

/// The deepest a group tree may be: the root is level 1 and every child one level below its
/// parent; a PodGroup is always a leaf.
const MAX_DEPTH: usize = 4;

/// The PodGroup condition that records that the gang condition once held.
const INITIALLY_SCHEDULED: &str = "PodGroupInitiallyScheduled";

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

/// A short description of a JSON value for messages.
fn describe(value: &Json) -> &'static str {
    match value {
        Json::Null => "nothing",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "a mapping",
    }
}

/// Whether a marker field such as `basic: {}` or `single: {}` is set; a value other than a
/// mapping is an error.
fn marker(ctx: &Ctx, path: &str, value: Option<&Json>) -> Result<bool, LoadError> {
    match value {
        None | Some(Json::Null) => Ok(false),
        Some(Json::Object(_)) => Ok(true),
        Some(other) => Err(ctx.invalid(
            path,
            format!(
                "expected an empty mapping, found {}; write {{}}",
                describe(other)
            ),
        )),
    }
}

/// What a group's `gang` policy counts, for messages.
#[derive(Clone, Copy)]
enum Members {
    /// A PodGroup: `gang.minCount` pods.
    Pods,
    /// A CompositePodGroup: `gang.minGroupCount` child groups.
    Groups,
}

impl Members {
    fn field(self) -> &'static str {
        match self {
            Members::Pods => "minCount",
            Members::Groups => "minGroupCount",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Members::Pods => "pods",
            Members::Groups => "child groups",
        }
    }
}

/// A `schedulingPolicy` at `path`: exactly one of `basic` and `gang`.
fn policy(
    ctx: &Ctx,
    path: &str,
    basic: Option<&Json>,
    gang_min: Option<i32>,
    members: Members,
) -> Result<GroupPolicy, LoadError> {
    let min_field = members.field();
    let basic = marker(ctx, &format!("{path}.basic"), basic)?;
    match (basic, gang_min) {
        (true, Some(_)) => Err(ctx.invalid(
            path,
            "basic and gang are both set; keep exactly one of them",
        )),
        (false, None) => Err(ctx.invalid(
            path,
            format!(
                "neither basic nor gang is set; set exactly one of them: basic: {{}} to place \
                 {} one by one, or gang: {{{min_field}: N}} for all or nothing",
                members.what()
            ),
        )),
        (true, None) => Ok(GroupPolicy::Basic),
        (false, Some(min)) => match u32::try_from(min) {
            Ok(min) if min >= 1 => Ok(GroupPolicy::Gang { min }),
            _ => Err(ctx.invalid(
                format!("{path}.gang.{min_field}"),
                format!(
                    "{min_field} is {min} (a missing {min_field} counts as 0); it must be at \
                     least 1; set it to the number of {} that must be placed together",
                    members.what()
                ),
            )),
        },
    }
}

fn pod_group_policy(
    ctx: &Ctx,
    path: &str,
    p: &api::PodGroupSchedulingPolicy,
) -> Result<GroupPolicy, LoadError> {
    policy(
        ctx,
        path,
        p.basic.as_ref().map(|b| &b.0),
        p.gang.as_ref().map(|g| g.min_count),
        Members::Pods,
    )
}

fn composite_policy(
    ctx: &Ctx,
    path: &str,
    p: &api::CompositePodGroupSchedulingPolicy,
) -> Result<GroupPolicy, LoadError> {
    policy(
        ctx,
        path,
        p.basic.as_ref().map(|b| &b.0),
        p.gang.as_ref().map(|g| g.min_group_count),
        Members::Groups,
    )
}

/// `schedulingConstraints.topology` at `path`: at most one constraint, with a non-empty key.
fn topology_key(
    ctx: &Ctx,
    path: &str,
    topology: Option<&Vec<api::TopologyConstraint>>,
) -> Result<Option<String>, LoadError> {
    let topology = topology.map(Vec::as_slice).unwrap_or_default();
    match topology {
        [] => Ok(None),
        [one] if one.key.is_empty() => Err(ctx.invalid(
            format!("{path}.topology[0].key"),
            "a topology constraint needs a key, the node label whose values are the domains \
             (e.g. topology.kubernetes.io/rack); set key",
        )),
        [one] => match crate::route::label_key_error(&one.key) {
            Some(why) => Err(ctx.invalid(
                format!("{path}.topology[0].key"),
                format!("{:?} is not a valid topology key: {why}", one.key),
            )),
            None => Ok(Some(one.key.clone())),
        },
        more => Err(ctx.invalid(
            format!("{path}.topology"),
            format!(
                "{} topology constraints are given; at most one is allowed; keep one of them",
                more.len()
            ),
        )),
    }
}

/// `disruptionMode` at `path`: unset means `single`; when set, exactly one of `single` and
/// `all`.
fn disruption_mode(
    ctx: &Ctx,
    path: &str,
    single: Option<&Json>,
    all: Option<&Json>,
) -> Result<DisruptionMode, LoadError> {
    let single = marker(ctx, &format!("{path}.single"), single)?;
    let all = marker(ctx, &format!("{path}.all"), all)?;
    match (single, all) {
        (true, false) => Ok(DisruptionMode::Single),
        (false, true) => Ok(DisruptionMode::All),
        (true, true) => Err(ctx.invalid(
            path,
            "single and all are both set; keep exactly one of them",
        )),
        (false, false) => Err(ctx.invalid(
            path,
            "neither single nor all is set; write single: {} (members may be disrupted one by \
             one) or all: {} (only together), or remove disruptionMode",
        )),
    }
}

fn pod_group_disruption(
    ctx: &Ctx,
    path: &str,
    mode: Option<&api::DisruptionMode>,
) -> Result<DisruptionMode, LoadError> {
    match mode {
        None => Ok(DisruptionMode::Single),
        Some(m) => disruption_mode(
            ctx,
            path,
            m.single.as_ref().map(|s| &s.0),
            m.all.as_ref().map(|a| &a.0),
        ),
    }
}

fn composite_disruption(
    ctx: &Ctx,
    path: &str,
    mode: Option<&api::CompositeDisruptionMode>,
) -> Result<DisruptionMode, LoadError> {
    match mode {
        None => Ok(DisruptionMode::Single),
        Some(m) => disruption_mode(
            ctx,
            path,
            m.single.as_ref().map(|s| &s.0),
            m.all.as_ref().map(|a| &a.0),
        ),
    }
}

/// A group's priority and preemption policy, resolved as for pods: `priority` when set, else
/// the value of the named PriorityClass (which must exist), else `None`. The preemption policy
/// is `preemptionPolicy`, else the named class's, else PreemptLowerPriority.
fn priority(
    ctx: &Ctx,
    priorities: &Priorities,
    value: Option<i32>,
    class_name: Option<&str>,
    preemption: Option<&str>,
) -> Result<(Option<i32>, PreemptionPolicy), LoadError> {
    let class = class_name.and_then(|n| priorities.get(n));
    let value = match (value, class_name, class) {
        (Some(v), _, _) => Some(v),
        (None, Some(_), Some(class)) => Some(class.value),
        (None, Some(name), None) => {
            return Err(ctx.invalid(
                "spec.priorityClassName",
                format!(
                    "PriorityClass {name:?} is not defined; add the PriorityClass or remove \
                     the field"
                ),
            ));
        }
        (None, None, _) => None,
    };
    let policy = match preemption_policy(ctx, "spec.preemptionPolicy", preemption)? {
        Some(policy) => policy,
        None => class
            .map(|c| c.preemption_policy)
            .unwrap_or(PreemptionPolicy::PreemptLowerPriority),
    };
    Ok((value, policy))
}

/// `resourceClaims` at `path`: each with a unique name and exactly one of
/// `resourceClaimName` and `resourceClaimTemplateName`.
fn resource_claims(
    ctx: &Ctx,
    path: &str,
    claims: Option<&Vec<api::PodGroupResourceClaim>>,
) -> Result<Vec<PodGroupClaim>, LoadError> {
    let mut out: Vec<PodGroupClaim> = Vec::new();
    for (i, c) in claims.into_iter().flatten().enumerate() {
        let at = format!("{path}[{i}]");
        if c.name.is_empty() {
            return Err(ctx.invalid(
                format!("{at}.name"),
                "a PodGroup resource claim needs a name; add name",
            ));
        }
        if let Some(first) = out.iter().position(|o| o.name == c.name) {
            return Err(ctx.invalid(
                format!("{at}.name"),
                format!(
                    "claim name {:?} is also used by {path}[{first}]; give each claim its own name",
                    c.name
                ),
            ));
        }
        let claim = non_empty(&c.resource_claim_name).map(str::to_string);
        let template = non_empty(&c.resource_claim_template_name).map(str::to_string);
        if claim.is_some() == template.is_some() {
            return Err(ctx.invalid(
                at,
                "set exactly one of resourceClaimName and resourceClaimTemplateName",
            ));
        }
        out.push(PodGroupClaim {
            name: c.name.clone(),
            resource_claim_name: claim,
            resource_claim_template_name: template,
        });
    }
    Ok(out)
}

pub(crate) fn pod_group(
    entry: &Entry<(api::PodGroup, GroupStatus)>,
    priorities: &Priorities,
) -> Result<PodGroup, LoadError> {
    let ctx = Ctx {
        origin: &entry.origin,
        object: &entry.object,
    };
    let (pg, status) = &*entry.value;
    let spec = &pg.spec;
    let policy = pod_group_policy(&ctx, "spec.schedulingPolicy", &spec.scheduling_policy)?;
    let topology_key = topology_key(
        &ctx,
        "spec.schedulingConstraints",
        spec.scheduling_constraints
            .as_ref()
            .and_then(|c| c.topology.as_ref()),
    )?;
    let (priority, preemption_policy) = priority(
        &ctx,
        priorities,
        spec.priority,
        non_empty(&spec.priority_class_name),
        spec.preemption_policy.as_deref(),
    )?;
    let disruption_mode =
        pod_group_disruption(&ctx, "spec.disruptionMode", spec.disruption_mode.as_ref())?;
    let resource_claims =
        resource_claims(&ctx, "spec.resourceClaims", spec.resource_claims.as_ref())?;
    Ok(PodGroup {
        namespace: entry.namespace.clone().unwrap_or_default(),
        name: entry.name.clone(),
        policy,
        topology_key,
        priority,
        preemption_policy,
        disruption_mode,
        parent: non_empty(&spec.parent_composite_pod_group_name).map(str::to_string),
        resource_claims,
        creation_timestamp: pg
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
        initially_scheduled: status.is_true(INITIALLY_SCHEDULED),
    })
}

pub(crate) fn composite_pod_group(
    entry: &Entry<workload_api::CompositePodGroup>,
    priorities: &Priorities,
) -> Result<CompositePodGroup, LoadError> {
    let ctx = Ctx {
        origin: &entry.origin,
        object: &entry.object,
    };
    let cpg = &entry.value;
    let spec = &cpg.spec;
    let policy = composite_policy(&ctx, "spec.schedulingPolicy", &spec.scheduling_policy)?;
    let topology_key = topology_key(
        &ctx,
        "spec.schedulingConstraints",
        spec.scheduling_constraints
            .as_ref()
            .and_then(|c| c.topology.as_ref()),
    )?;
    let (priority, preemption_policy) = priority(
        &ctx,
        priorities,
        spec.priority,
        non_empty(&spec.priority_class_name),
        spec.preemption_policy.as_deref(),
    )?;
    let disruption_mode =
        composite_disruption(&ctx, "spec.disruptionMode", spec.disruption_mode.as_ref())?;
    Ok(CompositePodGroup {
        namespace: entry.namespace.clone().unwrap_or_default(),
        name: entry.name.clone(),
        policy,
        topology_key,
        priority,
        preemption_policy,
        disruption_mode,
        parent: non_empty(&spec.parent_composite_pod_group_name).map(str::to_string),
        creation_timestamp: cpg
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
    })
}

pub(crate) fn workload(entry: &Entry<api::Workload>) -> Result<Workload, LoadError> {
    let ctx = Ctx {
        origin: &entry.origin,
        object: &entry.object,
    };
    let spec = &entry.value.spec;
    let pod_groups = spec.pod_group_templates.as_deref().unwrap_or_default();
    let composites = spec
        .composite_pod_group_templates
        .as_deref()
        .unwrap_or_default();
    match (pod_groups.is_empty(), composites.is_empty()) {
        (false, false) => {
            return Err(ctx.invalid(
                "spec",
                "podGroupTemplates and compositePodGroupTemplates are both set; a Workload \
                 holds exactly one of them: move the PodGroupTemplates into a \
                 CompositePodGroupTemplate, or drop the composite templates",
            ));
        }
        (true, true) => {
            return Err(ctx.invalid(
                "spec",
                "a Workload needs podGroupTemplates or compositePodGroupTemplates; add the \
                 templates its controller creates groups from",
            ));
        }
        _ => {}
    }
    let mut walk = TemplateWalk {
        ctx: &ctx,
        names: HashMap::new(),
        pod_group_templates: Vec::new(),
        composite_pod_group_templates: Vec::new(),
    };
    walk.level("spec", 1, pod_groups, composites)?;
    Ok(Workload {
        namespace: entry.namespace.clone().unwrap_or_default(),
        name: entry.name.clone(),
        pod_group_templates: walk.pod_group_templates,
        composite_pod_group_templates: walk.composite_pod_group_templates,
    })
}

/// A depth-first walk over a Workload's template tree, validating every template and
/// collecting the names in pre-order.
struct TemplateWalk<'a> {
    ctx: &'a Ctx<'a>,
    /// Template name -> the path of the template that has it.
    names: HashMap<String, String>,
    pod_group_templates: Vec<String>,
    composite_pod_group_templates: Vec<String>,
}

impl TemplateWalk<'_> {
    /// The template lists under `path`, whose templates sit at level `depth` of the tree.
    fn level(
        &mut self,
        path: &str,
        depth: usize,
        pod_groups: &[api::PodGroupTemplate],
        composites: &[api::CompositePodGroupTemplate],
    ) -> Result<(), LoadError> {
        for (field, len) in [
            ("podGroupTemplates", pod_groups.len()),
            ("compositePodGroupTemplates", composites.len()),
        ] {
            if len > MAX_TEMPLATES {
                return Err(self.ctx.invalid(
                    format!("{path}.{field}"),
                    format!(
                        "{len} templates are given; at most {MAX_TEMPLATES} are allowed; \
                         merge templates or split the Workload"
                    ),
                ));
            }
            if len > 0 && depth > MAX_DEPTH {
                return Err(self.ctx.invalid(
                    format!("{path}.{field}"),
                    format!(
                        "these templates are at level {depth} of the template tree; at most \
                         {MAX_DEPTH} levels are allowed (each CompositePodGroupTemplate is a \
                         level, and so are the PodGroupTemplates below it); flatten the tree"
                    ),
                ));
            }
        }
        for (i, t) in pod_groups.iter().enumerate() {
            let at = format!("{path}.podGroupTemplates[{i}]");
            self.name(&at, &t.name)?;
            pod_group_policy(
                self.ctx,
                &format!("{at}.schedulingPolicy"),
                &t.scheduling_policy,
            )?;
            topology_key(
                self.ctx,
                &format!("{at}.schedulingConstraints"),
                t.scheduling_constraints
                    .as_ref()
                    .and_then(|c| c.topology.as_ref()),
            )?;
            pod_group_disruption(
                self.ctx,
                &format!("{at}.disruptionMode"),
                t.disruption_mode.as_ref(),
            )?;
            preemption_policy(
                self.ctx,
                &format!("{at}.preemptionPolicy"),
                t.preemption_policy.as_deref(),
            )?;
            resource_claims(
                self.ctx,
                &format!("{at}.resourceClaims"),
                t.resource_claims.as_ref(),
            )?;
            self.pod_group_templates.push(t.name.clone());
        }
        for (i, t) in composites.iter().enumerate() {
            let at = format!("{path}.compositePodGroupTemplates[{i}]");
            self.name(&at, &t.name)?;
            composite_policy(
                self.ctx,
                &format!("{at}.schedulingPolicy"),
                &t.scheduling_policy,
            )?;
            topology_key(
                self.ctx,
                &format!("{at}.schedulingConstraints"),
                t.scheduling_constraints
                    .as_ref()
                    .and_then(|c| c.topology.as_ref()),
            )?;
            composite_disruption(
                self.ctx,
                &format!("{at}.disruptionMode"),
                t.disruption_mode.as_ref(),
            )?;
            preemption_policy(
                self.ctx,
                &format!("{at}.preemptionPolicy"),
                t.preemption_policy.as_deref(),
            )?;
            self.composite_pod_group_templates.push(t.name.clone());
            let child_groups = t.pod_group_templates.as_deref().unwrap_or_default();
            let child_composites = t
                .composite_pod_group_templates
                .as_deref()
                .unwrap_or_default();
            if child_groups.is_empty() && child_composites.is_empty() {
                return Err(self.ctx.invalid(
                    at,
                    "a CompositePodGroupTemplate needs podGroupTemplates or \
                     compositePodGroupTemplates; add at least one child template",
                ));
            }
            self.level(&at, depth + 1, child_groups, child_composites)?;
        }
        Ok(())
    }

    /// A template's name: required, and unique in the whole Workload.
    fn name(&mut self, at: &str, name: &str) -> Result<(), LoadError> {
        if name.is_empty() {
            return Err(self
                .ctx
                .invalid(format!("{at}.name"), "a template needs a name; add name"));
        }
        if let Some(first) = self.names.get(name) {
            return Err(self.ctx.invalid(
                format!("{at}.name"),
                format!(
                    "template name {name:?} is also used by {first}; template names must be \
                     unique in the whole Workload; rename one of them"
                ),
            ));
        }
        self.names.insert(name.to_string(), at.to_string());
        Ok(())
    }
}

/// Checks the group tree once every object is loaded: every parent is a CompositePodGroup of
/// the same namespace, parents form no cycle, and no group is deeper than [`MAX_DEPTH`].
/// `groups` and `composites` are parallel to their entries.
pub(crate) fn check_group_tree(
    group_entries: &[Entry<(api::PodGroup, GroupStatus)>],
    groups: &[PodGroup],
    composite_entries: &[Entry<workload_api::CompositePodGroup>],
    composites: &[CompositePodGroup],
) -> Result<(), LoadError> {
    let by_key: HashMap<(&str, &str), usize> = composites
        .iter()
        .enumerate()
        .map(|(i, c)| ((c.namespace.as_str(), c.name.as_str()), i))
        .collect();
    let group_exists =
        |ns: &str, name: &str| groups.iter().any(|g| g.namespace == ns && g.name == name);
    let parent_path = "spec.parentCompositePodGroupName";

    // 1. Every parent exists.
    let parents = composites
        .iter()
        .zip(composite_entries.iter().map(ctx_of))
        .map(|(c, ctx)| (&c.namespace, &c.parent, ctx))
        .chain(
            groups
                .iter()
                .zip(group_entries.iter().map(ctx_of))
                .map(|(g, ctx)| (&g.namespace, &g.parent, ctx)),
        );
    for (ns, parent, ctx) in parents {
        let Some(parent) = parent else { continue };
        if by_key.contains_key(&(ns.as_str(), parent.as_str())) {
            continue;
        }
        let note = if group_exists(ns, parent) {
            format!(
                " (PodGroup {ns}/{parent} exists, but only a CompositePodGroup can be a parent)"
            )
        } else {
            String::new()
        };
        return Err(ctx.invalid(
            parent_path,
            format!(
                "the parent CompositePodGroup {ns}/{parent} is not defined{note}; define it in \
                 namespace {ns} or remove the field"
            ),
        ));
    }
    let parent_of = |c: usize| -> Option<usize> {
        let cpg = &composites[c];
        cpg.parent
            .as_ref()
            .map(|p| by_key[&(cpg.namespace.as_str(), p.as_str())])
    };

    // 2. No cycles. Each composite is walked once (0: not seen, 1: on the current walk,
    // 2: known to lead to a root); a cycle is reported at its member that comes first in the
    // input.
    let mut state = vec![0u8; composites.len()];
    for start in 0..composites.len() {
        let mut walk = Vec::new();
        let mut at = Some(start);
        while let Some(c) = at {
            match state[c] {
                2 => break,
                1 => {
                    let cycle = &walk[walk.iter().position(|&w| w == c).unwrap_or(0)..];
                    let first = cycle.iter().copied().min().unwrap_or(c);
                    let mut names: Vec<&str> = Vec::new();
                    let mut m = first;
                    loop {
                        names.push(composites[m].name.as_str());
                        m = parent_of(m).unwrap_or(first);
                        if m == first {
                            break;
                        }
                    }
                    names.push(composites[first].name.as_str());
                    return Err(ctx_of(&composite_entries[first]).invalid(
                        parent_path,
                        format!(
                            "the parent chain loops back to this CompositePodGroup: {} \
                             (namespace {}); a group cannot be its own ancestor; change or \
                             remove one of these parentCompositePodGroupName fields",
                            names.join(" -> "),
                            composites[first].namespace
                        ),
                    ));
                }
                _ => {
                    state[c] = 1;
                    walk.push(c);
                    at = parent_of(c);
                }
            }
        }
        for c in walk {
            state[c] = 2;
        }
    }

    // 3. Depth: a group's level is 1 + the number of its ancestors. Walks stop at the first
    // level too many, so this is linear in the number of groups.
    let up_to_limit = |mut parent: Option<usize>| -> Vec<usize> {
        let mut out = Vec::new();
        while let Some(p) = parent {
            out.push(p);
            if out.len() == MAX_DEPTH {
                break;
            }
            parent = parent_of(p);
        }
        out
    };
    let members = composites
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), parent_of(i), ctx_of(&composite_entries[i])))
        .chain(groups.iter().zip(group_entries).map(|(g, e)| {
            let parent = g
                .parent
                .as_ref()
                .map(|p| by_key[&(g.namespace.as_str(), p.as_str())]);
            (g.name.as_str(), parent, ctx_of(e))
        }));
    for (name, parent, ctx) in members {
        let up = up_to_limit(parent);
        if up.len() < MAX_DEPTH {
            continue;
        }
        let mut level = up.len() + 1;
        let mut top = parent_of(up[up.len() - 1]);
        while let Some(p) = top {
            level += 1;
            top = parent_of(p);
        }
        let chain: Vec<&str> = std::iter::once(name)
            .chain(up.iter().map(|&c| composites[c].name.as_str()))
            .collect();
        let more = if level > up.len() + 1 { " -> ..." } else { "" };
        return Err(ctx.invalid(
            parent_path,
            format!(
                "this group is at level {level} of its group tree ({}{more}, up to the root); \
                 at most {MAX_DEPTH} levels are allowed; attach it to a CompositePodGroup \
                 higher in the tree",
                chain.join(" -> ")
            ),
        ));
    }
    Ok(())
}

fn ctx_of<T>(entry: &Entry<T>) -> Ctx<'_> {
    Ctx {
        origin: &entry.origin,
        object: &entry.object,
    }
}
