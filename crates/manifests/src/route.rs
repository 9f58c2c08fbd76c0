//! Routing each document by apiVersion and kind: the kinds lockstep reads, including the
//! Workload API and DRA kinds, are deserialized into k8s-openapi types or the crate's own
//! [`crate::workload_api`] types (errors name the field path); anything else is skipped with a
//! warning. Also expands lists and catches duplicate objects.

use std::collections::HashMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::api::scheduling::v1 as scheduling;
use k8s_openapi::api::scheduling::v1beta1 as workload;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};

use crate::convert::pod::Draft;
use crate::documents::Document;
use crate::error::{LoadError, Origin};
use crate::unknown::{self, UnknownField};
use crate::workload_api;
use crate::workloads;

/// One routed object with what messages need to name it.
pub(crate) struct Entry<T> {
    pub origin: Origin,
    /// How messages name the object, e.g. `Pod default/web`.
    pub object: String,
    /// The namespace (defaulted to "default") for namespaced kinds.
    pub namespace: Option<String>,
    pub name: String,
    /// Boxed: a typed Pod is about 2.5 KB, moved on every push and every growth of the lists
    /// otherwise.
    pub value: Box<T>,
}

impl<T> Entry<T> {
    /// The entry without its value, and the value.
    pub(crate) fn split(self) -> (Entry<()>, Box<T>) {
        let head = Entry {
            origin: self.origin,
            object: self.object,
            namespace: self.namespace,
            name: self.name,
            value: Box::new(()),
        };
        (head, self.value)
    }
}

impl Entry<()> {
    pub(crate) fn with<T>(self, value: T) -> Entry<T> {
        self.with_boxed(Box::new(value))
    }

    pub(crate) fn with_boxed<T>(self, value: Box<T>) -> Entry<T> {
        Entry {
            origin: self.origin,
            object: self.object,
            namespace: self.namespace,
            name: self.name,
            value,
        }
    }
}

/// Everything routed so far, by kind, in input order.
#[derive(Default)]
pub(crate) struct Collected {
    pub nodes: Vec<Entry<core::Node>>,
    /// Pods converted as far as they can be while reading (their typed objects freed).
    pub pods: Vec<Entry<Draft>>,
    pub namespaces: Vec<Entry<core::Namespace>>,
    pub priority_classes: Vec<Entry<scheduling::PriorityClass>>,
    pub pod_disruption_budgets: Vec<Entry<policy::PodDisruptionBudget>>,
    /// Workloads of either supported version, read as v1beta1 (the shapes are the same).
    pub workloads: Vec<Entry<workload::Workload>>,
    /// PodGroups of either supported version, read as v1beta1, with their status apart.
    pub pod_groups: Vec<Entry<(workload::PodGroup, workload_api::GroupStatus)>>,
    pub composite_pod_groups: Vec<Entry<workload_api::CompositePodGroup>>,
    pub device_classes: Vec<Entry<resource::DeviceClass>>,
    pub resource_slices: Vec<Entry<resource::ResourceSlice>>,
    pub resource_claims: Vec<Entry<resource::ResourceClaim>>,
    pub resource_claim_templates: Vec<Entry<resource::ResourceClaimTemplate>>,
    /// Workload objects (RayCluster, Job, ...), expanded by [`crate::workloads::expand`].
    pub workload_objects: Vec<Entry<workloads::Object>>,
    /// (`namespace/pod`, owner such as `RayCluster ml/rc`) for the pods workload objects
    /// made or counted as theirs.
    pub owners: Vec<(String, String)>,
    pub warnings: Vec<String>,
    /// Fields the objects' API types do not define, in input order.
    pub unknown_fields: Vec<UnknownField>,
    /// (kind, namespace, name) -> where it was first defined.
    seen: HashMap<(String, String, String), Origin>,
    /// The objects as read, kept when [`Collected::keep_values`] is set, to tell an object
    /// given twice from two objects of one name.
    values: HashMap<(String, String, String), Json>,
    /// Whether to keep every object's value (set before anything is added).
    pub(crate) keep_values: bool,
    /// Set while the extra sources are added: an object identical to one already read is that
    /// object, not a duplicate.
    pub(crate) merging: bool,
    /// The display names of the objects added while `merging`, in input order.
    pub(crate) merged_objects: Vec<String>,
    /// Where each object came from, by its display name (`Kind name` or `Kind ns/name`).
    pub(crate) origins: Vec<(String, Origin)>,
    /// Nodes and pods routed but not yet deserialized, in input order: they are deserialized
    /// together, on every core, by [`Collected::flush`], before anything else is recorded
    /// (a warning, another kind, an error), so every list and message keeps input order.
    pending: Vec<Pending>,
}

