//! The nd-arrow model: named N-d arrays ([`NdArrowArray`]) on a shared grid
//! ([`NdRecordBatch`]), broadcasting and materializing them, and their Arrow encoding
//! (`nd_arrow.array`, `nd_arrow.global_attributes`); and the way back, flat rows onto the grid
//! of their dimension columns (`rows_grid.rs`, what writes from SQL use), or a result already
//! on a grid (`on_grid.rs`). nd-arrow-array is not on the registry, so ndfusion implements
//! the format itself (ARCHITECTURE.md, "The nd-arrow encoding").

mod array;
pub(crate) mod arrow_encoding;
pub(crate) mod batch;
pub(crate) mod casting;
#[cfg(test)]
mod generated_inputs;
pub(crate) mod on_grid;
pub(crate) mod rows_batch;
pub(crate) mod rows_grid;
pub(crate) mod rows_groups;

pub(crate) use array::cell_count;
pub use array::{Dim, NdArrowArray};
pub use batch::NdRecordBatch;
pub use casting::Casting;

/// A violation of the nd-arrow rules (dimensions, value counts, broadcasting, attributes), with
/// the array and table row where known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{context}{message}")]
pub struct NdError {
    context: String,
    message: String,
}

impl NdError {
    pub(crate) fn new(message: String) -> Self {
        NdError {
            context: String::new(),
            message,
        }
    }

    /// Prefixes the array name: `array 'temp': ...`.
    pub(crate) fn in_array(mut self, name: &str) -> Self {
        self.context = format!("array '{name}': {}", self.context);
        self
    }
}
