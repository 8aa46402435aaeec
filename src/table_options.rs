//! `CREATE EXTERNAL TABLE ... OPTIONS (...)` as every kind reads them: the kind's own keys
//! (each declared once as an [`OptionSpec`]) and the storage settings, every other key an
//! error that lists the known ones; and [`KindOptions`], the one options type of every kind,
//! which parses them, writes them back for a cluster and shows them in EXPLAIN.

use std::collections::HashMap;
use std::marker::PhantomData;

use datafusion::common::plan_err;
use datafusion::logical_expr::CreateExternalTable;

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::storage::StorageOptions;

/// What values a format option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// A count of at least 1.
    Positive,
    /// `true` or `false`.
    Flag,
    /// Comma-separated names, at least one.
    Names,
    /// One of these words (lower case).
    Choice(&'static [&'static str]),
    /// Any text that is not blank (a name, an id, an instant: the format checks it).
    #[cfg_attr(not(feature = "icechunk"), allow(dead_code))]
    Text,
}

/// One option of a format, declared once: parsing, printing (`to_sql`, EXPLAIN), checking and
/// the list of known keys in errors all read this.
#[derive(Debug)]
pub struct OptionSpec {
    pub key: &'static str,
    pub kind: OptionKind,
    /// What it sets, and its default.
    pub doc: &'static str,
    /// Zarr groups only: an error on an array.
    pub groups_only: bool,
}

impl OptionSpec {
    /// An option of arrays and groups alike.
    pub(crate) const fn new(key: &'static str, kind: OptionKind, doc: &'static str) -> Self {
        OptionSpec {
            key,
            kind,
            doc,
            groups_only: false,
        }
    }

    /// The same, for Zarr groups only.
    pub(crate) const fn for_groups(self) -> Self {
        OptionSpec {
            groups_only: true,
            ..self
        }
    }
}

/// A value of a format option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OptionValue {
    Positive(usize),
    Flag(bool),
    Names(Vec<String>),
    Choice(&'static str),
    Text(String),
}

impl std::fmt::Display for OptionValue {
    /// As `OPTIONS (...)` writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionValue::Positive(n) => write!(f, "{n}"),
            OptionValue::Flag(b) => write!(f, "{b}"),
            OptionValue::Names(names) => f.write_str(&names.join(",")),
            OptionValue::Choice(word) => f.write_str(word),
            OptionValue::Text(text) => f.write_str(text),
        }
    }
}

impl OptionValue {
    /// `value` as `spec` takes it.
    fn parse(spec: &OptionSpec, value: &str) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidOption {
            option: spec.key.to_string(),
            reason,
        };
        match spec.kind {
            OptionKind::Positive => match value.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(OptionValue::Positive(n)),
                _ => Err(invalid(format!(
                    "expected a positive integer, found '{value}'"
                ))),
            },
            OptionKind::Flag => match value.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(OptionValue::Flag(true)),
                "false" => Ok(OptionValue::Flag(false)),
                _ => Err(invalid(format!("expected true or false, found '{value}'"))),
            },
            OptionKind::Names => {
                let names: Vec<String> = (value.split(',').map(str::trim))
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect();
                if names.is_empty() {
                    return Err(invalid("expected comma-separated names".into()));
                }
                Ok(OptionValue::Names(names))
            }
            OptionKind::Choice(words) => {
                let wanted = value.trim().to_ascii_lowercase();
                match words.iter().find(|w| **w == wanted) {
                    Some(word) => Ok(OptionValue::Choice(word)),
                    None => Err(invalid(format!(
                        "expected one of {}, found '{value}'",
                        words.join(", ")
                    ))),
                }
            }
            OptionKind::Text => match value.trim() {
                "" => Err(invalid("expected a value, found nothing".into())),
                text => Ok(OptionValue::Text(text.to_string())),
            },
        }
    }
}

/// The format options a table was given, in the order of the format's table of options.
#[derive(Debug, Clone)]
pub(crate) struct FormatOptions {
    specs: &'static [OptionSpec],
    values: Vec<(&'static str, OptionValue)>,
}

impl FormatOptions {
    /// None set, of a format whose options are `specs`.
    pub(crate) const fn new(specs: &'static [OptionSpec]) -> Self {
        FormatOptions {
            specs,
            values: Vec::new(),
        }
    }

