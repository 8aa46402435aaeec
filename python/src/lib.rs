//! ndfusion's tables for datafusion-python: `ZarrTable` and `LanceNdTable` hand their
//! providers over `datafusion-ffi` (`__datafusion_table_provider__`), opened on the
//! extension's own tokio runtime, which also runs their scans. `nd_batches.rs` writes and
//! reads lance-nd tables for `ndfusion.write_nd_batches` / `read_nd_batches`;
//! `session.rs` is ndfusion's own session (`ndfusion.SessionContext`), which needs no FFI.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider, TableProviderFactory};
use datafusion::common::Result as DfResult;
use datafusion::datasource::TableType;
use datafusion::error::DataFusionError;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::{CreateExternalTable, Expr, ScalarUDF, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use datafusion_ffi::table_provider_factory::FFI_TableProviderFactory;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use tokio::runtime::Runtime;

mod described_plan;
mod nd_batches;
mod session;

use described_plan::DescribedPlan;

create_exception!(ndfusion, Error, PyException, "An error ndfusion reports.");

/// The allocator of the `ndfusion` binary, for what the extension allocates (Python's own
/// objects keep Python's). Decoding allocates a buffer per chunk; glibc's allocator hands
/// large ones back to the kernel each time, and the kernel zeroes fresh pages for the next.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The extension's runtime: tables open on it and their scans run on it.
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

fn error(e: impl std::fmt::Display) -> PyErr {
    Error::new_err(e.to_string())
}

/// The logical extension codec of the datafusion-python session the table joins.
fn session_codec(session: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    // A table gets the session, a factory the codec's capsule itself.
    let capsule = match session.cast::<PyCapsule>() {
        Ok(capsule) => capsule.clone(),
        Err(_) => session
            .call_method0("__datafusion_logical_extension_codec__")?
            .cast_into::<PyCapsule>()?,
    };
    let pointer = capsule.pointer_checked(Some(c"datafusion_logical_extension_codec"))?;
    // The capsule holds an FFI_LogicalExtensionCodec for as long as the session lives; the
    // clone is ours.
    let codec = unsafe { pointer.cast::<FFI_LogicalExtensionCodec>().as_ref() };
    Ok(codec.clone())
}

/// A provider whose filters come back over the FFI: DataFusion's own functions arrive as
/// foreign UDFs (`get_field` among them, which Lance then cannot evaluate: its field name is
/// no longer a scalar there), so they are put back by name before the table sees them.
#[derive(Debug)]
struct LocalFunctions(Arc<dyn TableProvider>);

fn local_functions(expr: &Expr) -> DfResult<Expr> {
    use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
    use datafusion::logical_expr::expr::ScalarFunction;
    static LOCAL: OnceLock<Vec<Arc<ScalarUDF>>> = OnceLock::new();
    let local = LOCAL.get_or_init(datafusion::functions::all_default_functions);
    expr.clone()
        .transform_up(|e| match &e {
            Expr::ScalarFunction(f) => match local.iter().find(|l| l.name() == f.func.name()) {
                Some(l) if !Arc::ptr_eq(l, &f.func) => Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(Arc::clone(l), f.args.clone()),
                ))),
                _ => Ok(Transformed::no(e)),
            },
            _ => Ok(Transformed::no(e)),
        })
        .data()
}

#[async_trait::async_trait]
impl TableProvider for LocalFunctions {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        self.0.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let filters = filters
            .iter()
            .map(local_functions)
            .collect::<DfResult<Vec<_>>>()?;
        let plan = self.0.scan(state, projection, &filters, limit).await?;
        Ok(Arc::new(DescribedPlan::new(plan)))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        let filters = filters
            .iter()
            .map(|f| local_functions(f))
            .collect::<DfResult<Vec<_>>>()?;
        self.0
            .supports_filters_pushdown(&filters.iter().collect::<Vec<_>>())
    }
}

/// Refuses another datafusion-python major before anything crosses the FFI to it
/// (`ndfusion._check_datafusion`).
fn check_datafusion(py: Python<'_>) -> PyResult<()> {
    py.import("ndfusion")?.call_method0("_check_datafusion")?;
    Ok(())
}

fn provider_capsule<'py>(
    py: Python<'py>,
    provider: &Arc<dyn TableProvider>,
    session: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyCapsule>> {
    check_datafusion(py)?;
    let codec = session_codec(session)?;
    let ffi = FFI_TableProvider::new_with_ffi_codec(
        Arc::new(LocalFunctions(Arc::clone(provider))),
        true,
        Some(runtime().handle().clone()),
        codec,
    );
    PyCapsule::new(py, ffi, Some(c"datafusion_table_provider".into()))
}

