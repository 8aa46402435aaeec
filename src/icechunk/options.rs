//! How an Icechunk table is read: the version, the node inside the repository, the virtual
//! chunk containers it may read, and the Zarr options of the array or group it opens.

use std::collections::HashMap;

use crate::error::Result;
use crate::icechunk::version::{Version, VersionOptions};
use crate::storage::{parse_grants, ContainerGrant};
use crate::table_options::{FormatOptions, OptionKind, OptionSpec, OptionValue};
use crate::zarr::ZarrOptions;

const BRANCH: OptionSpec = OptionSpec::new(
    "branch",
    OptionKind::Text,
    "the branch whose tip each query reads (default: main)",
);
const TAG: OptionSpec = OptionSpec::new("tag", OptionKind::Text, "the tag to read");
const SNAPSHOT: OptionSpec = OptionSpec::new(
    "snapshot",
    OptionKind::Text,
    "the snapshot id to read (icechunk_log lists them)",
);
const AS_OF: OptionSpec = OptionSpec::new(
    "as_of",
    OptionKind::Text,
    "with 'branch': read the branch as it was at this RFC 3339 instant",
);
const PATH: OptionSpec = OptionSpec::new(
    "path",
    OptionKind::Text,
    "the array or group inside the repository (default: its root)",
);
const VIRTUAL_CHUNK_CONTAINERS: OptionSpec = OptionSpec::new(
    "virtual_chunk_containers",
    OptionKind::Text,
    "virtual chunk containers the table may read, comma-separated URL prefixes \
     (file:///data/nc/, s3://bucket/nc/) or name=prefix for a named container at a new place \
     (default: none)",
);

const OPTIONS: &[OptionSpec] = &[BRANCH, TAG, SNAPSHOT, AS_OF, PATH, VIRTUAL_CHUNK_CONTAINERS];

/// How to read an Icechunk repository: [`ZarrOptions`] for what it holds, and which version,
/// node and virtual chunk containers.
///
/// ```
/// let options = ndfusion::IcechunkOptions::new()
///     .with_tag("v1")
///     .with_path("ocean/surface")
///     .with_zarr(ndfusion::ZarrOptions::new().with_variables(["temp"]));
/// # let _ = options;
/// ```
#[derive(Debug, Clone)]
pub struct IcechunkOptions {
    set: FormatOptions,
    zarr: ZarrOptions,
}

impl Default for IcechunkOptions {
    fn default() -> Self {
        IcechunkOptions {
            set: FormatOptions::new(OPTIONS),
            zarr: ZarrOptions::new(),
        }
    }
}

impl IcechunkOptions {
    /// The tip of `main`, the repository's root, no virtual chunks.
    pub fn new() -> Self {
        Self::default()
    }

    fn with_text(mut self, spec: &OptionSpec, value: &str) -> Self {
        self.set
            .set(spec, OptionValue::Text(value.trim().to_string()));
        self
    }

    /// Reads the tip of `branch` as it is when each query is planned.
    pub fn with_branch(self, branch: &str) -> Self {
        self.with_text(&BRANCH, branch)
    }

    /// Reads tag `tag`.
    pub fn with_tag(self, tag: &str) -> Self {
        self.with_text(&TAG, tag)
    }

    /// Reads snapshot `id` (checked when the table opens).
    pub fn with_snapshot(self, id: &str) -> Self {
        self.with_text(&SNAPSHOT, id)
    }

    /// Reads the branch (`main` unless [`with_branch`](Self::with_branch)) as it was at
    /// `instant` (RFC 3339, checked when the table opens).
    pub fn with_as_of(self, instant: &str) -> Self {
        self.with_text(&AS_OF, instant)
    }

    /// The array or group inside the repository (`ocean/surface`).
    pub fn with_path(self, path: &str) -> Self {
        self.with_text(&PATH, path)
    }

    /// The virtual chunk containers the table may read chunks from: URL prefixes
    /// (`file:///data/nc/`, `s3://bucket/nc/`), or `name=prefix` for a named container whose
    /// files are at `prefix` here (checked when the table opens).
    pub fn with_virtual_chunk_containers<S: AsRef<str>>(
        self,
        containers: impl IntoIterator<Item = S>,
    ) -> Self {
        let list: Vec<String> = containers
            .into_iter()
            .map(|c| c.as_ref().to_string())
            .collect();
        self.with_text(&VIRTUAL_CHUNK_CONTAINERS, &list.join(","))
    }

    /// The Zarr options of the array or group (batch size, `variables`, CF decoding, ...)
    /// and the storage settings of the repository.
    pub fn with_zarr(mut self, zarr: ZarrOptions) -> Self {
        self.zarr = zarr;
        self
    }

    /// Reads under `limits` instead of the process's defaults (a session's factory gives the
    /// session's: `SET ndfusion.*`).
    pub fn with_limits(mut self, limits: crate::Limits) -> Self {
        self.zarr = self.zarr.with_limits(limits);
        self
    }

