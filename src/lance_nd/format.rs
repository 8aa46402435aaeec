//! What makes a Lance table a lance-nd table, and how Lance's errors are reported.

use lance::Dataset;

use crate::error::Error;

/// Schema metadata key and value that mark a Lance table as lance-nd.
pub(crate) const FORMAT_KEY: &str = "lance_nd:format";
pub(crate) const FORMAT_VERSION: &str = "1";
/// Prefix of the optional per-array statistics columns, `__stats__:<array>`.
pub(crate) const STATS_PREFIX: &str = "__stats__:";
/// The column a Lance scan adds with `with_row_address`: fragment id << 32 | row offset
/// (`lance_core::ROW_ADDR`, not re-exported by `lance`).
pub(crate) const ROW_ADDR: &str = "_rowaddr";

/// A Lance error while writing the table at `uri`; `left` says what the failed write left in
/// the table (Lance commits each step atomically, so it is known which steps landed).
pub(crate) fn write_error(uri: &str, e: lance::Error, left: &str) -> Error {
    let (uri, left) = (uri.to_string(), left.to_string());
    match e {
        // Lance's "too many concurrent writers": every attempt met another writer's commit
        // and none landed (its retry budget ends between attempts, never during a put).
        lance::Error::CommitConflict { .. }
        | lance::Error::RetryableCommitConflict { .. }
        | lance::Error::IncompatibleTransaction { .. }
        | lance::Error::TooMuchWriteContention { .. } => Error::Conflict {
            uri,
            left,
            source: e,
        },
        e => Error::WriteFailed {
            uri,
            left,
            source: e,
        },
    }
}

/// A Lance error while reading the table at `uri`: a missing table gets its own variant.
pub(crate) fn read_error(uri: &str, e: lance::Error) -> Error {
    match e {
        lance::Error::DatasetNotFound { .. } => Error::NotFound {
            location: uri.to_string(),
            reason: "no lance-nd table here (no Lance manifest)".into(),
        },
        e => Error::Lance {
            uri: uri.to_string(),
            source: e,
        },
    }
}

/// Checks the lance-nd marker of an opened table.
pub(crate) fn check_marker(dataset: &Dataset, uri: &str) -> Result<(), Error> {
    let marker = dataset
        .schema()
        .metadata
        .get(FORMAT_KEY)
        .map(String::as_str);
    if marker != Some(FORMAT_VERSION) {
        return Err(Error::NotLanceNd {
            uri: uri.to_string(),
        });
    }
    Ok(())
}
