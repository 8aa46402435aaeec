//! `IcechunkTable`: an array or group of an Icechunk repository as a DataFusion table, one
//! snapshot per query.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::common::{DataFusionError, Result as DfResult, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{CreateExternalTable, Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use icechunk::format::SnapshotId;
use icechunk::Repository;

use crate::error::{Error, Result};
use crate::icechunk::bounds::RepositoryFiles;
use crate::icechunk::options::IcechunkOptions;
use crate::icechunk::repository::{open_repository, OpenRepository};
use crate::icechunk::store::IcechunkStore;
use crate::icechunk::version::Version;
use crate::table_options::check_external_table;
use crate::table_source::{scan_of, Opened, TableSource};
use crate::zarr::node_table::NodeTable;
use crate::zarr::store::ZarrStore;

/// An array or group of an Icechunk repository, read as [`ZarrTable`](crate::ZarrTable)
/// reads one (the same columns, CF decoding and pushdown), at the version its options choose.
///
/// On a branch (the default: `main`), each query reads the branch's tip as it is when the
/// query is planned, and only that snapshot: a commit landing during the query is seen by the
/// next one. EXPLAIN names the snapshot (`array=` or `group=<repository>@<snapshot id>/<path>`),
/// and a cluster's executors read the same one.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let options = ndfusion::IcechunkOptions::new().with_tag("v1").with_path("surface");
/// let table = ndfusion::IcechunkTable::open_with("data/ocean.icechunk", options).await?;
/// let ctx = ndfusion::new_session_context();
/// ctx.register_table("surface", std::sync::Arc::new(table))?;
/// ctx.sql("SELECT avg(temp) FROM surface").await?.show().await?;
/// # Ok(()) }
/// ```
pub struct IcechunkTable {
    location: String,
    options: IcechunkOptions,
    version: Version,
    repo: Repository,
    files: RepositoryFiles,
    schema: SchemaRef,
    /// The snapshot read last, with its table (re-opened when a branch moves).
    current: Mutex<Current>,
    /// How to open the table again (a cluster's scheduler does).
    source: Arc<TableSource>,
}

impl std::fmt::Debug for IcechunkTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcechunkTable")
            .field("location", &self.location)
            .field("version", &self.version)
            .field("path", &self.options.path())
            .finish()
    }
}

/// The snapshot a table reads now, and the `repo` file's ETag it was resolved under.
#[derive(Debug)]
struct Current {
    at: Arc<AtSnapshot>,
    /// While the `repo` file keeps this ETag (an object store's; local files give none), no
    /// branch has moved: a query on a branch then reads `at` without resolving the tip again,
    /// one round trip fewer. A commit landing between the check and Icechunk's read only
    /// makes the next query resolve again.
    repo_tag: Option<String>,
}

/// The table at one snapshot.
#[derive(Debug)]
struct AtSnapshot {
    snapshot: SnapshotId,
    table: NodeTable,
    /// The table pinned to this snapshot, as its scans travel to a cluster.
    source: Arc<TableSource>,
}

/// What an [`IcechunkTable`] opened, as a cluster is told it.
#[derive(Debug, Clone)]
pub(crate) struct IcechunkOpened {
    location: String,
    options: IcechunkOptions,
}

impl Opened for IcechunkOpened {
    fn format(&self) -> &'static str {
        "icechunk"
    }

    fn locations(&self) -> Vec<String> {
        vec![self.location.clone()]
    }

    fn options_sql(&self) -> Result<HashMap<String, String>> {
        self.options.to_sql()
    }
}

impl IcechunkTable {
    /// Opens the root of the repository at `location` (a local folder, or an `s3://`, `gs://`
    /// or `az://` prefix) on the tip of `main`.
    pub async fn open(location: &str) -> Result<Self> {
        Self::open_with(location, IcechunkOptions::new()).await
    }

    /// Opens the array or group `options` name, at the version they choose.
    pub async fn open_with(location: &str, options: IcechunkOptions) -> Result<Self> {
        let version = options.version()?;
        let grants = options.grants()?;
        let OpenRepository {
            repo,
            files,
            repo_tag,
        } = open_repository(location, options.zarr().storage(), &grants).await?;
        let snapshot = version.resolve(&repo, location).await?;
        let at = open_at(&repo, &files, location, &options, snapshot).await?;
        Ok(IcechunkTable {
            schema: at.table.provider().schema(),
            current: Mutex::new(Current {
                at: Arc::new(at),
                repo_tag,
            }),
            source: TableSource::new(IcechunkOpened {
                location: location.to_string(),
                options: options.clone(),
            }),
            location: location.to_string(),
            options,
            version,
            repo,
            files,
        })
    }

    /// The options the table was opened with.
    pub fn options(&self) -> &IcechunkOptions {
        &self.options
    }

