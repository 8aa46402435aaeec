//! Errors of ndfusion, with the context a user needs to find the fault: the array or table
//! location, and the field, key, chunk or option at fault.
//!
//! Inside the crate, functions return [`Result`]; at the DataFusion boundary (table providers,
//! execution plans, factories) an [`Error`] becomes a [`DataFusionError::External`], so its
//! message reaches the user unchanged.

use datafusion::error::DataFusionError;

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when opening or reading N-d data.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The location does not exist or cannot be listed/read.
    #[error("cannot open {location}: {reason}")]
    NotFound { location: String, reason: String },

    /// Metadata (zarr.json, .zarray, ...) is unreadable, malformed or violates the format.
    #[error("invalid Zarr metadata in {path}: {reason}")]
    InvalidMetadata { path: String, reason: String },

    /// A data type (or struct field type) that ndfusion cannot represent.
    #[error("invalid or unsupported data type in {path}: {reason}")]
    UnsupportedDataType { path: String, reason: String },

    /// A codec the pinned zarrs cannot decode, or that cannot carry a struct element.
    #[error("unsupported codec in {path}: {reason}")]
    UnsupportedCodec { path: String, reason: String },

    /// A chunk could not be fetched or decoded.
    #[error("cannot read chunk '{key}' of {path}: {reason}")]
    Chunk {
        path: String,
        key: String,
        reason: String,
    },

    /// A SQL option (`OPTIONS (...)`) or location string is wrong.
    #[error("invalid option {option}: {reason}")]
    InvalidOption { option: String, reason: String },

    /// An invariant of the crate broke; reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(String),

    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
}

impl From<Error> for DataFusionError {
    fn from(err: Error) -> Self {
        match err {
            Error::Arrow(e) => DataFusionError::ArrowError(Box::new(e), None),
            other => DataFusionError::External(Box::new(other)),
        }
    }
}
