//! How a netCDF table is read: the dataset options of Zarr groups (xarray's names) and the
//! storage settings.

use crate::table_options::{Declared, KindOptions, OptionKeys, OptionKind, OptionSpec};
use crate::zarr::ZarrOptions;

const BATCH_SIZE: OptionSpec = OptionSpec::new(
    "batch_size",
    OptionKind::Positive,
    "rows per output batch (default: the session's datafusion.execution.batch_size)",
);
const CHUNKS_IN_FLIGHT: OptionSpec = OptionSpec::new(
    "chunks_in_flight",
    OptionKind::Positive,
    "chunks each partition reads ahead (default: 2 from local files, 16 from object stores)",
);
const VARIABLES: OptionSpec = OptionSpec::new(
    "variables",
    OptionKind::Names,
    "the data variables to show, comma-separated (default: all)",
);
const DECODE_TIMES: OptionSpec = OptionSpec::new(
    "decode_times",
    OptionKind::Flag,
    "decode CF times to timestamps (default: true)",
);
const MASK_AND_SCALE: OptionSpec = OptionSpec::new(
    "mask_and_scale",
    OptionKind::Flag,
    "_FillValue / missing_value to NULL, scale_factor / add_offset (default: true)",
);

/// The options of `STORED AS NETCDF`, in the order EXPLAIN shows them.
const OPTIONS: &[OptionSpec] = &[
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
/// From SQL, as `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED AS NETCDF`: `batch_size`,
/// `chunks_in_flight`, `variables` (comma-separated), `decode_times` and `mask_and_scale`
/// (`true`/`false`, xarray's names), and the storage settings of
/// [`StorageOptions`](crate::StorageOptions); from Rust with [`NetCDFOptions::from_sql`] or
/// [`with_storage`](KindOptions::with_storage).
pub type NetCDFOptions = KindOptions<NetCDFKeys>;

impl KindOptions<NetCDFKeys> {
    /// The same settings as the Zarr reader takes them (a file is read as a Zarr group).
    pub(crate) fn as_zarr(&self) -> ZarrOptions {
        self.as_kind()
    }
}