/// A node or a pod routed, to be deserialized.
struct Pending {
    head: Entry<()>,
    node: bool,
    value: Json,
}

/// Fewer pending objects than this are deserialized on one thread.
const PARALLEL_MIN_PENDING: usize = 256;

/// A node deserialized, or a pod deserialized and drafted, apart.
enum Decoded {
    Node(Box<core::Node>),
    Pod(Box<Draft>),
}

/// The typed kinds: (apiVersion, kind).
const TYPED_KINDS: &[(&str, &str)] = &[
    ("v1", "Node"),
    ("v1", "Pod"),
    ("v1", "Namespace"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("policy/v1", "PodDisruptionBudget"),
    ("scheduling.k8s.io/v1beta1", "Workload"),
    ("scheduling.k8s.io/v1beta1", "PodGroup"),
    ("scheduling.k8s.io/v1beta1", "CompositePodGroup"),
    ("scheduling.k8s.io/v1alpha3", "Workload"),
    ("scheduling.k8s.io/v1alpha3", "PodGroup"),
    ("scheduling.k8s.io/v1alpha3", "CompositePodGroup"),
    ("resource.k8s.io/v1", "DeviceClass"),
    ("resource.k8s.io/v1", "ResourceSlice"),
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
];

/// What the warning for a known kind in an unsupported apiVersion adds about the versions read.
fn supported_versions(kind: &str) -> String {
    if let Some((version, _)) = workloads::KINDS.iter().find(|(_, k)| *k == kind) {
        return format!("; lockstep reads {version}");
    }
    match kind {
        "Workload" | "PodGroup" | "CompositePodGroup" => {
            "; lockstep reads scheduling.k8s.io/v1beta1 and scheduling.k8s.io/v1alpha3"
        }
        "DeviceClass" | "ResourceSlice" | "ResourceClaim" | "ResourceClaimTemplate" => {
            "; lockstep reads resource.k8s.io/v1"
        }
        _ => "",
    }
    .to_string()
}

impl Collected {
    pub(crate) fn add_document(&mut self, file: &str, document: Document) -> Result<(), LoadError> {
        self.add_documents([(file, document)])
    }

    /// Routes documents in order, each with the name of the file it came from; their nodes
    /// and pods are deserialized together at the end (or before an error, a warning or
    /// another kind), on every core.
    pub(crate) fn add_documents<'a>(
        &mut self,
        documents: impl IntoIterator<Item = (&'a str, Document)>,
    ) -> Result<(), LoadError> {
        for (file, document) in documents {
            let origin = Origin {
                file: file.into(),
                document: document.number,
                item: None,
            };
            self.add_value(origin, document.value, None)?;
        }
        self.flush()
    }

    /// Routes one object; an error is returned after the objects before it are deserialized,
    /// so that the first error in input order is the one reported.
    fn add_value(
        &mut self,
        origin: Origin,
        value: Json,
        item_defaults: Option<(&str, &str)>,
    ) -> Result<(), LoadError> {
        match self.route(origin, value, item_defaults) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.flush()?;
                Err(e)
            }
        }
    }

    /// Deserializes the pending nodes and pods, in order: the first error in input order is
    /// returned, and their unknown fields are recorded in input order.
    pub(crate) fn flush(&mut self) -> Result<(), LoadError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.pending);
        let decode_one = |p: &mut Pending| {
            let (origin, object) = (&p.head.origin, p.head.object.as_str());
            if p.node {
                decode_at("", p.value.take(), origin, object)
                    .map(|(n, unknown)| (Decoded::Node(n), unknown))
            } else {
                decode_at::<core::Pod>("", p.value.take(), origin, object).map(|(pod, unknown)| {
                    let draft = Box::new(crate::convert::pod::draft(&p.head, pod));
                    (Decoded::Pod(draft), unknown)
                })
            }
        };
        // Each part stops at its first error: nothing after it is used.
        let decode_part = |part: &mut [Pending]| {
            let mut out = Vec::with_capacity(part.len());
            for item in part {
                let result = decode_one(item);
                let failed = result.is_err();
                out.push(result);
                if failed {
                    break;
                }
            }
            out
        };
        let threads = crate::threads_for(pending.len(), PARALLEL_MIN_PENDING);
        let results: Vec<Result<(Decoded, Vec<String>), LoadError>> = if threads < 2 {
            decode_part(&mut pending)
        } else {
            let chunk = pending.len().div_ceil(threads);
            let decode_part = &decode_part;
            std::thread::scope(|scope| {
                let handles: Vec<_> = pending
                    .chunks_mut(chunk)
                    .map(|part| scope.spawn(move || decode_part(part)))
                    .collect();
                let mut all = Vec::new();
                for h in handles {
                    let part = h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
                    let failed = part.last().is_some_and(|r| r.is_err());
                    all.extend(part);
                    if failed {
                        break;
                    }
                }
                all
            })
        };
        for (Pending { head, .. }, result) in pending.into_iter().zip(results) {
            let (decoded, unknown) = result?;
            self.note_unknown(unknown, &head.origin, &head.object);
            match decoded {
                Decoded::Node(n) => self.nodes.push(head.with_boxed(n)),
                Decoded::Pod(p) => self.pods.push(head.with_boxed(p)),
            }
        }
        Ok(())
    }

    fn route(
        &mut self,
        origin: Origin,
        mut value: Json,
        item_defaults: Option<(&str, &str)>,
    ) -> Result<(), LoadError> {
        let Json::Object(map) = &mut value else {
            return Err(LoadError::NotAnObject {
                found: describe(&value),
                origin,
            });
        };
        if let Some((api_version, kind)) = item_defaults {
            map.entry("apiVersion")
                .or_insert_with(|| Json::from(api_version));
            map.entry("kind").or_insert_with(|| Json::from(kind));
        }
        let kind_label = match map.get("kind") {
            Some(Json::String(k)) if !k.is_empty() => k.clone(),
            _ => "object".to_string(),
        };
        let api_version = required_string(map, "apiVersion", &origin, &kind_label)?;
        let kind = required_string(map, "kind", &origin, "object")?;

        if origin.item.is_none() && is_list(&kind, map) {
            return self.expand_list(origin, &api_version, &kind, value);
        }

        let (namespace, name) = metadata(map, &origin, &kind)?;

        let typed = TYPED_KINDS.contains(&(api_version.as_str(), kind.as_str()))
            || workloads::KINDS.contains(&(api_version.as_str(), kind.as_str()));
        if !typed {
            let name = match &name {
                Some(n) => format!(" {n:?}"),
                None => String::new(),
            };
            let version_note = if TYPED_KINDS
                .iter()
                .chain(workloads::KINDS)
                .any(|(_, k)| *k == kind)
            {
                format!(" (apiVersion {api_version}{})", supported_versions(&kind))
            } else {
                String::new()
            };
            self.flush()?;
            self.warnings.push(format!(
                "warning: ignoring unsupported kind {kind}{name}{version_note} in {origin}"
            ));
            return Ok(());
        }

        let Some(name) = name else {
            return Err(LoadError::MissingField {
                origin,
                object: kind,
                field: "metadata.name",
            });
        };
        let namespaced = matches!(
            kind.as_str(),
            "Pod"
                | "PodDisruptionBudget"
                | "Workload"
                | "PodGroup"
                | "CompositePodGroup"
                | "ResourceClaim"
                | "ResourceClaimTemplate"
        ) || workloads::KINDS.iter().any(|(_, k)| *k == kind);
        let namespace = namespaced.then(|| namespace.unwrap_or_else(|| "default".to_string()));
        check_name(&origin, &kind, namespace.as_deref(), &name)?;
        let object = match &namespace {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };

        let key = (
            kind.clone(),
            namespace.clone().unwrap_or_default(),
            name.clone(),
        );
        if self.merging {
            self.merged_objects.push(object.clone());
        }
        if let Some(first) = self.seen.get(&key) {
            if self.merging && self.values.get(&key) == Some(&value) {
                return Ok(());
            }
            if *first == origin {
                return Err(LoadError::SameFileTwice {
                    file: origin.file.to_string(),
                });
            }
            return Err(LoadError::Duplicate {
                object,
                first: first.clone(),
                second: origin,
            });
        }
        self.seen.insert(key.clone(), origin.clone());
        if self.keep_values {
            self.values.insert(key, value.clone());
        }
        self.origins.push((object.clone(), origin.clone()));

        let head = Entry {
            origin: origin.clone(),
            object: object.clone(),
            namespace: namespace.clone(),
            name: name.clone(),
            value: Box::new(()),
        };
        if kind != "Node" && kind != "Pod" {
            self.flush()?;
        }
        match kind.as_str() {
            "Node" | "Pod" => self.pending.push(Pending {
                head,
                node: kind == "Node",
                value,
            }),
            "Namespace" => {
                let ns = self.decode(value, &origin, &object)?;
                self.namespaces.push(head.with(ns));
            }
            "PriorityClass" => {
                let pc = self.decode(value, &origin, &object)?;
                self.priority_classes.push(head.with(pc));
            }
            "PodDisruptionBudget" => {
                let pdb = self.decode(value, &origin, &object)?;
                self.pod_disruption_budgets.push(head.with(pdb));
            }
            "Workload" => {
                let workload = self.decode(workload_api_object(value), &origin, &object)?;
                self.workloads.push(head.with(workload));
            }
            "PodGroup" => {
                // The status is read apart, more leniently than the API type reads it.
                let mut value = workload_api_object(value);
                let status = value.as_object_mut().and_then(|m| m.remove("status"));
                let group = self.decode(value, &origin, &object)?;
                let status = match status {
                    None | Some(Json::Null) => workload_api::GroupStatus::default(),
                    // Read leniently on purpose: its unknown fields are not reported.
                    Some(status) => decode_at("status", status, &origin, &object)?.0,
                };
                self.pod_groups.push(head.with((group, status)));
            }
            "CompositePodGroup" => {
                // Its status is not read (the scheduler keeps none), so not checked either.
                let mut value = workload_api_object(value);
                value.as_object_mut().map(|m| m.remove("status"));
                let group = self.decode(value, &origin, &object)?;
                self.composite_pod_groups.push(head.with(group));
            }
            "DeviceClass" => {
                let class = self.decode(value, &origin, &object)?;
                self.device_classes.push(head.with(class));
            }
            "ResourceSlice" => {
                let slice = self.decode(value, &origin, &object)?;
                self.resource_slices.push(head.with(slice));
            }
            "ResourceClaim" => {
                let claim = self.decode(value, &origin, &object)?;
                self.resource_claims.push(head.with(claim));
            }
            "ResourceClaimTemplate" => {
                let template = self.decode(value, &origin, &object)?;
                self.resource_claim_templates.push(head.with(template));
            }
            "RayCluster" => {
                let o = self.decode(own_object(value), &origin, &object)?;
                self.add_workload(head, workloads::Object::RayCluster(Box::new(o)));
            }
            "RayJob" => {
                let o = self.decode(own_object(value), &origin, &object)?;
                self.add_workload(head, workloads::Object::RayJob(Box::new(o)));
            }
            "Job" => {
                let o = self.decode(value, &origin, &object)?;
                self.add_workload(head, workloads::Object::Job(Box::new(o)));
            }
            "JobSet" => {
                let o = self.decode(own_object(value), &origin, &object)?;
                self.add_workload(head, workloads::Object::JobSet(Box::new(o)));
            }
            "Deployment" => {
                let o = self.decode(value, &origin, &object)?;
                self.add_workload(head, workloads::Object::Deployment(Box::new(o)));
            }
            "ReplicaSet" => {
                let o = self.decode(value, &origin, &object)?;
                self.add_workload(head, workloads::Object::ReplicaSet(Box::new(o)));
            }
            "StatefulSet" => {
                let o = self.decode(value, &origin, &object)?;
                self.add_workload(head, workloads::Object::StatefulSet(Box::new(o)));
            }
            "LeaderWorkerSet" => {
                let o = self.decode(own_object(value), &origin, &object)?;
                self.add_workload(head, workloads::Object::LeaderWorkerSet(Box::new(o)));
            }
            _ => unreachable!("every typed kind is matched above"),
        }
        Ok(())
    }

    /// Adds every item of a `kind: List` or a typed list such as `PodList`. Items of a typed
    /// list may omit apiVersion and kind, as the API server's lists do.
    fn expand_list(
        &mut self,
        origin: Origin,
        api_version: &str,
        kind: &str,
        mut value: Json,
    ) -> Result<(), LoadError> {
        let items = match value.get_mut("items").map(Json::take) {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(items)) => items,
            Some(other) => {
                return Err(LoadError::FieldType {
                    origin,
                    object: kind.to_string(),
                    path: "items".to_string(),
                    message: format!("expected a list of objects, found {}", describe(&other)),
                });
            }
        };
        let item_kind = kind.strip_suffix("List").unwrap_or_default();
        let defaults =
            (kind != "List" && !item_kind.is_empty()).then_some((api_version, item_kind));
        for (i, item) in items.into_iter().enumerate() {
            let origin = Origin {
                item: Some(u32::try_from(i).unwrap_or(u32::MAX)),
                ..origin.clone()
            };
            self.add_value(origin, item, defaults)?;
        }
        Ok(())
    }
}

