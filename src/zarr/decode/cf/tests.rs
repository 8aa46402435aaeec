use super::*;
use arrow::array::{AsArray, Float32Array, Int16Array, Int64Array, Int8Array, StringArray};
use arrow::datatypes::{Float32Type, Float64Type, UInt64Type};
use serde_json::json;

fn attrs(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn decoder(stored: &DataType, a: Value) -> CfDecoder {
    CfDecoder::new("v", stored, &attrs(a), CfOptions::default())
        .unwrap()
        .unwrap()
}

fn nanos(out: &ArrayRef) -> Vec<Option<i64>> {
    let out = cast(out, &DataType::Int64).unwrap();
    out.as_primitive::<Int64Type>().iter().collect()
}

#[test]
fn packed_integers_are_masked_and_scaled_to_float64() {
    let a = json!({"scale_factor": 0.01, "add_offset": 30.0, "_FillValue": -32768});
    let d = decoder(&DataType::Int16, a.clone());
    assert_eq!(d.output_type(), &DataType::Float64);
    let stored: ArrayRef = Arc::new(Int16Array::from(vec![100, -32768, 0]));
    let out = d.decode(&stored).unwrap();
    let out = out.as_primitive::<Float64Type>();
    assert_eq!(out.value(0), 100.0 * 0.01 + 30.0);
    assert!(out.is_null(1));
    assert_eq!(out.value(2), 30.0);
    let off = CfOptions {
        mask_and_scale: false,
        ..CfOptions::default()
    };
    assert!(CfDecoder::new("sal", &DataType::Int16, &attrs(a), off)
        .unwrap()
        .is_none());
}

#[test]
fn nan_fill_values_in_base64_mask_nan() {
    let d = decoder(&DataType::Float32, json!({"_FillValue": "AAAAAAAA+H8="}));
    assert_eq!(d.output_type(), &DataType::Float32);
    let stored: ArrayRef = Arc::new(Float32Array::from(vec![1.5, f32::NAN]));
    let out = d.decode(&stored).unwrap();
    assert!(out.is_valid(0) && out.is_null(1));
    // Masked small integers become float32, larger ones float64.
    let d = decoder(&DataType::UInt8, json!({"_FillValue": 255}));
    assert_eq!(d.output_type(), &DataType::Float32);
    let d = decoder(&DataType::Int32, json!({"_FillValue": 255}));
    assert_eq!(d.output_type(), &DataType::Float64);
}

#[test]
fn unsigned_reinterprets_the_stored_integers_and_their_fill_value() {
    // int8 -1 is the fill (255 unsigned); -128 reads 128.
    let d = decoder(
        &DataType::Int8,
        json!({"_Unsigned": "true", "_FillValue": -1}),
    );
    assert_eq!(d.output_type(), &DataType::Float32);
    let stored: ArrayRef = Arc::new(Int8Array::from(vec![-1, 5, -128, 127]));
    let out = d.decode(&stored).unwrap();
    let out: Vec<Option<f32>> = out.as_primitive::<Float32Type>().iter().collect();
    assert_eq!(out, vec![None, Some(5.0), Some(128.0), Some(127.0)]);
    // Scaled: unsigned before scale and offset.
    let a = json!({"_Unsigned": "true", "scale_factor": 0.5, "add_offset": 1.0});
    let d = decoder(&DataType::Int16, a);
    let stored: ArrayRef = Arc::new(Int16Array::from(vec![-1, 100]));
    let out = d.decode(&stored).unwrap();
    let out: Vec<Option<f64>> = out.as_primitive::<Float64Type>().iter().collect();
    assert_eq!(out, vec![Some(65535.0 * 0.5 + 1.0), Some(51.0)]);
    // Alone: the unsigned type itself.
    let d = decoder(&DataType::Int64, json!({"_Unsigned": "true"}));
    assert_eq!(d.output_type(), &DataType::UInt64);
    let stored: ArrayRef = Arc::new(Int64Array::from(vec![-2]));
    let out = d.decode(&stored).unwrap();
    assert_eq!(out.as_primitive::<UInt64Type>().value(0), u64::MAX - 1);
    // "false" on unsigned integers: signed values, the fill by value; a fill the signed type
    // cannot hold is an error naming the variable.
    let d = decoder(
        &DataType::UInt16,
        json!({"_Unsigned": "false", "_FillValue": 100}),
    );
    assert_eq!(d.output_type(), &DataType::Float32);
    let a = attrs(json!({"_Unsigned": "false", "_FillValue": 65534}));
    let err = CfDecoder::new("anomaly", &DataType::UInt16, &a, CfOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("variable 'anomaly': _FillValue"), "{err}");
    // Not an integer: ignored, as xarray does.
    assert!(CfDecoder::new(
        "f",
        &DataType::Float32,
        &attrs(json!({"_Unsigned": "true"})),
        CfOptions::default()
    )
    .unwrap()
    .is_none());
}

#[test]
fn missing_value_lists_and_text_fill_values() {
    let d = decoder(&DataType::Int32, json!({"missing_value": [-999, -998]}));
    let stored: ArrayRef = Arc::new(arrow::array::Int32Array::from(vec![1, -999, -998, 4]));
    let out = d.decode(&stored).unwrap();
    assert_eq!(out.null_count(), 2);
    let d = decoder(&DataType::Utf8, json!({"_FillValue": "n/a"}));
    assert_eq!(d.output_type(), &DataType::Utf8);
    let stored: ArrayRef = Arc::new(StringArray::from(vec!["ok", "n/a"]));
    assert_eq!(d.decode(&stored).unwrap().null_count(), 1);
}

#[test]
fn times_since_a_date_become_nanosecond_timestamps() {
    let d = decoder(
        &DataType::Int64,
        json!({"units": "days since 2001-03-01", "calendar": "proleptic_gregorian"}),
    );
    let stored: ArrayRef = Arc::new(Int64Array::from(vec![0, 10]));
    let start = 983_404_800_000_000_000; // 2001-03-01T00:00:00Z
    assert_eq!(
        nanos(&d.decode(&stored).unwrap()),
        vec![Some(start), Some(start + 10 * 86_400_000_000_000)]
    );
    let huge = Arc::new(Int64Array::from(vec![i64::MAX / 2])) as ArrayRef;
    assert!(d.decode(&huge).is_err());
    // Floats: truncated nanoseconds, NaN as NULL.
    let d = decoder(
        &DataType::Float64,
        json!({"units": "days since 1970-01-01"}),
    );
    let stored: ArrayRef = Arc::new(Float64Array::from(vec![0.25, f64::NAN]));
    assert_eq!(
        nanos(&d.decode(&stored).unwrap()),
        vec![Some(21_600_000_000_000), None]
    );
    // Masked integer times stay exact (no float on the way).
    let d = decoder(
        &DataType::Int64,
        json!({"units": "nanoseconds since 1970-01-01", "_FillValue": -1}),
    );
    let stored: ArrayRef = Arc::new(Int64Array::from(vec![1_700_000_000_000_000_001, -1]));
    assert_eq!(
        nanos(&d.decode(&stored).unwrap()),
        vec![Some(1_700_000_000_000_000_001), None]
    );
    let off = CfOptions {
        decode_times: false,
        ..CfOptions::default()
    };
    let a = attrs(json!({"units": "days since 2000-01-01", "calendar": "noleap"}));
    assert!(CfDecoder::new("time", &DataType::Int64, &a, off)
        .unwrap()
        .is_none());
}

#[test]
fn non_standard_calendars_decode_to_their_labels() {
    let day = 86_400_000_000_000i64;
    let d = decoder(
        &DataType::Int64,
        json!({"units": "days since 2000-01-01", "calendar": "noleap"}),
    );
    // 2000-03-01 in noleap is 59 days after 2000-01-01 (60 in Gregorian).
    let stored: ArrayRef = Arc::new(Int64Array::from(vec![0, 59, 365]));
    let y2000 = 946_684_800_000_000_000;
    assert_eq!(
        nanos(&d.decode(&stored).unwrap()),
        vec![Some(y2000), Some(y2000 + 60 * day), Some(y2000 + 366 * day)]
    );
    // A 360_day label that is no Gregorian date: an error naming the variable and the label.
    let d = decoder(
        &DataType::Int64,
        json!({"units": "days since 2000-01-01", "calendar": "360_day"}),
    );
    let stored: ArrayRef = Arc::new(Int64Array::from(vec![0, 59]));
    let err = d.decode(&stored).unwrap_err().to_string();
    assert!(err.contains("variable 'v'"), "{err}");
    assert!(err.contains("360_day label 2000-02-30"), "{err}");
    assert!(err.contains("'decode_times' 'false'"), "{err}");
    let a = attrs(json!({"units": "days since 2000-01-01", "calendar": "lunar"}));
    let err = CfDecoder::new("time", &DataType::Int64, &a, CfOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("calendar 'lunar'"), "{err}");
    let a = attrs(json!({"units": "days since 2001-02-29", "calendar": "julian"}));
    assert!(CfDecoder::new("time", &DataType::Int64, &a, CfOptions::default()).is_err());
}

#[test]
fn integer_fill_values_are_compared_as_integers() {
    // As f64, 2^53 + 1 equals 2^53; u64::MAX - 1 and i64::MIN + 2 round away.
    let d = decoder(&DataType::Int64, json!({"_FillValue": 9007199254740993i64}));
    let stored: ArrayRef = Arc::new(Int64Array::from(vec![9007199254740992, 9007199254740993]));
    let out = d.decode(&stored).unwrap();
    assert!(out.is_valid(0) && out.is_null(1));
    let d = decoder(
        &DataType::UInt64,
        json!({"_FillValue": 18446744073709551614u64}),
    );
    let stored: ArrayRef = Arc::new(arrow::array::UInt64Array::from(vec![
        18446744073709551614u64,
        18446744073709551615,
    ]));
    let out = d.decode(&stored).unwrap();
    assert!(out.is_null(0) && out.is_valid(1));
    let d = decoder(
        &DataType::Int64,
        json!({"_FillValue": -9223372036854775806i64}),
    );
    let stored: ArrayRef = Arc::new(Int64Array::from(vec![i64::MIN, -9223372036854775806]));
    let out = d.decode(&stored).unwrap();
    assert!(out.is_valid(0) && out.is_null(1));
}
