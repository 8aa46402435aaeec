//! [`MetadataProblem`]: what is wrong with a metadata document, by the kind of [`Error`] it
//! becomes once the caller names the document ([`MetadataProblem::at`]). The parsers below
//! the document (data types, fill values, v2 dtypes, sizes, attributes) return it, so each
//! problem keeps its kind however deep it is found.

use crate::error::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MetadataProblem {
    /// The document breaks a rule of the format: [`Error::InvalidMetadata`].
    Invalid(String),
    /// A data type ndfusion cannot represent: [`Error::UnsupportedDataType`].
    DataType(String),
    /// A codec ndfusion cannot decode: [`Error::UnsupportedCodec`].
    Codec(String),
}

impl MetadataProblem {
    /// The error of this problem in the metadata document at `path`.
    pub(crate) fn at(self, path: &str) -> Error {
        let path = path.to_string();
        match self {
            MetadataProblem::Invalid(reason) => Error::InvalidMetadata { path, reason },
            MetadataProblem::DataType(reason) => Error::UnsupportedDataType { path, reason },
            MetadataProblem::Codec(reason) => Error::UnsupportedCodec { path, reason },
        }
    }
}

impl std::fmt::Display for MetadataProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetadataProblem::Invalid(r)
            | MetadataProblem::DataType(r)
            | MetadataProblem::Codec(r) => f.write_str(r),
        }
    }
}

impl From<String> for MetadataProblem {
    fn from(reason: String) -> Self {
        MetadataProblem::Invalid(reason)
    }
}

impl From<&str> for MetadataProblem {
    fn from(reason: &str) -> Self {
        MetadataProblem::Invalid(reason.to_string())
    }
}
