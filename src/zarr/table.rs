//! `ZarrTable`: a Zarr array, or a Zarr group read as a dataset, as a DataFusion table.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{Result, Statistics};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;

use crate::table_source::{scan_of, Opened, TableSource};
use crate::zarr::collection::{expand, is_pattern, CollectionTable};
use crate::zarr::node_table::{NodeFormat, NodeTable};
use crate::zarr::options::ZarrOptions;

/// A Zarr array or group as a table.
///
/// - **An array**: one row per element, an Int64 index column per dimension, then one column per
///   top-level struct field (or one `value` column).
/// - **A group** (a dataset, as xarray writes them): one row per cell of the grid its variables
///   span, as `xarray.open_zarr(group).to_dataframe().reset_index()` shows it: a column per
///   dimension holding its coordinate values (or an Int64 index), then the data variables and
///   other coordinates, broadcast over the dimensions they lack, CF-decoded (times, fill values,
///   scale and offset).
///
/// Either has a `__global_attrs__` column when it has attributes. Filters on dimensions (on
/// coordinate values when they are monotonic) select chunks, the others run inside the scan;
/// every filter is exact, so DataFusion does not evaluate it again.
///
/// - **A collection**: a `LOCATION` glob (`data/floats/*.zarr`, `s3://bucket/argo/**/p.zarr`),
///   or a list of locations ([`ZarrTable::open_many`]), is one table over every member: columns
///   joined by name (NULL where a member lacks one), `__global_attrs__` each member's
///   attributes; filters on `__global_attrs__` alone choose the members before any chunk is
///   read.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = ndfusion::new_session_context();
/// let table = ndfusion::ZarrTable::open("tests/data/zarr_v3/struct_1d.zarr").await?;
/// ctx.register_table("points", std::sync::Arc::new(table))?;
/// ctx.sql("SELECT count(*) FROM points").await?.show().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ZarrTable {
    inner: Inner,
    options: ZarrOptions,
    /// How to open the table again (a cluster's scheduler and executors do).
    source: Arc<TableSource>,
}

/// What a [`ZarrTable`] opened.
#[derive(Debug, Clone)]
pub(crate) enum ZarrOpened {
    /// `ZarrTable::open_with(location)`: an array, a group, or a glob of members.
    One {
        location: String,
        options: ZarrOptions,
        format: NodeFormat,
    },
    /// `ZarrTable::open_many(locations)`: a collection of listed members.
    Many {
        locations: Vec<String>,
        options: ZarrOptions,
        format: NodeFormat,
    },
}

impl Opened for ZarrOpened {
    fn format(&self) -> &'static str {
        use NodeFormat::*;
        match self {
            ZarrOpened::One { format: Zarr, .. } => "zarr",
            ZarrOpened::Many { format: Zarr, .. } => "zarr_many",
            ZarrOpened::One {
                format: NetCDF { .. },
                ..
            } => "netcdf",
            ZarrOpened::Many {
                format: NetCDF { .. },
                ..
            } => "netcdf_many",
            ZarrOpened::One {
                format: Hdf5 { .. },
                ..
            } => "hdf5",
            ZarrOpened::Many {
                format: Hdf5 { .. },
                ..
            } => "hdf5_many",
        }
    }

    fn locations(&self) -> Vec<String> {
        match self {
            ZarrOpened::One { location, .. } => vec![location.clone()],
            ZarrOpened::Many { locations, .. } => locations.clone(),
        }
    }

    fn options_sql(&self) -> crate::error::Result<HashMap<String, String>> {
        match self {
            ZarrOpened::One {
                options, format, ..
            }
            | ZarrOpened::Many {
                options, format, ..
            } => {
                let mut sql = options.to_sql()?;
                sql.extend(format.options_sql());
                Ok(sql)
            }
        }
    }
}

#[derive(Debug)]
enum Inner {
    Node(NodeTable),
    Collection(CollectionTable),
}

