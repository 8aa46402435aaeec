//! `LanceNdTable`: a lance-nd table as a DataFusion table, every nd record batch materialized
//! onto its grid.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use futures::TryStreamExt;
use lance::Dataset;

use super::damage::read_error_naming_files;
use super::filter::{classify, FilterUse};
use super::format::{read_error, STATS_PREFIX};
use super::location::TableLocation;
use super::materialize::ColumnSource;
use super::options::LanceNdOptions;
use super::scan::{LanceNdScan, ScanRequest};
use super::sql_writes::{LanceNdSink, RowsLayout};
use super::statistics::{SummaryBuilder, TableSummary};
use super::writer::{check_stats_field, WriteOptions};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::nd::arrow_encoding::{is_nd_array_field, nd_array_parts, GLOBAL_ATTRS_COLUMN};
use crate::scan::project_columns;
use crate::scan::ScanExec;
use crate::table_source::{Opened, ScanOrigin, TableSource};

/// A lance-nd table as a table: an Int64 index column for each dimension name that has no
/// array of the same name, one column per array (its values broadcast onto the row's grid,
/// NULL where the row lacks the array), and `__global_attrs__` repeated on every cell.
///
/// Filters on `__global_attrs__` run inside Lance (exact, using scalar indices); comparisons of
/// an array with a literal skip rows by the `__stats__:<array>` columns when there are any.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = ndfusion::new_session_context();
/// let table = ndfusion::LanceNdTable::open("tests/data/lance_nd/doc_example.lance").await?;
/// ctx.register_table("profiles", std::sync::Arc::new(table))?;
/// ctx.sql("SELECT * FROM profiles WHERE __global_attrs__.id = 'a'").await?.show().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LanceNdTable {
    schema: SchemaRef,
    columns: Vec<ColumnSource>,
    /// Every array of the table, with its value type.
    arrays: Vec<(String, DataType)>,
    /// Arrays with a `__stats__:<array>` column.
    stats: HashSet<String>,
    /// Every dimension name, in order of first appearance.
    dims: Vec<String>,
    /// What is read, at which version.
    reading: Arc<Reading>,
}

/// Where the table is read and at which version: the version it was opened at, until an
/// `INSERT INTO` through this table moves it to the version the insert made (a table that
/// did not show its own insert would surprise; one that moved with others' writes would
/// give a cluster's processes different rows).
#[derive(Debug)]
pub(crate) struct Reading {
    place: Place,
    version: RwLock<Arc<Version>>,
}

/// What a version of the table is read with.
#[derive(Debug)]
struct Place {
    /// The location as given.
    given: String,
    location: TableLocation,
    options: LanceNdOptions,
    arrays: Vec<(String, DataType)>,
    /// Arrays whose `__stats__` columns give bounds (of the shape the writer checks).
    bounded: Vec<String>,
}

/// One version of the table, and what is known of it before reading.
#[derive(Debug)]
struct Version {
    dataset: Arc<Dataset>,
    /// Per-fragment row counts, dimension sizes and `__stats__` bounds.
    summary: Arc<TableSummary>,
    /// How to open the table again, at this version.
    source: Arc<TableSource>,
}

impl Place {
    /// `dataset`'s dimensions and summary.
    async fn read(&self, dataset: Dataset) -> Result<(Vec<String>, Version)> {
        let source = TableSource::new(LanceNdOpened {
            location: self.given.clone(),
            version: dataset.version_id(),
            options: self.options.clone(),
        });
        let uri = &self.location.shown;
        let (dims, summary) = summarize(&dataset, uri, &self.arrays, &self.bounded).await?;
        let version = Version {
            dataset: Arc::new(dataset),
            summary: Arc::new(summary),
            source,
        };
        Ok((dims, version))
    }
}

impl Reading {
    /// The version read now.
    fn current(&self) -> Arc<Version> {
        let version = self.version.read().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&version)
    }

    /// Reads the latest version from now on (after an insert through the table). Arrays and
    /// dimensions another writer added meanwhile stay out of the table's columns.
    pub(crate) async fn refresh(&self) -> Result<()> {
        let dataset = self.place.location.open().await?;
        let (_, version) = self.place.read(dataset).await?;
        *self.version.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(version);
        Ok(())
    }
}