    /// The snapshot the last query read (or the table opened at).
    pub fn snapshot_id(&self) -> String {
        self.lock().snapshot.to_string()
    }

    fn lock(&self) -> Arc<AtSnapshot> {
        Arc::clone(&self.current().at)
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table at the version's snapshot now: the one read last unless the branch moved.
    async fn now(&self) -> Result<Arc<AtSnapshot>> {
        let current = self.lock();
        if !self.version.moves() {
            return Ok(current);
        }
        let repo_tag = self.files.check_repo_file().await?;
        {
            let now = self.current();
            if repo_tag.is_some() && now.repo_tag == repo_tag {
                return Ok(Arc::clone(&now.at));
            }
        }
        let tip = self.version.resolve(&self.repo, &self.location).await?;
        if tip == current.snapshot {
            // The tag goes with the snapshot it was resolved to, not with one another query
            // has put there meanwhile.
            let mut now = self.current();
            if now.at.snapshot == tip {
                now.repo_tag = repo_tag;
            }
            return Ok(current);
        }
        let at = open_at(&self.repo, &self.files, &self.location, &self.options, tip).await?;
        let schema = at.table.provider().schema();
        if schema.fields() != self.schema.fields() {
            return Err(Error::InvalidTable {
                uri: self.location.clone(),
                reason: format!(
                    "{} is now snapshot {}, whose columns differ from the table's ({}): \
                     create the table again to read them",
                    self.version,
                    at.snapshot,
                    column_change(&self.schema, &schema)
                ),
            });
        }
        let at = Arc::new(at);
        *self.current() = Current {
            at: Arc::clone(&at),
            repo_tag,
        };
        Ok(at)
    }
}

/// What differs between two schemas, for messages.
fn column_change(before: &SchemaRef, after: &SchemaRef) -> String {
    let names = |s: &SchemaRef| -> Vec<String> {
        s.fields()
            .iter()
            .map(|f| format!("{} {}", f.name(), f.data_type()))
            .collect()
    };
    let (old, new) = (names(before), names(after));
    let gone: Vec<&String> = old.iter().filter(|c| !new.contains(c)).collect();
    let added: Vec<&String> = new.iter().filter(|c| !old.contains(c)).collect();
    format!("gone: {gone:?}, new: {added:?}")
}

/// The name a node of a snapshot has in messages and EXPLAIN.
fn node_location(location: &str, snapshot: &SnapshotId, path: &str) -> String {
    let base = format!("{}@{snapshot}", location.trim_end_matches('/'));
    match path {
        "" => base,
        path => format!("{base}/{path}"),
    }
}

async fn open_at(
    repo: &Repository,
    files: &RepositoryFiles,
    location: &str,
    options: &IcechunkOptions,
    snapshot: SnapshotId,
) -> Result<AtSnapshot> {
    files.check_snapshot(repo, &snapshot).await?;
    let path = options.path();
    let store = IcechunkStore::open(repo, files, &snapshot, path, location).await?;
    let shown = node_location(location, &snapshot, path);
    let table = NodeTable::open_in(
        ZarrStore::over(Arc::new(store), files.limits()),
        &shown,
        options.zarr().clone(),
    )
    .await?;
    let source = TableSource::new(IcechunkOpened {
        location: location.to_string(),
        options: options.pinned(&snapshot.to_string()),
    });
    Ok(AtSnapshot {
        snapshot,
        table,
        source,
    })
}

#[async_trait]
impl TableProvider for IcechunkTable {
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
        let at = self.now().await?;
        let provider = at.table.provider();
        scan_of(&at.source, provider, state, projection, filters, limit).await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        self.lock()
            .table
            .provider()
            .supports_filters_pushdown(filters)
    }

    /// A branch's statistics would be those of the snapshot read last, not of the one the
    /// next query reads: none then.
    fn statistics(&self) -> Option<Statistics> {
        match self.version.moves() {
            true => None,
            false => self.lock().table.provider().statistics(),
        }
    }
}

impl IcechunkTable {
    /// How the table was opened.
    pub(crate) fn source(&self) -> &Arc<TableSource> {
        &self.source
    }
}

/// `CREATE EXTERNAL TABLE ... STORED AS ICECHUNK LOCATION '...' OPTIONS (...)`.
#[derive(Debug, Default)]
pub struct IcechunkTableFactory;

#[async_trait]
impl TableProviderFactory for IcechunkTableFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> DfResult<Arc<dyn TableProvider>> {
        check_external_table(cmd, "ICECHUNK")?;
        let limits = crate::limits::Limits::of_session(state.config_options())?;
        let options = IcechunkOptions::from_sql(&cmd.options)?.with_limits(limits);
        let table = IcechunkTable::open_with(&cmd.location, options).await;
        Ok(Arc::new(table.map_err(DataFusionError::from)?))
    }
}
