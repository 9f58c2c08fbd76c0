//! `lockstep-manifests`: Kubernetes manifests in, the lockstep model out.
//!
//! Owns reading manifest files, directories and stdin; splitting multi-document YAML, JSON
//! streams and `kind: List`s into objects; deserializing the kinds the scheduler understands
//! into k8s-openapi types (so a wrong field names its path); and converting them into a
//! validated [`lockstep_model::Cluster`] with Kubernetes' defaulting applied: API-server
//! defaults (requests from limits, namespace labels, host ports under `hostNetwork`), priority
//! admission (priority from the PriorityClass), and kube-scheduler's effective requests
//! (`resourcehelper.PodRequests` with sidecars, pod-level resources and overhead; the non-zero
//! CPU and memory requests used for scoring).
//!
//! Routed kinds: `v1` Node, Pod, Namespace; `scheduling.k8s.io/v1` PriorityClass; `policy/v1`
//! PodDisruptionBudget; the Workload API (`scheduling.k8s.io/v1beta1`, and `v1alpha3` read the
//! same way): Workload, PodGroup, CompositePodGroup, validated as the API server validates
//! them, with the group tree (parents, cycles, depth) checked once every file is loaded; the
//! DRA kinds (`resource.k8s.io/v1` DeviceClass, ResourceSlice, ResourceClaim with its
//! allocation status, ResourceClaimTemplate) and pods' `spec.resourceClaims`, validated object
//! by object as the API server does, with quantities in whole base units. CEL expressions are
//! kept as text: `lockstep-dra` compiles them (this crate must not depend on it), and whether a
//! claim, template or class named elsewhere exists is left to it and the engine. Workload
//! objects (`ray.io/v1` RayCluster and RayJob, `batch/v1` Job, `jobset.x-k8s.io/v1alpha2`
//! JobSet, `apps/v1` Deployment, ReplicaSet and StatefulSet, `leaderworkerset.x-k8s.io/v1`
//! LeaderWorkerSet) are expanded into the pods and groups their controllers would create
//! (see `workloads`). Any other kind, or a known kind in another apiVersion, is skipped with a
//! warning.
//!
//! It must not schedule, print, exit or panic: bad input is a [`LoadError`] naming the file,
//! the document, the object and the field, and saying what to do; nothing is half-loaded.
//! It must stay the only crate that sees k8s-openapi types; the engine sees only the model.
//! Output is deterministic: directories are read in path order, nodes are sorted by name,
//! resource names are interned in name order.

mod convert;
mod documents;
mod error;
mod input;
mod route;
mod unknown;
mod workload_api;
mod workloads;
mod yaml_fast;
mod yaml_json;

use std::io::Read;
use std::path::PathBuf;

pub use convert::one::{Converted, convert_object, converts_alone};
pub use error::{LoadError, Origin};
pub use unknown::UnknownField;

