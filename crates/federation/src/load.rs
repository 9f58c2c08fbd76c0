//! Reading Karmada objects from manifest sources into the [`Federation`]: typed
//! deserialisation (a field Karmada does not define is an error naming its path), the
//! validation Karmada's admission webhooks apply, and their defaults (a spread constraint
//! without a field spreads by cluster with minGroups 1; Divided without a preference is
//! Weighted).

use std::collections::{BTreeMap, BTreeSet};

use lockstep_manifests::{RawDocument, Source};
use serde_json::Value as Json;

use crate::api;
use crate::error::FederationError;
use crate::model::{self, Amounts, Binding, Cluster, Federation, Milli, Requirements, Strategy};

/// The annotation Karmada keeps the placement it last scheduled with in.
pub const APPLIED_PLACEMENT_ANNOTATION: &str = "policy.karmada.io/applied-placement";

/// What loading produced: the federation and warnings (kinds not read).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub federation: Federation,
    pub warnings: Vec<String>,
}

/// Reads every source into one federation.
pub fn load(sources: &[Source]) -> Result<Loaded, FederationError> {
    let (documents, warnings) = lockstep_manifests::read_documents(sources)?;
    from_documents(documents, warnings)
}

/// Reads one text as if it were a file called `name` (JSON or YAML as
/// [`lockstep_manifests::load_str`] decides), with the same checks as [`load`].
pub fn load_str(name: &str, text: &str) -> Result<Loaded, FederationError> {
    let (documents, warnings) = lockstep_manifests::read_documents_str(name, text)?;
    from_documents(documents, warnings)
}

fn from_documents(
    documents: Vec<RawDocument>,
    mut warnings: Vec<String>,
) -> Result<Loaded, FederationError> {
    let mut objects = Vec::new();
    for doc in documents {
        flatten(doc, &mut objects)?;
    }
    let mut clusters: BTreeMap<String, Cluster> = BTreeMap::new();
    let mut bindings = Vec::new();
    let mut seen = BTreeMap::new();
    for (origin, value) in objects {
        let api_version = value
            .get("apiVersion")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string();
        let kind = value
            .get("kind")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string();
        if api_version.is_empty() || kind.is_empty() {
            return Err(FederationError::input(format!(
                "{origin}: expected a Karmada object with apiVersion and kind; add them \
                 (cluster.karmada.io/v1alpha1 Cluster, work.karmada.io/v1alpha2 \
                 ResourceBinding or ClusterResourceBinding)"
            )));
        }
        match (api_version.as_str(), kind.as_str()) {
            (api::CLUSTER_API_VERSION, "Cluster") => {
                let c: api::Cluster = typed(&origin, &kind, value)?;
                let cluster = convert_cluster(&origin, c)?;
                if let Some(first) =
                    seen.insert(format!("Cluster {}", cluster.name), origin.clone())
                {
                    return Err(FederationError::input(format!(
                        "{origin}: Cluster {} is also defined in {first}; give each object once",
                        cluster.name
                    )));
                }
                clusters.insert(cluster.name.clone(), cluster);
            }
            (api::WORK_API_VERSION, "ResourceBinding" | "ClusterResourceBinding") => {
                let b: api::Binding = typed(&origin, &kind, value)?;
                let binding = convert_binding(&origin, &kind, b)?;
                if let Some(first) = seen.insert(format!("{kind} {}", binding.key), origin.clone())
                {
                    return Err(FederationError::input(format!(
                        "{origin}: {kind} {} is also defined in {first}; give each object once",
                        binding.key
                    )));
                }
                bindings.push(binding);
            }
            (_, "Cluster" | "ResourceBinding" | "ClusterResourceBinding") => {
                warnings.push(format!(
                    "warning: ignoring {kind} of apiVersion {api_version} in {origin}; lockstep \
                     federate reads Cluster as {} and bindings as {}",
                    api::CLUSTER_API_VERSION,
                    api::WORK_API_VERSION
                ));
            }
            _ => warnings.push(format!(
                "warning: ignoring unsupported kind {kind} ({api_version}) in {origin}"
            )),
        }
    }
    for b in &bindings {
        for (name, _) in &b.clusters {
            if !clusters.contains_key(name) {
                return Err(FederationError::input(format!(
                    "{}: {}: spec.clusters names cluster {name:?}, which is not in the input; \
                     add its Cluster object or remove it from the placement",
                    b.origin,
                    b.display()
                )));
            }
        }
    }
    Ok(Loaded {
        federation: Federation {
            clusters: clusters.into_values().collect(),
            bindings,
        },
        warnings,
    })
}