    /// `OPTIONS (...)`: the format's keys (DataFusion prefixes keys without a dot with
    /// `format.`; both spellings are accepted) and the storage settings; any other key is an
    /// error listing the known ones. `taker` is what takes them, for that error
    /// (`STORED AS ZARR`, `write_nd_batches`).
    pub(crate) fn from_sql(
        specs: &'static [OptionSpec],
        options: &HashMap<String, String>,
        taker: &str,
    ) -> Result<(Self, StorageOptions)> {
        let (own, _, storage) = Self::from_sql_layered(specs, &[], options, taker)?;
        Ok((own, storage))
    }

    /// Like [`from_sql`](Self::from_sql) for a format that takes another's options (`specs`)
    /// and its own (`more`, which win a key both declare): both sets, then the storage
    /// settings. Unknown keys list all.
    pub(crate) fn from_sql_layered(
        specs: &'static [OptionSpec],
        more: &'static [OptionSpec],
        options: &HashMap<String, String>,
        taker: &str,
    ) -> Result<(Self, Self, StorageOptions)> {
        let mut own = FormatOptions::new(specs);
        let mut extra = FormatOptions::new(more);
        let mut storage = StorageOptions::new();
        let mut keys: Vec<&String> = options.keys().collect();
        keys.sort();
        for key in keys {
            let value = &options[key];
            let bare = key.strip_prefix("format.").unwrap_or(key);
            // A key both declare is the layering format's own (Icechunk's containers).
            if let Some(spec) = more.iter().find(|s| s.key == bare) {
                extra.set(spec, OptionValue::parse(spec, value)?);
            } else if let Some(spec) = specs.iter().find(|s| s.key == bare) {
                own.set(spec, OptionValue::parse(spec, value)?);
            } else if StorageOptions::is_storage_key(bare) {
                storage = storage.with(bare, value.clone())?;
            } else {
                let mut known: Vec<&str> = Vec::new();
                for key in (specs.iter().chain(more).map(|s| s.key)).chain(StorageOptions::keys()) {
                    if !known.contains(&key) {
                        known.push(key);
                    }
                }
                return Err(Error::InvalidOption {
                    option: bare.to_string(),
                    reason: format!(
                        "{taker} does not know this option; known: {}",
                        known.join(", ")
                    ),
                });
            }
        }
        Ok((own, extra, storage))
    }

    /// Sets `spec` (one of this format's options) to `value`.
    pub(crate) fn set(&mut self, spec: &OptionSpec, value: OptionValue) {
        self.values.retain(|(k, _)| *k != spec.key);
        self.values.push((spec.key, value));
        let specs = self.specs;
        self.values
            .sort_by_key(|(k, _)| specs.iter().position(|s| s.key == *k));
    }

    fn get(&self, spec: &OptionSpec) -> Option<&OptionValue> {
        (self.values.iter())
            .find(|(k, _)| *k == spec.key)
            .map(|(_, v)| v)
    }

    pub(crate) fn positive(&self, spec: &OptionSpec) -> Option<usize> {
        match self.get(spec) {
            Some(OptionValue::Positive(n)) => Some(*n),
            _ => None,
        }
    }

    pub(crate) fn flag(&self, spec: &OptionSpec) -> Option<bool> {
        match self.get(spec) {
            Some(OptionValue::Flag(b)) => Some(*b),
            _ => None,
        }
    }

    pub(crate) fn names(&self, spec: &OptionSpec) -> Option<&[String]> {
        match self.get(spec) {
            Some(OptionValue::Names(names)) => Some(names),
            _ => None,
        }
    }

    #[cfg_attr(not(feature = "icechunk"), allow(dead_code))]
    pub(crate) fn text(&self, spec: &OptionSpec) -> Option<&str> {
        match self.get(spec) {
            Some(OptionValue::Text(text)) => Some(text),
            _ => None,
        }
    }

    pub(crate) fn choice(&self, spec: &OptionSpec) -> Option<&'static str> {
        match self.get(spec) {
            Some(OptionValue::Choice(word)) => Some(word),
            _ => None,
        }
    }