/// What a [`LanceNdTable`] opened: a table at the Lance version it was opened at, so every
/// process reads the same rows however many writes land meanwhile.
#[derive(Debug, Clone)]
struct LanceNdOpened {
    location: String,
    version: u64,
    options: LanceNdOptions,
}

impl Opened for LanceNdOpened {
    fn format(&self) -> &'static str {
        "lance_nd"
    }

    fn locations(&self) -> Vec<String> {
        vec![self.location.clone()]
    }

    fn version(&self) -> Option<u64> {
        Some(self.version)
    }

    fn options_sql(&self) -> Result<HashMap<String, String>> {
        self.options.to_sql()
    }
}

impl LanceNdTable {
    /// Opens the lance-nd table at `location` (a local path, `file://`, `s3://`, `gs://`,
    /// `az://`, `abfs://` URL) with the default [`LanceNdOptions`]. The dimension names come
    /// from the data: the `dim_names` of every array of every row are read (not their values).
    pub async fn open(location: &str) -> Result<Self> {
        Self::open_with(location, LanceNdOptions::new()).await
    }

    /// Opens the table at `location` with `options`.
    pub async fn open_with(location: &str, options: LanceNdOptions) -> Result<Self> {
        Self::open_at(location, options, None).await
    }

    /// Opens the table at `location` as it was at Lance `version` (the latest when `None`).
    pub(crate) async fn open_at(
        location: &str,
        options: LanceNdOptions,
        version: Option<u64>,
    ) -> Result<Self> {
        let given = location.to_string();
        let location = TableLocation::resolve(location, options.storage())?;
        let mut dataset = location.open().await?;
        if let Some(version) = version {
            dataset = dataset
                .checkout_version(version)
                .await
                .map_err(|e| read_error(&location.shown, e))?;
        }
        let uri = location.shown.clone();
        let table_schema = Schema::from(dataset.schema());
        let invalid = |reason: String| Error::InvalidTable {
            uri: uri.clone(),
            reason,
        };
        let mut arrays = Vec::new();
        for field in table_schema
            .fields()
            .iter()
            .filter(|f| is_nd_array_field(f))
        {
            let (value_type, _) = nd_array_parts(field).map_err(|e| invalid(e.to_string()))?;
            arrays.push((field.name().clone(), value_type));
        }
        let stats = table_schema
            .fields()
            .iter()
            .filter_map(|f| f.name().strip_prefix(STATS_PREFIX).map(str::to_string))
            .collect();
        // Bounds only from `__stats__` columns of the shape the writer checks (anyone may have
        // added one); filters still use every such column (`classify`).
        let bounded: Vec<String> = arrays
            .iter()
            .filter(|(a, t)| {
                let name = format!("{STATS_PREFIX}{a}");
                table_schema
                    .field_with_name(&name)
                    .is_ok_and(|f| check_stats_field(&uri, f, a, t).is_ok())
            })
            .map(|(a, _)| a.clone())
            .collect();
        let place = Place {
            given,
            location,
            options,
            arrays: arrays.clone(),
            bounded,
        };
        let (dims, version) = place.read(dataset).await?;
        let reading = Reading {
            place,
            version: RwLock::new(Arc::new(version)),
        };

        let mut fields = Vec::new();
        let mut columns = Vec::new();
        for d in dims.iter().filter(|d| !arrays.iter().any(|(a, _)| a == *d)) {
            if d == GLOBAL_ATTRS_COLUMN {
                return Err(invalid(format!(
                    "a dimension is named {GLOBAL_ATTRS_COLUMN}"
                )));
            }
            fields.push(Field::new(d, DataType::Int64, true));
            columns.push(ColumnSource::Index(d.clone()));
        }
        for (name, value_type) in &arrays {
            fields.push(Field::new(name, value_type.clone(), true));
            columns.push(ColumnSource::Array(name.clone()));
        }
        if let Ok(global) = table_schema.field_with_name(GLOBAL_ATTRS_COLUMN) {
            fields.push(Field::new(
                GLOBAL_ATTRS_COLUMN,
                global.data_type().clone(),
                true,
            ));
            columns.push(ColumnSource::GlobalAttrs);
        }
        Ok(LanceNdTable {
            schema: Arc::new(Schema::new(fields)),
            columns,
            arrays,
            stats,
            dims,
            reading: Arc::new(reading),
        })
    }

