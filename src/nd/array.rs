//! `NdArrowArray`: one named-dimension N-d array (values in C order) with attributes.

use arrow::array::{Array, ArrayRef};

use super::NdError;

/// One dimension: a name and a size.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dim {
    /// The dimension's name, unique within an array.
    pub name: String,
    /// Its length.
    pub size: usize,
}

impl Dim {
    /// A dimension `name` of `size`.
    pub fn new(name: impl Into<String>, size: usize) -> Self {
        Dim {
            name: name.into(),
            size,
        }
    }
}

/// An N-d array: flat values in C order over `dims`, plus attributes (one Arrow value each).
/// Element nulls are the null buffer of `values`; a rank-0 array is a scalar with one value.
#[derive(Debug, Clone)]
pub struct NdArrowArray {
    values: ArrayRef,
    dims: Vec<Dim>,
    attrs: Vec<(String, ArrayRef)>,
}

/// Compares Arrow arrays by value (data type, nulls and values).
pub(super) fn same_values(a: &ArrayRef, b: &ArrayRef) -> bool {
    a.to_data() == b.to_data()
}

/// Compares named one-value arrays (attributes) by key and value.
pub(super) fn same_attrs(a: &[(String, ArrayRef)], b: &[(String, ArrayRef)]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && same_values(va, vb))
}

impl PartialEq for NdArrowArray {
    fn eq(&self, other: &Self) -> bool {
        self.dims == other.dims
            && same_values(&self.values, &other.values)
            && same_attrs(&self.attrs, &other.attrs)
    }
}

impl NdArrowArray {
    /// Checks the nd-arrow rules: dimension names non-empty and unique, as many values as
    /// the product of the sizes, each attribute one value with a unique non-empty key.
    pub fn try_new(
        values: ArrayRef,
        dims: Vec<Dim>,
        attrs: Vec<(String, ArrayRef)>,
    ) -> Result<Self, NdError> {
        for (i, d) in dims.iter().enumerate() {
            if d.name.is_empty() {
                return Err(NdError::new(format!("dimension {i} has an empty name")));
            }
            if dims[..i].iter().any(|e| e.name == d.name) {
                return Err(NdError::new(format!(
                    "dimension name '{}' appears twice",
                    d.name
                )));
            }
        }
        for d in &dims {
            if u32::try_from(d.size).is_err() {
                return Err(NdError::new(format!(
                    "dimension '{}' has {} cells; the format stores sizes as 32-bit numbers",
                    d.name, d.size
                )));
            }
        }
        let expected = cell_count(&dims)?;
        if values.len() != expected {
            return Err(NdError::new(format!(
                "{} values do not fill dimensions {} ({expected} values)",
                values.len(),
                describe_dims(&dims)
            )));
        }
        check_attributes(&attrs, "attribute")?;
        Ok(NdArrowArray {
            values,
            dims,
            attrs,
        })
    }

    /// The values, flat in C order over [`dims`](Self::dims).
    pub fn values(&self) -> &ArrayRef {
        &self.values
    }

    /// The dimensions, outermost first.
    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }

    /// The attributes: one Arrow value per key.
    pub fn attrs(&self) -> &[(String, ArrayRef)] {
        &self.attrs
    }

    /// The number of dimensions (0 for a scalar).
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
}

/// The most cells one array or one grid may have: Arrow's 32-bit offsets (string values) and
/// the 32-bit indices of broadcasting bound it.
pub(super) const MAX_CELLS: usize = i32::MAX as usize;

/// The number of cells of `dims`, checked: an overflow, or more than [`MAX_CELLS`], is an error
/// (sizes come from files, which may claim anything).
pub(crate) fn cell_count(dims: &[Dim]) -> Result<usize, NdError> {
    dims.iter()
        .try_fold(1usize, |n, d| n.checked_mul(d.size))
        .filter(|&n| n <= MAX_CELLS)
        .ok_or_else(|| {
            NdError::new(format!(
                "dimensions {} hold more than {MAX_CELLS} cells",
                describe_dims(dims)
            ))
        })
}

/// Attributes (`what` = "attribute" or "global attribute") are one value each under unique,
/// non-empty keys.
pub(super) fn check_attributes(attrs: &[(String, ArrayRef)], what: &str) -> Result<(), NdError> {
    for (i, (key, value)) in attrs.iter().enumerate() {
        if key.is_empty() || attrs[..i].iter().any(|(k, _)| k == key) {
            return Err(NdError::new(format!(
                "{what} key '{key}' is empty or repeated"
            )));
        }
        if value.len() != 1 {
            return Err(NdError::new(format!(
                "{what} '{key}' holds {} values, not one",
                value.len()
            )));
        }
    }
    Ok(())
}

/// `(x=3, y=4)`
pub(super) fn describe_dims(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| format!("{}={}", d.name, d.size))
        .collect();
    format!("({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, StringArray};
    use std::sync::Arc;

    fn values(n: usize) -> ArrayRef {
        Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64)))
    }

    #[test]
    fn validates_the_rules() {
        assert!(NdArrowArray::try_new(
            values(12),
            vec![Dim::new("x", 3), Dim::new("y", 4)],
            vec![]
        )
        .is_ok());
        let scalar = NdArrowArray::try_new(values(1), vec![], vec![]).unwrap();
        assert_eq!(scalar.rank(), 0);
        let err =
            NdArrowArray::try_new(values(11), vec![Dim::new("x", 3), Dim::new("y", 4)], vec![])
                .unwrap_err();
        assert!(err
            .to_string()
            .contains("11 values do not fill dimensions (x=3, y=4)"));
        let err =
            NdArrowArray::try_new(values(9), vec![Dim::new("x", 3), Dim::new("x", 3)], vec![])
                .unwrap_err();
        assert!(err.to_string().contains("'x' appears twice"));
        let two: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        let err =
            NdArrowArray::try_new(values(1), vec![], vec![("units".into(), two)]).unwrap_err();
        assert!(err.to_string().contains("attribute 'units' holds 2 values"));
    }
}