    /// The options set, as `OPTIONS (...)` keys and values.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn to_sql(&self) -> impl Iterator<Item = (String, String)> + '_ {
        (self.values.iter()).map(|(k, v)| (k.to_string(), v.to_string()))
    }

    /// The options set, as EXPLAIN shows them (`key=value`).
    pub(crate) fn described(&self) -> impl Iterator<Item = String> + '_ {
        (self.values.iter()).map(|(k, v)| format!("{k}={v}"))
    }

    /// Every option of the format and what it sets.
    pub(crate) fn documented(&self) -> Vec<(&'static str, &'static str)> {
        self.specs.iter().map(|s| (s.key, s.doc)).collect()
    }

    /// The first option set that applies to groups only.
    pub(crate) fn group_option_set(&self) -> Option<&'static str> {
        (self.specs.iter())
            .find(|s| s.groups_only && self.get(s).is_some())
            .map(|s| s.key)
    }
}

mod keys {
    /// What a kind's [`OptionKeys`](super::OptionKeys) declare. In a private module: only
    /// ndfusion's kinds have keys.
    pub trait Declared {
        /// The keys, in the order EXPLAIN shows them.
        const SPECS: &'static [super::OptionSpec];
        /// What takes them, in messages (`STORED AS ZARR`).
        const TAKER: &'static str;
    }
}

pub(crate) use keys::Declared;

/// The `OPTIONS (...)` keys of one kind of table, which make a [`KindOptions`] that kind's
/// options: [`ZarrKeys`](crate::ZarrKeys), [`LanceNdKeys`](crate::LanceNdKeys).
pub trait OptionKeys:
    keys::Declared + Copy + Default + std::fmt::Debug + Send + Sync + 'static
{
}

/// How a table of one kind is read: the kind's options and the storage settings, from SQL
/// `OPTIONS (...)` ([`from_sql`](Self::from_sql)) or from Rust (the kind's builder methods,
/// [`with_storage`](Self::with_storage), [`with_limits`](Self::with_limits)). Each kind names
/// its own: [`ZarrOptions`](crate::ZarrOptions), [`LanceNdOptions`](crate::LanceNdOptions).
#[derive(Clone)]
pub struct KindOptions<K: OptionKeys> {
    pub(crate) set: FormatOptions,
    storage: StorageOptions,
    keys: PhantomData<K>,
}

impl<K: OptionKeys> Default for KindOptions<K> {
    fn default() -> Self {
        KindOptions {
            set: FormatOptions::new(K::SPECS),
            storage: StorageOptions::default(),
            keys: PhantomData,
        }
    }
}

impl<K: OptionKeys> std::fmt::Debug for KindOptions<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindOptions")
            .field("of", &K::TAKER)
            .field("set", &self.set)
            .field("storage", &self.storage)
            .finish()
    }
}

impl<K: OptionKeys> KindOptions<K> {
    /// The defaults: none of the kind's options set, storage credentials from the
    /// environment, the process's limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// How remote locations are reached.
    pub fn with_storage(mut self, storage: StorageOptions) -> Self {
        self.storage = storage;
        self
    }

    /// The storage settings.
    pub fn storage(&self) -> &StorageOptions {
        &self.storage
    }

