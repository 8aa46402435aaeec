//! `ndfusion.SessionContext`: ndfusion's own session from Python (`new_session_context`:
//! every kind's `STORED AS`, the table functions, the optimizer rules such as the grid
//! aggregate, `SET ndfusion.*`, `COPY` and `INSERT`), not datafusion-python's through the
//! FFI, where those rules do not apply. `ndfusion.DataFrame` holds a result: planned and run
//! on the extension's runtime with the GIL released, handed to Python through the Arrow C
//! stream interface (`__arrow_c_stream__`), so pyarrow, polars and DuckDB read it without a
//! copy through pandas.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_pyarrow::{FromPyArrow, IntoPyArrow, Table, ToPyArrow};
use datafusion::arrow::array::{RecordBatch, RecordBatchReader};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{DataFrame, SessionConfig, SessionContext};
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::nd_batches::batch_to_py;
use crate::{error, runtime, table_provider, wait};

/// Rows `repr` shows.
const SHOWN_ROWS: usize = 10;

/// What `work` gives, waited for as [`wait`] waits; a DataFusion error as `ndfusion.Error`.
fn run<T: Send + 'static>(
    py: Python<'_>,
    work: impl std::future::Future<Output = Result<T, DataFusionError>> + Send + 'static,
) -> PyResult<T> {
    wait(py, work)
}

/// ndfusion's session: `SessionContext(config=None, memory_limit=None)`, `config` the keys
/// SQL's `SET` takes (`{"ndfusion.max_metadata_bytes": "16M"}`), `memory_limit` the CLI's
/// `--memory-limit` (`"2G"`: a fair pool in which sorts spill within their part).
#[pyclass(module = "ndfusion", name = "SessionContext", frozen)]
pub(crate) struct PySessionContext {
    ctx: SessionContext,
}

#[pymethods]
impl PySessionContext {
    #[new]
    #[pyo3(signature = (config=None, memory_limit=None))]
    fn new(
        py: Python<'_>,
        config: Option<HashMap<String, String>>,
        memory_limit: Option<String>,
    ) -> PyResult<Self> {
        let ctx = match memory_limit {
            None => ndfusion::new_session_context(),
            Some(size) => {
                let limit = (ndfusion::parse_size(&size).ok())
                    .and_then(|bytes| usize::try_from(bytes).ok())
                    .ok_or_else(|| {
                        error(format!(
                            "memory_limit '{size}' is not a size (2G, 512M, ...)"
                        ))
                    })?;
                let runtime = ndfusion::memory_limited_runtime(limit).map_err(error)?;
                let config = SessionConfig::new().with_information_schema(true);
                ndfusion::new_session_context_with_runtime(config, runtime)
            }
        };
        let mut config: Vec<(String, String)> = config.unwrap_or_default().into_iter().collect();
        config.sort();
        for (key, value) in config {
            // As `SET` does, so a key means what it means in SQL (runtime keys included).
            if key.is_empty()
                || !key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._".contains(c))
            {
                return Err(error(format!("config key '{key}' is not a setting's name")));
            }
            let set = format!("SET {key} = '{}'", value.replace('\'', "''"));
            let ctx = ctx.clone();
            run(py, async move { ctx.sql(&set).await?.collect().await })
                .map_err(|e| error(format!("config key '{key}': {e}")))?;
        }
        Ok(PySessionContext { ctx })
    }

    /// The result of one SQL statement. DDL (`CREATE EXTERNAL TABLE`, `SET`), `COPY` and
    /// `INSERT` run now, as in datafusion-python; a query runs when its result is asked for.
    fn sql(&self, py: Python<'_>, query: String) -> PyResult<PyDataFrame> {
        let ctx = self.ctx.clone();
        let df = run(py, async move {
            let df = ctx.sql(&query).await?;
            if !matches!(
                df.logical_plan(),
                LogicalPlan::Copy(_) | LogicalPlan::Dml(_)
            ) {
                return Ok(df);
            }
            // Its one row, the count, is what the statement answers.
            let schema = Arc::clone(df.schema().inner());
            let batches = df.collect().await?;
            ctx.read_table(Arc::new(MemTable::try_new(schema, vec![batches])?))
        })?;
        Ok(PyDataFrame { df })
    }