fn is_list(kind: &str, map: &Map<String, Json>) -> bool {
    kind == "List" || (kind.ends_with("List") && map.contains_key("items"))
}

/// A short description of a JSON value for messages.
fn describe(value: &Json) -> String {
    match value {
        Json::Null => "nothing".to_string(),
        Json::Bool(b) => format!("the boolean {b}"),
        Json::Number(n) => format!("the number {n}"),
        Json::String(s) => format!("the string {s:?}"),
        Json::Array(_) => "a list".to_string(),
        Json::Object(_) => "a mapping".to_string(),
    }
}

fn required_string(
    map: &Map<String, Json>,
    field: &'static str,
    origin: &Origin,
    object: &str,
) -> Result<String, LoadError> {
    match map.get(field) {
        None | Some(Json::Null) => Err(LoadError::MissingField {
            origin: origin.clone(),
            object: object.to_string(),
            field,
        }),
        Some(Json::String(s)) if s.is_empty() => Err(LoadError::MissingField {
            origin: origin.clone(),
            object: object.to_string(),
            field,
        }),
        Some(Json::String(s)) => Ok(s.clone()),
        Some(other) => Err(LoadError::FieldType {
            origin: origin.clone(),
            object: object.to_string(),
            path: field.to_string(),
            message: format!("expected a string, found {}", describe(other)),
        }),
    }
}

