//! CF decoding of dataset variables, as xarray 2026.9 does it by default:
//!
//! 1. `_Unsigned` (`"true"` on signed integers, `"false"` on unsigned ones) reinterprets the
//!    stored integers, and the `_FillValue` with them;
//! 2. values equal to `_FillValue` or `missing_value` (a number or a list) become NULL, for
//!    numbers, bytes and strings alike (`mask_and_scale`);
//! 3. `scale_factor` / `add_offset` apply (`mask_and_scale`);
//! 4. numbers with `units: "<unit> since <date>"` become nanosecond Timestamps, in any of the
//!    CF calendars (`decode_times`).
//!
//! `valid_min` / `valid_max` / `valid_range` are not applied (xarray does not by default).
//! Output types follow xarray's rules: with `scale_factor` or `add_offset` the values are
//! Float64 (JSON numbers are float64), or Float32 for float32 ones of a netCDF file
//! ([`ATTRIBUTE_TYPES`]); masked without them, floats keep their type, 8/16-bit
//! integers become Float32 and other integers Float64; masked times stay integers until they
//! are Timestamps; bytes and strings keep their type.

mod calendar;
mod error;
mod missing;
mod time;
mod time_units;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Float32Array, Float64Array, PrimitiveArray};
use arrow::compute::kernels::numeric;
use arrow::compute::{cast, nullif};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Int16Type, Int32Type, Int64Type, Int8Type, TimeUnit, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use datafusion::common::ScalarValue;
use serde_json::{Map, Value};

use self::calendar::Calendar;
pub(crate) use self::error::CfError;
use self::missing::{attribute_values, exactly_as, missing_mask};
use self::time::TimeDecoder;
use self::time_units::{is_time_units, parse_time_units};

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
    name: String,
    /// `_Unsigned`: the integer type the stored bits are read as.
    view: Option<DataType>,
    /// Values read as missing, each of the (viewed) stored type; NaN matches NaN.
    missing: Vec<ScalarValue>,
    scale: Option<f64>,
    offset: Option<f64>,
    /// The float type masking and scaling produce, when they produce one.
    float: Option<DataType>,
    time: Option<TimeDecoder>,
    output: DataType,
}

