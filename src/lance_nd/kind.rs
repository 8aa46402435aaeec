//! `STORED AS LANCE_ND` in the list of table kinds (`table_kind.rs`): read, and written by
//! `COPY ... STORED AS LANCE_ND`.

use std::sync::Arc;

use datafusion::catalog::TableProvider;

use super::{
    LanceNdCopyOptions, LanceNdFormatFactory, LanceNdOptions, LanceNdTable, LanceNdTableFactory,
};
use crate::session::LANCE_ND_FORMAT;
use crate::table_kind::{
    no_functions, no_locations, no_option_locations, Opening, Reopened, TableKind, Writer,
};

/// lance-nd tables, read at the version they were opened at.
pub(crate) fn kind() -> TableKind {
    TableKind {
        stored_as: LANCE_ND_FORMAT,
        python_class: "LanceNdTable",
        factory: || Arc::new(LanceNdTableFactory),
        options: LanceNdOptions::documented,
        options_of: None,
        functions: no_functions,
        source: |t| t.downcast_ref::<LanceNdTable>().map(LanceNdTable::source),
        describe: |t| Some(t.downcast_ref::<LanceNdTable>()?.options().to_string()),
        reopens: &["lance_nd"],
        reopen,
        read_locations: no_locations,
        option_locations: no_option_locations,
        writer: Some(Writer {
            format: || Arc::new(LanceNdFormatFactory::default()),
            options: LanceNdCopyOptions::documented,
        }),
    }
}

/// A table a cluster plan names, opened again at the version the plan read.
fn reopen(opening: Opening) -> Reopened {
    Box::pin(async move {
        let options = LanceNdOptions::from_sql(&opening.options)?;
        let table = LanceNdTable::open_at(opening.location()?, options, opening.version).await?;
        Ok(Arc::new(table) as Arc<dyn TableProvider>)
    })
}
