//! Generated inputs: metadata documents, attributes and chunk bytes that other programs (or an
//! attacker) may have written. Every case must end in a value or an error, never a panic or a
//! hang. `PROPTEST_CASES` sets how many cases each property runs (a few dozen by default; the
//! README's development section has the long run).

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::zarr::decode::cf::{CfDecoder, CfOptions};
use crate::zarr::metadata::array_meta::parse_v3_value;
use crate::zarr::metadata::v2::parse_v2_value;

fn config() -> ProptestConfig {
    crate::proptest_config::config(64)
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z0-9_<>|\\[\\]]{0,12}".prop_map(Value::from),
        Just(Value::from("NaN")),
        Just(Value::from("AAAAAAAA+H8=")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Sizes where the trouble is: 0, small, near the type limits.
fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1u64..50,
        Just(u32::MAX as u64),
        Just(i64::MAX as u64),
        Just(u64::MAX),
        any::<u64>(),
    ]
}

fn data_type() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(json!("float32")),
        Just(json!("int16")),
        Just(json!("uint8")),
        Just(json!("bool")),
        Just(json!("complex128")),
        Just(json!("string")),
        Just(json!({"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}})),
        size().prop_map(|n| json!({"name": format!("r{n}")})),
        size().prop_map(|n| json!({"name": "raw_bytes", "configuration": {"length_bytes": n}})),
        any_json(),
    ];
    scalar.prop_recursive(2, 12, 3, |inner| {
        prop::collection::vec(("[a-z]{0,3}", inner), 0..4).prop_map(|fields| {
            let fields: Vec<Value> = fields
                .into_iter()
                .map(|(name, dt)| json!({"name": name, "data_type": dt}))
                .collect();
            json!({"name": "struct", "configuration": {"fields": fields}})
        })
    })
}

fn codecs() -> impl Strategy<Value = Value> {
    let codec = prop_oneof![
        Just(json!({"name": "bytes", "configuration": {"endian": "little"}})),
        Just(json!({"name": "bytes"})),
        Just(json!({"name": "zstd", "configuration": {"level": 1, "checksum": false}})),
        Just(json!({"name": "transpose", "configuration": {"order": [1, 0]}})),
        Just(json!({"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2], "codecs": [{"name": "bytes"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}})),
        any_json(),
    ];
    prop::collection::vec(codec, 0..3).prop_map(Value::from)
}

/// A `zarr.json` that is nearly right: every part drawn from values that are valid, edge cases
/// or anything.
fn zarr_json() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(size(), 0..4),
        prop::collection::vec(size(), 0..4),
        data_type(),
        any_json(),
        codecs(),
        any_json(),
    )
        .prop_map(|(shape, chunks, dt, fill, codecs, attrs)| {
            json!({
                "zarr_format": 3, "node_type": "array", "shape": shape,
                "data_type": dt, "fill_value": fill, "codecs": codecs,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
                "chunk_key_encoding": {"name": "default"},
                "attributes": attrs,
            })
        })
}

fn dtype_v2() -> impl Strategy<Value = Value> {
    let typestr = prop_oneof![
        Just(json!("<f8")),
        Just(json!("|u1")),
        Just(json!(">i2")),
        Just(json!("|O")),
        size().prop_map(|n| json!(format!("<U{n}"))),
        size().prop_map(|n| json!(format!("|V{n}"))),
        "[<>|][a-zA-Z][0-9]{0,20}(\\[[a-z0-9]{0,3}\\])?".prop_map(Value::from),
    ];
    typestr.prop_recursive(2, 12, 3, |inner| {
        prop::collection::vec(
            (
                "[a-z]{0,3}",
                inner,
                prop::option::of(prop::collection::vec(size(), 0..3)),
            ),
            0..4,
        )
        .prop_map(|fields| {
            Value::from(
                fields
                    .into_iter()
                    .map(|(name, dt, sub)| match sub {
                        Some(sub) => json!([name, dt, sub]),
                        None => json!([name, dt]),
                    })
                    .collect::<Vec<_>>(),
            )
        })
    })
}

fn zarray() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(size(), 0..4),
        prop::collection::vec(size(), 0..4),
        dtype_v2(),
        any_json(),
        prop_oneof![Just(json!("C")), Just(json!("F")), any_json()],
        prop_oneof![Just(Value::Null), any_json()],
    )
        .prop_map(|(shape, chunks, dtype, fill, order, compressor)| {
            json!({
                "zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dtype,
                "fill_value": fill, "order": order, "compressor": compressor, "filters": null,
            })
        })
}

