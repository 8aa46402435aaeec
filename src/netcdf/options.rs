//! How a netCDF table is read: the dataset options of Zarr groups (xarray's names) and the
//! storage settings.

use crate::table_options::{
    Declared, KindOptions, OptionKeys, OptionKind, OptionSpec, OptionValue,
};
use crate::zarr::node_table::NodeFormat;
use crate::zarr::ZarrOptions;

pub(crate) const BATCH_SIZE: OptionSpec = OptionSpec::new(
    "batch_size",
    OptionKind::Positive,
    "rows per output batch (default: the session's datafusion.execution.batch_size)",
);
pub(crate) const CHUNKS_IN_FLIGHT: OptionSpec = OptionSpec::new(
    "chunks_in_flight",
    OptionKind::Positive,
    "chunks each partition reads ahead (default: 2 from local files, 16 from object stores)",
);
pub(crate) const VARIABLES: OptionSpec = OptionSpec::new(
    "variables",
    OptionKind::Names,
    "the data variables to show, comma-separated (default: all)",
);
pub(crate) const DECODE_TIMES: OptionSpec = OptionSpec::new(
    "decode_times",
    OptionKind::Flag,
    "decode CF times to timestamps (default: true)",
);
pub(crate) const MASK_AND_SCALE: OptionSpec = OptionSpec::new(
    "mask_and_scale",
    OptionKind::Flag,
    "_FillValue / missing_value to NULL, scale_factor / add_offset (default: true)",
);

const PATH: OptionSpec = OptionSpec::new(
    "path",
    OptionKind::Text,
    "the group of a netCDF-4 file to read, as xarray's group= (/obs/deep; default: the root)",
);

/// The options of `STORED AS NETCDF`, in the order EXPLAIN shows them.
const OPTIONS: &[OptionSpec] = &[
    PATH,
    BATCH_SIZE,
    CHUNKS_IN_FLIGHT,
    VARIABLES,
    DECODE_TIMES,
    MASK_AND_SCALE,
];

/// The keys of `STORED AS NETCDF`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NetCDFKeys;

impl Declared for NetCDFKeys {
    const SPECS: &'static [OptionSpec] = OPTIONS;
    const TAKER: &'static str = "STORED AS NETCDF";
}

impl OptionKeys for NetCDFKeys {}

/// How a netCDF table is read.
///
/// From SQL, as `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED AS NETCDF`: `path` (the
/// group of a netCDF-4 file), `batch_size`,
/// `chunks_in_flight`, `variables` (comma-separated), `decode_times` and `mask_and_scale`
/// (`true`/`false`, xarray's names), and the storage settings of
/// [`StorageOptions`](crate::StorageOptions); from Rust with [`NetCDFOptions::from_sql`] or
/// [`with_storage`](KindOptions::with_storage).
pub type NetCDFOptions = KindOptions<NetCDFKeys>;

impl KindOptions<NetCDFKeys> {
    /// Reads the group `path` of a netCDF-4 file (`/obs/deep`, or `obs/deep`) rather than
    /// its root group, as xarray's `open_dataset(..., group=path)`.
    pub fn with_path(mut self, path: &str) -> Self {
        self.set
            .set(&PATH, OptionValue::Text(path.trim().to_string()));
        self
    }

    /// What a location is read as: a netCDF file, and which group of it.
    pub(crate) fn format(&self) -> NodeFormat {
        NodeFormat::netcdf(self.set.text(&PATH))
    }

    /// The same settings as the Zarr reader takes them (a file is read as a Zarr group).
    pub(crate) fn as_zarr(&self) -> ZarrOptions {
        self.as_kind()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(path: &str) -> NodeFormat {
        let sql = [("path".to_string(), path.to_string())].into();
        NetCDFOptions::from_sql(&sql).unwrap().format()
    }

    #[test]
    fn the_root_group_has_every_spelling_and_others_lose_their_slashes() {
        for root in ["/", " / "] {
            assert_eq!(group(root), NodeFormat::netcdf(None), "{root:?}");
        }
        assert_eq!(NetCDFOptions::new().format(), NodeFormat::netcdf(None));
        assert_eq!(group("/obs/deep/"), NodeFormat::netcdf(Some("obs/deep")));
        // The cluster is told the group as an option, which reads back the same.
        let told = group("/obs").options_sql().unwrap();
        assert_eq!(told, ("path".to_string(), "obs".to_string()));
    }
}
