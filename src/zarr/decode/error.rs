//! [`DecodeError`]: why element bytes did not become a column. It travels as the source of
//! the crate's `Error` that names the array and chunk (or variable) at fault.

use arrow::datatypes::TimeUnit;
use arrow::error::ArrowError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("field '{field}' holds invalid UTF-32 code point {code:#x}")]
    InvalidUtf32 { field: String, code: u32 },
    #[error("field '{field}': time value {value} overflows when scaled to {unit:?}")]
    TimeOverflow {
        field: String,
        value: i64,
        unit: TimeUnit,
    },
    #[error("field '{field}': {source}")]
    Arrow {
        field: String,
        #[source]
        source: ArrowError,
    },
}

impl DecodeError {
    pub(crate) fn arrow(field: &str) -> impl FnOnce(ArrowError) -> DecodeError + '_ {
        move |source| DecodeError::Arrow {
            field: field.to_string(),
            source,
        }
    }
}
