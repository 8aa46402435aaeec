//! CF decoding of dataset variables, as xarray does it by default: values equal to
//! `_FillValue` or `missing_value` become NULL, `scale_factor` / `add_offset` are applied
//! (`mask_and_scale`), and numbers with `units: "<unit> since <date>"` become timestamps
//! (`decode_times`). Each part can be switched off with xarray's option names.
//!
//! Output types follow xarray's rules: with `scale_factor` or `add_offset` (JSON numbers, so
//! float64) the values are Float64; masked without them, float16/float32 and 8/16-bit integers
//! become Float32 and other integers Float64; times are nanosecond timestamps.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Datum, Float64Array, Int64Array};
use arrow::buffer::BooleanBuffer;
use arrow::compute::kernels::{cmp, numeric};
use arrow::compute::{cast, nullif};
use arrow::datatypes::{DataType, Float64Type, TimeUnit};
use chrono::{NaiveDate, NaiveDateTime};
use datafusion::common::ScalarValue;
use serde_json::{Map, Value};

/// Which parts of CF decoding run (xarray's `decode_times` and `mask_and_scale`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CfOptions {
    pub decode_times: bool,
    pub mask_and_scale: bool,
}

impl Default for CfOptions {
    fn default() -> Self {
        CfOptions {
            decode_times: true,
            mask_and_scale: true,
        }
    }
}

/// How one variable's stored values become the values a table shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CfDecoder {
    /// Stored values read as missing (NaN matches NaN).
    missing: Vec<f64>,
    scale: Option<f64>,
    offset: Option<f64>,
    /// The float type masking and scaling produce, when they run.
    float: Option<DataType>,
    time: Option<TimeEncoding>,
    output: DataType,
}

/// `<unit> since <date>`: value `v` is `epoch_ns + v * unit_ns` nanoseconds since 1970.
#[derive(Debug, Clone, Copy, PartialEq)]
struct TimeEncoding {
    unit_ns: i64,
    epoch_ns: i64,
}

impl CfDecoder {
    /// The decoder of a variable stored as `stored` with `attributes`; `Ok(None)` when
    /// nothing applies. `name` names the variable in errors.
    pub(crate) fn new(
        name: &str,
        stored: &DataType,
        attributes: &Map<String, Value>,
        options: CfOptions,
    ) -> Result<Option<Self>, String> {
        let numeric = stored.is_integer() || stored.is_floating();
        if !numeric {
            return Ok(None);
        }
        let mut missing = Vec::new();
        let (mut scale, mut offset) = (None, None);
        if options.mask_and_scale {
            for key in ["_FillValue", "missing_value"] {
                if let Some(value) = attributes.get(key) {
                    missing.extend(
                        fill_values(value, stored)
                            .map_err(|e| format!("variable '{name}': attribute {key}: {e}"))?,
                    );
                }
            }
            scale = number(attributes.get("scale_factor"))
                .map_err(|e| format!("variable '{name}': scale_factor: {e}"))?;
            offset = number(attributes.get("add_offset"))
                .map_err(|e| format!("variable '{name}': add_offset: {e}"))?;
        }
        let float = if scale.is_some() || offset.is_some() {
            Some(DataType::Float64)
        } else if !missing.is_empty() {
            Some(match stored {
                DataType::Float16 | DataType::Float32 => DataType::Float32,
                t if t.is_integer() && t.primitive_width() <= Some(2) => DataType::Float32,
                _ => DataType::Float64,
            })
        } else {
            None
        };
        let time = match attributes.get("units").and_then(Value::as_str) {
            Some(units) if options.decode_times && units.contains(" since ") => {
                let calendar = attributes
                    .get("calendar")
                    .and_then(Value::as_str)
                    .unwrap_or("standard");
                if !matches!(
                    calendar.to_ascii_lowercase().as_str(),
                    "standard" | "gregorian" | "proleptic_gregorian"
                ) {
                    return Err(format!(
                        "variable '{name}': calendar '{calendar}' cannot be decoded to timestamps \
                         (only standard, gregorian and proleptic_gregorian); \
                         OPTIONS ('decode_times' 'false') reads the stored numbers"
                    ));
                }
                Some(
                    parse_time_units(units)
                        .map_err(|e| format!("variable '{name}': units '{units}': {e}"))?,
                )
            }
            _ => None,
        };
        if float.is_none() && time.is_none() {
            return Ok(None);
        }
        let output = if time.is_some() {
            DataType::Timestamp(TimeUnit::Nanosecond, None)
        } else {
            float.clone().unwrap_or_else(|| stored.clone())
        };
        Ok(Some(CfDecoder {
            missing,
            scale,
            offset,
            float,
            time,
            output,
        }))
    }