    /// The Zarr options (and storage settings) the table reads with.
    pub fn zarr(&self) -> &ZarrOptions {
        &self.zarr
    }

    /// Every option `STORED AS ICECHUNK` takes besides Zarr's and the storage keys.
    pub fn documented() -> Vec<(&'static str, &'static str)> {
        IcechunkOptions::new().set.documented()
    }

    /// The options of `CREATE EXTERNAL TABLE ... STORED AS ICECHUNK OPTIONS (...)`.
    pub fn from_sql(options: &HashMap<String, String>) -> Result<Self> {
        let (zarr, set) = ZarrOptions::from_sql_with(options, OPTIONS, "STORED AS ICECHUNK")?;
        let options = IcechunkOptions { set, zarr };
        // Checked now, so a bad value is reported when the table is created.
        options.version()?;
        options.grants()?;
        Ok(options)
    }

    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn to_sql(&self) -> Result<HashMap<String, String>> {
        let mut map = self.zarr.to_sql()?;
        map.extend(self.set.to_sql());
        Ok(map)
    }

    pub(crate) fn version(&self) -> Result<Version> {
        Version::from_options(VersionOptions {
            branch: self.set.text(&BRANCH),
            tag: self.set.text(&TAG),
            snapshot: self.set.text(&SNAPSHOT),
            as_of: self.set.text(&AS_OF),
        })
    }

    /// The same options reading snapshot `id` only (what a cluster's executors read).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn pinned(&self, id: &str) -> Self {
        let mut pinned = self.clone();
        pinned.set = FormatOptions::new(OPTIONS);
        for spec in OPTIONS {
            if let Some(text) = self.set.text(spec) {
                if ![BRANCH.key, TAG.key, AS_OF.key].contains(&spec.key) {
                    pinned.set.set(spec, OptionValue::Text(text.to_string()));
                }
            }
        }
        pinned.with_snapshot(id)
    }

    /// The node inside the repository, without leading or trailing `/` (`""`: the root).
    pub(crate) fn path(&self) -> &str {
        self.set.text(&PATH).unwrap_or("").trim_matches('/')
    }

    pub(crate) fn grants(&self) -> Result<Vec<ContainerGrant>> {
        match self.set.text(&VIRTUAL_CHUNK_CONTAINERS) {
            Some(value) => parse_grants(value),
            None => Ok(Vec::new()),
        }
    }
}

impl std::fmt::Display for IcechunkOptions {
    /// The options set (secrets as `***`), or `defaults`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self.set.described().collect();
        let zarr = self.zarr.to_string();
        if zarr != "defaults" {
            parts.push(zarr);
        }
        match parts.is_empty() {
            true => f.write_str("defaults"),
            false => f.write_str(&parts.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(pairs: &[(&str, &str)]) -> Result<IcechunkOptions> {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        IcechunkOptions::from_sql(&map)
    }

    #[test]
    fn icechunk_zarr_and_storage_keys_are_read_together() {
        let options = sql(&[
            ("tag", "v1"),
            ("path", "/ocean/surface/"),
            ("variables", "temp"),
            ("aws.region", "eu-west-1"),
        ])
        .unwrap();
        assert_eq!(options.path(), "ocean/surface");
        assert_eq!(options.zarr().variables().unwrap(), ["temp"]);
        let back = options.to_sql().unwrap();
        assert_eq!(back["tag"], "v1");
        assert_eq!(back["aws.region"], "eu-west-1");
        assert_eq!(back["variables"], "temp");
    }

    #[test]
    fn an_unknown_option_lists_every_known_key() {
        let err = sql(&[("brnch", "main")]).unwrap_err().to_string();
        assert!(err.contains("invalid option 'brnch'"), "{err}");
        assert!(
            err.contains("STORED AS ICECHUNK does not know this option"),
            "{err}"
        );
        for key in [
            "branch",
            "as_of",
            "virtual_chunk_containers",
            "variables",
            "aws.region",
        ] {
            assert!(err.contains(key), "{key}: {err}");
        }
    }

    #[test]
    fn two_version_selectors_are_refused_naming_both() {
        let err = sql(&[("tag", "v1"), ("snapshot", "1CECHNKREP0F1RSTCMT0")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("'tag' and 'snapshot'"), "{err}");
    }

    #[test]
    fn a_pinned_table_reads_one_snapshot_and_keeps_the_rest() {
        let options = sql(&[("branch", "dev"), ("path", "a"), ("batch_size", "10")]).unwrap();
        let pinned = options.pinned("1CECHNKREP0F1RSTCMT0").to_sql().unwrap();
        assert_eq!(pinned.get("branch"), None);
        assert_eq!(pinned["snapshot"], "1CECHNKREP0F1RSTCMT0");
        assert_eq!(pinned["path"], "a");
        assert_eq!(pinned["batch_size"], "10");
    }
}
