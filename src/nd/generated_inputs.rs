//! Generated lance-nd rows: mismatched `dim_sizes` and value counts, repeated or empty names,
//! null parts, sizes at the type limits, columns of the wrong shape. Every case must end in a
//! value or an error, never a panic. `PROPTEST_CASES` sets the number of cases.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int64Array, ListArray, StringArray, StructArray, UInt32Array,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, Fields};
use proptest::prelude::*;

use super::arrow_encoding::{
    decode_dims, decode_nd_array, is_nd_array_field, nd_array_parts, EXTENSION_NAME_KEY,
    ND_ARRAY_EXTENSION,
};
use super::batch::NdRecordBatch;

fn config() -> ProptestConfig {
    crate::proptest_config::config(128)
}

/// One stored row of an nd array column, as another writer may have left it.
#[derive(Debug, Clone)]
struct Row {
    present: bool,
    values: Vec<Option<f64>>,
    names: Vec<Option<String>>,
    sizes: Vec<Option<u32>>,
}

fn row() -> impl Strategy<Value = Row> {
    (
        any::<bool>(),
        prop::collection::vec(prop::option::of(any::<f64>()), 0..12),
        prop::collection::vec(prop::option::of("[xyz]?"), 0..4),
        prop::collection::vec(
            prop::option::of(prop_oneof![0u32..5, Just(u32::MAX), any::<u32>()]),
            0..4,
        ),
    )
        .prop_map(|(present, values, names, sizes)| Row {
            present,
            values,
            names,
            sizes,
        })
}

fn list(values: ArrayRef, lengths: Vec<usize>, item: DataType) -> ArrayRef {
    Arc::new(ListArray::new(
        Arc::new(Field::new("item", item, true)),
        OffsetBuffer::from_lengths(lengths),
        values,
        None,
    ))
}

/// The column of `rows`, `values` / `dim_names` / `dim_sizes` children as the format has them.
fn column(rows: &[Row]) -> StructArray {
    let values = list(
        Arc::new(Float64Array::from(
            rows.iter()
                .flat_map(|r| r.values.clone())
                .collect::<Vec<_>>(),
        )),
        rows.iter().map(|r| r.values.len()).collect(),
        DataType::Float64,
    );
    let names = list(
        Arc::new(StringArray::from(
            rows.iter()
                .flat_map(|r| r.names.clone())
                .collect::<Vec<_>>(),
        )),
        rows.iter().map(|r| r.names.len()).collect(),
        DataType::Utf8,
    );
    let sizes = list(
        Arc::new(UInt32Array::from(
            rows.iter()
                .flat_map(|r| r.sizes.clone())
                .collect::<Vec<_>>(),
        )),
        rows.iter().map(|r| r.sizes.len()).collect(),
        DataType::UInt32,
    );
    let fields = Fields::from(vec![
        Field::new("values", values.data_type().clone(), true),
        Field::new("dim_names", names.data_type().clone(), true),
        Field::new("dim_sizes", sizes.data_type().clone(), true),
    ]);
    let present = NullBuffer::from(rows.iter().map(|r| r.present).collect::<Vec<_>>());
    StructArray::new(fields, vec![values, names, sizes], Some(present))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn stored_rows_decode_and_materialize_or_fail_cleanly(
        a in prop::collection::vec(row(), 1..4),
        b in prop::collection::vec(row(), 1..4),
    ) {
        let n = a.len().min(b.len());
        let (a, b) = (column(&a[..n]), column(&b[..n]));
        for r in 0..n {
            let names = Arc::new(a.column(1).clone()) as ArrayRef;
            let sizes = Arc::new(a.column(2).clone()) as ArrayRef;
            let _ = decode_dims(&names, &sizes, r);
            let first = decode_nd_array(&a, r, "a");
            let second = decode_nd_array(&b, r, "b");
            if let (Ok(first), Ok(second)) = (first, second) {
                let arrays: Vec<_> = [("a", first), ("b", second)]
                    .into_iter()
                    .filter_map(|(name, array)| array.map(|x| (name.to_string(), x)))
                    .collect();
                if let Ok(batch) = NdRecordBatch::try_new(arrays, vec![]) {
                    if let Ok(table) = batch.materialize() {
                        prop_assert_eq!(table.num_rows(), batch.cell_count());
                    }
                }
            }
        }
    }

    #[test]
    fn columns_of_any_shape_are_read_or_refused(
        extension in prop_oneof![Just(ND_ARRAY_EXTENSION.to_string()), "[a-z_.]{0,16}"],
        shape in 0usize..5,
    ) {
        let data_type = match shape {
            0 => DataType::Int64,
            1 => DataType::Struct(Fields::empty()),
            2 => DataType::Struct(Fields::from(vec![Field::new("values", DataType::Int64, true)])),
            3 => DataType::Struct(Fields::from(vec![
                Field::new("values", DataType::new_list(DataType::Float64, true), true),
                Field::new("attrs", DataType::Int64, true),
            ])),
            _ => DataType::new_list(DataType::Float64, true),
        };
        let field = Field::new("v", data_type, true)
            .with_metadata(HashMap::from([(EXTENSION_NAME_KEY.to_string(), extension)]));
        if is_nd_array_field(&field) {
            let _ = nd_array_parts(&field);
        }
        // A non-list dim_sizes child read as one.
        let names: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        let _ = decode_dims(&names, &names, 1);
    }
}