/// `metadata.namespace` and `metadata.name`, each when present and non-empty.
/// Why `name` is not a DNS-1123 label (at most 63 lower-case letters, digits and '-',
/// starting and ending with a letter or digit), if it is not.
pub(crate) fn dns1123_label_error(name: &str) -> Option<String> {
    let b = name.as_bytes();
    let chars_ok = b
        .iter()
        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    let ends_ok = b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric);
    if b.len() > 63 {
        Some(format!("{} characters; at most 63 are allowed", b.len()))
    } else if !chars_ok || !ends_ok {
        Some(
            "a DNS-1123 label must consist of lower-case letters, digits and '-', and start and \
             end with a letter or digit"
                .to_string(),
        )
    } else {
        None
    }
}

/// Why `name` is not a DNS-1123 subdomain (at most 253 characters of DNS-1123 labels joined
/// by '.'), if it is not.
pub(crate) fn dns1123_subdomain_error(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some(format!(
            "{} characters; at most 253 are allowed",
            name.len()
        ));
    }
    let ok = name.split('.').all(|label| {
        let b = label.as_bytes();
        b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric)
            && b.iter()
                .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    });
    (!ok).then(|| {
        "a DNS-1123 subdomain must consist of lower-case letters, digits, '-' and '.', and \
         start and end with a letter or digit"
            .to_string()
    })
}

