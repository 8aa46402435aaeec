//! A write staged batch by batch: each call's rows go to new data files at once, under the
//! table schema the batches so far need, and one commit at the end makes them the table's.
//! So a write of many nd record batches holds one at a time (a `COPY ... 'batch_by'` of more
//! rows than memory), and a write that fails or is dropped before its commit leaves the
//! table as it was (its data files, never referenced, are harmless).
//!
//! The schema grows between calls when a batch brings an array or an attribute key the
//! earlier ones lacked; files written before read the new fields as null, as the table's
//! existing rows do.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatchIterator;
use arrow::datatypes::{Schema, SchemaRef};
use lance::dataset::fragment::write::FragmentCreateBuilder;
use lance::dataset::transaction::{Operation, Transaction};
use lance::dataset::{CommitBuilder, WriteMode};
use lance::datatypes::Schema as LanceSchema;
use lance::Dataset;
use lance_file::version::LanceFileVersion;
use lance_table::format::Fragment;

use super::cast::Casts;
use super::encode::encode_rows;
use super::schema_plan::{plan_schema, schema_additions};
use super::WriteOptions;
use crate::error::{Error, Result};
use crate::lance_nd::format::{check_marker, write_error, FORMAT_KEY, FORMAT_VERSION};
use crate::lance_nd::location::TableLocation;
use crate::nd::NdRecordBatch;

/// What a failed write left when it failed before committing.
const NOTHING_WRITTEN: &str = "nothing was written";
/// What a failed write left when the commit itself failed (not by a conflict): the store may
/// have taken the new manifest before the failure hid the answer.
const COMMIT_UNKNOWN: &str = "the commit's outcome is unknown: read the table before retrying";

/// One write to a lance-nd table, between [`StagedWrite::begin`] and [`StagedWrite::commit`].
pub(crate) struct StagedWrite {
    location: TableLocation,
    options: WriteOptions,
    /// The table as it was when the write began; `None` when the write creates it.
    table: Option<Dataset>,
    /// The schema the next data files are written with: the table's (or, for a new table,
    /// none but the format marker), grown by what the batches so far brought.
    schema: LanceSchema,
    casts: Casts,
    written: Vec<Fragment>,
}

impl StagedWrite {
    /// Opens the table at `location` (a lance-nd table, or nothing yet). Writes nothing.
    pub(crate) async fn begin(location: &str, options: &WriteOptions) -> Result<Self> {
        let location = TableLocation::resolve(location, &options.storage)?;
        let table = location.open_lance().await?;
        let schema = match &table {
            Some(dataset) => {
                check_marker(dataset, &location.shown)?;
                dataset.schema().clone()
            }
            None => LanceSchema {
                fields: Vec::new(),
                metadata: HashMap::from([(FORMAT_KEY.to_string(), FORMAT_VERSION.to_string())]),
            },
        };
        Ok(StagedWrite {
            location,
            options: options.clone(),
            table,
            schema,
            casts: Casts::new(),
            written: Vec::new(),
        })
    }

    /// Writes `batches` (one table row each) to new data files, growing the schema first
    /// when they need it. Every batch was validated when it was built.
    pub(crate) async fn add(&mut self, batches: &[NdRecordBatch]) -> Result<()> {
        if batches.is_empty() {
            return Ok(());
        }
        let uri = self.location.shown.as_str();
        let failed = |e| write_error(uri, e, NOTHING_WRITTEN);
        let current = Schema::from(&self.schema);
        let (wanted, casts) = plan_schema(uri, &current, batches, &self.options)?;
        self.casts.extend(casts);
        let additions = schema_additions(&current, &wanted);
        if !additions.is_empty() {
            let mut grown = self.schema.merge(&Schema::new(additions)).map_err(failed)?;
            // Ids are never reused, not even those of columns the table dropped.
            let highest = (self.table.as_ref())
                .map(|t| t.manifest().max_field_id())
                .max(self.schema.max_field_id());
            grown.try_set_field_id(highest).map_err(failed)?;
            self.schema = grown;
        }
        let arrow_schema: SchemaRef = Arc::new(Schema::from(&self.schema));
        let rows = encode_rows(uri, &arrow_schema, batches, &self.casts)?;
        let reader = RecordBatchIterator::new(vec![Ok(rows)], arrow_schema);
        let params = self.location.write_params(WriteMode::Append);
        let written = FragmentCreateBuilder::new(self.location.uri())
            .schema(&self.schema)
            .write_params(&params)
            .write_fragments(reader)
            .await
            .map_err(failed)?;
        self.written.extend(written);
        Ok(())
    }

    /// Makes the written rows the table's in one commit: an append when the schema did not
    /// grow; else a `Merge` of the table's fragments and the new ones under the grown
    /// schema (Lance refuses it when another writer committed since the table was read, so
    /// no concurrent row is dropped); for a new table, its first version.
    pub(crate) async fn commit(self) -> Result<()> {
        if self.written.is_empty() {
            return Ok(());
        }
        let uri = self.location.shown.as_str();
        match self.table {
            Some(dataset) => {
                let operation = if &self.schema == dataset.schema() {
                    // Lance numbers an append's fragments (id 0: not yet numbered).
                    let fragments = (self.written.into_iter())
                        .map(|f| Fragment { id: 0, ..f })
                        .collect();
                    Operation::Append { fragments }
                } else {
                    let manifest = dataset.manifest();
                    let first_id = manifest.max_fragment_id().map_or(0, |id| id + 1);
                    let mut fragments: Vec<Fragment> = (dataset.get_fragments().iter())
                        .map(|f| f.metadata().clone())
                        .collect();
                    fragments.extend(
                        (self.written.into_iter().zip(first_id..))
                            .map(|(f, id)| Fragment { id, ..f }),
                    );
                    Operation::Merge {
                        fragments,
                        schema: self.schema,
                        // The additions are nullable (schema_plan.rs), so existing rows read
                        // them as null.
                        preserves_nullability: true,
                    }
                };
                let transaction = Transaction::new(dataset.manifest().version, operation, None);
                commit(uri, CommitBuilder::new(Arc::new(dataset)), transaction).await
            }
            None => {
                // An overwrite would replace a table another writer made meanwhile.
                if self.location.open_lance().await?.is_some() {
                    return Err(Error::Conflict {
                        uri: uri.to_string(),
                        left: NOTHING_WRITTEN.to_string(),
                        source: lance::Error::dataset_already_exists(uri.to_string()),
                    });
                }
                let operation = Operation::Overwrite {
                    fragments: self.written,
                    schema: self.schema,
                    config_upsert_values: None,
                    initial_bases: None,
                };
                let params = self.location.write_params(WriteMode::Create);
                let mut builder = CommitBuilder::new(self.location.uri()).with_storage_format(
                    params
                        .data_storage_version
                        .unwrap_or(LanceFileVersion::V2_2),
                );
                if let Some(session) = params.session {
                    builder = builder.with_session(session);
                }
                if let Some(handler) = params.commit_handler {
                    builder = builder.with_commit_handler(handler);
                }
                commit(uri, builder, Transaction::new(0, operation, None)).await
            }
        }
    }
}

/// Commits `transaction`: a conflict left nothing; another failure may have hidden a commit
/// that landed.
async fn commit(uri: &str, builder: CommitBuilder<'_>, transaction: Transaction) -> Result<()> {
    builder.execute(transaction).await.map_err(|e| match e {
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
