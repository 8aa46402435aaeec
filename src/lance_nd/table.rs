//! Opening lance-nd tables, and their errors.

use lance::Dataset;

/// Schema metadata key and value that mark a Lance table as lance-nd.
pub const FORMAT_KEY: &str = "lance_nd:format";
pub const FORMAT_VERSION: &str = "1";
/// Prefix of the optional per-array statistics columns, `__stats__:<array>`.
pub const STATS_PREFIX: &str = "__stats__:";

#[derive(Debug, thiserror::Error)]
pub enum LanceNdError {
    #[error("no lance-nd table at {uri}: {reason}")]
    NotFound { uri: String, reason: String },

    #[error("{uri} is a Lance table without the lance-nd marker (schema metadata {FORMAT_KEY} = \"{FORMAT_VERSION}\"); refusing to treat it as lance-nd")]
    NotLanceNd { uri: String },

    #[error("array '{array}' holds {table} in the table, the write has {write} (casting: {casting:?}); allow the cast in WriteOptions::casting")]
    TypeMismatch {
        array: String,
        table: arrow::datatypes::DataType,
        write: arrow::datatypes::DataType,
        casting: super::writer::Casting,
    },

    #[error("another writer changed {uri} at the same time; nothing was written, retry the write: {reason}")]
    Conflict { uri: String, reason: String },

    #[error("lance-nd table {uri}: {reason}")]
    Lance { uri: String, reason: String },

    #[error("{0}")]
    Schema(String),

    #[error("{0}")]
    Data(String),
}

impl LanceNdError {
    pub fn lance(uri: &str, e: lance::Error) -> Self {
        match e {
            lance::Error::CommitConflict { .. }
            | lance::Error::RetryableCommitConflict { .. }
            | lance::Error::IncompatibleTransaction { .. } => LanceNdError::Conflict {
                uri: uri.to_string(),
                reason: e.to_string(),
            },
            lance::Error::DatasetNotFound { .. } => LanceNdError::NotFound {
                uri: uri.to_string(),
                reason: e.to_string(),
            },
            e => LanceNdError::Lance {
                uri: uri.to_string(),
                reason: e.to_string(),
            },
        }
    }
}

impl From<LanceNdError> for datafusion::error::DataFusionError {
    fn from(e: LanceNdError) -> Self {
        datafusion::error::DataFusionError::External(Box::new(e))
    }
}

/// Opens the Lance table at `uri` and checks the lance-nd marker.
pub async fn open_lance_nd(uri: &str) -> Result<Dataset, LanceNdError> {
    let dataset = Dataset::open(uri).await.map_err(|e| match e {
        lance::Error::DatasetNotFound { .. } => LanceNdError::NotFound {
            uri: uri.to_string(),
            reason: "not a Lance table (no manifest)".into(),
        },
        e => LanceNdError::lance(uri, e),
    })?;
    if dataset
        .schema()
        .metadata
        .get(FORMAT_KEY)
        .map(String::as_str)
        != Some(FORMAT_VERSION)
    {
        return Err(LanceNdError::NotLanceNd {
            uri: uri.to_string(),
        });
    }
    Ok(dataset)
}