/// Why `key` is not a label key (an optional DNS-1123 subdomain prefix and '/', then a name
/// of at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or
/// digit), if it is not. Topology keys are label keys.
pub(crate) fn label_key_error(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some("the prefix before '/' is empty".to_string());
        }
        if let Some(why) = dns1123_subdomain_error(p) {
            return Some(format!("the prefix {p:?}: {why}"));
        }
    }
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    (!ok).then(|| {
        "a label key is a name of at most 63 letters, digits, '-', '_' and '.', starting and \
         ending with a letter or digit, optionally after a DNS subdomain and '/' \
         (e.g. topology.kubernetes.io/zone)"
            .to_string()
    })
}

/// Checks `metadata.name` (and `metadata.namespace`) as the API server does: a Namespace's
/// name is a DNS-1123 label, every other kind read here is named by a DNS-1123 subdomain, and
/// a namespace is a DNS-1123 label. Names are quoted with escapes in the message, so control
/// characters never reach the terminal.
fn check_name(
    origin: &Origin,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), LoadError> {
    let invalid = |path: &str, value: &str, why: String| LoadError::InvalidValue {
        origin: origin.clone(),
        object: kind.to_string(),
        path: path.to_string(),
        message: format!("{value:?} is not a valid name: {why}; rename it"),
    };
    if let Some(ns) = namespace
        && let Some(why) = dns1123_label_error(ns)
    {
        return Err(invalid("metadata.namespace", ns, why));
    }
    let why = if kind == "Namespace" {
        dns1123_label_error(name)
    } else {
        dns1123_subdomain_error(name)
    };
    match why {
        Some(why) => Err(invalid("metadata.name", name, why)),
        None => Ok(()),
    }
}

