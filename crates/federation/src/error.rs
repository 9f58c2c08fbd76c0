//! The one error type: bad input, with the file, the object and the field at fault.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum FederationError {
    /// Karmada objects that are malformed or invalid.
    #[error("{0}")]
    Input(String),
    /// Manifest sources that cannot be read or parsed.
    #[error(transparent)]
    Load(#[from] lockstep_manifests::LoadError),
    /// A `--member` cluster's manifests or setup.
    #[error("--member {cluster}: {message}")]
    Member { cluster: String, message: String },
}

impl FederationError {
    pub fn input(message: impl Into<String>) -> Self {
        FederationError::Input(message.into())
    }
}