impl CfDecoder {
    /// The decoder of a variable stored as `stored` with `attributes`; `Ok(None)` when
    /// nothing applies. `name` names the variable in errors.
    pub(crate) fn new(
        name: &str,
        stored: &DataType,
        attributes: &Map<String, Value>,
        options: CfOptions,
    ) -> Result<Option<Self>, CfError> {
        let numeric = stored.is_integer() || stored.is_floating();
        let text = matches!(stored, DataType::Utf8 | DataType::Binary);
        if !numeric && !text {
            return Ok(None);
        }
        let error = |what: &str, e: CfError| e.in_attribute(name, what);
        let mut view = None;
        let mut missing = Vec::new();
        let (mut scale, mut offset) = (None, None);
        if options.mask_and_scale {
            let unsigned = attributes.get("_Unsigned").and_then(Value::as_str);
            view = unsigned.and_then(|u| unsigned_view(stored, u));
            let compared = view.as_ref().unwrap_or(stored);
            for key in ["missing_value", "_FillValue"] {
                let Some(value) = attributes.get(key) else {
                    continue;
                };
                for v in attribute_values(value, stored).map_err(|e| error(key, e))? {
                    let as_compared = match (&view, key) {
                        // xarray converts the _FillValue with the data: bit for bit from the
                        // signed type, by value into the signed type; missing_value as it is.
                        (Some(to), "_FillValue") if to.is_unsigned_integer() => {
                            exactly_as(&v, stored).and_then(|raw| reinterpret(&raw, to))
                        }
                        (Some(to), "_FillValue") => Some(exactly_as(&v, to).ok_or_else(|| {
                            error(
                                key,
                                format!("{v} is not a {to} value (_Unsigned false)").into(),
                            )
                        })?),
                        _ => exactly_as(&v, compared),
                    };
                    missing.extend(as_compared);
                }
            }
            if numeric {
                scale =
                    number(attributes.get("scale_factor")).map_err(|e| error("scale_factor", e))?;
                offset =
                    number(attributes.get("add_offset")).map_err(|e| error("add_offset", e))?;
            }
        }
        let compared = view.clone().unwrap_or_else(|| stored.clone());
        let time = match attributes.get("units").and_then(Value::as_str) {
            Some(units) if numeric && options.decode_times && is_time_units(units) => {
                let calendar_name = attributes
                    .get("calendar")
                    .and_then(Value::as_str)
                    .unwrap_or("standard");
                let calendar =
                    Calendar::from_name(calendar_name).ok_or_else(|| CfError::Calendar {
                        variable: name.to_string(),
                        calendar: calendar_name.to_string(),
                    })?;
                let parsed = parse_time_units(units).map_err(|e| e.in_units(name, units))?;
                Some(
                    TimeDecoder::new(parsed, calendar, name)
                        .map_err(|e| e.in_units(name, units))?,
                )
            }
            _ => None,
        };
        let float = if scale.is_some() || offset.is_some() {
            let types = attributes.get(ATTRIBUTE_TYPES).and_then(Value::as_object);
            let type_of = |key: &str| {
                let given = types.and_then(|t| t.get(key)).and_then(Value::as_str);
                given.unwrap_or("float64").to_string()
            };
            Some(packed_float(
                &compared,
                scale.map(|_| type_of("scale_factor")).as_deref(),
                offset.map(|_| type_of("add_offset")).as_deref(),
            ))
        } else if !missing.is_empty() && numeric && time.is_none() {
            Some(match &compared {
                t if t.is_floating() => t.clone(),
                t if t.primitive_width() <= Some(2) => DataType::Float32,
                _ => DataType::Float64,
            })
        } else {
            None
        };
        if view.is_none() && missing.is_empty() && float.is_none() && time.is_none() {
            return Ok(None);
        }
        let output = if time.is_some() {
            DataType::Timestamp(TimeUnit::Nanosecond, None)
        } else {
            float.clone().unwrap_or_else(|| compared.clone())
        };
        Ok(Some(CfDecoder {
            name: name.to_string(),
            view,
            missing,
            scale,
            offset,
            float,
            time,
            output,
        }))
    }

    /// Whether decoding may make a NULL: a missing value masked, or a time (NaT).
    pub(crate) fn may_make_null(&self) -> bool {
        !self.missing.is_empty() || self.time.is_some()
    }

    /// The type of decoded values.
    pub(crate) fn output_type(&self) -> &DataType {
        &self.output
    }

    /// Decodes stored values.
    pub(crate) fn decode(&self, stored: &ArrayRef) -> Result<ArrayRef, CfError> {
        let error = CfError::from;
        let stored = match &self.view {
            Some(to) => reinterpret_array(stored, to)?,
            None => Arc::clone(stored),
        };
        let missing = missing_mask(&stored, &self.missing)?;
        let mut values = match &self.float {
            // In float32 when xarray unpacks in float32 (float32 scale_factor / add_offset of
            // a netCDF file), so each product rounds as numpy's does.
            Some(DataType::Float32) if self.scale.is_some() || self.offset.is_some() => {
                let mut v = cast(&stored, &DataType::Float32).map_err(error)?;
                if let Some(scale) = self.scale {
                    v = numeric::mul(&v, &Float32Array::new_scalar(scale as f32)).map_err(error)?;
                }
                if let Some(offset) = self.offset {
                    v = numeric::add(&v, &Float32Array::new_scalar(offset as f32))
                        .map_err(error)?;
                }
                v
            }
            Some(float) if self.scale.is_some() || self.offset.is_some() => {
                let mut v = cast(&stored, &DataType::Float64).map_err(error)?;
                if let Some(scale) = self.scale {
                    v = numeric::mul(&v, &Float64Array::new_scalar(scale)).map_err(error)?;
                }
                if let Some(offset) = self.offset {
                    v = numeric::add(&v, &Float64Array::new_scalar(offset)).map_err(error)?;
                }
                cast(&v, float).map_err(error)?
            }
            // Masking alone: one cast, none when the stored type is already the float type.
            Some(float) if float != stored.data_type() => cast(&stored, float).map_err(error)?,
            _ => stored,
        };
        if let Some(missing) = &missing {
            values = nullif(&values, missing).map_err(error)?;
        }
        match &self.time {
            Some(time) => time.decode(&values, &self.name),
            None => Ok(values),
        }
    }
}

