//! [`CfError`]: why a variable's CF attributes cannot be applied, or its stored values not
//! decoded by them. The callers name the variable's location in the crate's `Error`.

use arrow::error::ArrowError;
use datafusion::error::DataFusionError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum CfError {
    /// A rule an attribute value, a unit or a decoded value breaks.
    #[error("{0}")]
    Rule(String),
    #[error(transparent)]
    Arrow(#[from] ArrowError),
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),
    /// The attribute of a variable at fault.
    #[error("variable '{variable}': {attribute}: {source}")]
    Attribute {
        variable: String,
        attribute: String,
        #[source]
        source: Box<CfError>,
    },
    #[error(
        "variable '{variable}': calendar '{calendar}' is not a CF calendar (standard, \
         gregorian, proleptic_gregorian, noleap, 365_day, all_leap, 366_day, 360_day, julian); \
         OPTIONS ('decode_times' 'false') reads the stored numbers"
    )]
    Calendar { variable: String, calendar: String },
    /// The time units of a variable at fault.
    #[error("variable '{variable}': units '{units}': {source}")]
    Units {
        variable: String,
        units: String,
        #[source]
        source: Box<CfError>,
    },
}

impl From<String> for CfError {
    fn from(rule: String) -> Self {
        CfError::Rule(rule)
    }
}

impl From<&str> for CfError {
    fn from(rule: &str) -> Self {
        CfError::Rule(rule.to_string())
    }
}

impl CfError {
    /// This error, as the fault of `attribute` of `variable`.
    pub(super) fn in_attribute(self, variable: &str, attribute: &str) -> CfError {
        CfError::Attribute {
            variable: variable.to_string(),
            attribute: attribute.to_string(),
            source: Box::new(self),
        }
    }

    /// This error, as the fault of the time `units` of `variable`.
    pub(super) fn in_units(self, variable: &str, units: &str) -> CfError {
        CfError::Units {
            variable: variable.to_string(),
            units: units.to_string(),
            source: Box::new(self),
        }
    }
}
