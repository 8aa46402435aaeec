//! `CREATE EXTERNAL TABLE ... STORED AS ZARR LOCATION '...'`.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::common::Result;
use datafusion::datasource::TableProvider;
use datafusion::logical_expr::CreateExternalTable;

use crate::limits::Limits;
use crate::table_options::check_external_table;
use crate::zarr::options::ZarrOptions;
use crate::zarr::table::ZarrTable;

/// Creates a [`ZarrTable`] from `CREATE EXTERNAL TABLE ... STORED AS ZARR LOCATION '...'
/// [OPTIONS (...)]` (see [`ZarrOptions`] for the options). [`register_table_factories`]
/// registers it under the name `ZARR`.
///
/// [`register_table_factories`]: crate::register_table_factories
#[derive(Debug, Default)]
pub struct ZarrTableFactory;

#[async_trait]
impl TableProviderFactory for ZarrTableFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        check_external_table(cmd, "ZARR")?;
        let limits = Limits::of_session(state.config_options())?;
        let options = ZarrOptions::from_sql(&cmd.options)?.with_limits(limits);
        Ok(Arc::new(
            ZarrTable::open_with(&cmd.location, options).await?,
        ))
    }
}
