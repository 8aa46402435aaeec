//! `STORED AS HDF5` in the list of table kinds (`table_kind.rs`).

use std::sync::Arc;

use datafusion::catalog::TableProvider;

use super::{HDF5Options, HDF5Table, HDF5TableFactory};
use crate::session::HDF5_FORMAT;
use crate::table_kind::{no_functions, no_option_locations, Opening, Reopened, TableKind};

/// HDF5 files and collections of them.
pub(crate) fn kind() -> TableKind {
    TableKind {
        stored_as: HDF5_FORMAT,
        python_class: "HDF5Table",
        factory: || Arc::new(HDF5TableFactory),
        options: HDF5Options::documented,
        options_of: None,
        functions: no_functions,
        source: |t| {
            t.downcast_ref::<HDF5Table>()
                .map(|t| Arc::clone(t.source()))
        },
        describe: |t| Some(t.downcast_ref::<HDF5Table>()?.options().to_string()),
        reopens: &["hdf5", "hdf5_many"],
        reopen,
        read_locations: |t| {
            let members = t
                .downcast_ref::<HDF5Table>()
                .map(HDF5Table::member_locations);
            members.into_iter().flatten().map(str::to_string).collect()
        },
        option_locations: no_option_locations,
        writer: None,
    }
}

/// A table a cluster plan names, opened again: one file (or a pattern), or listed files.
fn reopen(opening: Opening) -> Reopened {
    Box::pin(async move {
        let options = HDF5Options::from_sql(&opening.options)?;
        let table = match opening.format.as_str() {
            "hdf5_many" => HDF5Table::open_many(&opening.locations, options).await?,
            _ => HDF5Table::open_with(opening.location()?, options).await?,
        };
        Ok(Arc::new(table) as Arc<dyn TableProvider>)
    })
}