    /// Registers one of ndfusion's tables (`ndfusion.ZarrTable(...)`, ...) as `name`.
    fn register_table(&self, name: &str, table: &Bound<'_, PyAny>) -> PyResult<()> {
        let provider = table_provider(table)?;
        self.ctx.register_table(name, provider).map_err(error)?;
        Ok(())
    }

    /// Registers Arrow data as the table `name`: anything with `__arrow_c_stream__` (a
    /// pyarrow Table or RecordBatchReader, a polars DataFrame, ...) or `__arrow_c_array__`
    /// (a pyarrow RecordBatch), read once, into memory.
    fn register_arrow(&self, name: &str, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let (schema, batches) = if data.hasattr("__arrow_c_stream__")? {
            let reader = ArrowArrayStreamReader::from_pyarrow_bound(data)?;
            let schema = reader.schema();
            let batches = reader
                .collect::<Result<Vec<_>, ArrowError>>()
                .map_err(error)?;
            (schema, batches)
        } else if data.hasattr("__arrow_c_array__")? {
            let batch = RecordBatch::from_pyarrow_bound(data)?;
            (batch.schema(), vec![batch])
        } else {
            return Err(error(format!(
                "register_arrow('{name}', ...) takes Arrow data (an object with \
                 __arrow_c_stream__ or __arrow_c_array__), not {}",
                data.get_type().name()?
            )));
        };
        let table: Arc<dyn TableProvider> =
            Arc::new(MemTable::try_new(schema, vec![batches]).map_err(error)?);
        self.ctx.register_table(name, table).map_err(error)?;
        Ok(())
    }

