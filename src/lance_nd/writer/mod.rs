//! Writing nd record batches to a lance-nd table: one table row per batch, the schema extended
//! first when a write brings new arrays, attribute keys or global attribute keys.
//!
//! `schema_plan.rs` works out the table schema a write needs, `cast.rs` the type changes it
//! makes (as `nd/casting.rs` allows), `statistics.rs` the optional `__stats__` columns, `encode.rs` the rows.

mod cast;
mod encode;
mod schema_plan;
mod statistics;

pub(crate) use statistics::check_stats_field;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatchIterator;
use arrow::datatypes::{Field, Schema, SchemaRef};
use lance::dataset::fragment::write::FragmentCreateBuilder;
use lance::dataset::transaction::{Operation, Transaction};
use lance::dataset::{CommitBuilder, InsertBuilder, WriteMode};
use lance::Dataset;
use lance_table::format::Fragment;

use cast::Casts;

use super::format::{check_marker, write_error, FORMAT_KEY, FORMAT_VERSION};
use super::location::TableLocation;
use crate::error::{Error, Result};
pub use crate::nd::Casting;
use crate::nd::NdRecordBatch;
use crate::storage::StorageOptions;
use crate::table_options::{FormatOptions, OptionKind, OptionSpec};
use encode::encode_rows;
use schema_plan::{plan_schema, schema_additions};

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
    let location = TableLocation::resolve(location, &options.storage)?;
    let uri = location.shown.as_str();
    match location.open_lance().await? {
        Some(dataset) => {
            check_marker(&dataset, uri)?;
            let existing = Schema::from(dataset.schema());
            let (wanted, casts) = plan_schema(uri, &existing, batches, options)?;
            let additions = schema_additions(&existing, &wanted);
            if additions.is_empty() {
                append(&location, dataset, batches, &casts).await
            } else {
                evolve_and_append(&location, dataset, additions, batches, &casts).await
            }
        }
        None => {
            let (wanted, casts) = plan_schema(uri, &Schema::empty(), batches, options)?;
            let schema = Arc::new(Schema::new(wanted).with_metadata(HashMap::from([(
                FORMAT_KEY.to_string(),
                FORMAT_VERSION.to_string(),
            )])));
            let batch = encode_rows(uri, &schema, batches, &casts)?;
            let reader = RecordBatchIterator::new(vec![Ok(batch)], Arc::clone(&schema));
            let params = location.write_params(WriteMode::Create);
            Dataset::write(reader, location.uri(), Some(params))
                .await
                .map_err(|e| write_error(uri, e, COMMIT_UNKNOWN))?;
            Ok(())
        }
    }
}

/// What a failed write left when it failed before committing.
const NOTHING_WRITTEN: &str = "nothing was written";
/// What a failed write left when the commit itself failed (not by a conflict): the store may
/// have taken the new manifest before the failure hid the answer.
const COMMIT_UNKNOWN: &str = "the commit's outcome is unknown: read the table before retrying";

/// Appends the rows of a write that fits the table's schema: data files first, then one
/// commit.
async fn append(
    location: &TableLocation,
    dataset: Dataset,
    batches: &[NdRecordBatch],
    casts: &Casts,
) -> Result<()> {
    let uri = location.shown.as_str();
    let schema: SchemaRef = Arc::new(Schema::from(dataset.schema()));
    let batch = encode_rows(uri, &schema, batches, casts)?;
    let dataset = Arc::new(dataset);
    let params = location.write_params(WriteMode::Append);
    let transaction = InsertBuilder::new(Arc::clone(&dataset))
        .with_params(&params)
        .execute_uncommitted(vec![batch])
        .await
        .map_err(|e| write_error(uri, e, NOTHING_WRITTEN))?;
    commit(uri, dataset, transaction).await
}

/// Commits `transaction` on `dataset`: a conflict left nothing; another failure may have hidden
/// a commit that landed.
async fn commit(uri: &str, dataset: Arc<Dataset>, transaction: Transaction) -> Result<()> {
    CommitBuilder::new(dataset)
        .execute(transaction)
        .await
        .map_err(|e| match e {
            conflict @ (lance::Error::CommitConflict { .. }
            | lance::Error::RetryableCommitConflict { .. }
            | lance::Error::IncompatibleTransaction { .. }
            | lance::Error::TooMuchWriteContention { .. }) => {
                write_error(uri, conflict, NOTHING_WRITTEN)
            }
            e => write_error(uri, e, COMMIT_UNKNOWN),
        })?;
    Ok(())
}

/// Adds `additions` (new columns, or new leaves of struct columns, all null in the existing
/// rows) and appends the rows in one commit: the rows are written as new fragments under the
/// evolved schema, then a `Merge` commits the table's fragments plus the new ones with that
/// schema. Lance refuses the `Merge` when another writer committed since the table was read
/// (a retryable conflict), so no concurrent row is dropped.
async fn evolve_and_append(
    location: &TableLocation,
    dataset: Dataset,
    additions: Vec<Field>,
    batches: &[NdRecordBatch],
    casts: &Casts,
) -> Result<()> {
    let uri = location.shown.as_str();
    let failed = |e| write_error(uri, e, NOTHING_WRITTEN);
    let manifest = dataset.manifest();
    let mut schema = dataset
        .schema()
        .merge(&Schema::new(additions))
        .map_err(failed)?;
    schema
        .try_set_field_id(Some(manifest.max_field_id()))
        .map_err(failed)?;
    let arrow_schema: SchemaRef = Arc::new(Schema::from(&schema));
    let batch = encode_rows(uri, &arrow_schema, batches, casts)?;
    let reader = RecordBatchIterator::new(vec![Ok(batch)], arrow_schema);
    let params = location.write_params(WriteMode::Append);
    let mut written = FragmentCreateBuilder::new(location.uri())
        .schema(&schema)
        .write_params(&params)
        .write_fragments(reader)
        .await
        .map_err(failed)?;
    let first_id = manifest.max_fragment_id().map_or(0, |id| id + 1);
    for (fragment, id) in written.iter_mut().zip(first_id..) {
        fragment.id = id;
    }
    let mut fragments: Vec<Fragment> = dataset
        .get_fragments()
        .iter()
        .map(|f| f.metadata().clone())
        .collect();
    fragments.extend(written);
    let operation = Operation::Merge {
        fragments,
        schema,
        // The additions are nullable (schema_plan.rs), so existing rows read them as null.
        preserves_nullability: true,
    };
    let transaction = Transaction::new(manifest.version, operation, None);
    commit(uri, Arc::new(dataset), transaction).await
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
