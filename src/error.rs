//! The one error type of ndfusion.
//!
//! Every variant names what is at fault (the location, metadata file, field, chunk key, row or
//! option) and keeps the error it comes from as its [`source`](std::error::Error::source):
//! `object_store`, `lance`, `serde_json` and `arrow` errors as their own types, zarrs' errors
//! (several types) boxed. At the DataFusion boundary an [`Error`] becomes
//! [`DataFusionError::External`]; [`Error::find`] gets it back.

use datafusion::error::DataFusionError;

use crate::nd::NdError;

/// Result with ndfusion's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of a library ndfusion calls, kept as the source of an [`Error`].
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong when opening, reading or writing N-d data.
///
/// `Debug` prints the message (as `Display` does): errors that cross process boundaries
/// (a Ballista executor's task error reaches the client as the `Debug` text of DataFusion's
/// error) stay readable and name what is at fault.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The location does not exist or holds no table of the expected format.
    #[error("cannot open {location}: {reason}")]
    NotFound {
        /// The location as given.
        location: String,
        /// What is missing.
        reason: String,
    },

    /// A `LOCATION` (or the location given to `open`) that ndfusion cannot use.
    #[error("invalid location '{location}': {reason}")]
    InvalidLocation {
        /// The location as given.
        location: String,
        /// Why it is refused.
        reason: String,
    },

    /// An object store refused or failed a request (credentials, missing bucket, network).
    #[error("object store error at {location}: {}", with_root_cause(source))]
    ObjectStore {
        /// The object or prefix the request was for.
        location: String,
        /// The object store's error.
        #[source]
        source: object_store::Error,
    },

    /// A metadata document (`zarr.json`, `.zarray`, `.zattrs`) is not JSON.
    #[error("invalid Zarr metadata in {path}: not valid JSON: {source}")]
    MetadataJson {
        /// The metadata file.
        path: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },

    /// Metadata is well-formed JSON but violates the format.
    #[error("invalid Zarr metadata in {path}: {reason}")]
    InvalidMetadata {
        /// The metadata file.
        path: String,
        /// The rule it breaks.
        reason: String,
    },

    /// A data type (or struct field type) that ndfusion cannot represent.
    #[error("invalid or unsupported data type in {path}: {reason}")]
    UnsupportedDataType {
        /// The metadata file.
        path: String,
        /// The type, and the field holding it.
        reason: String,
    },

    /// A codec the pinned zarrs cannot decode, or that cannot carry the array's elements.
    #[error("unsupported codec in {path}: {reason}")]
    UnsupportedCodec {
        /// The metadata file.
        path: String,
        /// The codec.
        reason: String,
    },

    /// A chunk could not be fetched or decoded.
    #[error("cannot read chunk '{key}' of {path}: {}", with_root_cause(source.as_ref()))]
    Chunk {
        /// The array.
        path: String,
        /// The chunk's store key (`c/0/1`, `0.1`).
        key: String,
        /// What failed: a zarrs storage or codec error, an object store error, or ndfusion's
        /// own check of the chunk's bytes.
        #[source]
        source: BoxError,
    },

    /// A size (`512M`, `2G`: [`parse_size`](crate::parse_size)) that could not be read.
    #[error("{reason}")]
    InvalidSize {
        /// The text given.
        text: String,
        /// Why it is not a size.
        reason: String,
    },

    /// A SQL option (`OPTIONS (...)`) or an option given from Rust is wrong.
    #[error("invalid option '{option}': {reason}")]
    InvalidOption {
        /// The option key.
        option: String,
        /// Why it is refused (unknown keys list the known ones).
        reason: String,
    },

    /// A write (`COPY ... STORED AS ZARR`) refused or failed; nothing is left at the
    /// location.
    #[error("cannot write {location}: {reason}")]
    Write {
        /// The location written to, as given.
        location: String,
        /// Why (the column, option or object at fault).
        reason: String,
    },

    /// A filter of the query failed while it was evaluated in a scan.
    #[error("filter {filter}: {source}")]
    Filter {
        /// The filter, as written in SQL terms.
        filter: String,
        /// DataFusion's error.
        #[source]
        source: DataFusionError,
    },

    /// An aggregate of the query failed while a grid scan's cells were folded into it.
    #[error("{aggregate}: {source}")]
    Aggregate {
        /// The aggregate, as EXPLAIN shows it.
        aggregate: String,
        /// DataFusion's error.
        #[source]
        source: DataFusionError,
    },

    /// A Lance table without the lance-nd marker.
    #[error("{uri} is a Lance table without the lance-nd marker (schema metadata lance_nd:format = \"1\"); refusing to treat it as lance-nd")]
    NotLanceNd {
        /// The table.
        uri: String,
    },

    /// A write whose values have another type than the table's column, without an allowed
    /// cast.
    #[error("array '{array}' holds {table} in the table, the write has {write} (casting: {casting:?}); allow the cast with the write's casting option (WriteOptions::with_casting in Rust, the 'casting' option in SQL and Python)")]
    TypeMismatch {
        /// The array (or `array.attrs.key`, `__global_attrs__.key`).
        array: String,
        /// The table's type.
        table: arrow::datatypes::DataType,
        /// The written type.
        write: arrow::datatypes::DataType,
        /// The casting the write allowed.
        casting: crate::nd::Casting,
    },

    /// Another writer committed first.
    #[error("another writer changed {uri} at the same time; {left}; retry the write: {source}")]
    Conflict {
        /// The table.
        uri: String,
        /// What the failed write left in the table.
        left: String,
        /// Lance's error.
        #[source]
        source: lance::Error,
    },

    /// A write failed for another reason than a concurrent writer (storage, I/O).
    #[error("writing lance-nd table {uri} failed; {left}: {source}")]
    WriteFailed {
        /// The table.
        uri: String,
        /// What the failed write left in the table.
        left: String,
        /// Lance's error.
        #[source]
        source: lance::Error,
    },

    /// Lance failed to open or scan a table.
    #[error("lance-nd table {uri}: {source}")]
    Lance {
        /// The table.
        uri: String,
        /// Lance's error.
        #[source]
        source: lance::Error,
    },

    /// Lance failed to read a table whose data files are damaged (named).
    #[error("lance-nd table {uri}: damaged data files: {files}: {source}")]
    DamagedFiles {
        /// The table.
        uri: String,
        /// The files at fault, each with what is wrong.
        files: String,
        /// Lance's error.
        #[source]
        source: lance::Error,
    },

    /// A lance-nd table's schema breaks the format, or a write does not fit it.
    #[error("lance-nd table {uri}: {reason}")]
    InvalidTable {
        /// The table.
        uri: String,
        /// The rule broken.
        reason: String,
    },

    /// A stored nd record batch breaks the nd-arrow rules.
    #[error("{uri}: row {row}: {source}")]
    InvalidRow {
        /// The table.
        uri: String,
        /// The table row (Lance row id in scans).
        row: u64,
        /// The rule broken, with the array.
        #[source]
        source: NdError,
    },

    /// An nd array or batch built from Rust breaks the nd-arrow rules.
    #[error(transparent)]
    Nd(#[from] NdError),

    /// An Arrow kernel failed.
    #[error("{context}: {source}")]
    Arrow {
        /// What was being done.
        context: String,
        /// Arrow's error.
        #[source]
        source: arrow::error::ArrowError,
    },

    /// A Ballista cluster could not be reached or started.
    #[error("{what}: {source}")]
    Cluster {
        /// The scheduler or executor, with its address.
        what: String,
        /// Ballista's or DataFusion's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A cluster refused to run part of a plan: a data source or sink other than ndfusion's
    /// tables (DataFusion's file tables outside the allow list, `COPY TO`, ...).
    #[error("refused by the cluster: {what} does not run on it")]
    ClusterRefused {
        /// The operator or data source refused.
        what: String,
    },

    /// An invariant of ndfusion broke; reported instead of panicking.
    #[error("internal error: {0}")]
    Internal(String),
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl Error {
    /// The ndfusion error inside a DataFusion error, if there is one.
    ///
    /// ```
    /// # use datafusion::error::DataFusionError;
    /// let e = DataFusionError::from(ndfusion::Error::Internal("x".into()));
    /// assert!(matches!(ndfusion::Error::find(&e), Some(ndfusion::Error::Internal(_))));
    /// ```
    pub fn find(error: &DataFusionError) -> Option<&Error> {
        let mut current: &(dyn std::error::Error + 'static) = error;
        loop {
            if let Some(found) = current.downcast_ref::<Error>() {
                return Some(found);
            }
            if let Some(DataFusionError::External(inner)) = current.downcast_ref() {
                current = inner.as_ref();
                continue;
            }
            current = current.source()?;
        }
    }

    /// The message a user should see for a DataFusion error: ndfusion's own message when it
    /// holds one (without DataFusion's "External error: " prefix), else DataFusion's.
    ///
    /// An error of a task on a Ballista executor reaches the client as text holding the
    /// `Debug` form of DataFusion's error; the message inside its `External(...)` (ndfusion's,
    /// which `Debug` prints as its message) is what is shown.
    pub fn user_message(error: &DataFusionError) -> String {
        let message = match Error::find(error) {
            Some(e) => return e.to_string(),
            None => match error.find_root() {
                DataFusionError::External(inner) => inner.to_string(),
                root => root.to_string(),
            },
        };
        let message = remote_message(&message).unwrap_or(message);
        // A scheduler's gRPC answer: tonic's `Status { code: .., message: "..", .. }`.
        let message = status_message(&message).unwrap_or(message);
        // A scheduler's refusal reaches a cluster client as Ballista's text around the
        // `Display` of DataFusion's error: keep what follows its last "External error: ".
        let message = match message.rfind("External error: ") {
            Some(at) => message[at + "External error: ".len()..].to_string(),
            None => message,
        };
        message.trim().replace('\n', " ")
    }

    /// An Arrow error with what was being done.
    pub(crate) fn arrow(context: impl Into<String>, source: arrow::error::ArrowError) -> Self {
        Error::Arrow {
            context: context.into(),
            source,
        }
    }
}

/// The quoted `message: "..."` of a tonic `Status` printed with `Debug`, unescaped.
fn status_message(text: &str) -> Option<String> {
    const FIELD: &str = "message: \"";
    if !text.contains("Status {") {
        return None;
    }
    let start = text.find(FIELD)? + FIELD.len();
    let mut out = String::new();
    let mut chars = text[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                'n' => out.push(' '),
                other => out.push(other),
            },
            '"' => return Some(out),
            c => out.push(c),
        }
    }
    None
}

/// The message inside the last `External(` of `message`, without the wrappers still open
/// before it (`Name(` and string quotes; a quoted string's content is escaped).
fn remote_message(message: &str) -> Option<String> {
    const EXTERNAL: &str = "External(";
    let start = message.rfind(EXTERNAL)? + EXTERNAL.len();
    let (prefix, inner) = message.split_at(start);
    let mut inner = inner.trim_end();
    let mut open = Vec::new();
    let mut chars = prefix.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '(' => open.push(')'),
            ')' if open.last() == Some(&')') => {
                open.pop();
            }
            '"' if open.last() == Some(&'"') => {
                open.pop();
            }
            '"' => open.push('"'),
            _ => {}
        }
    }
    for closer in open.iter().rev() {
        inner = inner.strip_suffix(*closer)?;
    }
    let mut text = inner.to_string();
    for _ in open.iter().filter(|c| **c == '"') {
        text = text.replace("\\\"", "\"").replace("\\\\", "\\");
    }
    Some(text)
}