    /// The names of the tables registered in the default schema, sorted.
    fn tables(&self) -> Vec<String> {
        let mut names: Vec<String> = (self.ctx.catalog("datafusion"))
            .and_then(|c| c.schema("public"))
            .map(|s| s.table_names())
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// A result of [`PySessionContext::sql`]: nothing runs until it is asked for.
#[pyclass(module = "ndfusion", name = "DataFrame", frozen)]
pub(crate) struct PyDataFrame {
    df: DataFrame,
}

impl PyDataFrame {
    fn collect(&self, py: Python<'_>) -> PyResult<Vec<RecordBatch>> {
        let df = self.df.clone();
        run(py, async move { df.collect().await })
    }

    fn arrow_schema(&self) -> SchemaRef {
        Arc::clone(self.df.schema().inner())
    }
}

#[pymethods]
impl PyDataFrame {
    /// The result as a `pyarrow.Table`.
    fn to_arrow<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let batches = self.collect(py)?;
        Table::try_new(batches, self.arrow_schema())
            .map_err(error)?
            .into_pyarrow(py)
    }

    /// The result as an `xarray.Dataset` on the grid of the columns `dims`, as
    /// `xr.Dataset.from_dataframe(df.to_pandas().set_index(dims))` makes it (coordinates
    /// sorted, NaN/NaT where no row names a cell, two rows on one cell an error naming it),
    /// laid out in Rust from the Arrow columns (`ndfusion::rows_on_grid`), with no pandas
    /// round trip; the coordinates are bounded by `ndfusion.max_coordinate_bytes`.
    fn to_xarray<'py>(&self, py: Python<'py>, dims: Vec<String>) -> PyResult<Bound<'py, PyAny>> {
        let df = self.df.clone();
        let schema = self.arrow_schema();
        let task = df.task_ctx();
        let limits =
            ndfusion::Limits::of_session(task.session_config().options()).map_err(error)?;
        let pool = Arc::clone(task.memory_pool());
        let batch = run(py, async move {
            let batches = df.collect().await?;
            let laid = tokio::task::spawn_blocking(move || {
                ndfusion::rows_on_grid(&schema, &batches, &dims, limits.coordinate_bytes, &pool)
            });
            let batch = laid
                .await
                .map_err(|e| DataFusionError::Execution(format!("to_xarray: {e}")))?;
            batch.map_err(|e| DataFusionError::Execution(format!("to_xarray: {e}")))
        })?;
        let (arrays, globals) = batch_to_py(py, &batch)?;
        py.import("ndfusion.nd_batches")?
            .call_method1("_dataset_of", (arrays, globals))
    }

    /// The result as a `pandas.DataFrame` (through pyarrow).
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_arrow(py)?.call_method0("to_pandas")
    }

    /// The result as a `polars.DataFrame` (polars must be installed).
    fn to_polars<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let polars = py.import("polars")?;
        polars.call_method1("from_arrow", (self.to_arrow(py)?,))
    }

    /// The result's schema, as a `pyarrow.Schema`.
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.arrow_schema().as_ref().to_pyarrow(py)
    }

    /// The number of rows of the result.
    fn count(&self, py: Python<'_>) -> PyResult<usize> {
        let df = self.df.clone();
        run(py, async move { df.count().await })
    }

    /// The plan, as `EXPLAIN` (`analyze=True`: as `EXPLAIN ANALYZE`, which runs the query)
    /// shows it.
    #[pyo3(signature = (analyze=false))]
    fn explain(&self, py: Python<'_>, analyze: bool) -> PyResult<String> {
        let df = self.df.clone();
        let batches = run(
            py,
            async move { df.explain(false, analyze)?.collect().await },
        )?;
        Ok(pretty_format_batches(&batches).map_err(error)?.to_string())
    }

    /// The Arrow C stream of the result's batches, as they are computed (the PyCapsule
    /// interface: `pyarrow.table(df)`, `polars.DataFrame(df)`, DuckDB). A requested schema is
    /// ignored, as the interface allows: the stream has the result's.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let df = self.df.clone();
        let stream = run(py, async move { df.execute_stream().await })?;
        let reader: Box<dyn RecordBatchReader + Send> = Box::new(Batches {
            schema: stream.schema(),
            stream,
        });
        let ffi = FFI_ArrowArrayStream::new(reader);
        PyCapsule::new(py, ffi, Some(c"arrow_array_stream".into()))
    }

    /// The result's batches, each computed as the loop asks for it (`pyarrow.RecordBatch`es
    /// of the Arrow stream).
    fn __iter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let reader = (slf.py().import("pyarrow")?.getattr("RecordBatchReader")?)
            .call_method1("from_stream", (slf,))?;
        reader.call_method0("__iter__")
    }

    /// The first rows, and how many there are, as a notebook shows a result.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let (shown, more) = self.first_rows(py)?;
        let table = pretty_format_batches(&shown).map_err(error)?;
        Ok(format!("{table}\n{}", rows_note(&shown, more)))
    }

    /// The first rows as an HTML table (pandas' own), for notebooks.
    fn _repr_html_(&self, py: Python<'_>) -> PyResult<String> {
        let (shown, more) = self.first_rows(py)?;
        let table = Table::try_new(shown.clone(), self.arrow_schema()).map_err(error)?;
        let html = (table.into_pyarrow(py)?.call_method0("to_pandas")?)
            .call_method0("_repr_html_")?
            .extract::<String>()?;
        Ok(format!("{html}<p>{}</p>", rows_note(&shown, more)))
    }
}

impl PyDataFrame {
    /// The first `SHOWN_ROWS` rows, and whether there are more.
    fn first_rows(&self, py: Python<'_>) -> PyResult<(Vec<RecordBatch>, bool)> {
        let df = self.df.clone();
        let batches = run(py, async move {
            df.limit(0, Some(SHOWN_ROWS + 1))?.collect().await
        })?;
        let mut shown = Vec::new();
        let mut left = SHOWN_ROWS;
        for batch in &batches {
            let n = batch.num_rows().min(left);
            shown.push(batch.slice(0, n));
            left -= n;
        }
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        Ok((shown, rows > SHOWN_ROWS))
    }
}

/// What a shown table says of the rows it leaves out.
fn rows_note(shown: &[RecordBatch], more: bool) -> String {
    let rows: usize = shown.iter().map(RecordBatch::num_rows).sum();
    match more {
        true => format!("(the first {rows} rows)"),
        false => format!("({rows} rows)"),
    }
}

/// A query's stream as an Arrow `RecordBatchReader`: each batch computed on the extension's
/// runtime when the reader's consumer asks for it.
struct Batches {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
}

impl Iterator for Batches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = runtime().block_on(self.stream.next())?;
        Some(next.map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl RecordBatchReader for Batches {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}