impl ZarrTable {
    /// Opens the array or group at `location` with the default [`ZarrOptions`]: a local folder
    /// path, a `file://` URL, or an object-store URL (`s3://`, `gs://`, `az://`, `abfs://`,
    /// `http(s)://`). Credentials come from the environment.
    pub async fn open(location: &str) -> crate::error::Result<Self> {
        Self::open_with(location, ZarrOptions::new()).await
    }

    /// Opens the array, group or collection (a glob) at `location` with `options`.
    pub async fn open_with(location: &str, options: ZarrOptions) -> crate::error::Result<Self> {
        Self::open_as(location, options, NodeFormat::Zarr).await
    }

    /// Opens what `location` holds (a node, a file, or a glob of them) in `format`.
    pub(crate) async fn open_as(
        location: &str,
        options: ZarrOptions,
        format: NodeFormat,
    ) -> crate::error::Result<Self> {
        let source = TableSource::new(ZarrOpened::One {
            location: location.to_string(),
            options: options.clone(),
            format: format.clone(),
        });
        let inner = if is_pattern(location) {
            let (members, storage) = expand(location, options.storage(), &format).await?;
            let member_options = options.clone().with_storage(storage);
            Inner::Collection(
                CollectionTable::open(location, members, member_options, &format).await?,
            )
        } else {
            Inner::Node(NodeTable::open(location, options.clone(), &format).await?)
        };
        Ok(ZarrTable {
            inner,
            source,
            options,
        })
    }

    /// One table over the arrays or groups at `locations` (a collection), with `options`.
    pub async fn open_many<S: AsRef<str>>(
        locations: &[S],
        options: ZarrOptions,
    ) -> crate::error::Result<Self> {
        Self::open_many_as(locations, options, NodeFormat::Zarr).await
    }

    /// One table over the nodes or files at `locations`, in `format`.
    pub(crate) async fn open_many_as<S: AsRef<str>>(
        locations: &[S],
        options: ZarrOptions,
        format: NodeFormat,
    ) -> crate::error::Result<Self> {
        let members: Vec<String> = locations.iter().map(|l| l.as_ref().to_string()).collect();
        let shown = match members.as_slice() {
            [] => {
                return Err(crate::error::Error::InvalidLocation {
                    location: String::new(),
                    reason: "no locations given".into(),
                })
            }
            [one] => one.clone(),
            [first, ..] => format!("{first} and {} more", members.len() - 1),
        };
        let collection =
            CollectionTable::open(&shown, members.clone(), options.clone(), &format).await?;
        Ok(ZarrTable {
            inner: Inner::Collection(collection),
            source: TableSource::new(ZarrOpened::Many {
                locations: members,
                options: options.clone(),
                format,
            }),
            options,
        })
    }

    /// The options the table was opened with.
    pub fn options(&self) -> &ZarrOptions {
        &self.options
    }

    /// How the table was opened.
    pub(crate) fn source(&self) -> &Arc<TableSource> {
        &self.source
    }

    /// The locations read besides the table's own: a collection's members (what its pattern
    /// expanded to), and the files Kerchunk references point into.
    pub(crate) fn member_locations(&self) -> Vec<&str> {
        match &self.inner {
            Inner::Collection(t) => t.member_locations(),
            Inner::Node(t) => t.reads_beyond().collect(),
        }
    }

    /// The shape of the array, or of the grid of the dataset; for a collection, the number of
    /// members.
    pub fn shape(&self) -> Vec<u64> {
        match &self.inner {
            Inner::Node(t) => t.shape(),
            Inner::Collection(t) => vec![t.member_count() as u64],
        }
    }

    fn provider(&self) -> &dyn TableProvider {
        match &self.inner {
            Inner::Node(t) => t.provider(),
            Inner::Collection(t) => t,
        }
    }
}

#[async_trait]
impl TableProvider for ZarrTable {
    fn schema(&self) -> SchemaRef {
        self.provider().schema()
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
    ) -> Result<Arc<dyn ExecutionPlan>> {
        scan_of(
            &self.source,
            self.provider(),
            state,
            projection,
            filters,
            limit,
        )
        .await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        self.provider().supports_filters_pushdown(filters)
    }

    fn statistics(&self) -> Option<Statistics> {
        self.provider().statistics()
    }
}