impl From<Error> for DataFusionError {
    fn from(err: Error) -> Self {
        DataFusionError::External(Box::new(err))
    }
}

/// An error's text, followed by its innermost cause where the text leaves it out (object_store
/// hides what reqwest and hyper said: "error following redirect" without the why).
pub(crate) fn with_root_cause(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut root = None;
    let mut next = error.source();
    while let Some(cause) = next {
        root = Some(cause);
        next = cause.source();
    }
    if let Some(root) = root {
        let cause = root.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_executor_error_shows_ndfusion_message() {
        let remote = "Execution error: Job pIhmwru failed: Job failed due to stage 1 failed: \
            Task failed due to runtime execution error: DataFusionError(Execution(\"DataFusionError(\
            External(cannot read chunk 'c/1' of a.zarr (\\\"x\\\"): bad (frame)))\"))\n";
        let e = DataFusionError::Execution(remote.trim_start_matches("Execution error: ").into());
        assert_eq!(
            Error::user_message(&e),
            "cannot read chunk 'c/1' of a.zarr (\"x\"): bad (frame)"
        );
        let plain = DataFusionError::Plan("no field named nope".into());
        assert_eq!(
            Error::user_message(&plain),
            "Error during planning: no field named nope"
        );
    }

    #[test]
    fn a_scheduler_refusal_shows_one_line() {
        // What a refusal of the scheduler's codec looks like to a cluster client.
        let status = "Error: Status { code: InvalidArgument, message: \"Error decoding: \
            External error: invalid option 'aws.endpoint': refused \\\"x\\\"\", \
            metadata: MetadataMap { headers: {} }, source: None }";
        let e = DataFusionError::Execution(status.into());
        assert_eq!(
            Error::user_message(&e),
            "invalid option 'aws.endpoint': refused \"x\""
        );
        let job = "Job X failed: DataFusion error: rule\ncaused by\nExternal error: \
            refused by the cluster: writing files does not run on it\n";
        let e = DataFusionError::Execution(job.into());
        assert_eq!(
            Error::user_message(&e),
            "refused by the cluster: writing files does not run on it"
        );
    }

    #[test]
    fn errors_survive_datafusion_and_keep_their_sources() {
        let json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let e = Error::MetadataJson {
            path: "a.zarr/zarr.json".into(),
            source: json,
        };
        let df = DataFusionError::Context("scan".into(), Box::new(DataFusionError::from(e)));
        let found = Error::find(&df).expect("ndfusion error inside");
        assert!(matches!(found, Error::MetadataJson { .. }));
        let source = std::error::Error::source(found).unwrap();
        assert!(source.downcast_ref::<serde_json::Error>().is_some());
        assert!(Error::user_message(&df).starts_with("invalid Zarr metadata in a.zarr/zarr.json"));
        let plain = DataFusionError::Plan("no such table".into());
        assert!(Error::find(&plain).is_none());
        assert_eq!(
            Error::user_message(&plain),
            "Error during planning: no such table"
        );
    }
}
