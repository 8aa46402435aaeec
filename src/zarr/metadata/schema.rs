//! The table view of an array: its Arrow schema and where each column comes from.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::zarr::metadata::array_meta::{ArrayMeta, VALUE_COLUMN};
use crate::zarr::metadata::attributes::GlobalAttrs;
use crate::zarr::metadata::element::ElementType;
use crate::zarr::metadata::problem::MetadataProblem;

/// Where a table column's values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnSource {
    /// The element's index along dimension `d`.
    Dimension(usize),
    /// Top-level struct field `i` of the element.
    Field(usize),
    /// The whole element (arrays whose elements are not structs).
    Element,
    /// The table's attributes, the same on every row.
    GlobalAttrs,
}

impl ColumnSource {
    /// Whether the column comes from the elements' bytes (not from indices or attributes).
    pub(crate) fn reads_elements(&self) -> bool {
        matches!(self, ColumnSource::Field(_) | ColumnSource::Element)
    }
}

/// Dimension index columns first, then one column per top-level struct field (or `value`),
/// then `__global_attrs__` when the array has attributes.
pub(crate) fn table_columns(
    meta: &ArrayMeta,
    global_attrs: Option<&GlobalAttrs>,
) -> Result<(SchemaRef, Vec<ColumnSource>), MetadataProblem> {
    let mut fields = Vec::new();
    let mut sources = Vec::new();
    for (d, name) in meta.dimension_names.iter().enumerate() {
        fields.push(Field::new(name, DataType::Int64, false));
        sources.push(ColumnSource::Dimension(d));
    }
    match &meta.element {
        ElementType::Struct(struct_fields) if meta.is_struct => {
            for (i, f) in struct_fields.iter().enumerate() {
                fields.push(Field::new(&f.name, f.ty.arrow_type(), f.ty.nullable()));
                sources.push(ColumnSource::Field(i));
            }
        }
        element => {
            fields.push(Field::new(
                VALUE_COLUMN,
                element.arrow_type(),
                element.nullable(),
            ));
            sources.push(ColumnSource::Element);
        }
    }
    if let Some(attrs) = global_attrs {
        fields.push(attrs.field());
        sources.push(ColumnSource::GlobalAttrs);
    }
    let mut seen = HashSet::new();
    if let Some(dup) = fields.iter().find(|f| !seen.insert(f.name().as_str())) {
        return Err(MetadataProblem::Invalid(format!(
            "column name '{}' is used by more than one dimension or field; rename the dimension",
            dup.name()
        )));
    }
    Ok((Arc::new(Schema::new(fields)), sources))
}
