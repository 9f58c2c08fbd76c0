//! Where an object came from, and the one error type of the crate.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;

/// The place of one object in the input: a file (or `<stdin>`), the 1-based number of the
/// YAML/JSON document in that file, and, for objects inside a `kind: List`, the 0-based index
/// in its `items`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: Arc<str>,
    pub document: u32,
    pub item: Option<u32>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.item {
            None => write!(f, "{} (document {})", self.file, self.document),
            Some(i) => write!(f, "{} (document {}, items[{i}])", self.file, self.document),
        }
    }
}

/// Why loading manifests failed. Every message says what is wrong, where (file, document,
/// object, field path) and what to do about it. Loading stops at the first error.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}; check that the path exists and is readable", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error(
        "{file} is not UTF-8 text: byte {offset} (line {line}, column {column}) is not valid \
         UTF-8; save it as UTF-8"
    )]
    NotUtf8 {
        file: String,
        /// 0-based offset of the first byte that is not UTF-8.
        offset: usize,
        line: usize,
        column: usize,
    },

    #[error(
        "{origin}: invalid {format} at line {line}, column {column}: {message}; fix the syntax"
    )]
    Syntax {
        origin: Origin,
        /// "YAML" or "JSON".
        format: &'static str,
        line: usize,
        column: usize,
        message: String,
    },

    /// A document the parser rejects for something other than its syntax.
    #[error("{origin}: {message}")]
    Invalid { origin: Origin, message: String },

    /// Input beyond one of the limits on documents (nesting depth, size, count).
    #[error("{origin}: {message} (see \"Limits\" in README.md)")]
    Limit { origin: Origin, message: String },

    #[error(
        "{origin}: expected a Kubernetes object (a mapping with apiVersion, kind and metadata), \
         found {found}"
    )]
    NotAnObject { origin: Origin, found: String },

    #[error(
        "{origin}: {object} has no {field}; every object needs apiVersion, kind and metadata.name"
    )]
    MissingField {
        origin: Origin,
        /// The kind when known, else "object".
        object: String,
        field: &'static str,
    },

    #[error("{origin}: {object}: field {path}: {message}; make the field match the Kubernetes API")]
    FieldType {
        origin: Origin,
        /// e.g. `Pod default/web`.
        object: String,
        /// e.g. `spec.containers[0].resources.requests.cpu`.
        path: String,
        message: String,
    },

    #[error("{origin}: {object}: field {path}: {message}")]
    Quantity {
        origin: Origin,
        object: String,
        path: String,
        message: String,
    },

    #[error("{origin}: {object}: field {path}: {message}")]
    InvalidValue {
        origin: Origin,
        object: String,
        path: String,
        message: String,
    },

    #[error(
        "pod {pod} in {origin} names priorityClassName {class}, which is not defined; \
         add the PriorityClass or remove the field"
    )]
    UndefinedPriorityClass {
        pod: String,
        origin: Origin,
        class: String,
    },

    #[error("{object} is defined twice, in {first} and in {second}; remove one of them")]
    Duplicate {
        object: String,
        first: Origin,
        second: Origin,
    },

    #[error(
        "{file} is given twice (as two -f arguments, or as a file and a directory holding it), \
         so every object in it would be defined twice; give it once"
    )]
    SameFileTwice { file: String },

    #[error(
        "node {node} in {origin} has neither status.allocatable nor status.capacity; add \
         status.allocatable (cpu, memory, pods)"
    )]
    NoAllocatable { node: String, origin: Origin },

    #[error(
        "PriorityClasses {first} ({first_origin}) and {second} ({second_origin}) both have \
         globalDefault: true; keep it on one of them"
    )]
    SeveralGlobalDefaults {
        first: String,
        first_origin: Origin,
        second: String,
        second_origin: Origin,
    },
}

impl LoadError {
    /// The inputs (files, or objects given by name) the error is about, first the one at
    /// fault: a caller that loads objects one per input can leave that one out and retry.
    pub fn inputs(&self) -> Vec<&str> {
        match self {
            LoadError::Syntax { origin, .. }
            | LoadError::Invalid { origin, .. }
            | LoadError::Limit { origin, .. }
            | LoadError::NotAnObject { origin, .. }
            | LoadError::MissingField { origin, .. }
            | LoadError::FieldType { origin, .. }
            | LoadError::Quantity { origin, .. }
            | LoadError::InvalidValue { origin, .. }
            | LoadError::UndefinedPriorityClass { origin, .. }
            | LoadError::NoAllocatable { origin, .. } => vec![&*origin.file],
            LoadError::Duplicate { first, second, .. } => {
                vec![&*second.file, &*first.file]
            }
            LoadError::SeveralGlobalDefaults {
                first_origin,
                second_origin,
                ..
            } => vec![&*second_origin.file, &*first_origin.file],
            _ => Vec::new(),
        }
    }
}
