//! [`NodeTable`]: the table of one Zarr node, an array or a group read as a dataset. A
//! `ZarrTable` is one, or a collection of them.

use std::sync::Arc;

use datafusion::datasource::TableProvider;

use crate::zarr::array::table::ArrayTable;
use crate::zarr::dataset::DatasetTable;
use crate::zarr::metadata::node::{read_node, Node};
use crate::zarr::options::ZarrOptions;
use crate::zarr::store::ZarrStore;

/// What a location holds: a Zarr node (or a Kerchunk reference file, which describes one), or
/// a netCDF file, read as the Zarr group its header describes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum NodeFormat {
    #[default]
    Zarr,
    /// A netCDF file; of a netCDF-4 file, the group `group` (the root group without one).
    NetCDF { group: Option<Arc<str>> },
    /// An HDF5 file: the dataset or group at `path`; without one, the file's one dataset.
    Hdf5 { path: Option<Arc<str>> },
}

impl NodeFormat {
    /// A netCDF file's root group (`/` and the empty path name it too), or another group.
    pub(crate) fn netcdf(group: Option<&str>) -> Self {
        let group = group.map(|g| g.trim_matches('/')).filter(|g| !g.is_empty());
        NodeFormat::NetCDF {
            group: group.map(Arc::from),
        }
    }

    /// Whether a location of this format is one file (a collection's members are files),
    /// rather than a Zarr node's folder.
    pub(crate) fn is_file(&self) -> bool {
        matches!(self, NodeFormat::NetCDF { .. } | NodeFormat::Hdf5 { .. })
    }

    /// What the members of a collection of this format are, for messages.
    pub(crate) fn members(&self) -> &'static str {
        match self {
            NodeFormat::Zarr => "Zarr array or group",
            NodeFormat::NetCDF { .. } | NodeFormat::Hdf5 { .. } => "file",
        }
    }

    /// The `OPTIONS` that say which part of a location is read, for a cluster to open the
    /// same (the group or dataset is an option of `STORED AS NETCDF` / `HDF5`, which the Zarr
    /// options a file is read with do not carry).
    pub(crate) fn options_sql(&self) -> Option<(String, String)> {
        match self {
            NodeFormat::NetCDF { group: Some(p) } | NodeFormat::Hdf5 { path: Some(p) } => {
                Some(("path".into(), p.to_string()))
            }
            _ => None,
        }
    }
}

/// An array or a dataset: what a location without wildcards opens, and what a collection's
/// members are.
#[derive(Debug)]
pub(crate) struct NodeTable {
    table: Table,
    /// Files its store reads besides the node's own location (a Kerchunk reference file's
    /// targets), which a cluster holds to its allow list as it holds locations.
    reads_beyond: Vec<String>,
}

#[derive(Debug)]
enum Table {
    Array(ArrayTable),
    Dataset(DatasetTable),
}

impl NodeTable {
    /// Opens the array or group at `location`, or the netCDF file there.
    pub(crate) async fn open(
        location: &str,
        options: ZarrOptions,
        format: &NodeFormat,
    ) -> crate::error::Result<Self> {
        let store = match format {
            NodeFormat::Zarr => {
                let granted = options.granted_prefixes()?;
                ZarrStore::open(location, options.storage(), &granted).await?
            }
            NodeFormat::NetCDF { group } => {
                let (storage, wanted) = (options.storage(), options.variables());
                crate::netcdf::open_netcdf(location, storage, group.as_deref(), wanted).await?
            }
            NodeFormat::Hdf5 { path } => {
                let (storage, wanted) = (options.storage(), options.variables());
                crate::hdf5::open_hdf5(location, storage, path.as_deref(), wanted).await?
            }
        };
        Self::open_in(store, location, options).await
    }

    /// Opens the array or group at the root of `store`, named `location` in messages and
    /// EXPLAIN.
    pub(crate) async fn open_in(
        store: ZarrStore,
        location: &str,
        options: ZarrOptions,
    ) -> crate::error::Result<Self> {
        let reads_beyond = store.reads_beyond();
        let table = match read_node(&store, location).await? {
            Node::Array(meta) => {
                options.check_array_options(location)?;
                Table::Array(ArrayTable::new(store, location, *meta, options)?)
            }
            Node::Group(group) => {
                Table::Dataset(DatasetTable::open(store, location, group, options).await?)
            }
        };
        Ok(NodeTable {
            table,
            reads_beyond,
        })
    }

    /// Files read besides the node's own location (a reference file's targets).
    pub(crate) fn reads_beyond(&self) -> impl Iterator<Item = &str> {
        self.reads_beyond.iter().map(String::as_str)
    }

    /// The shape of the array, or of the grid of the dataset.
    pub(crate) fn shape(&self) -> Vec<u64> {
        match &self.table {
            Table::Array(t) => t.shape().to_vec(),
            Table::Dataset(t) => t.shape(),
        }
    }

    /// The attributes of the array or group.
    pub(crate) fn attributes(&self) -> &serde_json::Map<String, serde_json::Value> {
        match &self.table {
            Table::Array(t) => t.attributes(),
            Table::Dataset(t) => t.attributes(),
        }
    }

    pub(crate) fn provider(&self) -> &dyn TableProvider {
        match &self.table {
            Table::Array(t) => t,
            Table::Dataset(t) => t,
        }
    }
}