impl Binding {
    /// `ResourceBinding ns/name` for messages.
    pub fn display(&self) -> String {
        format!("{} {}", self.kind, self.key)
    }
}

fn flatten(doc: RawDocument, out: &mut Vec<(String, Json)>) -> Result<(), FederationError> {
    let RawDocument { origin, value } = doc;
    let Json::Object(map) = &value else {
        return Err(FederationError::input(format!(
            "{origin}: expected an object (a mapping with apiVersion, kind and metadata)"
        )));
    };
    let kind = map.get("kind").and_then(Json::as_str).unwrap_or("");
    if kind == "List" || (kind.ends_with("List") && map.contains_key("items")) {
        let item_kind = kind.strip_suffix("List").unwrap_or("").to_string();
        let api_version = map.get("apiVersion").cloned();
        let items = match map.get("items") {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(items)) => items.clone(),
            Some(_) => {
                return Err(FederationError::input(format!(
                    "{origin}: {kind}: items must be a list of objects"
                )));
            }
        };
        for (i, mut item) in items.into_iter().enumerate() {
            if let Json::Object(m) = &mut item
                && !item_kind.is_empty()
            {
                m.entry("kind")
                    .or_insert_with(|| Json::from(item_kind.clone()));
                if let Some(v) = &api_version {
                    m.entry("apiVersion").or_insert_with(|| v.clone());
                }
            }
            let mut o = origin.clone();
            o.item = Some(u32::try_from(i).unwrap_or(u32::MAX));
            out.push((o.to_string(), item));
        }
        return Ok(());
    }
    out.push((origin.to_string(), value));
    Ok(())
}

/// Deserialises `value` as `T`; a field `T` does not define, or a value of the wrong type, is
/// an error naming the file, the object and the field's path.
fn typed<T: serde::de::DeserializeOwned>(
    origin: &str,
    kind: &str,
    value: Json,
) -> Result<T, FederationError> {
    let object = object_name(kind, &value);
    let (t, unknown) = lockstep_manifests::deserialize_noting_unknown::<T>(value).map_err(|e| {
        FederationError::input(format!(
            "{origin}: {object}: field {}: {}; make the field match Karmada's API",
            e.path(),
            e.inner()
        ))
    })?;
    if let Some(path) = unknown.first() {
        let more = if unknown.len() > 1 {
            format!(
                " (and {} more: {})",
                unknown.len() - 1,
                unknown[1..].join(", ")
            )
        } else {
            String::new()
        };
        return Err(FederationError::input(format!(
            "{origin}: {object}: {path}: unknown field{more}; Karmada's {kind} does not define \
             it (check its spelling and indentation)"
        )));
    }
    Ok(t)
}

fn object_name(kind: &str, value: &Json) -> String {
    let meta = value.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Json::as_str)
        .unwrap_or("<unnamed>");
    match meta.and_then(|m| m.get("namespace")).and_then(Json::as_str) {
        Some(ns) if kind == "ResourceBinding" => format!("{kind} {ns}/{name}"),
        _ => format!("{kind} {name}"),
    }
}

fn bad(origin: &str, object: &str, path: &str, message: &str) -> FederationError {
    FederationError::input(format!("{origin}: {object}: {path}: {message}"))
}

