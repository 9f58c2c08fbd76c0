//! Priority classes, priority resolution and pod disruption budgets.

use std::collections::HashMap;

use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::scheduling::v1 as scheduling;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use lockstep_model::{IntOrPercent, PodDisruptionBudget, PreemptionPolicy, PriorityClass};

use super::{Ctx, selectors};
use crate::error::LoadError;
use crate::route::Entry;

/// The classes every cluster has (`scheduling.SystemPriorityClasses`), used when the input
/// names one without defining it.
const SYSTEM_CLASSES: &[(&str, i32)] = &[
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

pub(crate) fn preemption_policy(
    ctx: &Ctx,
    path: &str,
    value: Option<&str>,
) -> Result<Option<PreemptionPolicy>, LoadError> {
    match value {
        None => Ok(None),
        Some("PreemptLowerPriority") => Ok(Some(PreemptionPolicy::PreemptLowerPriority)),
        Some("Never") => Ok(Some(PreemptionPolicy::Never)),
        Some(other) => Err(ctx.invalid(
            path,
            format!("invalid preemptionPolicy {other:?}; use PreemptLowerPriority or Never"),
        )),
    }
}

pub(crate) fn priority_class(
    entry: &Entry<scheduling::PriorityClass>,
) -> Result<PriorityClass, LoadError> {
    let ctx = Ctx {
        origin: &entry.origin,
        object: &entry.object,
    };
    let pc = &entry.value;
    let Some(value) = pc.value else {
        return Err(ctx.invalid(
            "value",
            "a PriorityClass needs a value; add value: <integer>",
        ));
    };
    Ok(PriorityClass {
        name: entry.name.clone(),
        value,
        global_default: pc.global_default.unwrap_or(false),
        preemption_policy: preemption_policy(
            &ctx,
            "preemptionPolicy",
            pc.preemption_policy.as_deref(),
        )?
        .unwrap_or_default(),
    })
}

fn system_classes() -> HashMap<String, PriorityClass> {
    SYSTEM_CLASSES
        .iter()
        .map(|(name, value)| {
            let class = PriorityClass {
                name: name.to_string(),
                value: *value,
                global_default: false,
                preemption_policy: PreemptionPolicy::PreemptLowerPriority,
            };
            (name.to_string(), class)
        })
        .collect()
}

/// Priority classes by name, and the global default.
pub(crate) struct Priorities {
    by_name: HashMap<String, PriorityClass>,
    global_default: Option<PriorityClass>,
}

impl Priorities {
    /// `entries` and `classes` are parallel: the routed objects and their conversions.
    pub(crate) fn new(
        entries: &[Entry<scheduling::PriorityClass>],
        classes: &[PriorityClass],
    ) -> Result<Priorities, LoadError> {
        let mut by_name = system_classes();
        let mut global_default: Option<(usize, &PriorityClass)> = None;
        for (i, class) in classes.iter().enumerate() {
            by_name.insert(class.name.clone(), class.clone());
            if class.global_default {
                if let Some((first, first_class)) = global_default {
                    return Err(LoadError::SeveralGlobalDefaults {
                        first: first_class.name.clone(),
                        first_origin: entries[first].origin.clone(),
                        second: class.name.clone(),
                        second_origin: entries[i].origin.clone(),
                    });
                }
                global_default = Some((i, class));
            }
        }
        Ok(Priorities {
            by_name,
            global_default: global_default.map(|(_, c)| c.clone()),
        })
    }

    /// The classes of a cluster already loaded (at most one global default among them).
    pub(crate) fn from_classes(classes: &[PriorityClass]) -> Priorities {
        let mut by_name = system_classes();
        for c in classes {
            by_name.insert(c.name.clone(), c.clone());
        }
        Priorities {
            by_name,
            global_default: classes.iter().find(|c| c.global_default).cloned(),
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&PriorityClass> {
        self.by_name.get(name)
    }

    pub(crate) fn global_default(&self) -> Option<&PriorityClass> {
        self.global_default.as_ref()
    }
}

fn int_or_percent(ctx: &Ctx, path: &str, v: &IntOrString) -> Result<IntOrPercent, LoadError> {
    match v {
        IntOrString::Int(i) if *i >= 0 => Ok(IntOrPercent::Int(*i)),
        IntOrString::String(s) => {
            let percent = s
                .strip_suffix('%')
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse::<i32>().ok())
                .filter(|p| *p <= 100);
            percent.map(IntOrPercent::Percent).ok_or_else(|| {
                ctx.invalid(
                    path,
                    format!("{s:?} is neither a count nor a percentage; write e.g. 2 or \"50%\""),
                )
            })
        }
        IntOrString::Int(i) => Err(ctx.invalid(path, format!("{i} is negative; use zero or more"))),
    }
}

pub(crate) fn pod_disruption_budget(
    entry: &Entry<policy::PodDisruptionBudget>,
) -> Result<PodDisruptionBudget, LoadError> {
    let ctx = Ctx {
        origin: &entry.origin,
        object: &entry.object,
    };
    let spec = entry.value.spec.clone().unwrap_or_default();
    let selector = spec
        .selector
        .as_ref()
        .map(|s| selectors::label_selector(&ctx, "spec.selector", s))
        .transpose()?;
    let min_available = spec
        .min_available
        .as_ref()
        .map(|v| int_or_percent(&ctx, "spec.minAvailable", v))
        .transpose()?;
    let max_unavailable = spec
        .max_unavailable
        .as_ref()
        .map(|v| int_or_percent(&ctx, "spec.maxUnavailable", v))
        .transpose()?;
    if min_available.is_some() && max_unavailable.is_some() {
        return Err(ctx.invalid(
            "spec",
            "minAvailable and maxUnavailable are both set; keep only one of them",
        ));
    }
    Ok(PodDisruptionBudget {
        namespace: entry.namespace.clone().unwrap_or_default(),
        name: entry.name.clone(),
        selector,
        disruptions_allowed: entry
            .value
            .status
            .as_ref()
            .and_then(|s| s.disruptions_allowed),
        min_available,
        max_unavailable,
    })
}
