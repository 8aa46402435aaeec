//! `STORED AS ICECHUNK` in the list of table kinds (`table_kind.rs`).

use std::sync::Arc;

use datafusion::catalog::TableProvider;

use super::{
    IcechunkLogFunction, IcechunkOptions, IcechunkRefsFunction, IcechunkTable, IcechunkTableFactory,
};
use crate::session::ICECHUNK_FORMAT;
use crate::storage::parse_grants;
use crate::table_kind::{no_locations, NamedTableFunction, Opening, Reopened, TableKind};

/// A node of an Icechunk repository at one version, and the repository's history.
pub(crate) fn kind() -> TableKind {
    TableKind {
        stored_as: ICECHUNK_FORMAT,
        python_class: "IcechunkTable",
        factory: || Arc::new(IcechunkTableFactory),
        options: IcechunkOptions::documented,
        options_of: Some(crate::session::ZARR_FORMAT),
        functions,
        source: |t| {
            t.downcast_ref::<IcechunkTable>()
                .map(|t| Arc::clone(t.source()))
        },
        describe: |t| {
            let table = t.downcast_ref::<IcechunkTable>()?;
            Some(format!(
                "{}; snapshot {}",
                table.options(),
                table.snapshot_id()
            ))
        },
        reopens: &["icechunk"],
        reopen,
        read_locations: no_locations,
        // Virtual chunks are read from their containers.
        option_locations: |options| match options.get("virtual_chunk_containers") {
            Some(containers) => Ok((parse_grants(containers)?.iter())
                .map(|g| g.prefix().to_string())
                .collect()),
            None => Ok(Vec::new()),
        },
        writer: None,
    }
}

fn functions() -> Vec<NamedTableFunction> {
    vec![
        ("icechunk_log", Arc::new(IcechunkLogFunction)),
        ("icechunk_refs", Arc::new(IcechunkRefsFunction)),
    ]
}

/// A table a cluster plan names, opened again (at the version its options choose).
fn reopen(opening: Opening) -> Reopened {
    Box::pin(async move {
        let options = IcechunkOptions::from_sql(&opening.options)?;
        let table = IcechunkTable::open_with(opening.location()?, options).await?;
        Ok(Arc::new(table) as Arc<dyn TableProvider>)
    })
}
