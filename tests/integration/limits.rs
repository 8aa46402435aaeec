//! Limits are a session's, not the process's (README, "Limits"): sessions in one process
//! read under their own, set with `SET ndfusion.*`, with [`SessionLimits`] from Rust, or for
//! one table with `ZarrOptions::with_limits`. The fixture is zarr-python 3.4.2's ocean group
//! (tests/data/datasets/make_fixtures.py): 5 attributes, 24 x 6 x 5 cells.

use datafusion::prelude::SessionConfig;
use ndfusion::{Limits, SessionLimits, ZarrOptions, ZarrTable};

const OCEAN: &str = "tests/data/datasets/ocean_v3.zarr";

async fn count(ctx: &datafusion::prelude::SessionContext) -> Result<String, String> {
    let create = format!(
        "CREATE EXTERNAL TABLE ocean STORED AS ZARR LOCATION '{}/{OCEAN}'",
        env!("CARGO_MANIFEST_DIR")
    );
    let run = async {
        ctx.sql(&create).await?;
        let batches = ctx
            .sql("SELECT count(*) FROM ocean")
            .await?
            .collect()
            .await?;
        datafusion::arrow::util::pretty::pretty_format_batches(&batches)
            .map(|t| t.to_string())
            .map_err(Into::into)
    };
    run.await
        .map_err(|e: datafusion::error::DataFusionError| ndfusion::Error::user_message(&e))
}

#[tokio::test]
async fn sessions_in_one_process_read_under_their_own_limits() {
    let strict = ndfusion::new_session_context();
    let open = ndfusion::new_session_context();
    strict
        .sql("SET ndfusion.max_attributes = '4'")
        .await
        .unwrap();
    let mut four = Limits::default();
    four.attributes = 4;
    let from_rust = ndfusion::new_session_context_with_config(
        SessionConfig::new().with_option_extension(SessionLimits::new(four)),
    );
    let (strict, open, from_rust) = tokio::join!(count(&strict), count(&open), count(&from_rust));
    for refused in [strict, from_rust] {
        let err = refused.unwrap_err();
        assert!(
            err.contains("5 attributes, more than the 4 a node may have")
                && err.contains("ndfusion.max_attributes"),
            "{err}"
        );
    }
    assert!(open.unwrap().contains("| 720 "));
}

#[tokio::test]
async fn a_table_opened_from_rust_takes_the_limits_it_is_given() {
    let location = format!("{}/{OCEAN}", env!("CARGO_MANIFEST_DIR"));
    let mut tight = Limits::default();
    tight.coordinate_bytes = 100;
    let err = ZarrTable::open_with(&location, ZarrOptions::new().with_limits(tight))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("coordinate 'time' holds 192 bytes of values, more than the 100"),
        "{err}"
    );
    ZarrTable::open_with(&location, ZarrOptions::new())
        .await
        .unwrap();
}