/// A DNS-1123 subdomain: lowercase alphanumerics, '-' and '.', at most 253, starting and
/// ending alphanumeric.
fn dns_subdomain_error(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("must not be empty");
    }
    if name.len() > 253 {
        return Some("must be at most 253 characters");
    }
    for label in name.split('.') {
        if dns_label_error(label).is_some() {
            return Some(
                "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting \
                 and ending with a letter or digit)",
            );
        }
    }
    None
}

fn dns_label_error(name: &str) -> Option<&'static str> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    (!ok).then_some(
        "must be a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and \
         ending with a letter or digit)",
    )
}

/// Parses a resource list into milli-units; negative or malformed quantities are errors.
fn amounts(
    origin: &str,
    object: &str,
    path: &str,
    list: &api::ResourceList,
) -> Result<Amounts, FederationError> {
    let mut out = Amounts::new();
    for (name, q) in list {
        let p = format!("{path}.{name}");
        let parsed = lockstep_model::Quantity::parse(&q.0)
            .map_err(|e| bad(origin, object, &p, &format!("{e}")))?;
        if parsed.is_negative() {
            return Err(bad(
                origin,
                object,
                &p,
                &format!(
                    "quantity {:?} is negative; give a quantity of 0 or more",
                    q.0
                ),
            ));
        }
        let milli = parsed.milli().ok_or_else(|| {
            bad(
                origin,
                object,
                &p,
                &format!("quantity {:?} is too large", q.0),
            )
        })?;
        out.insert(name.clone(), Milli::from(milli));
    }
    Ok(out)
}

fn convert_cluster(origin: &str, c: api::Cluster) -> Result<Cluster, FederationError> {
    let name = c.metadata.name.clone().unwrap_or_default();
    let object = format!("Cluster {name}");
    if let Some(e) = dns_subdomain_error(&name) {
        return Err(bad(origin, &object, "metadata.name", e));
    }
    if c.metadata
        .namespace
        .as_deref()
        .is_some_and(|n| !n.is_empty())
    {
        return Err(bad(
            origin,
            &object,
            "metadata.namespace",
            "a Cluster is cluster-scoped; remove the namespace",
        ));
    }
    for (i, t) in c.spec.taints.iter().enumerate() {
        if !matches!(
            t.effect.as_str(),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute"
        ) {
            return Err(bad(
                origin,
                &object,
                &format!("spec.taints[{i}].effect"),
                &format!(
                    "{:?} is not a taint effect; use NoSchedule, PreferNoSchedule or NoExecute",
                    t.effect
                ),
            ));
        }
        if t.key.is_empty() {
            return Err(bad(
                origin,
                &object,
                &format!("spec.taints[{i}].key"),
                "a taint needs a key",
            ));
        }
    }
    let mut models = BTreeMap::new();
    for (i, m) in c.spec.resource_models.iter().enumerate() {
        let mut mins = Amounts::new();
        for (j, r) in m.ranges.iter().enumerate() {
            let path = format!("spec.resourceModels[{i}].ranges[{j}]");
            let mut one = api::ResourceList::new();
            one.insert("min".into(), r.min.clone());
            one.insert("max".into(), r.max.clone());
            let parsed = amounts(origin, &object, &path, &one)?;
            if parsed["max"] < parsed["min"] {
                return Err(bad(
                    origin,
                    &object,
                    &path,
                    "max is lower than min; a range needs min <= max",
                ));
            }
            mins.insert(r.name.clone(), parsed["min"]);
        }
        if models.insert(m.grade, mins).is_some() {
            return Err(bad(
                origin,
                &object,
                &format!("spec.resourceModels[{i}].grade"),
                &format!("grade {} appears twice; give each grade once", m.grade),
            ));
        }
    }
    let summary = match &c.status.resource_summary {
        None => None,
        Some(s) => {
            let mut modelings = BTreeMap::new();
            for (i, m) in s.allocatable_modelings.iter().enumerate() {
                if m.count < 0 {
                    return Err(bad(
                        origin,
                        &object,
                        &format!("status.resourceSummary.allocatableModelings[{i}].count"),
                        "a node count must be 0 or more",
                    ));
                }
                *modelings.entry(m.grade).or_insert(0) += m.count;
            }
            Some(model::Summary::new(
                amounts(
                    origin,
                    &object,
                    "status.resourceSummary.allocatable",
                    &s.allocatable,
                )?,
                amounts(
                    origin,
                    &object,
                    "status.resourceSummary.allocated",
                    &s.allocated,
                )?,
                amounts(
                    origin,
                    &object,
                    "status.resourceSummary.allocating",
                    &s.allocating,
                )?,
                modelings,
            ))
        }
    };
    let condition = |t: &str| {
        c.status
            .conditions
            .iter()
            .any(|cond| cond.type_ == t && cond.status == "True")
    };
    let mut apis = BTreeSet::new();
    for e in &c.status.api_enablements {
        for r in &e.resources {
            apis.insert((e.group_version.clone(), r.kind.clone()));
        }
    }
    Ok(Cluster {
        name,
        labels: c.metadata.labels.clone().unwrap_or_default(),
        provider: c.spec.provider.clone(),
        region: c.spec.region.clone(),
        zones: if c.spec.zones.is_empty() && !c.spec.zone.is_empty() {
            vec![c.spec.zone.clone()]
        } else {
            c.spec.zones.clone()
        },
        taints: c.spec.taints.clone(),
        ready: condition("Ready"),
        apis,
        apis_complete: condition("CompleteAPIEnablements"),
        summary,
        models,
    })
}