    /// The type of decoded values.
    pub(crate) fn output_type(&self) -> &DataType {
        &self.output
    }

    /// Decodes stored values.
    pub(crate) fn decode(&self, stored: &ArrayRef) -> Result<ArrayRef, String> {
        let error = |e: arrow::error::ArrowError| e.to_string();
        let missing = self.missing_mask(stored)?;
        let mut values = match &self.float {
            Some(float) if self.scale.is_some() || self.offset.is_some() => {
                let mut v = cast(stored, &DataType::Float64).map_err(error)?;
                if let Some(scale) = self.scale {
                    v = numeric::mul(&v, &Float64Array::new_scalar(scale)).map_err(error)?;
                }
                if let Some(offset) = self.offset {
                    v = numeric::add(&v, &Float64Array::new_scalar(offset)).map_err(error)?;
                }
                cast(&v, float).map_err(error)?
            }
            // Masking alone: one cast, none when the stored type is already the float type.
            Some(float) if float != stored.data_type() => cast(stored, float).map_err(error)?,
            _ => Arc::clone(stored),
        };
        if let Some(missing) = &missing {
            values = nullif(&values, missing).map_err(error)?;
        }
        match self.time {
            Some(time) => time.decode(&values),
            None => Ok(values),
        }
    }

    /// True where the stored value is one of the missing values, compared in the stored type
    /// (a missing value the type cannot hold matches nothing).
    fn missing_mask(&self, stored: &ArrayRef) -> Result<Option<BooleanArray>, String> {
        let mut mask: Option<BooleanBuffer> = None;
        for &m in &self.missing {
            let hits = if m.is_nan() {
                match nan_mask(stored) {
                    Some(hits) => hits,
                    None => continue,
                }
            } else {
                let as_stored = ScalarValue::Float64(Some(m))
                    .cast_to(stored.data_type())
                    .ok()
                    .filter(|v| {
                        v.cast_to(&DataType::Float64).ok() == Some(ScalarValue::Float64(Some(m)))
                    });
                let Some(as_stored) = as_stored else {
                    continue;
                };
                let scalar = as_stored.to_scalar().map_err(|e| e.to_string())?;
                cmp::eq(stored, &scalar as &dyn Datum).map_err(|e| e.to_string())?
            };
            let hits = match hits.nulls() {
                Some(nulls) => hits.values() & nulls.inner(),
                None => hits.values().clone(),
            };
            mask = Some(match mask {
                Some(m) => &m | &hits,
                None => hits,
            });
        }
        Ok(mask.map(|m| BooleanArray::new(m, None)))
    }
}

/// Where a float column is NaN; `None` for other types.
fn nan_mask(values: &ArrayRef) -> Option<BooleanArray> {
    use arrow::datatypes::{Float16Type, Float32Type};
    Some(match values.data_type() {
        DataType::Float16 => {
            BooleanArray::from_unary(values.as_primitive::<Float16Type>(), |x| x.is_nan())
        }
        DataType::Float32 => {
            BooleanArray::from_unary(values.as_primitive::<Float32Type>(), f32::is_nan)
        }
        DataType::Float64 => {
            BooleanArray::from_unary(values.as_primitive::<Float64Type>(), f64::is_nan)
        }
        _ => return None,
    })
}

impl TimeEncoding {
    fn decode(&self, values: &ArrayRef) -> Result<ArrayRef, String> {
        let out_of_range = || {
            "a time is out of the range of nanosecond timestamps (1677-09-21 to 2262-04-11)"
                .to_string()
        };
        let nanos: Int64Array = if values.data_type().is_integer() {
            let v = cast(values, &DataType::Int64).map_err(|e| e.to_string())?;
            let scaled = numeric::mul(&v, &Int64Array::new_scalar(self.unit_ns))
                .map_err(|_| out_of_range())?;
            let shifted = numeric::add(&scaled, &Int64Array::new_scalar(self.epoch_ns))
                .map_err(|_| out_of_range())?;
            shifted.as_primitive().clone()
        } else {
            let v = cast(values, &DataType::Float64).map_err(|e| e.to_string())?;
            let v = v.as_primitive::<Float64Type>();
            let (unit, epoch) = (self.unit_ns as f64, self.epoch_ns as f64);
            let mut out = Vec::with_capacity(v.len());
            for x in v.values() {
                let ns = (x * unit + epoch).round();
                out.push(if ns.is_finite() && ns.abs() < 9.2e18 {
                    ns as i64
                } else {
                    0
                });
            }
            let finite = v
                .iter()
                .all(|x| x.is_none_or(|x| (x * unit + epoch).abs() < 9.2e18));
            if !finite {
                return Err(out_of_range());
            }
            Int64Array::new(out.into(), v.nulls().cloned())
        };
        cast(
            &(Arc::new(nanos) as ArrayRef),
            &DataType::Timestamp(TimeUnit::Nanosecond, None),
        )
        .map_err(|e| e.to_string())
    }
}

