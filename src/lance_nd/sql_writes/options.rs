//! What `COPY (query) TO 't.lance' STORED AS LANCE_ND OPTIONS (...)` takes: each key declared
//! once, read by the format factory, shown by `\options` and listed in errors.

use crate::table_options::{Declared, KindOptions, OptionKeys, OptionKind, OptionSpec};

use super::super::writer::{WriteOptions, CASTING, STATISTICS};

const DIMENSIONS: OptionSpec = OptionSpec::new(
    "dimensions",
    OptionKind::Names,
    "columns that are each batch's dimensions, comma-separated: each becomes a coordinate (its \
     sorted distinct values) and every other column an array on their grid (default: none, \
     one row per batch)",
);
const BATCH_BY: OptionSpec = OptionSpec::new(
    "batch_by",
    OptionKind::Names,
    "columns whose values are the global attributes of a batch: one nd record batch (one \
     table row) per distinct value (default: none, one batch of all rows, or one per \
     `__global_attrs__` value when the query has that column)",
);

/// The options of `COPY ... STORED AS LANCE_ND`, in the order `\options` lists them.
const COPY_OPTIONS: &[OptionSpec] = &[DIMENSIONS, BATCH_BY, CASTING, STATISTICS];

/// The keys of `COPY ... STORED AS LANCE_ND` (what makes a [`KindOptions`] a
/// [`LanceNdCopyOptions`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct LanceNdCopyKeys;

impl Declared for LanceNdCopyKeys {
    const SPECS: &'static [OptionSpec] = COPY_OPTIONS;
    const TAKER: &'static str = "COPY ... STORED AS LANCE_ND";
}

impl OptionKeys for LanceNdCopyKeys {}

/// How `COPY ... TO ... STORED AS LANCE_ND` writes: `dimensions`, `batch_by`, `casting`,
/// `statistics`, and the storage settings of [`StorageOptions`](crate::StorageOptions).
pub type LanceNdCopyOptions = KindOptions<LanceNdCopyKeys>;

impl KindOptions<LanceNdCopyKeys> {
    /// Each batch's dimensions (`dimensions`).
    pub(crate) fn dimensions(&self) -> &[String] {
        self.set.names(&DIMENSIONS).unwrap_or_default()
    }

    /// The columns that make a batch (`batch_by`).
    pub(crate) fn batch_by(&self) -> &[String] {
        self.set.names(&BATCH_BY).unwrap_or_default()
    }

    /// How the batches are appended: as [`write_nd_batches`](crate::write_nd_batches) does
    /// with these options.
    pub(crate) fn write_options(&self) -> WriteOptions {
        WriteOptions::of_set(&self.set).with_storage(self.storage().clone())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::error::Result;

    fn options(pairs: &[(&str, &str)]) -> Result<LanceNdCopyOptions> {
        let map: HashMap<String, String> = (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        LanceNdCopyOptions::from_sql(&map)
    }

    #[test]
    fn keys_come_bare_or_with_datafusions_prefix() {
        let o = options(&[
            ("format.dimensions", "depth, time"),
            ("batch_by", "station"),
            ("format.casting", "safe"),
        ])
        .unwrap();
        assert_eq!(o.dimensions(), ["depth", "time"]);
        assert_eq!(o.batch_by(), ["station"]);
        assert_eq!(o.write_options().casting(), crate::Casting::Safe);
        let o = options(&[]).unwrap();
        assert!(o.dimensions().is_empty() && o.batch_by().is_empty());
        let err = options(&[("overwrite", "true")]).unwrap_err().to_string();
        assert!(
            err.contains("COPY ... STORED AS LANCE_ND does not know this option")
                && err.contains("dimensions, batch_by, casting, statistics"),
            "{err}"
        );
    }
}
