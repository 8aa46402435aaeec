//! Numbers in CF time units become nanosecond Timestamps, as xarray decodes them: integers
//! exactly, floats as `trunc(value * unit)` nanoseconds (pandas' path) for the standard calendars
//! and to the nearest microsecond (cftime's) for the others, NaN as NULL. Non-standard calendars
//! decode to the Gregorian Timestamp of each date label; a label no Gregorian calendar has is an
//! error naming it.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, TimestampNanosecondArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type};

use super::calendar::{gregorian_days_since_1970, Calendar};
use super::time_units::{TimeUnits, NS_PER_DAY};
use super::CfError;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct TimeDecoder {
    unit_ns: i64,
    calendar: Calendar,
    /// The reference date: days in `calendar` since its 0000-01-01 and UTC nanoseconds after
    /// that midnight.
    reference_days: i64,
    reference_ns: i64,
    /// Gregorian calendars: the reference instant in nanoseconds since 1970.
    epoch_ns: Option<i64>,
}

const OUT_OF_RANGE: &str =
    "a time is out of the range of nanosecond timestamps (1677-09-21 to 2262-04-11)";

impl TimeDecoder {
    pub(super) fn new(units: TimeUnits, calendar: Calendar, name: &str) -> Result<Self, CfError> {
        if !calendar.is_valid(units.reference) {
            return Err(CfError::Rule(format!(
                "the reference date {} does not exist in the {calendar:?} calendar",
                units.reference
            )));
        }
        let reference_days = calendar.days(units.reference);
        let epoch_ns = match calendar {
            Calendar::Gregorian => {
                let days = gregorian_days_since_1970(units.reference).ok_or_else(|| {
                    CfError::Rule(format!("variable '{name}': bad reference date"))
                })?;
                let ns = i128::from(days) * i128::from(NS_PER_DAY) + i128::from(units.reference_ns);
                Some(i64::try_from(ns).map_err(|_| {
                    "the reference date is out of the range of nanosecond timestamps".to_string()
                })?)
            }
            _ => None,
        };
        Ok(TimeDecoder {
            unit_ns: units.unit_ns,
            calendar,
            reference_days,
            reference_ns: units.reference_ns,
            epoch_ns,
        })
    }

    /// Stored (or masked and scaled) numbers to Timestamps; `name` names the variable.
    pub(super) fn decode(&self, values: &ArrayRef, name: &str) -> Result<ArrayRef, CfError> {
        let nulls = values.nulls().cloned();
        let nanos: Vec<i64> = if values.data_type().is_integer() {
            let v = cast(values, &DataType::Int64).map_err(|_| OUT_OF_RANGE.to_string())?;
            let v = v.as_primitive::<Int64Type>();
            let unit = i128::from(self.unit_ns);
            v.values()
                .iter()
                .enumerate()
                .map(|(i, &x)| match v.is_null(i) {
                    true => Ok(0),
                    false => self.instant(i128::from(x) * unit, name),
                })
                .collect::<Result<_, _>>()?
        } else {
            let v = cast(values, &DataType::Float64)?;
            let v = v.as_primitive::<Float64Type>();
            let unit = self.unit_ns as f64;
            let gregorian = self.epoch_ns.is_some();
            let mut out = Vec::with_capacity(v.len());
            let mut valid = Vec::with_capacity(v.len());
            for (i, &x) in v.values().iter().enumerate() {
                let present = v.is_valid(i) && !x.is_nan();
                valid.push(present);
                if !present {
                    out.push(0);
                    continue;
                }
                let offset = if gregorian {
                    (x * unit).trunc()
                } else {
                    (x * unit / 1000.0).round() * 1000.0
                };
                if !offset.is_finite() || offset.abs() >= 9.2e18 {
                    return Err(OUT_OF_RANGE.into());
                }
                out.push(self.instant(offset as i128, name)?);
            }
            let nulls = arrow::buffer::NullBuffer::from(valid);
            let array = Int64Array::new(out.into(), Some(nulls));
            return timestamps(array);
        };
        timestamps(Int64Array::new(nanos.into(), nulls))
    }

    /// The Timestamp `offset_ns` after the reference date.
    fn instant(&self, offset_ns: i128, name: &str) -> Result<i64, CfError> {
        if let Some(epoch) = self.epoch_ns {
            return i64::try_from(i128::from(epoch) + offset_ns).map_err(|_| OUT_OF_RANGE.into());
        }
        let day = i128::from(NS_PER_DAY);
        let total = offset_ns + i128::from(self.reference_ns);
        let days = i64::try_from(total.div_euclid(day) + i128::from(self.reference_days))
            .map_err(|_| OUT_OF_RANGE.to_string())?;
        let time_of_day = total.rem_euclid(day);
        let label = self.calendar.label(days);
        let gregorian = gregorian_days_since_1970(label).ok_or_else(|| {
            format!(
                "variable '{name}': the {} label {label} is not a date of the Gregorian \
                 calendar, so it cannot be a Timestamp; OPTIONS ('decode_times' 'false') reads \
                 the stored numbers",
                calendar_name(self.calendar)
            )
        })?;
        i64::try_from(i128::from(gregorian) * day + time_of_day).map_err(|_| OUT_OF_RANGE.into())
    }
}

fn calendar_name(calendar: Calendar) -> &'static str {
    match calendar {
        Calendar::Gregorian => "standard",
        Calendar::NoLeap => "noleap",
        Calendar::AllLeap => "all_leap",
        Calendar::Day360 => "360_day",
        Calendar::Julian => "julian",
    }
}

fn timestamps(nanos: Int64Array) -> Result<ArrayRef, CfError> {
    let (_, values, nulls) = nanos.into_parts();
    Ok(Arc::new(TimestampNanosecondArray::new(values, nulls)))
}