/// How often a waiting call looks for Python's signals (Ctrl-C, a kernel interrupt).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// What `work` gives, run as a task of the extension's runtime while the caller waits with
/// the GIL released; its error as `ndfusion.Error`. Every `SIGNAL_CHECK` the caller takes
/// the GIL back to run Python's signal handlers: when one raises (Ctrl-C's
/// `KeyboardInterrupt`), the task is aborted, so a query's streams are dropped and its
/// operators stop (the session's yield points), and the exception is raised.
fn wait<T: Send + 'static, E: std::fmt::Display + Send + 'static>(
    py: Python<'_>,
    work: impl std::future::Future<Output = Result<T, E>> + Send + 'static,
) -> PyResult<T> {
    let mut task = AbortOnDrop(runtime().spawn(work));
    loop {
        let waited = py.detach(|| {
            runtime().block_on(async { tokio::time::timeout(SIGNAL_CHECK, &mut task.0).await })
        });
        match waited {
            Ok(Ok(result)) => return result.map_err(error),
            Ok(Err(join)) => return Err(error(format!("the task failed: {join}"))),
            Err(_) => py.check_signals()?,
        }
    }
}

/// A task aborted when the caller stops waiting for it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What `work` gives (ndfusion's own calls), waited for as [`wait`] waits.
fn blocking<T: Send + 'static>(
    py: Python<'_>,
    work: impl std::future::Future<Output = ndfusion::Result<T>> + Send + 'static,
) -> PyResult<T> {
    wait(py, work)
}

/// The table `open` opens, on the extension's runtime with the GIL released.
fn opened<T: TableProvider + 'static>(
    py: Python<'_>,
    open: impl std::future::Future<Output = ndfusion::Result<T>> + Send + 'static,
) -> PyResult<Arc<dyn TableProvider>> {
    Ok(Arc::new(blocking(py, open)?))
}

