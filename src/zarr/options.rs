//! How a Zarr table is read: batch size, chunks in flight, read piece size, storage settings.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::storage::{parse_grants, ContainerGrant};
use crate::table_options::{
    Declared, FormatOptions, KindOptions, OptionKeys, OptionKind, OptionSpec, OptionValue,
};
use crate::zarr::decode::cf::CfOptions;

/// Chunks each partition fetches ahead of the one it decodes, from local folders: enough to
/// overlap reading with decoding on a local disk.
const LOCAL_CHUNKS_IN_FLIGHT: usize = 2;

/// The same from object stores: a request costs tens of milliseconds, so many are kept in
/// flight (object_store's own default for concurrent range requests is 10).
const REMOTE_CHUNKS_IN_FLIGHT: usize = 16;

/// Bytes of an uncompressed local chunk read and gathered at a time: small enough that the
/// kernel's copy is still in the core's cache when the fields are gathered (BENCHMARKS.md).
const PIECE_BYTES: usize = 1 << 20;

const BATCH_SIZE: OptionSpec = OptionSpec::new(
    "batch_size",
    OptionKind::Positive,
    "rows per output batch (default: the session's datafusion.execution.batch_size)",
);
const CHUNKS_IN_FLIGHT: OptionSpec = OptionSpec::new(
    "chunks_in_flight",
    OptionKind::Positive,
    "chunks each partition reads ahead (default: 2 from local folders, 16 from object \
          stores)",
);
const PIECE_BYTES_OPTION: OptionSpec = OptionSpec::new(
    "piece_bytes",
    OptionKind::Positive,
    "bytes of an uncompressed local chunk read at a time (default: 1048576)",
);
const VARIABLES: OptionSpec = OptionSpec::new(
    "variables",
    OptionKind::Names,
    "groups: the data variables to show, comma-separated (default: all)",
)
.for_groups();
const DECODE_TIMES: OptionSpec = OptionSpec::new(
    "decode_times",
    OptionKind::Flag,
    "groups: decode CF times to timestamps (default: true)",
)
.for_groups();
const MASK_AND_SCALE: OptionSpec = OptionSpec::new(
    "mask_and_scale",
    OptionKind::Flag,
    "groups: _FillValue / missing_value to NULL, scale_factor / add_offset (default: true)",
)
.for_groups();

const VIRTUAL_CHUNK_CONTAINERS: OptionSpec = OptionSpec::new(
    "virtual_chunk_containers",
    OptionKind::Text,
    "Kerchunk reference files: URL prefixes outside the file's own folder its references may \
     point into, comma-separated (file:///data/nc/, s3://bucket/nc/; default: none)",
);

/// The options of `STORED AS ZARR`, in the order EXPLAIN shows them.
pub(crate) const OPTIONS: &[OptionSpec] = &[
    BATCH_SIZE,
    CHUNKS_IN_FLIGHT,
    PIECE_BYTES_OPTION,
    VARIABLES,
    DECODE_TIMES,
    MASK_AND_SCALE,
    VIRTUAL_CHUNK_CONTAINERS,
];

/// The keys of `STORED AS ZARR` (what makes a [`KindOptions`] a [`ZarrOptions`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ZarrKeys;

impl Declared for ZarrKeys {
    const SPECS: &'static [OptionSpec] = OPTIONS;
    const TAKER: &'static str = "STORED AS ZARR";
}

impl OptionKeys for ZarrKeys {}

/// How a Zarr table is read.
///
/// From SQL, as `OPTIONS` of `CREATE EXTERNAL TABLE ... STORED AS ZARR`: `batch_size`,
/// `chunks_in_flight`, `piece_bytes`; for groups `variables` (comma-separated),
/// `decode_times` and `mask_and_scale` (`true`/`false`, xarray's names); and the storage
/// settings of [`StorageOptions`](crate::StorageOptions). From Rust, with the builder methods:
///
/// ```no_run
/// # async fn demo() -> ndfusion::Result<()> {
/// use ndfusion::{StorageOptions, ZarrOptions, ZarrTable};
/// let options = ZarrOptions::new()
///     .with_chunks_in_flight(32)
///     .with_storage(StorageOptions::new().with("aws.skip_signature", "true")?);
/// let table = ZarrTable::open_with("s3://bucket/ocean.zarr", options).await?;
/// # Ok(()) }
/// ```
///
/// The defaults: the session's batch size, 2 chunks in flight locally (16 remotely), 1 MiB
/// pieces, storage credentials from the environment.
pub type ZarrOptions = KindOptions<ZarrKeys>;

impl KindOptions<ZarrKeys> {
    /// Rows per output batch (at least 1), instead of the session's batch size.
    pub fn with_batch_size(mut self, rows: usize) -> Self {
        (self.set).set(&BATCH_SIZE, OptionValue::Positive(rows.max(1)));
        self
    }

    /// Chunks each partition reads ahead of the one it decodes (at least 1).
    pub fn with_chunks_in_flight(mut self, chunks: usize) -> Self {
        (self.set).set(&CHUNKS_IN_FLIGHT, OptionValue::Positive(chunks.max(1)));
        self
    }

    /// Bytes of an uncompressed local chunk read and gathered at a time (at least 1).
    pub fn with_piece_bytes(mut self, bytes: usize) -> Self {
        (self.set).set(&PIECE_BYTES_OPTION, OptionValue::Positive(bytes.max(1)));
        self
    }