/// How many threads share `work` units of a kind that is worth splitting from `min_work` units
/// on: every core, at most 8; one below `min_work`.
pub(crate) fn threads_for(work: usize, min_work: usize) -> usize {
    if work < min_work {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// Lists shorter than this are mapped on one thread by [`map_in_order`].
const PARALLEL_MIN_ITEMS: usize = 256;

/// `items` mapped by `f`, in order, on every core for long lists.
pub(crate) fn map_in_order<T: Send, U: Send>(
    mut items: Vec<T>,
    f: impl Fn(T) -> U + Sync,
) -> Vec<U> {
    let threads = threads_for(items.len(), PARALLEL_MIN_ITEMS);
    if threads < 2 {
        return items.into_iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    let mut parts = Vec::new();
    while items.len() > chunk {
        parts.push(items.split_off(items.len() - chunk));
    }
    parts.push(items);
    parts.reverse();
    std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .into_iter()
            .map(|part| scope.spawn(move || part.into_iter().map(f).collect::<Vec<U>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// The Kubernetes API version whose types manifests are read into (k8s-openapi's `v1_37`
/// feature in the workspace Cargo.toml).
pub const KUBERNETES_API_VERSION: &str = "1.37";

/// Where manifests come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file, or a directory read recursively for `*.yaml`, `*.yml` and `*.json` files in
    /// path order (entries whose name starts with `.` are skipped).
    Path(PathBuf),
    /// Standard input, named `<stdin>` in messages.
    Stdin,
}

impl Source {
    /// The source a command-line argument names: `-` is stdin, anything else a path.
    pub fn from_arg(arg: &str) -> Source {
        if arg == "-" {
            Source::Stdin
        } else {
            Source::Path(PathBuf::from(arg))
        }
    }
}

/// The loaded cluster and the warnings about input that was skipped.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub cluster: lockstep_model::Cluster,
    /// One line each, starting with `warning: ` (unknown fields among them).
    pub warnings: Vec<String>,
    /// Fields the Kubernetes API does not define, each also a warning: errors for a caller
    /// that is strict.
    pub unknown_fields: Vec<UnknownField>,
    /// Where each object came from (`file (document N)`), by its display name as errors
    /// name it: `Kind name` for cluster-scoped kinds, `Kind namespace/name` otherwise.
    pub origins: std::collections::BTreeMap<String, String>,
    /// The owner of each pod a workload object made or counts as its own, by `namespace/name`:
    /// `RayCluster ml/rc`, `Job ml/train`, ...
    pub owners: std::collections::BTreeMap<String, String>,
}

impl Loaded {
    /// Prefixes a message about `object` with the file and document it came from.
    pub fn locate(&self, object: &str, message: &str) -> String {
        match self.origins.get(object) {
            Some(origin) => format!("{origin}: {message}"),
            None => message.to_string(),
        }
    }
}

/// Loads every source, in order, into one cluster. Stdin is read when a source is
/// [`Source::Stdin`].
pub fn load(sources: &[Source]) -> Result<Loaded, LoadError> {
    load_with_stdin(sources, &mut std::io::stdin().lock())
}

/// Like [`load`], reading [`Source::Stdin`] from `stdin`.
pub fn load_with_stdin(sources: &[Source], stdin: &mut dyn Read) -> Result<Loaded, LoadError> {
    let mut warnings = Vec::new();
    let inputs = input::read_sources(sources, stdin, &mut warnings)?;
    let mut collected = route::Collected::default();
    collected.warnings = warnings;
    add_inputs(&mut collected, inputs)?;
    convert::build(collected)
}

/// Routes every document of every input; an input without any document gets a warning. Each
/// input's text is freed once it is read.
fn add_inputs(
    collected: &mut route::Collected,
    inputs: Vec<input::Input>,
) -> Result<(), LoadError> {
    for input in inputs {
        let name = input.name.as_str();
        // A batch of documents at a time: only one batch's parsed values are alive at once.
        let count = documents::parse_in_batches(name, &input.text, input.json, &mut |batch| {
            collected.add_documents(batch.into_iter().map(|d| (name, d)))
        })?;
        if count == 0 {
            collected.warnings.push(format!(
                "warning: {name} holds no Kubernetes objects (it is empty, or only comments and \
                 document separators); nothing is read from it"
            ));
        }
    }
    Ok(())
}

/// Like [`load`], then adds the objects of `extra` (such as the pod file of `--estimate`): an
/// object of `extra` identical to one of `sources` (same content once parsed) is that one
/// object; a different object of the same kind and name is [`LoadError::Duplicate`], naming
/// both places. Also returns the display names (`Pod ml/web`) of `extra`'s objects, in order.
pub fn load_with_extra(
    sources: &[Source],
    extra: &Source,
) -> Result<(Loaded, Vec<String>), LoadError> {
    let mut stdin = std::io::stdin().lock();
    let mut warnings = Vec::new();
    let inputs = input::read_sources(sources, &mut stdin, &mut warnings)?;
    let extra_inputs = input::read_sources(std::slice::from_ref(extra), &mut stdin, &mut warnings)?;
    let mut collected = route::Collected::default();
    collected.keep_values = true;
    collected.warnings = warnings;
    add_inputs(&mut collected, inputs)?;
    collected.merging = true;
    add_inputs(&mut collected, extra_inputs)?;
    let extra_objects = std::mem::take(&mut collected.merged_objects);
    Ok((convert::build(collected)?, extra_objects))
}

/// Loads objects that are already parsed (as an API server serves them), each with the
/// name its errors are given under (e.g. `Pod ml/web`), as if each were a file of one
/// document. The live scheduler reads its watch caches this way, through the same
/// conversion and validation as every manifest.
pub fn load_objects(mut objects: Vec<(String, serde_json::Value)>) -> Result<Loaded, LoadError> {
    let mut collected = route::Collected::default();
    collected.add_documents(objects.iter_mut().map(|(name, value)| {
        (
            name.as_str(),
            documents::Document {
                number: 1,
                value: value.take(),
            },
        )
    }))?;
    convert::build(collected)
}

/// Checks a YAML text against the limits on documents (nesting depth, size, count) before a
/// parser sees it, for YAML files read outside [`load`] (a scheduler configuration).
pub fn check_yaml_limits(name: &str, text: &str) -> Result<(), LoadError> {
    documents::check_yaml_limits(name, text)
}

/// Loads one text as if it were a file called `name`: JSON when `name` ends in `.json`, YAML
/// when it ends in `.yaml` or `.yml`, otherwise JSON if the text starts with `{`.
pub fn load_str(name: &str, text: &str) -> Result<Loaded, LoadError> {
    let input = input::Input {
        name: name.to_string(),
        text: text.to_string(),
        json: input::is_json(std::path::Path::new(name), text),
    };
    let mut collected = route::Collected::default();
    add_inputs(&mut collected, vec![input])?;
    convert::build(collected)
}

/// One document of a manifest set as parsed, before any kind is routed: where it came from
/// and its value. For readers of other APIs' objects (Karmada's) that share this crate's
/// sources, limits, document splitting and messages.
#[derive(Debug, Clone)]
pub struct RawDocument {
    pub origin: Origin,
    pub value: serde_json::Value,
}

/// Reads and parses every source in order into documents (`kind: List` is not expanded).
/// The warnings name inputs that hold no objects.
pub fn read_documents(sources: &[Source]) -> Result<(Vec<RawDocument>, Vec<String>), LoadError> {
    let mut warnings = Vec::new();
    let inputs = input::read_sources(sources, &mut std::io::stdin().lock(), &mut warnings)?;
    raw_documents(&inputs, warnings)
}

/// Like [`read_documents`] for one text read as if it were a file called `name` (JSON or
/// YAML by the rule of [`load_str`]).
pub fn read_documents_str(
    name: &str,
    text: &str,
) -> Result<(Vec<RawDocument>, Vec<String>), LoadError> {
    let input = input::Input {
        name: name.to_string(),
        text: text.to_string(),
        json: input::is_json(std::path::Path::new(name), text),
    };
    raw_documents(std::slice::from_ref(&input), Vec::new())
}

fn raw_documents(
    inputs: &[input::Input],
    mut warnings: Vec<String>,
) -> Result<(Vec<RawDocument>, Vec<String>), LoadError> {
    let mut out = Vec::new();
    for input in inputs {
        let documents = documents::parse_documents(&input.name, &input.text, input.json)?;
        if documents.is_empty() {
            warnings.push(format!(
                "warning: {} holds no objects (it is empty, or only comments and document \
                 separators); nothing is read from it",
                input.name
            ));
        }
        let file: std::sync::Arc<str> = input.name.as_str().into();
        out.extend(documents.into_iter().map(|d| RawDocument {
            origin: Origin {
                file: file.clone(),
                document: d.number,
                item: None,
            },
            value: d.value,
        }));
    }
    Ok((out, warnings))
}

/// Deserializes `value` into `T`, returning the paths of the fields `T` does not define
/// (`spec.placement.clusterAfinity`), as manifests' unknown fields are found; an error
/// carries the path of the field at fault.
pub fn deserialize_noting_unknown<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
) -> Result<(T, Vec<String>), serde_path_to_error::Error<serde_json::Error>> {
    unknown::deserialize(value)
}

/// Like [`load`], then adds one more text as if it were a JSON file called `name` (objects
/// made by a caller, such as the pod shape of a replica estimate).
pub fn load_with_text(sources: &[Source], name: &str, text: &str) -> Result<Loaded, LoadError> {
    let mut warnings = Vec::new();
    let mut inputs = input::read_sources(sources, &mut std::io::stdin().lock(), &mut warnings)?;
    inputs.push(input::Input {
        name: name.to_string(),
        text: text.to_string(),
        json: true,
    });
    let mut collected = route::Collected::default();
    collected.warnings = warnings;
    add_inputs(&mut collected, inputs)?;
    convert::build(collected)
}
