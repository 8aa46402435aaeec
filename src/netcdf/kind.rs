//! `STORED AS NETCDF` in the list of table kinds (`table_kind.rs`).

use std::sync::Arc;

use datafusion::catalog::TableProvider;

use super::{NetCDFOptions, NetCDFTable, NetCDFTableFactory};
use crate::session::NETCDF_FORMAT;
use crate::table_kind::{no_functions, no_option_locations, Opening, Reopened, TableKind};

/// netCDF files and collections of them.
pub(crate) fn kind() -> TableKind {
    TableKind {
        stored_as: NETCDF_FORMAT,
        python_class: "NetCDFTable",
        factory: || Arc::new(NetCDFTableFactory),
        options: NetCDFOptions::documented,
        options_of: None,
        functions: no_functions,
        source: |t| {
            t.downcast_ref::<NetCDFTable>()
                .map(|t| Arc::clone(t.source()))
        },
        describe: |t| Some(t.downcast_ref::<NetCDFTable>()?.options().to_string()),
        reopens: &["netcdf", "netcdf_many"],
        reopen,
        read_locations: |t| {
            let members = t
                .downcast_ref::<NetCDFTable>()
                .map(NetCDFTable::member_locations);
            members.into_iter().flatten().map(str::to_string).collect()
        },
        option_locations: no_option_locations,
        writer: None,
    }
}

/// A table a cluster plan names, opened again: one file (or a pattern), or listed files.
fn reopen(opening: Opening) -> Reopened {
    Box::pin(async move {
        let options = NetCDFOptions::from_sql(&opening.options)?;
        let table = match opening.format.as_str() {
            "netcdf_many" => NetCDFTable::open_many(&opening.locations, options).await?,
            _ => NetCDFTable::open_with(opening.location()?, options).await?,
        };
        Ok(Arc::new(table) as Arc<dyn TableProvider>)
    })
}