fn attributes() -> impl Strategy<Value = Map<String, Value>> {
    let units = prop_oneof![
        Just(json!("days since 2001-03-01")),
        Just(json!("hours since 1970-01-01T00:00:00Z")),
        Just(json!("seconds since 9999-99-99")),
        "[a-z]{0,6} since [0-9:T -]{0,20}".prop_map(Value::from),
        any_json(),
    ];
    (
        prop::option::of(units),
        prop::option::of(any_json()),
        prop::option::of(any_json()),
        prop::option::of(any_json()),
        prop::option::of(any_json()),
    )
        .prop_map(|(units, fill, scale, offset, calendar)| {
            let mut m = Map::new();
            for (k, v) in [
                ("units", units),
                ("_FillValue", fill),
                ("scale_factor", scale),
                ("add_offset", offset),
                ("calendar", calendar),
            ] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            m
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn zarr_json_documents_parse_or_fail_cleanly(doc in zarr_json()) {
        let _ = parse_v3_value("generated/zarr.json", doc, 10_000);
    }

    #[test]
    fn zarray_documents_parse_or_fail_cleanly(doc in zarray(), attrs in prop::option::of(any_json())) {
        let _ = parse_v2_value("generated/.zarray", doc, attrs, 10_000);
    }

    #[test]
    fn cf_attributes_decode_or_fail_cleanly(
        attrs in attributes(),
        values in prop::collection::vec(any::<i64>(), 0..16),
        floats in prop::collection::vec(any::<f64>(), 0..16),
    ) {
        let ints: arrow::array::ArrayRef = Arc::new(arrow::array::Int64Array::from(values));
        let floats: arrow::array::ArrayRef = Arc::new(arrow::array::Float64Array::from(floats));
        for stored in [&ints, &floats] {
            if let Ok(Some(decoder)) =
                CfDecoder::new("v", stored.data_type(), &attrs, CfOptions::default())
            {
                if let Ok(out) = decoder.decode(stored) {
                    prop_assert_eq!(out.len(), stored.len());
                    prop_assert_eq!(out.data_type(), decoder.output_type());
                }
            }
        }
    }
}

/// A group's `zarr.json` with consolidated metadata of generated members.
fn group_json() -> impl Strategy<Value = Value> {
    let member = (
        prop::collection::vec(0u64..6, 0..3),
        prop::collection::vec(1u64..4, 0..3),
        prop::collection::vec("[xyt]", 0..3),
        prop_oneof![Just(json!("float32")), Just(json!("int16")), Just(json!("string")), data_type()],
        attributes(),
    )
        .prop_map(|(shape, chunks, dims, dt, attrs)| {
            json!({
                "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dt,
                "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
                "chunk_key_encoding": {"name": "default"}, "dimension_names": dims,
                "attributes": Value::Object(attrs),
            })
        });
    (
        prop::collection::btree_map("[xyt]|[a-z]{2}", member, 0..4),
        any_json(),
    )
        .prop_map(|(members, attrs)| {
            json!({
                "zarr_format": 3, "node_type": "group", "attributes": attrs,
                "consolidated_metadata": {"kind": "inline", "must_understand": false,
                    "metadata": Value::Object(members.into_iter().collect())},
            })
        })
}

/// Opens `location` as a table and reads it: the answer or an error, whatever it holds.
fn open_and_read(location: &str, query: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ctx = crate::new_session_context();
        let Ok(table) = crate::ZarrTable::open(location).await else {
            return;
        };
        if ctx.register_table("t", Arc::new(table)).is_err() {
            return;
        }
        if let Ok(df) = ctx.sql(query).await {
            let result = df.collect().await;
            if std::env::var("NDFUSION_SHOW_OUTCOMES").is_ok() {
                eprintln!(
                    "{location} {query}: {}",
                    match &result {
                        Ok(b) =>
                            format!("ok {} rows", b.iter().map(|b| b.num_rows()).sum::<usize>()),
                        Err(e) => crate::error::Error::user_message(e),
                    }
                );
            }
        }
    });
}

/// A fixture copied to a temporary folder, for damage.
fn copy_fixture(name: &str) -> tempfile::TempDir {
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            let target = to.join(path.file_name().unwrap());
            if path.is_dir() {
                copy(&path, &target);
            } else {
                std::fs::copy(&path, &target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    copy(&from, &dir.path().join("a.zarr"));
    dir
}

/// How a chunk file is damaged: replaced, cut short, or grown.
#[derive(Debug, Clone)]
enum Damage {
    Replace(Vec<u8>),
    Truncate(usize),
    Append(Vec<u8>),
    Flip(usize, u8),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200).prop_map(Damage::Replace),
        (0usize..400).prop_map(Damage::Truncate),
        prop::collection::vec(any::<u8>(), 1..40).prop_map(Damage::Append),
        (0usize..400, any::<u8>()).prop_map(|(i, b)| Damage::Flip(i, b)),
    ]
}

fn apply(path: &std::path::Path, damage: &Damage) {
    let mut bytes = std::fs::read(path).unwrap_or_default();
    match damage {
        Damage::Replace(b) => bytes = b.clone(),
        Damage::Truncate(n) => bytes.truncate(*n),
        Damage::Append(b) => bytes.extend(b),
        Damage::Flip(i, b) => {
            if !bytes.is_empty() {
                let i = i % bytes.len();
                bytes[i] ^= b | 1;
            }
        }
    }
    std::fs::write(path, bytes).unwrap();
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn consolidated_groups_open_or_fail_cleanly(doc in group_json()) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("zarr.json"), doc.to_string()).unwrap();
        open_and_read(&dir.path().to_string_lossy(), "SELECT * FROM t LIMIT 20");
    }

    /// Damaged chunks through every read path: plain (pieces, local boxes), sharded (the shard
    /// index, inner chunks), zstd (prefix and whole), blosc through the codec chain, v2.
    #[test]
    fn damaged_chunks_read_or_fail_cleanly(
        fixture in prop::sample::select(vec![
            ("zarr_v3/codec_uncompressed.zarr", "c/0/1"),
            ("zarr_v3/codec_sharded.zarr", "c/0/0"),
            ("zarr_v3/grid_2d.zarr", "c/1/1"),
            ("zarr_v3/codec_blosc.zarr", "c/0/0"),
            ("zarr_v3/codec_crc32c.zarr", "c/0/0"),
            ("zarr_v2/codec_none.zarr", "0.1"),
        ]),
        damage in damage(),
        query in prop::sample::select(vec![
            "SELECT * FROM t",
            "SELECT temp FROM t WHERE time = 1 AND station < 3",
            "SELECT count(*) FROM t WHERE pressure > 1000",
        ]),
    ) {
        let (name, chunk) = fixture;
        let dir = copy_fixture(name);
        apply(&dir.path().join("a.zarr").join(chunk), &damage);
        open_and_read(&dir.path().join("a.zarr").to_string_lossy(), query);
    }
}
