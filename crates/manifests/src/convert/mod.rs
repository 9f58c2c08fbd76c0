//! From routed k8s-openapi objects to the model's [`Cluster`].
//!
//! Order of work: priority classes (pods and groups need them), namespaces, resource names
//! (interned in name order after the four fixed ones, so ids do not depend on input order),
//! nodes (sorted by name), pods (input order), disruption budgets, the Workload API objects
//! (input order per kind; then the group tree is checked across files), the DRA objects (input
//! order per kind).

mod dra;
mod node;
pub(crate) mod one;
pub(crate) mod pod;
mod policy;
pub(crate) mod requests;
pub(crate) mod selectors;
mod workload;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use lockstep_model::{Cluster, Quantity, ResourceList, ResourceNames};

use crate::Loaded;
use crate::error::{LoadError, Origin};
use crate::route::Collected;

/// The object being converted, for error messages.
pub(crate) struct Ctx<'a> {
    pub origin: &'a Origin,
    pub object: &'a str,
}

impl Ctx<'_> {
    pub(crate) fn invalid(&self, path: impl Into<String>, message: impl Into<String>) -> LoadError {
        LoadError::InvalidValue {
            origin: self.origin.clone(),
            object: self.object.to_string(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// Parses a quantity of resource `resource` into an integer amount: milli-CPU for `cpu`,
    /// whole units (bytes, devices) for everything else, rounded up. Negative amounts are
    /// rejected. `path` makes the field's path, called only for a message.
    fn amount(
        &self,
        path: impl Fn() -> String,
        resource: &str,
        quantity: &K8sQuantity,
    ) -> Result<i64, LoadError> {
        let error = |message: String| LoadError::Quantity {
            origin: self.origin.clone(),
            object: self.object.to_string(),
            path: path(),
            message,
        };
        let q = Quantity::parse(&quantity.0).map_err(|e| error(e.to_string()))?;
        if q.is_negative() {
            return Err(error(format!(
                "quantity {:?} is negative; resource amounts must be zero or more",
                quantity.0
            )));
        }
        let value = if resource == "cpu" {
            q.milli()
        } else {
            q.units()
        };
        value.ok_or_else(|| {
            error(format!(
                "quantity {:?} is too large (the limit is about 9.2e18 {})",
                quantity.0,
                if resource == "cpu" {
                    "milli-CPU"
                } else {
                    "units"
                }
            ))
        })
    }

    /// Parses a quantity into whole base units (bytes, counts), rounded up like Kubernetes'
    /// `Quantity.Value()`, whatever the name of the thing it measures (DRA capacities and
    /// counters). Missing (empty) and negative quantities are rejected.
    pub(crate) fn base_units(&self, path: &str, quantity: &K8sQuantity) -> Result<i64, LoadError> {
        let error = |message: String| LoadError::Quantity {
            origin: self.origin.clone(),
            object: self.object.to_string(),
            path: path.to_string(),
            message,
        };
        if quantity.0.trim().is_empty() {
            return Err(error(
                "a quantity is required here; give one such as 1, 40Gi or 500M".to_string(),
            ));
        }
        let q = Quantity::parse(&quantity.0).map_err(|e| error(e.to_string()))?;
        if q.is_negative() {
            return Err(error(format!(
                "quantity {:?} is negative; it must be zero or more",
                quantity.0
            )));
        }
        q.units().ok_or_else(|| {
            error(format!(
                "quantity {:?} is too large (the limit is about 9.2e18 units)",
                quantity.0
            ))
        })
    }

    /// Parses every quantity of a resource map (`path` names the map).
    pub(crate) fn amounts(
        &self,
        path: &str,
        map: Option<&BTreeMap<String, K8sQuantity>>,
    ) -> Result<requests::Amounts, LoadError> {
        let mut out = requests::Amounts::new();
        for (name, q) in map.into_iter().flatten() {
            let value = self.amount(|| format!("{path}.{name}"), name, q)?;
            out.insert(name.clone(), value);
        }
        Ok(out)
    }
}

/// Different resource names (cpu, memory, pods, extended resources, ...) in one input.
pub(crate) const MAX_RESOURCE_NAMES: usize = 256;

/// Converts amounts by name into a resource list, interning names.
pub(crate) fn resource_list(
    names: &mut ResourceNames,
    amounts: &requests::Amounts,
) -> ResourceList {
    let mut list = ResourceList::new();
    for (name, value) in amounts {
        list.set(names.intern(name), *value);
    }
    list
}

/// Lists shorter than this are converted on one thread.
const PARALLEL_MIN_OBJECTS: usize = 512;

fn threads_for(len: usize) -> usize {
    crate::threads_for(len, PARALLEL_MIN_OBJECTS)
}

/// Converts `entries` in order, on every core for long lists: the result, the warnings and
/// the first error are those of converting them one after another. Every resource name is
/// interned before (so each thread's copy of `names` only looks names up); if a thread's
/// copy had to add one all the same, the list is converted again on one thread, so ids stay
/// those of the one-thread pass.
fn convert_all<T: Sync, U: Send>(
    entries: &[T],
    names: &mut ResourceNames,
    warnings: &mut Vec<String>,
    convert: impl Fn(&T, &mut ResourceNames, &mut Vec<String>) -> Result<U, LoadError> + Sync,
) -> Result<Vec<U>, LoadError> {
    let serial = |names: &mut ResourceNames, warnings: &mut Vec<String>| {
        entries
            .iter()
            .map(|e| convert(e, names, warnings))
            .collect::<Result<Vec<U>, LoadError>>()
    };
    let threads = threads_for(entries.len());
    if threads < 2 {
        return serial(names, warnings);
    }
    let known = names.len();
    let chunk = entries.len().div_ceil(threads);
    let shared: &ResourceNames = names;
    let convert = &convert;
    // Per part: its conversions, its warnings, and whether its copy of `names` stayed as is.
    type Part<U> = (Result<Vec<U>, LoadError>, Vec<String>, bool);
    let parts: Vec<Part<U>> = std::thread::scope(|scope| {
        let handles: Vec<_> = entries
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut names = shared.clone();
                    let mut warnings = Vec::new();
                    let out = part
                        .iter()
                        .map(|e| convert(e, &mut names, &mut warnings))
                        .collect::<Result<Vec<U>, LoadError>>();
                    (out, warnings, names.len() == known)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    if parts.iter().any(|(_, _, same)| !same) {
        return serial(names, warnings);
    }
    let mut out = Vec::with_capacity(entries.len());
    for (part, part_warnings, _) in parts {
        warnings.extend(part_warnings);
        out.extend(part?);
    }
    Ok(out)
}

/// Builds the cluster from everything collected. Nothing is returned unless all of it is
/// valid.
pub(crate) fn build(mut collected: Collected) -> Result<Loaded, LoadError> {
    crate::workloads::expand(&mut collected)?;
    let Collected {
        nodes,
        pods,
        namespaces,
        priority_classes,
        pod_disruption_budgets,
        workloads,
        pod_groups,
        composite_pod_groups,
        device_classes,
        resource_slices,
        resource_claims,
        resource_claim_templates,
        mut warnings,
        origins,
        unknown_fields,
        owners,
        ..
    } = collected;
    let mut cluster = Cluster {
        priority_classes: priority_classes
            .iter()
            .map(policy::priority_class)
            .collect::<Result<_, _>>()?,
        ..Cluster::default()
    };
    let priorities = policy::Priorities::new(&priority_classes, &cluster.priority_classes)?;

    for ns in &namespaces {
        let mut labels = ns.value.metadata.labels.clone().unwrap_or_default();
        // The API server labels every namespace with its name.
        labels.insert("kubernetes.io/metadata.name".to_string(), ns.name.clone());
        cluster.namespaces.insert(ns.name.clone(), labels);
    }

    // Intern every resource name in name order, so that ids are independent of input order.
    // The engine keeps a row of every resource per node, so their number is bounded.
    let mut resource_names = BTreeSet::new();
    let too_many = |origin: &Origin, object: &str| LoadError::Limit {
        origin: origin.clone(),
        message: format!(
            "{object}: more than {MAX_RESOURCE_NAMES} different resource names (cpu, memory, \
             extended resources) in the input; use fewer resource names"
        ),
    };
    for n in &nodes {
        node::resource_names(&n.value, &mut resource_names);
        if resource_names.len() > MAX_RESOURCE_NAMES {
            return Err(too_many(&n.origin, &n.object));
        }
    }
    for p in &pods {
        for name in p.value.resource_names() {
            if !resource_names.contains(name) {
                resource_names.insert(name.to_string());
            }
        }
        if resource_names.len() > MAX_RESOURCE_NAMES {
            return Err(too_many(&p.origin, &p.object));
        }
    }
    for name in &resource_names {
        cluster.resources.intern(name);
    }

    let mut model_nodes = convert_all(&nodes, &mut cluster.resources, &mut warnings, node::node)?;
    model_nodes.sort_by(|a, b| a.name.cmp(&b.name));
    cluster.nodes = model_nodes;
    // Freeing a typed object costs about as much as converting it: on every core.
    crate::map_in_order(nodes, drop);
    cluster.pods = pods
        .into_iter()
        .map(|p| pod::finish(p, &priorities, &mut cluster.resources))
        .collect::<Result<_, _>>()?;

    for b in &pod_disruption_budgets {
        cluster
            .pod_disruption_budgets
            .push(policy::pod_disruption_budget(b)?);
    }

    for w in &workloads {
        cluster.workloads.push(workload::workload(w)?);
    }
    for g in &composite_pod_groups {
        cluster
            .composite_pod_groups
            .push(workload::composite_pod_group(g, &priorities)?);
    }
    for g in &pod_groups {
        cluster
            .pod_groups
            .push(workload::pod_group(g, &priorities)?);
    }
    workload::check_group_tree(
        &pod_groups,
        &cluster.pod_groups,
        &composite_pod_groups,
        &cluster.composite_pod_groups,
    )?;

    for c in &device_classes {
        cluster.device_classes.push(dra::device_class(c)?);
    }
    for s in &resource_slices {
        cluster
            .resource_slices
            .push(dra::resource_slice(s, &mut warnings)?);
    }
    for c in &resource_claims {
        cluster
            .resource_claims
            .push(dra::resource_claim(c, &mut warnings)?);
    }
    for t in &resource_claim_templates {
        cluster
            .resource_claim_templates
            .push(dra::resource_claim_template(t, &mut warnings)?);
    }

    // Namespaces that objects live in exist in a real cluster even when the input does not
    // define them; give them the label the API server would.
    let used = cluster
        .pods
        .iter()
        .map(|p| p.namespace.clone())
        .chain(
            cluster
                .pod_disruption_budgets
                .iter()
                .map(|b| b.namespace.clone()),
        )
        .chain(cluster.workloads.iter().map(|w| w.namespace.clone()))
        .chain(cluster.pod_groups.iter().map(|g| g.namespace.clone()))
        .chain(
            cluster
                .composite_pod_groups
                .iter()
                .map(|g| g.namespace.clone()),
        )
        .chain(cluster.resource_claims.iter().map(|c| c.namespace.clone()))
        .chain(
            cluster
                .resource_claim_templates
                .iter()
                .map(|t| t.namespace.clone()),
        );
    for ns in used {
        cluster
            .namespaces
            .entry(ns.clone())
            .or_insert_with(|| BTreeMap::from([("kubernetes.io/metadata.name".to_string(), ns)]));
    }

    Ok(Loaded {
        cluster,
        warnings,
        unknown_fields,
        origins: origins
            .into_iter()
            .map(|(object, origin)| (object, origin.to_string()))
            .collect(),
        owners: owners.into_iter().collect(),
    })
}
