//! The kinds of table ndfusion opens, listed once: [`table_kinds`].
//!
//! A kind is its own folder (`zarr/`, `lance_nd/`, `icechunk/`) and one [`TableKind`] entry
//! (its `kind.rs`): its `STORED AS` name and factory, its documented options and table
//! functions, how a table of it is recognised among providers and described (`\d NAME`), how
//! it is told to a cluster and opened again there, and its Python class. Every place that
//! knows the kinds iterates this list: the session's factories (`session.rs`), the cluster
//! codec (`cluster/codec.rs`), the REPL's `\options` and `\d NAME`, and the Python extension
//! (`python/src/lib.rs`, which refuses to load when a kind has no class there).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use datafusion::catalog::{TableFunctionImpl, TableProvider, TableProviderFactory};
use datafusion::datasource::file_format::FileFormatFactory;
use futures::future::BoxFuture;

use crate::error::Result;
use crate::table_source::TableSource;

/// A table function by name (`icechunk_log`).
pub type NamedTableFunction = (&'static str, Arc<dyn TableFunctionImpl>);

/// A table a cluster plan names, being opened again.
pub(crate) type Reopened = BoxFuture<'static, Result<Arc<dyn TableProvider>>>;

/// One kind of table: what `STORED AS <name>` opens.
pub struct TableKind {
    /// The `STORED AS` name (`ZARR`).
    pub(crate) stored_as: &'static str,
    /// The class of the Python package that opens a table of this kind.
    pub(crate) python_class: &'static str,
    /// The factory `CREATE EXTERNAL TABLE ... STORED AS <name>` calls.
    pub(crate) factory: fn() -> Arc<dyn TableProviderFactory>,
    /// The `OPTIONS` keys and what each does.
    pub(crate) options: fn() -> Vec<(&'static str, &'static str)>,
    /// Another kind whose options this kind takes too (Icechunk takes Zarr's).
    pub(crate) options_of: Option<&'static str>,
    /// Table functions that come with the kind (`icechunk_log`).
    pub(crate) functions: fn() -> Vec<NamedTableFunction>,
    /// How a table of this kind was opened; `None` for a table of another kind.
    pub(crate) source: fn(&dyn TableProvider) -> Option<Arc<TableSource>>,
    /// What the table was opened with, as `\d NAME` shows it (secrets as `***`).
    pub(crate) describe: fn(&dyn TableProvider) -> Option<String>,
    /// The names its tables' [`Opened::format`](crate::table_source::Opened::format) gives.
    pub(crate) reopens: &'static [&'static str],
    /// Opens a table of one of those formats again (on a cluster's processes).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) reopen: fn(Opening) -> Reopened,
    /// Locations a table reads besides those it was opened at (a collection's members, which
    /// its pattern expanded to): a cluster checks each against its allowed locations.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) read_locations: fn(&dyn TableProvider) -> Vec<String>,
    /// Locations its options name (Icechunk's virtual chunk containers), checked so too.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) option_locations: fn(&HashMap<String, String>) -> Result<Vec<String>>,
    /// What `COPY ... TO ... STORED AS <name>` writes with, for kinds that write, and the
    /// `OPTIONS` keys it takes.
    pub(crate) writer: Option<Writer>,
}

/// How a kind writes query results (`COPY ... STORED AS <name>`).
#[derive(Clone, Copy)]
pub(crate) struct Writer {
    /// The file format DataFusion's `COPY` planner asks for a writer.
    pub format: fn() -> Arc<dyn FileFormatFactory>,
    /// The `OPTIONS` keys of a write and what each does.
    pub options: fn() -> Vec<(&'static str, &'static str)>,
}

/// What opened a table, as a cluster is told it (`table_source::Opened`), to open it again.
#[derive(Debug, Clone)]
pub(crate) struct Opening {
    /// One of the kind's [`TableKind::reopens`] names.
    pub format: String,
    pub locations: Vec<String>,
    /// The version read, for tables that have versions.
    pub version: Option<u64>,
    /// `OPTIONS (...)` keys and values.
    pub options: HashMap<String, String>,
}

