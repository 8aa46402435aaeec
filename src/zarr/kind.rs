//! `STORED AS ZARR` in the list of table kinds (`table_kind.rs`).

use std::sync::Arc;

use datafusion::catalog::TableProvider;

use super::{ZarrFormatFactory, ZarrOptions, ZarrTable, ZarrTableFactory, ZarrWriteOptions};
use crate::session::ZARR_FORMAT;
use crate::table_kind::{no_functions, Opening, Reopened, TableKind, Writer};

/// Zarr arrays, groups (datasets) and collections.
pub(crate) fn kind() -> TableKind {
    TableKind {
        stored_as: ZARR_FORMAT,
        python_class: "ZarrTable",
        factory: || Arc::new(ZarrTableFactory),
        options: ZarrOptions::documented,
        options_of: None,
        functions: no_functions,
        source: |t| {
            t.downcast_ref::<ZarrTable>()
                .map(|t| Arc::clone(t.source()))
        },
        describe: |t| Some(t.downcast_ref::<ZarrTable>()?.options().to_string()),
        reopens: &["zarr", "zarr_many"],
        reopen,
        read_locations: |t| {
            let members = t
                .downcast_ref::<ZarrTable>()
                .map(ZarrTable::member_locations);
            members.into_iter().flatten().map(str::to_string).collect()
        },
        // A reference file's references outside its folder are read too.
        option_locations: |options| {
            let value = options.get("virtual_chunk_containers");
            super::options::granted_prefixes(value.map(String::as_str))
        },
        writer: Some(Writer {
            format: || Arc::new(ZarrFormatFactory::default()),
            options: ZarrWriteOptions::documented,
        }),
    }
}

/// A table a cluster plan names, opened again: one location (an array, a group or a pattern)
/// or a listed collection.
fn reopen(opening: Opening) -> Reopened {
    Box::pin(async move {
        let options = ZarrOptions::from_sql(&opening.options)?;
        let table = match opening.format.as_str() {
            "zarr_many" => ZarrTable::open_many(&opening.locations, options).await?,
            _ => ZarrTable::open_with(opening.location()?, options).await?,
        };
        Ok(Arc::new(table) as Arc<dyn TableProvider>)
    })
}