/// A Python class for one of ndfusion's tables: `Class(location, options=None)` opens it with
/// the format's `OPTIONS` keys (`Options::from_sql`) on the extension's runtime, and hands it
/// to datafusion-python as a foreign table provider.
macro_rules! table_class {
    ($(#[$doc:meta])* $class:ident, $options:ty, $table:ty) => {
        $(#[$doc])*
        #[pyclass(module = "ndfusion", frozen)]
        struct $class {
            provider: Arc<dyn TableProvider>,
        }

        #[pymethods]
        impl $class {
            #[new]
            #[pyo3(signature = (location, options=None))]
            fn new(
                py: Python<'_>,
                location: String,
                options: Option<HashMap<String, String>>,
            ) -> PyResult<Self> {
                let options = <$options>::from_sql(&options.unwrap_or_default()).map_err(error)?;
                let open = async move { <$table>::open_with(&location, options).await };
                let provider = opened(py, open)?;
                Ok($class { provider })
            }

            fn __datafusion_table_provider__<'py>(
                &self,
                py: Python<'py>,
                session: Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, PyCapsule>> {
                provider_capsule(py, &self.provider, &session)
            }
        }
    };
}

table_class!(
    /// A Zarr array, group or glob of stores, as `STORED AS ZARR` opens it.
    ZarrTable,
    ndfusion::ZarrOptions,
    ndfusion::ZarrTable
);
table_class!(
    /// A netCDF file or glob of files, as `STORED AS NETCDF` opens it.
    NetCDFTable,
    ndfusion::NetCDFOptions,
    ndfusion::NetCDFTable
);
table_class!(
    /// An HDF5 dataset or group (its `path` option), or a glob of files, as `STORED AS HDF5`
    /// opens it.
    HDF5Table,
    ndfusion::HDF5Options,
    ndfusion::HDF5Table
);
table_class!(
    /// A lance-nd table, as `STORED AS LANCE_ND` opens it.
    LanceNdTable,
    ndfusion::LanceNdOptions,
    ndfusion::LanceNdTable
);
table_class!(
    /// An array or group of an Icechunk repository, as `STORED AS ICECHUNK` opens it: on a
    /// branch, each query reads the branch's tip when it is planned.
    IcechunkTable,
    ndfusion::IcechunkOptions,
    ndfusion::IcechunkTable
);

/// The provider of one of ndfusion's table objects, for `SessionContext.register_table`.
fn table_provider(table: &Bound<'_, PyAny>) -> PyResult<Arc<dyn TableProvider>> {
    macro_rules! provider_of {
        ($($class:ident),*) => {
            $(if let Ok(t) = table.cast::<$class>() {
                return Ok(Arc::clone(&t.get().provider));
            })*
        };
    }
    provider_of!(
        ZarrTable,
        NetCDFTable,
        HDF5Table,
        LanceNdTable,
        IcechunkTable
    );
    Err(error(format!(
        "register_table takes one of ndfusion's tables (ZarrTable, NetCDFTable, HDF5Table, \
         LanceNdTable, IcechunkTable), not {}",
        table.get_type().name()?
    )))
}

/// A table factory as `STORED AS ZARR` / `STORED AS LANCE_ND` use it, whose tables are
/// wrapped as `ZarrTable`'s are.
#[derive(Debug)]
struct LocalFactory(Arc<dyn TableProviderFactory>);

#[async_trait::async_trait]
impl TableProviderFactory for LocalFactory {
    /// Opened on the extension's runtime (the caller polls this on datafusion-python's,
    /// where ndfusion's blocking tasks have no runtime); ndfusion's factories read only the
    /// command, so a default session stands in for the caller's.
    async fn create(
        &self,
        _state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> DfResult<Arc<dyn TableProvider>> {
        let (factory, cmd) = (Arc::clone(&self.0), cmd.clone());
        let table = runtime()
            .spawn(async move {
                let state = SessionStateBuilder::new().build();
                factory.create(&state, &cmd).await
            })
            .await
            .map_err(|e| DataFusionError::Execution(format!("opening the table failed: {e}")))??;
        Ok(Arc::new(LocalFunctions(table)))
    }
}

/// ndfusion's table factory for `STORED AS <format>` (any of `ndfusion::table_kinds()`).
#[pyclass(module = "ndfusion", frozen)]
struct TableFactory {
    factory: Arc<dyn TableProviderFactory>,
}

#[pymethods]
impl TableFactory {
    #[new]
    fn new(format: &str) -> PyResult<Self> {
        let Some(kind) = ndfusion::table_kind(format) else {
            let known: Vec<&str> = (ndfusion::table_kinds().iter())
                .map(|k| k.stored_as())
                .collect();
            return Err(Error::new_err(format!(
                "no table factory for STORED AS {}; known: {}",
                format.to_ascii_uppercase(),
                known.join(", ")
            )));
        };
        Ok(TableFactory {
            factory: kind.factory(),
        })
    }

    fn __datafusion_table_provider_factory__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        check_datafusion(py)?;
        let codec = session_codec(&session)?;
        let factory = Arc::new(LocalFactory(Arc::clone(&self.factory)));
        let ffi = FFI_TableProviderFactory::new_with_ffi_codec(
            factory,
            Some(runtime().handle().clone()),
            codec,
        );
        PyCapsule::new(py, ffi, Some(c"datafusion_table_provider_factory".into()))
    }
}

/// The `STORED AS` names of every kind of table (`ndfusion::table_kinds()`), for
/// `register_table_factories`: the one list of kinds, so Python's cannot drift from it.
#[pyfunction]
fn table_kinds() -> Vec<&'static str> {
    (ndfusion::table_kinds().iter())
        .map(|k| k.stored_as())
        .collect()
}

#[pymodule]
fn _ndfusion(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ZarrTable>()?;
    m.add_class::<NetCDFTable>()?;
    m.add_class::<HDF5Table>()?;
    m.add_class::<LanceNdTable>()?;
    m.add_class::<IcechunkTable>()?;
    m.add_class::<TableFactory>()?;
    m.add_class::<session::PySessionContext>()?;
    m.add_class::<session::PyDataFrame>()?;
    m.add_function(wrap_pyfunction!(table_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(nd_batches::write_nd_batches, m)?)?;
    m.add_function(wrap_pyfunction!(nd_batches::read_nd_batches, m)?)?;
    m.add("Error", m.py().get_type::<Error>())?;
    // Every kind of table has its class here (one `table_class!` line each).
    for kind in ndfusion::table_kinds() {
        if !m.hasattr(kind.python_class())? {
            return Err(Error::new_err(format!(
                "STORED AS {} has no Python class {} in the extension",
                kind.stored_as(),
                kind.python_class()
            )));
        }
    }
    Ok(())
}