fn read_requirements(
    origin: &str,
    object: &str,
    path: &str,
    node_claim: Option<&api::NodeClaim>,
    request: &api::ResourceList,
    claims: &[k8s_openapi::api::core::v1::PodResourceClaim],
    priority_class_name: &str,
) -> Result<Requirements, FederationError> {
    if let Some(nc) = node_claim {
        validate_tolerations(
            origin,
            object,
            &format!("{path}.nodeClaim"),
            &nc.tolerations,
        )?;
    }
    for (i, c) in claims.iter().enumerate() {
        let n =
            c.resource_claim_name.is_some() as u8 + c.resource_claim_template_name.is_some() as u8;
        if n != 1 || c.name.is_empty() {
            return Err(bad(
                origin,
                object,
                &format!("{path}.resourceClaimRefs[{i}]"),
                "a claim reference needs a name and exactly one of resourceClaimName and \
                 resourceClaimTemplateName",
            ));
        }
    }
    Ok(Requirements {
        requests: amounts(origin, object, &format!("{path}.resourceRequest"), request)?,
        node_claim: node_claim.cloned(),
        claims: claims.to_vec(),
        priority_class_name: priority_class_name.to_string(),
    })
}

fn validate_tolerations(
    origin: &str,
    object: &str,
    path: &str,
    tolerations: &[k8s_openapi::api::core::v1::Toleration],
) -> Result<(), FederationError> {
    for (i, t) in tolerations.iter().enumerate() {
        let p = format!("{path}.tolerations[{i}]");
        match t.operator.as_deref() {
            None | Some("" | "Equal") => {
                if t.key.as_deref().unwrap_or("").is_empty() {
                    return Err(bad(
                        origin,
                        object,
                        &format!("{p}.operator"),
                        "operator must be Exists when key is empty",
                    ));
                }
            }
            Some("Exists") => {
                if t.value.as_deref().is_some_and(|v| !v.is_empty()) {
                    return Err(bad(
                        origin,
                        object,
                        &format!("{p}.value"),
                        "value must be empty when operator is Exists",
                    ));
                }
            }
            Some(other) => {
                return Err(bad(
                    origin,
                    object,
                    &format!("{p}.operator"),
                    &format!("{other:?} is not an operator; use Equal or Exists"),
                ));
            }
        }
        if let Some(e) = t.effect.as_deref()
            && !matches!(e, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            return Err(bad(
                origin,
                object,
                &format!("{p}.effect"),
                &format!(
                    "{e:?} is not a taint effect; use NoSchedule, PreferNoSchedule or NoExecute"
                ),
            ));
        }
    }
    Ok(())
}

