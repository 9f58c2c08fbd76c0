//! Errors: [`DraError`] for bad input (the API server would have rejected it), [`Unfit`] for a
//! node where the claims cannot be allocated.

use std::fmt;

use thiserror::Error;

/// Input that Kubernetes would not accept; front ends report it as bad input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DraError {
    /// A CEL selector that does not compile (syntax, undeclared names, too long, too costly).
    #[error(
        "{object}: {field}: invalid CEL expression {expression:?}: {message}; fix the expression (the API server would reject it)"
    )]
    InvalidSelector {
        /// The object, e.g. `DeviceClass gpu` or `ResourceClaim ns/name`.
        object: String,
        /// Field path, e.g. `spec.devices.requests[0].exactly.selectors[1].cel.expression`.
        field: String,
        expression: String,
        message: String,
    },
    /// Any other invalid field.
    #[error("{object}: {field}: {message}")]
    Invalid {
        object: String,
        field: String,
        message: String,
    },
    /// Two objects of the same kind with the same name.
    #[error("{kind} {name} is defined twice; remove one of them")]
    Duplicate { kind: &'static str, name: String },
}

/// Why the DynamicResources filter rejects a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnfitReason {
    /// No allocation of the unallocated claims exists on the node.
    CannotAllocateAllClaims,
    /// A claim is already allocated and its allocation cannot be used on the node.
    ClaimNotAvailableOnNode,
    /// A request names a device class that does not exist.
    DeviceClassNotFound,
    /// A claim or template reference that the state does not know.
    ClaimNotFound,
    /// The backtracking search gave up after its step bound.
    SearchBoundExceeded,
}

impl UnfitReason {
    /// A short message in the style of kube-scheduler's DynamicResources plugin; the same for
    /// every node, so that reasons can be counted across nodes.
    pub fn message(self) -> &'static str {
        match self {
            UnfitReason::CannotAllocateAllClaims => "cannot allocate all claims",
            UnfitReason::ClaimNotAvailableOnNode => "resourceclaim not available on the node",
            UnfitReason::DeviceClassNotFound => "device class does not exist",
            UnfitReason::ClaimNotFound => "resourceclaim not found",
            UnfitReason::SearchBoundExceeded => "device allocation search exceeded its step bound",
        }
    }
}

/// The claims cannot be allocated on a node: a short reason and an optional detail naming the
/// claim, request, expression or device involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfit {
    pub reason: UnfitReason,
    pub detail: Option<String>,
}

impl Unfit {
    pub fn new(reason: UnfitReason) -> Self {
        Unfit {
            reason,
            detail: None,
        }
    }
    pub fn with_detail(reason: UnfitReason, detail: impl Into<String>) -> Self {
        Unfit {
            reason,
            detail: Some(detail.into()),
        }
    }
    /// The short message (see [`UnfitReason::message`]).
    pub fn message(&self) -> &'static str {
        self.reason.message()
    }
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason.message())?;
        if let Some(d) = &self.detail {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Unfit {}