/// The missing values an attribute holds: a number, `"NaN"` / `"Infinity"`, base64 of the
/// value's bytes (xarray writes float fill values so), or a list of them.
fn fill_values(value: &Value, stored: &DataType) -> Result<Vec<f64>, String> {
    match value {
        Value::Null => Ok(vec![]),
        Value::Array(items) => items.iter().map(|v| fill_value(v, stored)).collect(),
        single => Ok(vec![fill_value(single, stored)?]),
    }
}

fn fill_value(value: &Value, stored: &DataType) -> Result<f64, String> {
    match value {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("{n} is not a number")),
        Value::String(s) => match s.as_str() {
            "NaN" | "nan" => Ok(f64::NAN),
            "Infinity" | "inf" => Ok(f64::INFINITY),
            "-Infinity" | "-inf" => Ok(f64::NEG_INFINITY),
            b64 => {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| format!("'{s}' is neither a number nor base64: {e}"))?;
                from_bytes(&bytes, stored).ok_or_else(|| {
                    format!("{} bytes of base64 are not a {stored} value", bytes.len())
                })
            }
        },
        other => Err(format!("{other} is not a number")),
    }
}

/// A little-endian value of `bytes.len()` bytes: floats by width, integers as `stored` is
/// signed or not.
fn from_bytes(bytes: &[u8], stored: &DataType) -> Option<f64> {
    let signed = !matches!(
        stored,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64
    );
    Some(match (bytes.len(), stored.is_floating()) {
        (8, true) => f64::from_le_bytes(bytes.try_into().ok()?),
        (4, true) => f32::from_le_bytes(bytes.try_into().ok()?) as f64,
        (8, false) if signed => i64::from_le_bytes(bytes.try_into().ok()?) as f64,
        (8, false) => u64::from_le_bytes(bytes.try_into().ok()?) as f64,
        (4, false) if signed => i32::from_le_bytes(bytes.try_into().ok()?) as f64,
        (4, false) => u32::from_le_bytes(bytes.try_into().ok()?) as f64,
        (2, false) if signed => i16::from_le_bytes(bytes.try_into().ok()?) as f64,
        (2, false) => u16::from_le_bytes(bytes.try_into().ok()?) as f64,
        (1, false) if signed => i8::from_le_bytes(bytes.try_into().ok()?) as f64,
        (1, false) => bytes[0] as f64,
        _ => return None,
    })
}

fn number(value: Option<&Value>) -> Result<Option<f64>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(format!("{other} is not a number")),
    }
}

/// `"<unit> since <date>"`.
fn parse_time_units(units: &str) -> Result<TimeEncoding, String> {
    let (unit, date) = units
        .split_once(" since ")
        .ok_or("expected '<unit> since <date>'")?;
    let unit_ns = match unit.trim().to_ascii_lowercase().as_str() {
        "days" | "day" | "d" => 86_400_000_000_000,
        "hours" | "hour" | "hr" | "h" => 3_600_000_000_000,
        "minutes" | "minute" | "min" => 60_000_000_000,
        "seconds" | "second" | "sec" | "s" => 1_000_000_000,
        "milliseconds" | "millisecond" | "msec" | "ms" => 1_000_000,
        "microseconds" | "microsecond" | "usec" | "us" => 1_000,
        "nanoseconds" | "nanosecond" | "nsec" | "ns" => 1,
        other => return Err(format!("unknown time unit '{other}'")),
    };
    let epoch = parse_reference_date(date.trim())?;
    let epoch_ns = epoch
        .and_utc()
        .timestamp_nanos_opt()
        .ok_or("the reference date is out of the range of nanosecond timestamps")?;
    Ok(TimeEncoding { unit_ns, epoch_ns })
}

