//! Collections from Rust: a list of locations is one table, like a glob.

use std::sync::Arc;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;

use ndfusion::{new_session_context, ZarrOptions, ZarrTable};

const DIR: &str = "tests/data/collections/floats";

#[tokio::test]
async fn a_list_of_locations_is_one_table() {
    let table = ZarrTable::open_many(
        &[format!("{DIR}/f1.zarr"), format!("{DIR}/f3.zarr")],
        ZarrOptions::new(),
    )
    .await
    .unwrap();
    assert_eq!(table.shape(), vec![2]);
    let ctx = new_session_context();
    ctx.register_table("f", Arc::new(table)).unwrap();
    let batches = ctx
        .sql("SELECT count(*), count(salt) FROM f")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    // expected.json: f1 has 10 levels, f3 9 (and salt).
    let counts = |c: usize| batches[0].column(c).as_primitive::<Int64Type>().value(0);
    assert_eq!((counts(0), counts(1)), (19, 9));
    let err = ZarrTable::open_many::<&str>(&[], ZarrOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "invalid location '': no locations given");
}