impl Opening {
    /// The one location of a kind opened at one location; an error for another count.
    pub(crate) fn location(&self) -> Result<&str> {
        match self.locations.as_slice() {
            [one] => Ok(one),
            other => Err(crate::error::Error::Internal(format!(
                "a table of format '{}' opens at one location, not {}",
                self.format,
                other.len()
            ))),
        }
    }
}

impl std::fmt::Debug for TableKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableKind")
            .field("stored_as", &self.stored_as)
            .finish_non_exhaustive()
    }
}

impl TableKind {
    /// The `STORED AS` name (`ZARR`, `LANCE_ND`, `ICECHUNK`).
    pub fn stored_as(&self) -> &'static str {
        self.stored_as
    }

    /// The class of ndfusion's Python package that opens a table of this kind.
    pub fn python_class(&self) -> &'static str {
        self.python_class
    }

    /// The factory `CREATE EXTERNAL TABLE ... STORED AS <name>` calls.
    pub fn factory(&self) -> Arc<dyn TableProviderFactory> {
        (self.factory)()
    }

    /// The `OPTIONS` keys this kind reads and what each does.
    pub fn documented_options(&self) -> Vec<(&'static str, &'static str)> {
        (self.options)()
    }

    /// The `STORED AS` name of another kind whose options this kind takes too.
    pub fn takes_options_of(&self) -> Option<&'static str> {
        self.options_of
    }

    /// The file format `COPY ... STORED AS <name>` writes with; `None` for a kind that only
    /// reads.
    pub fn write_format(&self) -> Option<Arc<dyn FileFormatFactory>> {
        self.writer.map(|w| (w.format)())
    }

    /// The `OPTIONS` keys `COPY ... STORED AS <name>` takes and what each does (none for a
    /// kind that only reads).
    pub fn documented_write_options(&self) -> Vec<(&'static str, &'static str)> {
        self.writer.map(|w| (w.options)()).unwrap_or_default()
    }

    /// The table functions that come with this kind, by name.
    pub fn table_functions(&self) -> Vec<NamedTableFunction> {
        (self.functions)()
    }

    /// What `table`, when it is of this kind, was opened with (secrets as `***`).
    pub fn describe(&self, table: &dyn TableProvider) -> Option<String> {
        (self.describe)(table)
    }

    /// Whether `table` is a table of this kind.
    pub fn is_kind_of(&self, table: &dyn TableProvider) -> bool {
        (self.source)(table).is_some()
    }
}

/// Every kind of table this build of ndfusion opens, in the order help lists them.
pub fn table_kinds() -> &'static [TableKind] {
    static KINDS: OnceLock<Vec<TableKind>> = OnceLock::new();
    KINDS.get_or_init(|| {
        let mut kinds = vec![
            crate::zarr::kind(),
            crate::netcdf::kind(),
            crate::hdf5::kind(),
        ];
        #[cfg(feature = "icechunk")]
        kinds.push(crate::icechunk::kind());
        kinds.push(crate::lance_nd::kind());
        kinds
    })
}

/// The kind `STORED AS name` opens (any case).
pub fn table_kind(name: &str) -> Option<&'static TableKind> {
    (table_kinds().iter()).find(|k| k.stored_as.eq_ignore_ascii_case(name))
}

/// The kind of `table`, when it is one of ndfusion's.
pub fn table_kind_of(table: &dyn TableProvider) -> Option<&'static TableKind> {
    table_kinds().iter().find(|k| k.is_kind_of(table))
}

/// The kind that opens tables of `format` again (a cluster plan's name for it).
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) fn reopening(format: &str) -> Option<&'static TableKind> {
    table_kinds().iter().find(|k| k.reopens.contains(&format))
}

/// How `table` was opened, when it is one of ndfusion's tables.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) fn source_of(table: &dyn TableProvider) -> Option<Arc<TableSource>> {
    table_kinds().iter().find_map(|k| (k.source)(table))
}

/// Tables without locations besides their own (`read_locations`).
pub(crate) fn no_locations(_: &dyn TableProvider) -> Vec<String> {
    Vec::new()
}

