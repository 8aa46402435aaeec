//! Writing nd record batches to a lance-nd table: one table row per batch, the schema extended
//! first when a write brings new arrays, attribute keys or global attribute keys.
//!
//! `schema_plan.rs` works out the table schema a write needs, `casting.rs` the type changes it
//! may make, `statistics.rs` the optional `__stats__` columns, `encode.rs` the rows.

mod casting;
mod encode;
mod schema_plan;
mod statistics;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatchIterator;
use arrow::datatypes::{Schema, SchemaRef};
use lance::dataset::{NewColumnTransform, WriteMode};
use lance::Dataset;

pub use casting::Casting;

use super::format::{check_marker, write_error, FORMAT_KEY, FORMAT_VERSION};
use super::location::TableLocation;
use crate::error::{Error, Result};
use crate::nd::NdRecordBatch;
use crate::storage::StorageOptions;
use encode::encode_rows;
use schema_plan::{plan_schema, schema_additions};

/// A write that does not fit the table (or breaks the format), at `uri`.
fn invalid(uri: &str, reason: impl Into<String>) -> Error {
    Error::InvalidTable {
        uri: uri.to_string(),
        reason: reason.into(),
    }
}

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

    /// Also write `__stats__:<array>` columns ({min, max} per row, ignoring nulls and NaN) for
    /// numeric arrays, which let filters on their values skip rows.
    pub fn with_statistics(mut self, statistics: bool) -> Self {
        self.statistics = statistics;
        self
    }

    /// How a remote location is reached.
    pub fn with_storage(mut self, storage: StorageOptions) -> Self {
        self.storage = storage;
        self
    }
}

/// Appends `batches` to the lance-nd table at `location` (one table row each; a local path or
/// an `s3://`, `gs://`, `az://` URL), creating the table when nothing is there. Every batch was
/// validated when it was built, so invalid arrays never reach the table.
///
/// A write that brings new arrays or attribute keys first adds them to the table (one Lance
/// commit per new column, all null in the existing rows), then appends its rows (one more
/// commit). A failure before the append commits leaves no row of the write in the table; the
/// error ([`Error::Conflict`] for a concurrent writer, [`Error::WriteFailed`] otherwise) says
/// whether new columns were added.
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
        Some(mut dataset) => {
            check_marker(&dataset, uri)?;
            let existing = Schema::from(dataset.schema());
            let (wanted, casts) = plan_schema(uri, &existing, batches, options)?;
            let additions = schema_additions(&existing, &wanted);
            let mut added = false;
            for addition in additions {
                let left = if added {
                    "some of the new columns were added (all null), no rows"
                } else {
                    "nothing was written"
                };
                dataset
                    .add_columns(
                        NewColumnTransform::AllNulls(Arc::new(Schema::new(vec![addition]))),
                        None,
                        None,
                    )
                    .await
                    .map_err(|e| write_error(uri, e, left))?;
                added = true;
            }
            let schema: SchemaRef = Arc::new(Schema::from(dataset.schema()));
            let batch = encode_rows(uri, &schema, batches, &casts)?;
            let reader = RecordBatchIterator::new(vec![Ok(batch)], schema);
            let left = if added {
                "the new columns were added (all null), none of the rows"
            } else {
                "nothing was written"
            };
            dataset
                .append(reader, None)
                .await
                .map_err(|e| write_error(uri, e, left))?;
            Ok(())
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
                .map_err(|e| write_error(uri, e, "nothing was written"))?;
            Ok(())
        }
    }
}