    /// For a group: only these data variables (and the coordinates they need).
    pub fn with_variables<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        let names = names.into_iter().map(Into::into).collect();
        self.set.set(&VARIABLES, OptionValue::Names(names));
        self
    }

    /// For a group: whether CF times (`units: "days since ..."`) become timestamps (default).
    pub fn with_decode_times(mut self, decode: bool) -> Self {
        self.set.set(&DECODE_TIMES, OptionValue::Flag(decode));
        self
    }

    /// For a group: whether `_FillValue` / `missing_value` become NULL and `scale_factor` /
    /// `add_offset` apply (default).
    pub fn with_mask_and_scale(mut self, decode: bool) -> Self {
        self.set.set(&MASK_AND_SCALE, OptionValue::Flag(decode));
        self
    }

    /// For a Kerchunk reference file: URL prefixes (ending in `/`: `file:///data/nc/`,
    /// `s3://bucket/nc/`) outside the file's own folder that its references may point into.
    pub fn with_virtual_chunk_containers<S: AsRef<str>>(
        mut self,
        prefixes: impl IntoIterator<Item = S>,
    ) -> Self {
        let list: Vec<String> = prefixes
            .into_iter()
            .map(|p| p.as_ref().trim().to_string())
            .collect();
        (self.set).set(&VIRTUAL_CHUNK_CONTAINERS, OptionValue::Text(list.join(",")));
        self
    }

    /// The URL prefixes `virtual_chunk_containers` grants (checked: each ends in `/`).
    pub(crate) fn granted_prefixes(&self) -> Result<Vec<String>> {
        granted_prefixes(self.set.text(&VIRTUAL_CHUNK_CONTAINERS))
    }

    /// Zarr's options and those of a format built on Zarr (`more`: Icechunk's), from SQL
    /// `OPTIONS`; `taker` names that format in messages.
    #[cfg_attr(not(feature = "icechunk"), allow(dead_code))]
    pub(crate) fn from_sql_with(
        options: &HashMap<String, String>,
        more: &'static [OptionSpec],
        taker: &str,
    ) -> Result<(Self, FormatOptions)> {
        let (set, extra, storage) = FormatOptions::from_sql_layered(OPTIONS, more, options, taker)?;
        Ok((KindOptions::of(set, storage), extra))
    }

    pub(crate) fn variables(&self) -> Option<&[String]> {
        self.set.names(&VARIABLES)
    }

    pub(crate) fn cf(&self) -> CfOptions {
        CfOptions {
            decode_times: self.set.flag(&DECODE_TIMES).unwrap_or(true),
            mask_and_scale: self.set.flag(&MASK_AND_SCALE).unwrap_or(true),
        }
    }

    /// The group-only options are errors for an array.
    pub(crate) fn check_array_options(&self, location: &str) -> Result<()> {
        match self.set.group_option_set() {
            Some(key) => Err(Error::InvalidOption {
                option: key.to_string(),
                reason: format!(
                    "{location} is an array, not a group: the option applies to groups"
                ),
            }),
            None => Ok(()),
        }
    }

    pub(crate) fn batch_size(&self, session_batch_size: usize) -> usize {
        (self.set.positive(&BATCH_SIZE))
            .unwrap_or(session_batch_size)
            .max(1)
    }

    pub(crate) fn chunks_in_flight(&self, remote: bool) -> usize {
        self.set.positive(&CHUNKS_IN_FLIGHT).unwrap_or(if remote {
            REMOTE_CHUNKS_IN_FLIGHT
        } else {
            LOCAL_CHUNKS_IN_FLIGHT
        })
    }

    pub(crate) fn piece_bytes(&self) -> usize {
        self.set
            .positive(&PIECE_BYTES_OPTION)
            .unwrap_or(PIECE_BYTES)
    }

    /// The options in force, as EXPLAIN VERBOSE shows them (secrets as `***`).
    pub(crate) fn describe(&self, session_batch_size: usize, remote: bool) -> String {
        self.describe_in_force(&[
            (&BATCH_SIZE, self.batch_size(session_batch_size)),
            (&CHUNKS_IN_FLIGHT, self.chunks_in_flight(remote)),
            (&PIECE_BYTES_OPTION, self.piece_bytes()),
        ])
    }
}

/// The prefixes of a `virtual_chunk_containers` value. A reference names files by URL, so
/// Icechunk's named containers (`name=prefix`) have no meaning here and are refused.
pub(crate) fn granted_prefixes(value: Option<&str>) -> Result<Vec<String>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    (parse_grants(value)?.into_iter())
        .map(|grant| match grant {
            ContainerGrant::Prefix(prefix) => Ok(prefix),
            moved @ ContainerGrant::Moved { .. } => Err(Error::InvalidOption {
                option: "virtual_chunk_containers".into(),
                reason: format!(
                    "'{moved}': a named container is Icechunk's; a Kerchunk reference file's \
                     references are URLs: give their URL prefix"
                ),
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_options_set_what_they_name() {
        let map = HashMap::from([
            ("format.chunks_in_flight".to_string(), "32".to_string()),
            ("aws.secret_access_key".to_string(), "s3cr3t".to_string()),
        ]);
        let options = ZarrOptions::from_sql(&map).unwrap();
        assert_eq!(options.chunks_in_flight(false), 32);
        assert_eq!(options.batch_size(8192), 8192);
        assert_eq!(
            options.describe_set(),
            "chunks_in_flight=32, aws.secret_access_key=***"
        );
        let bad = HashMap::from([("format.piece_bytes".to_string(), "-1".to_string())]);
        assert_eq!(
            ZarrOptions::from_sql(&bad).unwrap_err().to_string(),
            "invalid option 'piece_bytes': expected a positive integer, found '-1'"
        );
    }
}