/// Options that name no locations (`option_locations`).
pub(crate) fn no_option_locations(_: &HashMap<String, String>) -> Result<Vec<String>> {
    Ok(Vec::new())
}

/// Kinds without table functions (`functions`).
pub(crate) fn no_functions() -> Vec<NamedTableFunction> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::new_session_context;

    /// A table of each kind, as its tests open it: `LOCATION` and `OPTIONS`.
    fn example(kind: &str) -> Option<(&'static str, &'static str)> {
        Some(match kind {
            "ZARR" => ("tests/data/zarr_v3/struct_1d.zarr", ""),
            "NETCDF" => (
                "tests/data/netcdf/classic.nc",
                "OPTIONS ('variables' 'temp')",
            ),
            "HDF5" => (
                "tests/data/hdf5/records.h5",
                "OPTIONS ('path' '/obs/records')",
            ),
            "LANCE_ND" => ("tests/data/lance_nd/doc_example.lance", ""),
            "ICECHUNK" => (
                "tests/data/icechunk/ocean.icechunk",
                "OPTIONS ('path' 'surface')",
            ),
            _ => return None,
        })
    }

    /// Every kind is whole: a table its factory opens is recognised as its own (and as no
    /// other kind's), is described, is told to a cluster in a format the kind opens again, and
    /// opens again with the same columns. A kind missing from one of these places fails here.
    #[tokio::test]
    async fn every_kind_opens_is_recognised_and_opens_again() {
        let ctx = new_session_context();
        for kind in table_kinds() {
            let name = kind.stored_as();
            let (location, options) = example(name)
                .unwrap_or_else(|| panic!("STORED AS {name} has no example table in this test"));
            let sql =
                format!("CREATE EXTERNAL TABLE t STORED AS {name} LOCATION '{location}' {options}");
            ctx.sql(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            let table = ctx.table_provider("t").await.unwrap();
            assert_eq!(
                table_kind_of(table.as_ref()).map(TableKind::stored_as),
                Some(name)
            );
            assert!(kind.describe(table.as_ref()).is_some(), "{name}");
            assert!(!kind.documented_options().is_empty(), "{name}");
            assert!(std::ptr::eq(
                table_kind(&name.to_lowercase()).unwrap(),
                kind
            ));
            let source = source_of(table.as_ref()).expect("a source");
            let opened = &source.opened;
            let format = opened.format();
            assert!(kind.reopens.contains(&format), "{name}: {format}");
            assert!(std::ptr::eq(reopening(format).unwrap(), kind), "{format}");
            let again = (kind.reopen)(Opening {
                format: format.to_string(),
                locations: opened.locations(),
                version: opened.version(),
                options: opened.options_sql().unwrap(),
            })
            .await
            .unwrap_or_else(|e| panic!("{name} opened again: {e}"));
            assert_eq!(again.schema(), table.schema(), "{name}");
            assert_eq!(table_kind_of(again.as_ref()).unwrap().stored_as(), name);
            ctx.sql("DROP TABLE t").await.unwrap();
        }
        let names: Vec<&str> = table_kinds().iter().map(TableKind::stored_as).collect();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(names, unique);
    }

    /// A kind that writes is found by `COPY ... STORED AS <name>`: its format is the one the
    /// session registered under the lower-cased name, and its options are documented.
    #[test]
    fn every_writing_kind_is_registered_for_copy() {
        let ctx = new_session_context();
        let state = ctx.state();
        let mut writers = 0;
        for kind in table_kinds() {
            let Some(format) = kind.write_format() else {
                continue;
            };
            writers += 1;
            let name = kind.stored_as().to_lowercase();
            let registered = state.get_file_format_factory(&name).expect("registered");
            assert_eq!(registered.get_ext(), format.get_ext(), "{name}");
            assert!(!kind.documented_write_options().is_empty(), "{name}");
        }
        assert!(writers > 0);
    }

    #[test]
    fn an_unknown_kind_is_none() {
        assert!(table_kind("PARQUET_ND").is_none());
        assert!(reopening("zarr_few").is_none());
    }
}