/// A variable attribute naming the numpy types of its `scale_factor` and `add_offset`
/// (`{"scale_factor": "float32"}`), which JSON does not keep: a netCDF file's are typed, and
/// xarray unpacks in their type. Without it they are float64, as xarray reads JSON numbers.
pub(crate) const ATTRIBUTE_TYPES: &str = "_ndfusion_attribute_types";

/// The float type xarray unpacks `stored` values into (`_choose_float_dtype`): the type of
/// `scale_factor` and `add_offset` when both are given, equal and float32 or float64 (but
/// float64 for 32-bit integers); float64 with an `add_offset` otherwise; the type of a lone
/// `scale_factor` (float64 for integer ones, where xarray would keep integers).
fn packed_float(stored: &DataType, scale: Option<&str>, offset: Option<&str>) -> DataType {
    let float = |name: &str| match name {
        "float32" => DataType::Float32,
        _ => DataType::Float64,
    };
    match (scale, offset) {
        (Some(s), Some(o)) if s == o && matches!(s, "float32" | "float64") => {
            if stored.is_integer() && stored.primitive_width() == Some(4) {
                DataType::Float64
            } else {
                float(s)
            }
        }
        (_, Some(_)) => DataType::Float64,
        (Some(s), None) => float(s),
        (None, None) => DataType::Float64,
    }
}

/// The type `_Unsigned` = `unsigned` makes of `stored`: the unsigned type of its width for
/// `"true"` on signed integers, the signed one for `"false"` on unsigned integers; `None`
/// otherwise (xarray ignores it there).
fn unsigned_view(stored: &DataType, unsigned: &str) -> Option<DataType> {
    use DataType::*;
    Some(match (unsigned, stored) {
        ("true", Int8) => UInt8,
        ("true", Int16) => UInt16,
        ("true", Int32) => UInt32,
        ("true", Int64) => UInt64,
        ("false", UInt8) => Int8,
        ("false", UInt16) => Int16,
        ("false", UInt32) => Int32,
        ("false", UInt64) => Int64,
        _ => return None,
    })
}

/// The same bits as an integer of type `to` (of the same width).
fn reinterpret_array(values: &ArrayRef, to: &DataType) -> Result<ArrayRef, CfError> {
    fn bits<T: ArrowPrimitiveType>(values: &ArrayRef) -> Result<ArrayRef, CfError> {
        let data = values.to_data().into_builder().data_type(T::DATA_TYPE);
        let data = data.build()?;
        Ok(Arc::new(PrimitiveArray::<T>::from(data)))
    }
    if values.data_type().primitive_width() != to.primitive_width() {
        return Err(CfError::Rule(format!(
            "cannot view {} as {to}",
            values.data_type()
        )));
    }
    match to {
        DataType::UInt8 => bits::<UInt8Type>(values),
        DataType::UInt16 => bits::<UInt16Type>(values),
        DataType::UInt32 => bits::<UInt32Type>(values),
        DataType::UInt64 => bits::<UInt64Type>(values),
        DataType::Int8 => bits::<Int8Type>(values),
        DataType::Int16 => bits::<Int16Type>(values),
        DataType::Int32 => bits::<Int32Type>(values),
        DataType::Int64 => bits::<Int64Type>(values),
        other => Err(CfError::Rule(format!("cannot view integers as {other}"))),
    }
}

fn reinterpret(value: &ScalarValue, to: &DataType) -> Option<ScalarValue> {
    let array = value.to_array().ok()?;
    let viewed = reinterpret_array(&array, to).ok()?;
    ScalarValue::try_from_array(&viewed, 0).ok()
}

fn number(value: Option<&Value>) -> Result<Option<f64>, CfError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(CfError::Rule(format!("{other} is not a number"))),
    }
}

#[cfg(test)]
mod tests;