    /// Reads under `limits` instead of the process's defaults (a session's factories give
    /// the session's: `SET ndfusion.*`).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.storage = self.storage.with_limits(limits);
        self
    }

    /// Every `OPTIONS (...)` key of the kind (storage settings aside) and what it sets.
    pub fn documented() -> Vec<(&'static str, &'static str)> {
        FormatOptions::new(K::SPECS).documented()
    }

    /// The options of `CREATE EXTERNAL TABLE ... OPTIONS (...)` (also what the Python
    /// package passes).
    pub fn from_sql(options: &HashMap<String, String>) -> Result<Self> {
        let (set, storage) = FormatOptions::from_sql(K::SPECS, options, K::TAKER)?;
        Ok(KindOptions::of(set, storage))
    }

    /// The same settings as the options of another kind, as far as it has the keys (a netCDF
    /// table is read as a Zarr group is).
    pub(crate) fn as_kind<L: OptionKeys>(&self) -> KindOptions<L> {
        let mut set = FormatOptions::new(L::SPECS);
        for (key, value) in &self.set.values {
            if let Some(spec) = L::SPECS.iter().find(|s| s.key == *key) {
                set.set(spec, value.clone());
            }
        }
        KindOptions::of(set, self.storage.clone())
    }

    pub(crate) fn of(set: FormatOptions, storage: StorageOptions) -> Self {
        KindOptions {
            set,
            storage,
            keys: PhantomData,
        }
    }

    /// The options as `OPTIONS (...)` keys, which [`from_sql`](Self::from_sql) reads back (a
    /// cluster sends them with the plan; not the limits, executors keep their own); an object
    /// store the application built has no keys.
    pub(crate) fn to_sql(&self) -> Result<HashMap<String, String>> {
        let mut map = self.storage.to_sql()?;
        map.extend(self.set.to_sql());
        Ok(map)
    }

    /// The options set by the user, as EXPLAIN shows them (secrets as `***`); empty when all
    /// are defaults.
    pub(crate) fn describe_set(&self) -> String {
        self.described(self.set.described().collect())
    }

    /// The values in force of the kind's counts, as EXPLAIN VERBOSE shows them, with the
    /// storage settings.
    pub(crate) fn describe_in_force(&self, in_force: &[(&OptionSpec, usize)]) -> String {
        let parts = (in_force.iter())
            .map(|(spec, n)| format!("{}={n}", spec.key))
            .collect();
        self.described(parts)
    }

    fn described(&self, mut parts: Vec<String>) -> String {
        if !self.storage.is_empty() {
            parts.push(format!("{:?}", self.storage));
        }
        parts.join(", ")
    }
}

impl<K: OptionKeys> std::fmt::Display for KindOptions<K> {
    /// The options set (secrets as `***`), or `defaults`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.describe_set() {
            set if set.is_empty() => f.write_str("defaults"),
            set => f.write_str(&set),
        }
    }
}

/// ndfusion's tables take no column list or partitioning: their columns come from the data.
/// `format` is the `STORED AS` name, for messages.
pub(crate) fn check_external_table(
    cmd: &CreateExternalTable,
    format: &str,
) -> datafusion::common::Result<()> {
    if !cmd.schema.fields().is_empty() {
        return plan_err!(
            "STORED AS {format} reads its columns from the data: leave out the column list"
        );
    }
    if !cmd.table_partition_cols.is_empty() {
        return plan_err!("STORED AS {format} does not support PARTITIONED BY");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[OptionSpec] = &[
        OptionSpec {
            key: "batch_size",
            kind: OptionKind::Positive,
            doc: "rows per batch",
            groups_only: false,
        },
        OptionSpec {
            key: "variables",
            kind: OptionKind::Names,
            doc: "variables",
            groups_only: true,
        },
    ];

    #[test]
    fn format_and_storage_keys_are_split_and_unknown_keys_listed() {
        let options = HashMap::from([
            ("format.batch_size".to_string(), "10".to_string()),
            ("variables".to_string(), " a, b ,".to_string()),
            ("aws.region".to_string(), "eu-west-1".to_string()),
        ]);
        let (own, storage) = FormatOptions::from_sql(SPECS, &options, "STORED AS ZARR").unwrap();
        assert_eq!(own.positive(&SPECS[0]), Some(10));
        assert_eq!(
            own.names(&SPECS[1]),
            Some(&["a".to_string(), "b".to_string()][..])
        );
        assert_eq!(own.group_option_set(), Some("variables"));
        assert_eq!(
            own.described().collect::<Vec<_>>(),
            ["batch_size=10", "variables=a,b"]
        );
        assert_eq!(storage.get("aws.region"), Some("eu-west-1"));

        let options = HashMap::from([("format.chunk_cache".to_string(), "1".to_string())]);
        let err = FormatOptions::from_sql(SPECS, &options, "STORED AS ZARR")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid option 'chunk_cache': STORED AS ZARR does not know this option; known: batch_size, variables, aws.access_key_id"),
            "{err}"
        );
        for (key, value) in [
            ("batch_size", "0"),
            ("batch_size", "x"),
            ("variables", " , "),
        ] {
            let options = HashMap::from([(key.to_string(), value.to_string())]);
            let err = FormatOptions::from_sql(SPECS, &options, "STORED AS ZARR").unwrap_err();
            assert!(err.to_string().contains(&format!("'{key}'")), "{err}");
        }
    }
}