    /// The options the table was opened with.
    pub fn options(&self) -> &LanceNdOptions {
        &self.reading.place.options
    }

    /// How to open the table again, at the version it reads.
    pub(crate) fn source(&self) -> Arc<TableSource> {
        Arc::clone(&self.reading.current().source)
    }

    fn classify(&self, filter: &Expr) -> FilterUse {
        classify(filter, &|a: &str| self.stats.contains(a))
    }
}

/// Every dimension name of every array in the table, in order of first appearance, and the
/// statistics of every fragment: one scan of the arrays' `dim_names` and `dim_sizes` and the
/// `__stats__` columns of `stats`.
async fn summarize(
    dataset: &Dataset,
    uri: &str,
    arrays: &[(String, DataType)],
    stats: &[String],
) -> Result<(Vec<String>, TableSummary)> {
    let mut summary = SummaryBuilder::new(uri, arrays, stats);
    if arrays.is_empty() {
        return Ok(summary.finish());
    }
    let mut scanner = dataset.scan();
    scanner
        .project(&summary.projection())
        .map_err(|e| read_error(uri, e))?;
    scanner.with_row_address();
    let mut stream = scanner
        .try_into_stream()
        .await
        .map_err(|e| read_error(uri, e))?;
    loop {
        match stream.try_next().await {
            Ok(Some(batch)) => summary.add(&batch)?,
            Ok(None) => break,
            Err(e) => return Err(read_error_naming_files(dataset, uri, e).await),
        }
    }
    Ok(summary.finish())
}

#[async_trait]
impl TableProvider for LanceNdTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let (schema, columns) = project_columns(&self.schema, &self.columns, projection)?;
        let mut exact = Vec::new();
        let mut skipping = Vec::new();
        for filter in filters {
            match self.classify(filter) {
                FilterUse::Lance(f) => exact.push(f),
                FilterUse::Stats(test) => skipping.push(test),
                FilterUse::Unused => {}
            }
        }
        let version = self.reading.current();
        let scan = ScanExec::new(Arc::new(LanceNdScan::new(ScanRequest {
            uri: self.reading.place.location.shown.clone(),
            dataset: Arc::clone(&version.dataset),
            schema,
            columns,
            arrays: self.arrays.clone(),
            summary: Arc::clone(&version.summary),
            lance_filter: conjunction(exact),
            stats_filter: conjunction(skipping),
            limit,
            target_partitions: state.config().target_partitions(),
            options: self.reading.place.options.clone(),
        })));
        let origin = ScanOrigin::new(&version.source, state, projection, filters, limit);
        scan.origin().set(Arc::new(origin));
        Ok(Arc::new(scan))
    }

    /// `INSERT INTO t ...`: the rows, in the table's columns, appended as nd record batches
    /// (one per distinct `__global_attrs__`, on the grid of its dimension values) in one
    /// commit; the table reads that version next.
    async fn insert_into(
        &self,
        state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let location = self.reading.place.given.as_str();
        let refused = |reason: String| {
            DataFusionError::from(Error::Write {
                location: location.to_string(),
                reason,
            })
        };
        if insert_op != InsertOp::Append {
            return Err(refused(format!(
                "a lance-nd table takes INSERT INTO (an append), not {insert_op}"
            )));
        }
        let indices: Vec<String> = (self.columns.iter())
            .filter_map(|c| match c {
                ColumnSource::Index(d) => Some(d.clone()),
                _ => None,
            })
            .collect();
        let limits = Limits::of_session(state.config_options())?;
        let schema = input.schema();
        let layout = RowsLayout::for_insert(&schema, &self.dims, &indices, limits.coordinate_bytes)
            .map_err(|e| refused(e.to_string()))?;
        // Rows are written as the table's own rows: typed as its columns (the planner cast
        // them), with statistics when it keeps them.
        let options = WriteOptions::new()
            .with_statistics(!self.stats.is_empty())
            .with_storage(self.reading.place.options.storage().clone());
        let sink = LanceNdSink::new(
            location,
            layout,
            options,
            schema,
            Some(Arc::clone(&self.reading)),
        );
        let order = sink.required_ordering();
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), order)))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| self.classify(f).pushdown())
            .collect())
    }
}
