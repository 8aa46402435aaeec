//! How an HDF5 table is read: what `path` names in the file, and the netCDF tables' options
//! for a group read as a dataset.

use crate::netcdf::options::{
    BATCH_SIZE, CHUNKS_IN_FLIGHT, DECODE_TIMES, MASK_AND_SCALE, VARIABLES,
};
use crate::table_options::{
    Declared, KindOptions, OptionKeys, OptionKind, OptionSpec, OptionValue,
};
use crate::zarr::node_table::NodeFormat;
use crate::zarr::ZarrOptions;

const PATH: OptionSpec = OptionSpec::new(
    "path",
    OptionKind::Text,
    "the dataset (/obs/records) or group (/obs, / for the root) to read (default: the file's \
     one dataset)",
);

/// The options of `STORED AS HDF5`, in the order EXPLAIN shows them.
const OPTIONS: &[OptionSpec] = &[
    PATH,
    BATCH_SIZE,
    CHUNKS_IN_FLIGHT,
    VARIABLES,
    DECODE_TIMES,
    MASK_AND_SCALE,
];

/// The keys of `STORED AS HDF5`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HDF5Keys;

impl Declared for HDF5Keys {
    const SPECS: &'static [OptionSpec] = OPTIONS;
    const TAKER: &'static str = "STORED AS HDF5";
}

impl OptionKeys for HDF5Keys {}

/// How an HDF5 table is read.
///
/// From SQL, as `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED AS HDF5`: `path` (a dataset,
/// read as an array table, or a group, read as a dataset table), `batch_size`,
/// `chunks_in_flight`, and for a group `variables`, `decode_times` and `mask_and_scale`; the
/// storage settings of [`StorageOptions`](crate::StorageOptions). From Rust with
/// [`HDF5Options::from_sql`] or [`with_path`](KindOptions::with_path).
pub type HDF5Options = KindOptions<HDF5Keys>;

impl KindOptions<HDF5Keys> {
    /// Reads the dataset or group at `path` (`/obs/records`).
    pub fn with_path(mut self, path: &str) -> Self {
        self.set
            .set(&PATH, OptionValue::Text(path.trim().to_string()));
        self
    }

    /// What a location is read as: an HDF5 file, and what of it.
    pub(crate) fn format(&self) -> NodeFormat {
        NodeFormat::Hdf5 {
            path: self.set.text(&PATH).map(|p| p.trim().into()),
        }
    }

    /// The same settings as the Zarr reader takes them.
    pub(crate) fn as_zarr(&self) -> ZarrOptions {
        self.as_kind()
    }
}
