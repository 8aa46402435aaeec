//! Query a Zarr struct array from Rust.
//!
//!     cargo run --example register_zarr -- tests/data/demo/ocean.zarr
//!
//! Registers the array twice: as a `TableProvider`, and through `CREATE EXTERNAL TABLE`.

use std::sync::Arc;

use datafusion::error::Result;
use ndfusion::{new_session_context, ZarrTable};

#[tokio::main]
async fn main() -> Result<()> {
    let location = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tests/data/demo/ocean.zarr".to_string());

    // A SessionContext with DataFusion's default features and the ZARR table factory.
    let ctx = new_session_context();

    // 1. As a TableProvider.
    let table = ZarrTable::open(&location).await?;
    println!("{location}: shape {:?}", table.shape());
    ctx.register_table("ocean", Arc::new(table))?;

    // 2. With SQL.
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE ocean_sql STORED AS ZARR LOCATION '{location}'"
    ))
    .await?;

    ctx.sql("DESCRIBE ocean").await?.show().await?;
    ctx.sql(
        "SELECT depth, avg(temperature) AS mean_temperature, avg(salinity) AS mean_salinity \
         FROM ocean_sql WHERE qc = 1 AND depth % 10 = 0 GROUP BY depth ORDER BY depth",
    )
    .await?
    .show()
    .await?;
    Ok(())
}
