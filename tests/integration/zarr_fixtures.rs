//! Every fixture written by zarr-python reads back as numpy read it (tests/data/zarr_v3/expected.json).

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StructArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, TimeUnit};
use serde_json::Value;

use ndfusion::{new_session_context, ZarrTable};

const V3: &str = "tests/data/zarr_v3";

/// One folder per writer: zarr-python 3.4.2 (`struct`), 3.1.6 (`structured`), 2.18.7 (v2),
/// and 3.4.2 writing v2.
const FIXTURE_DIRS: &[&str] = &[
    "tests/data/zarr_v3",
    "tests/data/zarr_v3_structured",
    "tests/data/zarr_v2",
    "tests/data/zarr_v2_by_zarr3",
];

fn expected(dir: &str) -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(format!("{dir}/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Flattens struct columns into dotted leaf paths and fixed-size lists into `name[i]`
/// (nested lists by their flat C-order index, as numpy flattens a subarray).
fn leaves(name: &str, array: &ArrayRef, out: &mut BTreeMap<String, ArrayRef>) {
    match array.data_type() {
        DataType::Struct(fields) => {
            let s: &StructArray = array.as_struct();
            for (f, child) in fields.iter().zip(s.columns()) {
                leaves(&format!("{name}.{}", f.name()), child, out);
            }
        }
        DataType::FixedSizeList(_, _) => {
            let mut values = Arc::clone(array);
            let mut per_row = 1;
            while let DataType::FixedSizeList(_, n) = values.data_type() {
                per_row *= *n as usize;
                values = Arc::clone(values.as_fixed_size_list().values());
            }
            let rows = array.len();
            for k in 0..per_row {
                let indices = arrow::array::UInt64Array::from_iter_values(
                    (0..rows).map(|r| (r * per_row + k) as u64),
                );
                let item = arrow::compute::take(values.as_ref(), &indices, None).unwrap();
                leaves(&format!("{name}[{k}]"), &item, out);
            }
        }
        _ => {
            out.insert(name.to_string(), Arc::clone(array));
        }
    }
}

fn float_eq(actual: f64, expected: &Value) -> bool {
    let e: f64 = expected
        .as_str()
        .expect("floats are repr strings")
        .parse()
        .unwrap();
    (actual.is_nan() && e.is_nan()) || actual.to_bits() == e.to_bits()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Compares one Arrow value with numpy's JSON rendering of it.
fn value_matches(array: &ArrayRef, i: usize, expected: &Value) -> bool {
    use arrow::datatypes::*;
    if array.is_null(i) {
        return expected.is_null();
    }
    match array.data_type() {
        DataType::Boolean => Value::Bool(array.as_boolean().value(i)) == *expected,
        DataType::Int8 => {
            expected.as_i64() == Some(array.as_primitive::<Int8Type>().value(i) as i64)
        }
        DataType::Int16 => {
            expected.as_i64() == Some(array.as_primitive::<Int16Type>().value(i) as i64)
        }
        DataType::Int32 => {
            expected.as_i64() == Some(array.as_primitive::<Int32Type>().value(i) as i64)
        }
        DataType::Int64 => expected.as_i64() == Some(array.as_primitive::<Int64Type>().value(i)),
        DataType::UInt8 => {
            expected.as_u64() == Some(array.as_primitive::<UInt8Type>().value(i) as u64)
        }
        DataType::UInt16 => {
            expected.as_u64() == Some(array.as_primitive::<UInt16Type>().value(i) as u64)
        }
        DataType::UInt32 => {
            expected.as_u64() == Some(array.as_primitive::<UInt32Type>().value(i) as u64)
        }
        DataType::UInt64 => expected.as_u64() == Some(array.as_primitive::<UInt64Type>().value(i)),
        DataType::Float16 => float_eq(
            array.as_primitive::<Float16Type>().value(i).to_f64(),
            expected,
        ),
        DataType::Float32 => float_eq(
            array.as_primitive::<Float32Type>().value(i) as f64,
            expected,
        ),
        DataType::Float64 => float_eq(array.as_primitive::<Float64Type>().value(i), expected),
        DataType::Timestamp(TimeUnit::Second, None) => {
            expected.as_i64() == Some(array.as_primitive::<TimestampSecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, None) => {
            expected.as_i64() == Some(array.as_primitive::<TimestampNanosecondType>().value(i))
        }
        DataType::Duration(TimeUnit::Millisecond) => {
            expected.as_i64() == Some(array.as_primitive::<DurationMillisecondType>().value(i))
        }
        DataType::Utf8 => expected.as_str() == Some(array.as_string::<i32>().value(i)),
        DataType::Binary => {
            expected.as_str() == Some(hex(array.as_binary::<i32>().value(i)).as_str())
        }
        DataType::FixedSizeBinary(_) => {
            expected.as_str() == Some(hex(array.as_fixed_size_binary().value(i)).as_str())
        }
        other => panic!("no comparison for {other}"),
    }
}

async fn read_all(location: &str, order_by: &[String]) -> RecordBatch {
    read_where(location, order_by, "").await
}

async fn read_where(location: &str, order_by: &[String], predicate: &str) -> RecordBatch {
    let ctx = new_session_context();
    ctx.register_table("t", Arc::new(ZarrTable::open(location).await.unwrap()))
        .unwrap();
    let order = if order_by.is_empty() {
        String::new()
    } else {
        format!(
            " ORDER BY {}",
            order_by
                .iter()
                .map(|d| format!("\"{d}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let df = ctx
        .sql(&format!("SELECT * FROM t{predicate}{order}"))
        .await
        .unwrap();
    let schema = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await.unwrap();
    concat_batches(&schema, &batches).unwrap()
}

#[tokio::test]
async fn every_fixture_reads_as_numpy_reads_it() {
    let mut count = 0;
    for dir in FIXTURE_DIRS {
        for (name, fixture) in &expected(dir) {
            if name == "ten_million_chunks" {
                continue; // too large to read whole: the next test reads its ends
            }
            check_fixture(&format!("{dir}/{name}.zarr"), fixture).await;
            count += 1;
        }
    }
    assert!(count >= 30, "fixtures missing from expected.json: {count}");
}

/// 10^10 rows in ten million chunks: the first 12 and last 7 rows read as numpy reads them,
/// each through a selection of one chunk.
#[tokio::test]
async fn the_ends_of_ten_million_chunks_read_as_numpy_reads_them() {
    let fixture = &expected("tests/data/zarr_v3")["ten_million_chunks"];
    let location = "tests/data/zarr_v3/ten_million_chunks.zarr";
    let order = ["i".to_string()];
    let head = fixture["head"].as_object().unwrap();
    let batch = read_where(location, &order, " WHERE i < 12").await;
    compare("head", &batch, head, &(0..12).collect::<Vec<_>>());
    let tail = fixture["tail"].as_object().unwrap();
    let first = tail["i"][0].as_i64().unwrap();
    let batch = read_where(location, &order, &format!(" WHERE i >= {first}")).await;
    compare("tail", &batch, tail, &(0..7).collect::<Vec<_>>());
}

async fn check_fixture(location: &str, fixture: &Value) {
    let dims: Vec<String> = serde_json::from_value(fixture["dims"].clone()).unwrap();
    let want = fixture["columns"].as_object().unwrap();
    let batch = read_all(location, &dims).await;
    let all_rows = want
        .values()
        .next()
        .map_or(0, |v| v.as_array().unwrap().len());
    compare(location, &batch, want, &(0..all_rows).collect::<Vec<_>>());

    // An inner box, [1, n - 2] on every dimension of length 3 or more: it cuts through chunks,
    // so chunks are read in part (partially decoded where the codecs allow it).
    let mut predicates = Vec::new();
    let mut kept: Vec<usize> = (0..all_rows).collect();
    let shape: Vec<i64> = serde_json::from_value(fixture["shape"].clone()).unwrap();
    for (dim, &n) in dims.iter().zip(&shape) {
        if n >= 3 {
            let index: Vec<i64> = want[dim]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            predicates.push(format!("\"{dim}\" BETWEEN 1 AND {}", n - 2));
            kept.retain(|&r| (1..=n - 2).contains(&index[r]));
        }
    }
    if !predicates.is_empty() {
        let predicate = format!(" WHERE {}", predicates.join(" AND "));
        let batch = read_where(location, &dims, &predicate).await;
        compare(&format!("{location}{predicate}"), &batch, want, &kept);
    }
}

/// Compares every leaf column of `batch` with numpy's values at rows `rows` of `want`.
fn compare(name: &str, batch: &RecordBatch, want: &serde_json::Map<String, Value>, rows: &[usize]) {
    let mut columns = BTreeMap::new();
    for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
        leaves(field.name(), array, &mut columns);
    }
    assert_eq!(
        columns.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{name}: columns"
    );
    for (column, values) in want {
        let values = values.as_array().unwrap();
        let array = &columns[column];
        assert_eq!(array.len(), rows.len(), "{name}.{column}: row count");
        for (i, &row) in rows.iter().enumerate() {
            let v = &values[row];
            assert!(
                value_matches(array, i, v),
                "{name}.{column}[{i}]: got {:?}, numpy has {v}",
                arrow::util::display::array_value_to_string(array, i)
            );
        }
    }
}

#[tokio::test]
async fn column_types_follow_the_zarr_types() {
    let table = ZarrTable::open(&format!("{V3}/all_types.zarr"))
        .await
        .unwrap();
    let schema = datafusion::datasource::TableProvider::schema(&table);
    let ty = |n: &str| schema.field_with_name(n).unwrap().data_type().clone();
    assert_eq!(ty("dim_0"), DataType::Int64);
    assert_eq!(ty("f2"), DataType::Float16);
    assert_eq!(ty("u8"), DataType::UInt64);
    assert_eq!(ty("raw"), DataType::FixedSizeBinary(3));
    assert_eq!(ty("ts"), DataType::Timestamp(TimeUnit::Second, None));
    assert_eq!(ty("tns"), DataType::Timestamp(TimeUnit::Nanosecond, None));
    assert_eq!(ty("day"), DataType::Timestamp(TimeUnit::Second, None));
    assert_eq!(ty("td"), DataType::Duration(TimeUnit::Millisecond));
    assert_eq!(ty("u"), DataType::Utf8);
    assert_eq!(ty("s"), DataType::Binary);
    assert!(matches!(ty("c16"), DataType::Struct(f) if f.len() == 2 && f[0].name() == "re"));
    assert!(schema.field_with_name("ts").unwrap().is_nullable());
    assert!(!schema.field_with_name("f8").unwrap().is_nullable());
}

/// A chunk read in part that is shorter than the box it should hold: an error naming the
/// chunk and the array, not fill values. A chunk absent from the store reads as the fill value
/// (numpy: 0.0 here).
#[tokio::test]
async fn an_uncompressed_chunk_of_the_wrong_size_is_an_error_wherever_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("grid.zarr");
    let source = std::path::Path::new(V3).join("codec_uncompressed.zarr");
    for entry in ["zarr.json", "c/0/0", "c/0/1"] {
        let to = copy.join(entry);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(source.join(entry), &to).unwrap();
    }
    // 10 bytes of a 2 x 3 chunk of 13-byte records.
    std::fs::OpenOptions::new()
        .write(true)
        .open(copy.join("c/0/0"))
        .unwrap()
        .set_len(10)
        .unwrap();
    let location = copy.to_string_lossy().to_string();
    let ctx = new_session_context();
    ctx.register_table("t", Arc::new(ZarrTable::open(&location).await.unwrap()))
        .unwrap();
    let query_error = |query: &'static str| {
        let ctx = ctx.clone();
        async move {
            let result = ctx.sql(query).await.unwrap().collect().await;
            result.expect_err(query).to_string()
        }
    };
    let err = query_error("SELECT pressure FROM t WHERE time = 1 AND station = 1").await;
    assert!(
        err.contains("'c/0/0'") && err.contains(&location),
        "error names the chunk and the array: {err}"
    );
    // One byte too many in c/0/1: wrong even though the element read (its first) is intact.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(copy.join("c/0/1"))
        .unwrap();
    std::io::Write::write_all(&mut file, &[0]).unwrap();
    drop(file);
    for query in [
        "SELECT pressure FROM t WHERE time = 0 AND station = 3",
        "SELECT sum(pressure) FROM t WHERE station >= 3 AND station < 6",
    ] {
        let err = query_error(query).await;
        assert!(
            err.contains("'c/0/1'") && err.contains("holds 79 bytes, expected 78"),
            "{query}: {err}"
        );
    }
    // Chunk c/0/2 is not in the copy: its rows read as the fill value.
    let batches = ctx
        .sql("SELECT sum(pressure), count(*) FROM t WHERE time = 1 AND station = 7 - 1")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let text = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    assert!(text.contains("| 0.0 ") && text.contains("| 1 "), "{text}");
}

/// CRC-32C (Castagnoli, reflected), as the `crc32c` index codec writes it after a shard index.
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A shard whose index (checksum intact) puts an inner chunk at offset 2^64 - 2, one whose
/// index says a length of 2^62, and one cut short: errors naming the shard and its size,
/// never a panic, an overflow or an allocation of what the index claims. zarr-python wrote
/// the shards (4 inner chunks each, index at the end: 4 x (offset, length) + CRC-32C).
#[tokio::test]
async fn shard_indexes_pointing_outside_their_shard_are_errors() {
    let source = std::path::Path::new(V3).join("codec_sharded.zarr");
    let shard = std::fs::read(source.join("c/0/0")).unwrap();
    let index_at = shard.len() - 4 * 16 - 4;
    assert_eq!(
        crc32c(&shard[index_at..shard.len() - 4]).to_le_bytes(),
        shard[shard.len() - 4..],
        "the fixture's index is where the spec puts it"
    );
    let with_entry = |offset: u64, length: u64| {
        let mut bytes = shard.clone();
        bytes[index_at..index_at + 8].copy_from_slice(&offset.to_le_bytes());
        bytes[index_at + 8..index_at + 16].copy_from_slice(&length.to_le_bytes());
        let crc = crc32c(&bytes[index_at..shard.len() - 4]);
        let end = bytes.len();
        bytes[end - 4..].copy_from_slice(&crc.to_le_bytes());
        bytes
    };
    // Cut short: the inner chunks' bytes lose their last 20, the index stays whole.
    let mut cut = shard[..index_at - 20].to_vec();
    cut.extend_from_slice(&shard[index_at..]);
    let cut_size = cut.len();
    for (name, bytes, says) in [
        (
            "offset 2^64 - 2",
            with_entry(u64::MAX - 1, 16),
            format!("offset {} of length 16", u64::MAX - 1),
        ),
        (
            "length 2^62",
            with_entry(0, 1 << 62),
            format!("length {}", 1u64 << 62),
        ),
        (
            "cut short",
            cut,
            format!("(the shard holds {cut_size} bytes)"),
        ),
    ] {
        let (_dir, ctx) =
            fixture_with_object("tests/data/zarr_v3/codec_sharded.zarr", "c/0/0", &bytes).await;
        // A box inside the shard's first inner chunk (read in part) and the whole array.
        for query in [
            "SELECT pressure FROM t WHERE time = 0 AND station = 0",
            "SELECT sum(pressure) FROM t",
        ] {
            let result = ctx.sql(query).await.unwrap().collect().await;
            let err = result.expect_err(query).to_string();
            assert!(
                err.contains("'c/0/0'")
                    && err.contains("points past the end of the shard's")
                    && err.contains(&says),
                "{name}, {query}: {err}"
            );
        }
    }
}

/// A copy of the zarr-python fixture at `fixture` with the object `key` replaced by `bytes`,
/// registered as `t`.
async fn fixture_with_object(
    fixture: &str,
    key: &str,
    bytes: &[u8],
) -> (tempfile::TempDir, datafusion::prelude::SessionContext) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.zarr");
    copy_dir(std::path::Path::new(fixture), &copy);
    std::fs::write(copy.join(key), bytes).unwrap();
    let ctx = new_session_context();
    let table = ZarrTable::open(&copy.to_string_lossy()).await.unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    (dir, ctx)
}

/// The error a query ends in, as text.
async fn query_error(ctx: &datafusion::prelude::SessionContext, query: &str) -> String {
    let result = ctx.sql(query).await.unwrap().collect().await;
    result.expect_err(query).to_string()
}

/// The single Int64 a query answers.
async fn count(ctx: &datafusion::prelude::SessionContext, query: &str) -> i64 {
    let rows = ctx.sql(query).await.unwrap().collect().await.unwrap();
    rows[0]
        .column(0)
        .as_primitive::<arrow::datatypes::Int64Type>()
        .value(0)
}

/// Decompression bombs in a zstd chunk: a frame without a size in its header that inflates to
/// 64 MiB, one whose header claims 2^40 bytes, and a stored chunk larger than any codec makes
/// of the chunk's bytes. Each is an error naming the chunk and both sizes, whether the chunk
/// is read whole or only its front; the readable chunk beside it still reads.
#[tokio::test]
async fn zstd_bombs_are_errors_naming_the_chunk_and_both_sizes() {
    let source = std::path::Path::new(V3).join("struct_1d.zarr");
    let good = std::fs::read(source.join("c/0")).unwrap();
    let expected = zstd::zstd_safe::get_frame_content_size(&good)
        .unwrap()
        .expect("zarr-python writes the content size") as usize;
    let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    encoder.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut encoder, &vec![0u8; 64 << 20]).unwrap();
    let unsized_bomb = encoder.finish().unwrap();
    let mut claim = vec![0x28, 0xb5, 0x2f, 0xfd, 0xe0];
    claim.extend_from_slice(&(1u64 << 40).to_le_bytes());
    claim.extend_from_slice(&[1, 0, 0]);
    let oversized = vec![7u8; (2 << 20) + expected];
    for (name, chunk, says) in [
        (
            "unsized bomb",
            unsized_bomb,
            format!("more than the {expected} bytes expected"),
        ),
        (
            "claim",
            claim,
            format!("decompresses to 1099511627776 bytes, expected {expected}"),
        ),
        (
            "oversized",
            oversized,
            format!("holds {} bytes, more than the", (2 << 20) + expected),
        ),
    ] {
        let (_dir, ctx) =
            fixture_with_object("tests/data/zarr_v3/struct_1d.zarr", "c/0", &chunk).await;
        for query in ["SELECT sum(id) FROM t", "SELECT id FROM t WHERE dim_0 < 2"] {
            let result = ctx.sql(query).await.unwrap().collect().await;
            let err = result.expect_err(query).to_string();
            assert!(
                err.contains("'c/0'") && err.contains(&says),
                "{name}, {query}: {err}"
            );
        }
        assert_eq!(
            count(
                &ctx,
                "SELECT count(*) FROM t WHERE dim_0 >= 4 AND dim_0 < 8"
            )
            .await,
            4
        );
    }
}

/// Bombs in the other compressors ndfusion bounds itself: zarr-python's gzip (v3) and zlib (v2)
/// fixtures with one chunk replaced by a stream of 64 MiB of zeros (chunks of 2 x 3 records
/// of 13 bytes: 78 bytes expected), and its blosc fixture with a chunk whose header claims
/// 2^31 bytes. Errors name the chunk and both sizes; the other chunks still read.
#[tokio::test]
async fn gzip_zlib_and_blosc_bombs_are_errors_naming_the_chunk() {
    use std::io::Write;
    let zeros = vec![0u8; 64 << 20];
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gzip.write_all(&zeros).unwrap();
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    zlib.write_all(&zeros).unwrap();
    let blosc_source = std::path::Path::new(V3).join("codec_blosc.zarr/c/0/0");
    let mut blosc = std::fs::read(blosc_source).unwrap();
    blosc[4..8].copy_from_slice(&(1u32 << 31).to_le_bytes());
    for (fixture, key, chunk, says) in [
        (
            "tests/data/zarr_v3/codec_big_endian.zarr",
            "c/0/0",
            gzip.finish().unwrap(),
            "gzip stream inflates to more than the 78 bytes expected",
        ),
        (
            "tests/data/zarr_v2/codec_zlib.zarr",
            "0.0",
            zlib.finish().unwrap(),
            "zlib stream inflates to more than the 78 bytes expected",
        ),
        (
            "tests/data/zarr_v3/codec_blosc.zarr",
            "c/0/0",
            blosc,
            "blosc header claims 2147483648 bytes, expected 78",
        ),
    ] {
        let (_dir, ctx) = fixture_with_object(fixture, key, &chunk).await;
        let query = "SELECT sum(pressure) FROM t";
        let err = query_error(&ctx, query).await;
        assert!(
            err.contains(&format!("'{key}'")) && err.contains(says),
            "{fixture}: {err}"
        );
        assert_eq!(
            count(&ctx, "SELECT count(*) FROM t WHERE time >= 2").await,
            21
        );
    }
}

/// Bombs in every other chain the fixtures hold: bz2 (v2), zstd after `transpose` (v3) and
/// after the `shuffle` filter (v2), and zstd inside a shard's inner chunks (v3, every entry of
/// the shard's index pointing at one bomb), each 64 MiB of zeros where a chunk (or inner chunk)
/// of 2 x 3 records of 13 bytes is expected. Read whole or in part (the shard's first inner
/// chunk alone), each is an error naming the chunk and the size it should have had.
#[tokio::test]
async fn bombs_in_any_chain_and_inside_shards_are_errors() {
    use std::io::Write;
    use zarrs::array::codec::api::{BytesToBytesCodecTraits, CodecOptions};
    let zeros = vec![0u8; 64 << 20];
    let mut bz2 = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    bz2.write_all(&zeros).unwrap();
    let mut zstd = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    zstd.include_contentsize(false).unwrap();
    zstd.write_all(&zeros).unwrap();
    let zstd = zstd.finish().unwrap();
    // A 4 x 6 shard of four 2 x 3 inner chunks, all at the one bomb; the index ends in its
    // CRC-32C.
    let mut index = Vec::new();
    for _ in 0..4 {
        index.extend_from_slice(&0u64.to_le_bytes());
        index.extend_from_slice(&(zstd.len() as u64).to_le_bytes());
    }
    let index = zarrs::array::codec::Crc32cCodec::new()
        .encode(std::borrow::Cow::Owned(index), &CodecOptions::default())
        .unwrap();
    let shard = [zstd.as_slice(), &index].concat();
    for (fixture, key, chunk) in [
        (
            "tests/data/zarr_v2/codec_bz2.zarr",
            "0.0",
            bz2.finish().unwrap(),
        ),
        (
            "tests/data/zarr_v3/codec_transpose.zarr",
            "c/0/0",
            zstd.clone(),
        ),
        (
            "tests/data/zarr_v2/codec_shuffle_filter.zarr",
            "0.0",
            zstd.clone(),
        ),
        ("tests/data/zarr_v3/codec_sharded.zarr", "c/0/0", shard),
    ] {
        let (_dir, ctx) = fixture_with_object(fixture, key, &chunk).await;
        for query in [
            "SELECT sum(pressure) FROM t",
            "SELECT pressure FROM t WHERE time = 0 AND station = 0",
        ] {
            let err = query_error(&ctx, query).await;
            assert!(
                err.contains(&format!("'{key}'")) && err.contains("more than the 78 bytes"),
                "{fixture}, {query}: {err}"
            );
        }
        assert_eq!(
            count(&ctx, "SELECT count(*) FROM t WHERE time >= 4").await,
            7
        );
    }
}

/// A bomb in a string variable (vlen-utf8 + zstd, written by zarr-python 3.4.2), whose
/// metadata promises no decoded size: 100 MiB of zeros stop at the 64 MiB cap, an error
/// naming the variable's chunk; the other variables of the dataset still read.
#[tokio::test]
async fn a_bomb_in_a_string_variable_stops_at_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.zarr");
    copy_dir(
        std::path::Path::new("tests/data/archives/stations_fill_v3.zarr"),
        &copy,
    );
    let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
    encoder.include_contentsize(false).unwrap();
    std::io::copy(&mut std::io::repeat(0).take(100 << 20), &mut encoder).unwrap();
    std::fs::write(copy.join("status/c/0"), encoder.finish().unwrap()).unwrap();
    let ctx = new_session_context();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{}'",
        copy.display()
    ))
    .await
    .unwrap();
    let err = query_error(&ctx, "SELECT count(status) FROM t").await;
    assert!(
        err.contains("status") && err.contains("more than the 67108864 bytes expected"),
        "{err}"
    );
    // xarray's count of `temp` (tests/data/archives/expected.json).
    assert_eq!(count(&ctx, "SELECT count(temp) FROM t").await, 5);
}

pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
