//! Writing nd record batches to a lance-nd table: one table row per batch, the schema extended
//! first when a write brings new arrays, attribute keys or global attribute keys.
//!
//! `staged.rs` writes the batches' data files as they come and commits them once,
//! `schema_plan.rs` works out the table schema a write needs, `cast.rs` the type changes it
//! makes (as `nd/casting.rs` allows), `statistics.rs` the optional `__stats__` columns,
//! `encode.rs` the rows.

mod cast;
mod encode;
mod schema_plan;
mod staged;
mod statistics;

pub(crate) use staged::StagedWrite;
pub(crate) use statistics::check_stats_field;

use std::collections::HashMap;

use crate::error::{Error, Result};
pub use crate::nd::Casting;
use crate::nd::NdRecordBatch;
use crate::storage::StorageOptions;
use crate::table_options::{FormatOptions, OptionKind, OptionSpec};

/// A write that does not fit the table (or breaks the format), at `uri`.
fn invalid(uri: &str, reason: impl Into<String>) -> Error {
    Error::InvalidTable {
        uri: uri.to_string(),
        reason: reason.into(),
    }
}

pub(crate) const CASTING: OptionSpec = OptionSpec::new(
    "casting",
    OptionKind::Choice(&["no", "safe", "unsafe"]),
    "what a write may do when an array's values have another type than the table's: \
     no (the default), safe (widen without loss) or unsafe (any cast Arrow can do)",
);
pub(crate) const STATISTICS: OptionSpec = OptionSpec::new(
    "statistics",
    OptionKind::Flag,
    "also write `__stats__:<array>` columns of numeric arrays (default: false)",
);
const WRITE_OPTIONS: &[OptionSpec] = &[CASTING, STATISTICS];

/// How [`write_nd_batches`] writes.
///
/// ```
/// use ndfusion::{Casting, WriteOptions};
/// let options = WriteOptions::new().with_casting(Casting::Safe).with_statistics(true);
/// ```
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    casting: Casting,
    statistics: bool,
    storage: StorageOptions,
}

impl WriteOptions {
    /// No casts, no statistics, credentials from the environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the write may do when an array's values have another type than the table's.
    pub fn with_casting(mut self, casting: Casting) -> Self {
        self.casting = casting;
        self
    }

    /// Also write `__stats__:<array>` columns ({min, max} per row, ignoring nulls; NaN counts
    /// as the largest value, as DataFusion orders floats) for numeric arrays, which let filters
    /// on their values skip rows.
    pub fn with_statistics(mut self, statistics: bool) -> Self {
        self.statistics = statistics;
        self
    }

    /// How a remote location is reached.
    pub fn with_storage(mut self, storage: StorageOptions) -> Self {
        self.storage = storage;
        self
    }

    /// The options as a map of strings (what the Python package passes): `casting` (`no`,
    /// `safe`, `unsafe`), `statistics` (`true`, `false`) and the storage settings of
    /// [`StorageOptions`]; any other key is an error listing the known ones.
    pub fn from_map(options: &HashMap<String, String>) -> Result<Self> {
        let (set, storage) = FormatOptions::from_sql(WRITE_OPTIONS, options, "write_nd_batches")?;
        Ok(Self::of_set(&set).with_storage(storage))
    }

    /// `casting` and `statistics` as a set of options (these, or `COPY ... STORED AS
    /// LANCE_ND`'s) gives them.
    pub(crate) fn of_set(set: &FormatOptions) -> Self {
        let casting = match set.choice(&CASTING) {
            Some("safe") => Casting::Safe,
            Some("unsafe") => Casting::Unsafe,
            _ => Casting::No,
        };
        WriteOptions {
            casting,
            statistics: set.flag(&STATISTICS).unwrap_or(false),
            storage: StorageOptions::default(),
        }
    }

    /// What the write may do when an array's values have another type than the table's.
    pub fn casting(&self) -> Casting {
        self.casting
    }
}

/// Appends `batches` to the lance-nd table at `location` (one table row each; a local path or
/// an `s3://`, `gs://`, `az://` URL), creating the table when nothing is there. Every batch was
/// validated when it was built, so invalid arrays never reach the table.
///
/// A write is one Lance commit. A write that brings new arrays or attribute keys adds them to
/// the schema (all null in the existing rows) in the same commit that appends its rows (a Lance
/// `Merge` of the table's fragments and the new ones). So a write that fails leaves the table
/// as it was: [`Error::Conflict`] when another writer committed first (retry the write),
/// [`Error::WriteFailed`] otherwise; its `left` field says what is known of the table.
pub async fn write_nd_batches(
    location: &str,
    batches: &[NdRecordBatch],
    options: &WriteOptions,
) -> Result<()> {
    if batches.is_empty() {
        return Ok(());
    }
    let mut write = StagedWrite::begin(location, options).await?;
    write.add(batches).await?;
    write.commit().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn write_options_from_a_map_name_the_option_at_fault() {
        let options = WriteOptions::from_map(&map(&[
            ("casting", "Safe"),
            ("statistics", "true"),
            ("aws.region", "eu-west-1"),
        ]))
        .unwrap();
        assert_eq!(options.casting, Casting::Safe);
        assert!(options.statistics);
        assert_eq!(options.storage.get("aws.region"), Some("eu-west-1"));
        let defaults = WriteOptions::from_map(&HashMap::new()).unwrap();
        assert_eq!(
            (defaults.casting, defaults.statistics),
            (Casting::No, false)
        );

        let err = WriteOptions::from_map(&map(&[("casting", "lossy")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid option 'casting': expected one of no, safe, unsafe, found 'lossy'"
        );
        let err = WriteOptions::from_map(&map(&[("cast", "safe")])).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "invalid option 'cast': write_nd_batches does not know this option; known: \
                 casting, statistics, aws.access_key_id"
            ),
            "{err}"
        );
    }
}