/// `2001-03-01`, `2001-03-01 00:00:00`, `2001-03-01T00:00:00.5`, with an optional `Z`, `UTC`
/// or `+hh:mm` offset (converted to UTC).
fn parse_reference_date(text: &str) -> Result<NaiveDateTime, String> {
    let mut text = text.replace('T', " ");
    let mut offset_seconds = 0i64;
    for suffix in [" UTC", "Z", " utc"] {
        if let Some(rest) = text.strip_suffix(suffix) {
            text = rest.trim().to_string();
        }
    }
    // A numeric offset after the time: `+05:30`, `-0800`.
    if let Some(pos) = text.rfind(['+', '-']).filter(|&p| p > 10) {
        let (date, offset) = text.split_at(pos);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let digits: String = offset[1..].chars().filter(char::is_ascii_digit).collect();
        let (h, m) = match digits.len() {
            1 | 2 => (digits.parse::<i64>().ok(), Some(0)),
            4 => (digits[..2].parse().ok(), digits[2..].parse().ok()),
            _ => (None, None),
        };
        let (Some(h), Some(m)) = (h, m) else {
            return Err(format!("cannot read the offset '{offset}'"));
        };
        offset_seconds = sign * (h * 3600 + m * 60);
        text = date.trim().to_string();
    }
    let parsed = [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(&text, f).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(&text, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    })
    .ok_or_else(|| format!("cannot read the reference date '{text}'"))?;
    Ok(parsed - chrono::Duration::seconds(offset_seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Int16Array};
    use serde_json::json;

    fn attrs(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn packed_integers_are_masked_and_scaled_to_float64() {
        let a = attrs(json!({"scale_factor": 0.01, "add_offset": 30.0, "_FillValue": -32768}));
        let d = CfDecoder::new("sal", &DataType::Int16, &a, CfOptions::default())
            .unwrap()
            .unwrap();
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
        assert!(CfDecoder::new("sal", &DataType::Int16, &a, off)
            .unwrap()
            .is_none());
    }

    #[test]
    fn nan_fill_values_in_base64_mask_nan() {
        let a = attrs(json!({"_FillValue": "AAAAAAAA+H8="}));
        let d = CfDecoder::new("t", &DataType::Float32, &a, CfOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(d.output_type(), &DataType::Float32);
        let stored: ArrayRef = Arc::new(Float32Array::from(vec![1.5, f32::NAN]));
        let out = d.decode(&stored).unwrap();
        assert!(out.is_valid(0) && out.is_null(1));
        // Masked small integers become float32, larger ones float64.
        let a = attrs(json!({"_FillValue": 255}));
        let d = CfDecoder::new("q", &DataType::UInt8, &a, CfOptions::default()).unwrap();
        assert_eq!(d.unwrap().output_type(), &DataType::Float32);
        let d = CfDecoder::new("q", &DataType::Int32, &a, CfOptions::default()).unwrap();
        assert_eq!(d.unwrap().output_type(), &DataType::Float64);
    }

    #[test]
    fn times_since_a_date_become_nanosecond_timestamps() {
        let a = attrs(json!({"units": "days since 2001-03-01", "calendar": "proleptic_gregorian"}));
        let d = CfDecoder::new("time", &DataType::Int64, &a, CfOptions::default())
            .unwrap()
            .unwrap();
        let stored: ArrayRef = Arc::new(Int64Array::from(vec![0, 10]));
        let out = d.decode(&stored).unwrap();
        let out = cast(&out, &DataType::Int64).unwrap();
        let out = out.as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(out.value(0), 983_404_800_000_000_000); // 2001-03-01T00:00:00Z
        assert_eq!(
            out.value(1),
            983_404_800_000_000_000 + 10 * 86_400_000_000_000
        );
        for (units, epoch) in [
            ("hours since 1970-01-01T00:00:00Z", 0),
            ("seconds since 1970-01-01 01:00:00+01:00", 0),
            ("minutes since 1970-1-2", 86_400_000_000_000),
        ] {
            assert_eq!(parse_time_units(units).unwrap().epoch_ns, epoch, "{units}");
        }
        let noleap = attrs(json!({"units": "days since 2000-01-01", "calendar": "noleap"}));
        let err =
            CfDecoder::new("time", &DataType::Int64, &noleap, CfOptions::default()).unwrap_err();
        assert!(err.contains("variable 'time': calendar 'noleap'"), "{err}");
        assert!(err.contains("'decode_times' 'false'"), "{err}");
        let off = CfOptions {
            decode_times: false,
            ..CfOptions::default()
        };
        assert!(CfDecoder::new("time", &DataType::Int64, &noleap, off)
            .unwrap()
            .is_none());
        let huge = Arc::new(Int64Array::from(vec![i64::MAX / 2])) as ArrayRef;
        assert!(d.decode(&huge).is_err());
    }
}