fn metadata(
    map: &Map<String, Json>,
    origin: &Origin,
    kind: &str,
) -> Result<(Option<String>, Option<String>), LoadError> {
    let meta = match map.get("metadata") {
        None | Some(Json::Null) => return Ok((None, None)),
        Some(Json::Object(meta)) => meta,
        Some(other) => {
            return Err(LoadError::FieldType {
                origin: origin.clone(),
                object: kind.to_string(),
                path: "metadata".to_string(),
                message: format!("expected a mapping, found {}", describe(other)),
            });
        }
    };
    let field = |name: &str| -> Result<Option<String>, LoadError> {
        match meta.get(name) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(s)) if s.is_empty() => Ok(None),
            Some(Json::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(LoadError::FieldType {
                origin: origin.clone(),
                object: kind.to_string(),
                path: format!("metadata.{name}"),
                message: format!("expected a string, found {}", describe(other)),
            }),
        }
    };
    Ok((field("namespace")?, field("name")?))
}

/// An object read into one of the crate's own structs: routing has checked apiVersion and
/// kind, so they are dropped (the structs do not define them).
fn own_object(value: Json) -> Json {
    workload_api_object(value)
}

/// A Workload API object ready to be read as v1beta1: routing has checked apiVersion and kind,
/// and v1alpha3 has the same shape, so both are dropped (k8s-openapi would reject v1alpha3).
fn workload_api_object(mut value: Json) -> Json {
    if let Json::Object(map) = &mut value {
        map.remove("apiVersion");
        map.remove("kind");
    }
    value
}

impl Collected {
    fn add_workload(&mut self, head: Entry<()>, object: workloads::Object) {
        self.workload_objects.push(head.with(object));
    }

    /// Deserializes a typed kind; a mismatch names the field path, and fields the type does
    /// not define are recorded.
    fn decode<T: DeserializeOwned>(
        &mut self,
        value: Json,
        origin: &Origin,
        object: &str,
    ) -> Result<T, LoadError> {
        let (t, unknown) = decode_at("", value, origin, object)?;
        self.note_unknown(unknown, origin, object);
        Ok(t)
    }

    /// Records the fields an object's type does not define, each also as a warning.
    fn note_unknown(&mut self, paths: Vec<String>, origin: &Origin, object: &str) {
        for path in paths {
            let field = UnknownField {
                origin: origin.clone(),
                object: object.to_string(),
                path,
            };
            self.warnings.push(field.warning());
            self.unknown_fields.push(field);
        }
    }
}

/// Deserializes the part of an object at field `prefix` (empty for the whole object); a
/// mismatch names the field path from the top of the object. Also returns the paths, from
/// `prefix`, of the fields the type does not define.
fn decode_at<T: DeserializeOwned>(
    prefix: &str,
    value: Json,
    origin: &Origin,
    object: &str,
) -> Result<(T, Vec<String>), LoadError> {
    unknown::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        LoadError::FieldType {
            origin: origin.clone(),
            object: object.to_string(),
            path: match (prefix, path.as_str()) {
                ("", ".") => "(top level)".to_string(),
                ("", _) => path,
                (_, ".") => prefix.to_string(),
                _ => format!("{prefix}.{path}"),
            },
            message: e.into_inner().to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1123_names() {
        for ok in ["a", "web-0", "0", "a.b-c.d", &"a".repeat(63)] {
            assert_eq!(
                dns1123_label_error(ok).filter(|_| !ok.contains('.')),
                None,
                "{ok}"
            );
            assert_eq!(dns1123_subdomain_error(ok), None, "{ok}");
        }
        for bad in [
            "", "Web", "-a", "a-", "a_b", "a/b", "a\u{1b}b", "a\nb", "a..b", ".a",
        ] {
            assert!(dns1123_subdomain_error(bad).is_some(), "{bad:?}");
            assert!(dns1123_label_error(bad).is_some(), "{bad:?}");
        }
        assert!(dns1123_label_error("a.b").is_some());
        assert!(dns1123_label_error(&"a".repeat(64)).is_some());
        let long = vec!["a".repeat(63); 4].join(".");
        assert_eq!(long.len(), 255);
        assert!(
            dns1123_subdomain_error(&long)
                .unwrap()
                .contains("at most 253")
        );
    }
}