fn validate_label_selector(
    origin: &str,
    object: &str,
    path: &str,
    s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Result<(), FederationError> {
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let values = e.values.as_deref().unwrap_or(&[]);
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(bad(
                    origin,
                    object,
                    &format!("{p}.values"),
                    "must be non-empty when operator is In or NotIn",
                ));
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(bad(
                    origin,
                    object,
                    &format!("{p}.values"),
                    "must be empty when operator is Exists or DoesNotExist",
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                return Err(bad(
                    origin,
                    object,
                    &format!("{p}.operator"),
                    &format!(
                        "{other:?} is not a valid operator; use In, NotIn, Exists or DoesNotExist"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn validate_affinity(
    origin: &str,
    object: &str,
    path: &str,
    a: &api::ClusterAffinity,
) -> Result<(), FederationError> {
    if let Some(s) = &a.label_selector {
        validate_label_selector(origin, object, &format!("{path}.labelSelector"), s)?;
    }
    if let Some(f) = &a.field_selector {
        for (i, e) in f.match_expressions.iter().enumerate() {
            let p = format!("{path}.fieldSelector.matchExpressions[{i}]");
            if !matches!(e.key.as_str(), "provider" | "region" | "zone") {
                return Err(bad(
                    origin,
                    object,
                    &format!("{p}.key"),
                    &format!(
                        "unsupported key {:?}, must be provider, region, or zone",
                        e.key
                    ),
                ));
            }
            if !matches!(e.operator.as_str(), "In" | "NotIn") {
                return Err(bad(
                    origin,
                    object,
                    &format!("{p}.operator"),
                    &format!("unsupported operator {:?}, must be In or NotIn", e.operator),
                ));
            }
        }
    }
    Ok(())
}

fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    name_ok && prefix.is_none_or(|p| dns_subdomain_error(p).is_none())
}

fn validate_placement(
    origin: &str,
    object: &str,
    p: &api::Placement,
) -> Result<(), FederationError> {
    let path = "spec.placement";
    if p.cluster_affinity.is_some() && !p.cluster_affinities.is_empty() {
        return Err(bad(
            origin,
            object,
            path,
            "clusterAffinity and clusterAffinities cannot co-exist; use one of them",
        ));
    }
    if let Some(a) = &p.cluster_affinity {
        validate_affinity(origin, object, &format!("{path}.clusterAffinity"), a)?;
    }
    let mut names = BTreeSet::new();
    for (i, t) in p.cluster_affinities.iter().enumerate() {
        let tp = format!("{path}.clusterAffinities[{i}]");
        if !is_label_key(&t.affinity_name) {
            return Err(bad(
                origin,
                object,
                &format!("{tp}.affinityName"),
                &format!("{:?} must be a valid label key", t.affinity_name),
            ));
        }
        if !names.insert(t.affinity_name.clone()) {
            return Err(bad(
                origin,
                object,
                &format!("{tp}.affinityName"),
                "each affinity term in a policy must have a unique name",
            ));
        }
        validate_affinity(origin, object, &tp, &t.affinity())?;
    }
    validate_tolerations(origin, object, path, &p.cluster_tolerations).map_err(|e| {
        FederationError::input(
            e.to_string()
                .replace(".tolerations[", ".clusterTolerations["),
        )
    })?;
    let mut fields = BTreeSet::new();
    for (i, c) in p.spread_constraints.iter().enumerate() {
        let cp = format!("{path}.spreadConstraints[{i}]");
        if !c.spread_by_field.is_empty() && !c.spread_by_label.is_empty() {
            return Err(bad(
                origin,
                object,
                &cp,
                "spreadByLabel should not co-exist with spreadByField",
            ));
        }
        if c.min_groups < 0 {
            return Err(bad(
                origin,
                object,
                &format!("{cp}.minGroups"),
                "minGroups lower than 0 is not allowed",
            ));
        }
        if c.max_groups < 0 {
            return Err(bad(
                origin,
                object,
                &format!("{cp}.maxGroups"),
                "maxGroups lower than 0 is not allowed",
            ));
        }
        if c.max_groups > 0 && c.max_groups < c.min_groups {
            return Err(bad(
                origin,
                object,
                &cp,
                "maxGroups lower than minGroups is not allowed",
            ));
        }
        if !c.spread_by_field.is_empty() {
            if !matches!(
                c.spread_by_field.as_str(),
                "cluster" | "region" | "zone" | "provider"
            ) {
                return Err(bad(
                    origin,
                    object,
                    &format!("{cp}.spreadByField"),
                    &format!(
                        "{:?} is not a spread field; use cluster, region, zone or provider",
                        c.spread_by_field
                    ),
                ));
            }
            if !fields.insert(c.spread_by_field.clone()) {
                return Err(bad(
                    origin,
                    object,
                    &format!("{path}.spreadConstraints"),
                    &format!(
                        "multiple {} spread constraints are not allowed",
                        c.spread_by_field
                    ),
                ));
            }
        }
    }
    if !fields.is_empty() && !fields.contains("cluster") {
        return Err(bad(
            origin,
            object,
            &format!("{path}.spreadConstraints"),
            "the cluster spread constraint must be enabled in one of the constraints in case of \
             SpreadByField is enabled",
        ));
    }
    if let Some(rs) = &p.replica_scheduling {
        let rp = format!("{path}.replicaScheduling");
        if !matches!(
            rs.replica_scheduling_type.as_str(),
            "" | "Duplicated" | "Divided"
        ) {
            return Err(bad(
                origin,
                object,
                &format!("{rp}.replicaSchedulingType"),
                &format!(
                    "{:?} is not supported; use Duplicated or Divided",
                    rs.replica_scheduling_type
                ),
            ));
        }
        if !matches!(
            rs.replica_division_preference.as_str(),
            "" | "Aggregated" | "Weighted"
        ) {
            return Err(bad(
                origin,
                object,
                &format!("{rp}.replicaDivisionPreference"),
                &format!(
                    "{:?} is not supported; use Aggregated or Weighted",
                    rs.replica_division_preference
                ),
            ));
        }
        if let Some(w) = &rs.weight_preference {
            if !matches!(w.dynamic_weight.as_str(), "" | "AvailableReplicas") {
                return Err(bad(
                    origin,
                    object,
                    &format!("{rp}.weightPreference.dynamicWeight"),
                    &format!(
                        "{:?} is not supported; use AvailableReplicas",
                        w.dynamic_weight
                    ),
                ));
            }
            for (i, s) in w.static_weight_list.iter().enumerate() {
                let sp = format!("{rp}.weightPreference.staticWeightList[{i}]");
                if s.weight < 0 {
                    return Err(bad(
                        origin,
                        object,
                        &format!("{sp}.weight"),
                        "a weight must be 0 or more",
                    ));
                }
                validate_affinity(
                    origin,
                    object,
                    &format!("{sp}.targetCluster"),
                    &s.target_cluster,
                )?;
            }
        }
    }
    Ok(())
}

fn convert_binding(origin: &str, kind: &str, b: api::Binding) -> Result<Binding, FederationError> {
    let name = b.metadata.name.clone().unwrap_or_default();
    let namespace = b.metadata.namespace.clone().filter(|n| !n.is_empty());
    let namespaced = kind == "ResourceBinding";
    let key = match (&namespace, namespaced) {
        (Some(ns), true) => format!("{ns}/{name}"),
        _ => name.clone(),
    };
    let object = format!("{kind} {key}");
    if let Some(e) = dns_subdomain_error(&name) {
        return Err(bad(origin, &object, "metadata.name", e));
    }
    match (&namespace, namespaced) {
        (None, true) => {
            return Err(bad(
                origin,
                &object,
                "metadata.namespace",
                "a ResourceBinding is namespaced; give its namespace",
            ));
        }
        (Some(ns), true) => {
            if let Some(e) = dns_label_error(ns) {
                return Err(bad(origin, &object, "metadata.namespace", e));
            }
        }
        (Some(_), false) => {
            return Err(bad(
                origin,
                &object,
                "metadata.namespace",
                "a ClusterResourceBinding is cluster-scoped; remove the namespace",
            ));
        }
        (None, false) => {}
    }
    let spec = &b.spec;
    if spec.replicas < 0 {
        return Err(bad(
            origin,
            &object,
            "spec.replicas",
            &format!("{} is negative; give 0 or more replicas", spec.replicas),
        ));
    }
    if spec.replicas > i64::from(i32::MAX) {
        return Err(bad(
            origin,
            &object,
            "spec.replicas",
            "must fit in a 32-bit integer",
        ));
    }
    let mut clusters = Vec::new();
    let mut names = BTreeSet::new();
    for (i, t) in spec.clusters.iter().enumerate() {
        if t.replicas < 0 || t.replicas > i64::from(i32::MAX) {
            return Err(bad(
                origin,
                &object,
                &format!("spec.clusters[{i}].replicas"),
                &format!("{} is out of range; give 0 or more replicas", t.replicas),
            ));
        }
        if !names.insert(t.name.clone()) {
            return Err(bad(
                origin,
                &object,
                &format!("spec.clusters[{i}].name"),
                &format!("cluster {:?} appears twice; list each cluster once", t.name),
            ));
        }
        clusters.push((t.name.clone(), t.replicas));
    }
    if spec.resource.kind.is_empty()
        || spec.resource.api_version.is_empty()
        || spec.resource.name.is_empty()
    {
        return Err(bad(
            origin,
            &object,
            "spec.resource",
            "needs apiVersion, kind and name of the resource the binding propagates",
        ));
    }
    let mut placement = spec.placement.clone().ok_or_else(|| {
        bad(
            origin,
            &object,
            "spec.placement",
            "a binding needs a placement (Karmada copies it from the propagation policy)",
        )
    })?;
    validate_placement(origin, &object, &placement)?;
    // Karmada's defaults.
    for c in &mut placement.spread_constraints {
        if c.spread_by_field.is_empty() && c.spread_by_label.is_empty() {
            c.spread_by_field = "cluster".into();
        }
        if c.min_groups == 0 {
            c.min_groups = 1;
        }
    }
    if let Some(rs) = &mut placement.replica_scheduling
        && rs.replica_scheduling_type == "Divided"
        && rs.replica_division_preference.is_empty()
    {
        rs.replica_division_preference = "Weighted".into();
    }
    let strategy = match &placement.replica_scheduling {
        None => Strategy::Duplicated,
        Some(rs) => match (
            rs.replica_scheduling_type.as_str(),
            rs.replica_division_preference.as_str(),
        ) {
            ("Divided", "Aggregated") => Strategy::Aggregated,
            ("Divided", _) => {
                if rs
                    .weight_preference
                    .as_ref()
                    .is_some_and(|w| !w.dynamic_weight.is_empty())
                {
                    Strategy::DynamicWeight
                } else {
                    Strategy::StaticWeight
                }
            }
            _ => Strategy::Duplicated,
        },
    };
    let static_weights = placement
        .replica_scheduling
        .as_ref()
        .and_then(|r| r.weight_preference.as_ref())
        .map(|w| w.static_weight_list.clone())
        .unwrap_or_default();
    let requirements = match &spec.replica_requirements {
        None => None,
        Some(r) => Some(read_requirements(
            origin,
            &object,
            "spec.replicaRequirements",
            r.node_claim.as_ref(),
            &r.resource_request,
            &r.resource_claim_refs,
            &r.priority_class_name,
        )?),
    };
    let mut components = Vec::new();
    for (i, c) in spec.components.iter().enumerate() {
        let path = format!("spec.components[{i}]");
        if c.replicas < 0 || c.replicas > i64::from(i32::MAX) {
            return Err(bad(
                origin,
                &object,
                &format!("{path}.replicas"),
                "must be 0 or more and fit in a 32-bit integer",
            ));
        }
        let req = match &c.replica_requirements {
            None => Requirements::default(),
            Some(r) => read_requirements(
                origin,
                &object,
                &format!("{path}.replicaRequirements"),
                r.node_claim.as_ref(),
                &r.resource_request,
                &r.resource_claim_refs,
                &r.priority_class_name,
            )?,
        };
        components.push(crate::model::Component {
            name: c.name.clone(),
            replicas: c.replicas,
            requirements: req,
        });
    }
    let (priority, preempts) = match &spec.schedule_priority {
        None => (0, false),
        Some(p) => {
            let preempts = match p.preemption_policy.as_deref() {
                None | Some("" | "Never") => false,
                Some("PreemptLowerPriority") => true,
                Some(other) => {
                    return Err(bad(
                        origin,
                        &object,
                        "spec.schedulePriority.preemptionPolicy",
                        &format!("{other:?} is not supported; use PreemptLowerPriority or Never"),
                    ));
                }
            };
            (p.priority, preempts)
        }
    };
    let seconds = |t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.as_ref().map(|t| t.0.as_second())
    };
    let fresh = match (&spec.reschedule_triggered_at, &b.status.last_scheduled_time) {
        (Some(r), Some(l)) => r.0 > l.0,
        _ => false,
    };
    let replicas_changed = match placement
        .replica_scheduling
        .as_ref()
        .map(|r| r.replica_scheduling_type.as_str())
    {
        None => false,
        Some("Divided") => clusters.iter().map(|(_, r)| r).sum::<i64>() != spec.replicas,
        Some(_) => clusters.iter().any(|(_, r)| *r != spec.replicas),
    };
    let placement_changed = match b
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(APPLIED_PLACEMENT_ANNOTATION))
    {
        // Karmada schedules a binding whose applied placement is unknown; without the
        // annotation lockstep takes a binding with clusters as placed by its placement.
        None => clusters.is_empty(),
        Some(text) => match serde_json::from_str::<api::Placement>(text) {
            Ok(applied) => applied != spec.placement.clone().unwrap_or_default(),
            Err(e) => {
                return Err(bad(
                    origin,
                    &object,
                    &format!("metadata.annotations[{APPLIED_PLACEMENT_ANNOTATION}]"),
                    &format!("not a Placement: {e}"),
                ));
            }
        },
    };
    let is_workload = spec.replicas > 0 || !components.is_empty();
    let needs_scheduling = clusters.is_empty()
        || placement_changed
        || replicas_changed
        || fresh
        || !is_workload
        || strategy == Strategy::Duplicated;
    let suspended = spec
        .suspension
        .as_ref()
        .and_then(|s| s.scheduling)
        .unwrap_or(false);
    let (unit_pods, unit) = Binding::demand(requirements.as_ref(), &components);
    let permanent_id = b.metadata.labels.as_ref().and_then(|labels| {
        let label = crate::model::PERMANENT_ID_LABELS[usize::from(!namespaced)];
        labels.get(label).filter(|v| !v.is_empty()).cloned()
    });
    Ok(Binding {
        permanent_id,
        gvk: (
            spec.resource.api_version.clone(),
            spec.resource.kind.clone(),
        ),
        unit_pods,
        unit,
        key,
        namespace: if namespaced { namespace } else { None },
        name,
        origin: origin.to_string(),
        kind: kind.to_string(),
        resource_api_version: spec.resource.api_version.clone(),
        resource_kind: spec.resource.kind.clone(),
        uid: spec.resource.uid.clone(),
        replicas: spec.replicas,
        requirements,
        components,
        clusters,
        strategy,
        static_weights,
        eviction_clusters: spec
            .graceful_eviction_tasks
            .iter()
            .map(|t| t.from_cluster.clone())
            .collect(),
        priority,
        preempts,
        creation: seconds(&b.metadata.creation_timestamp),
        fresh,
        observed_affinity: b.status.scheduler_observed_affinity_name.clone(),
        needs_scheduling,
        suspended,
        placement,
    })
}
