//! The demo tables the REPL starts with: Zarr arrays written by zarr-python and a lance-nd
//! table written by pylance, shipped with the repository under `tests/data/`.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::error::Result;
use datafusion::prelude::SessionContext;

use datafusion::datasource::TableProvider;

use ndfusion::{LanceNdTable, ZarrTable};

/// Name, path below the data folder, and a one-line description of each demo table.
pub const DEMO_TABLES: &[(&str, &str, &str)] = &[
    (
        "ocean",
        "demo/ocean.zarr",
        "daily ocean profiles: day x depth, {temperature, salinity, qc}",
    ),
    (
        "weather",
        "zarr_v3/grid_2d.zarr",
        "a 5 x 7 grid: time x station, {temp, pressure, ok}",
    ),
    (
        "points",
        "zarr_v3/struct_1d.zarr",
        "10 records with a nested struct: {id, flags, point {x, y}, value}",
    ),
    (
        "sea",
        "datasets/ocean_v3.zarr",
        "an xarray dataset: time x lat x lon, {land, sal, temp, tide, basin}, CF-decoded",
    ),
    (
        "profiles",
        "lance_nd/doc_example.lance",
        "lance-nd: 3 nd record batches (x, y, temperature | pressure) with __global_attrs__.id",
    ),
];

/// The folder holding the demo data: `$NDFUSION_DEMO_DATA`, or the repository's `tests/data`.
pub fn data_dir() -> PathBuf {
    std::env::var_os("NDFUSION_DEMO_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")))
}

/// Registers the demo tables.
pub async fn register(ctx: &SessionContext) -> Result<()> {
    let dir = data_dir();
    for (name, path, _) in DEMO_TABLES {
        let location = dir.join(path).to_string_lossy().to_string();
        let table: Arc<dyn TableProvider> = if location.ends_with(".lance") {
            Arc::new(LanceNdTable::open(&location).await?)
        } else {
            Arc::new(ZarrTable::open(&location).await?)
        };
        ctx.register_table(*name, table)?;
    }
    Ok(())
}
