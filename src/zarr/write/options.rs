//! What `COPY (query) TO 'out.zarr' STORED AS ZARR OPTIONS (...)` takes: each key declared
//! once, read by the format factory, shown by `\options` and listed in errors.

use super::zarr_version::ZarrVersion;
use crate::error::{Error, Result};
use crate::table_options::{Declared, KindOptions, OptionKeys, OptionKind, OptionSpec};

const OVERWRITE: OptionSpec = OptionSpec::new(
    "overwrite",
    OptionKind::Flag,
    "replace a store already at the location, once the new one is complete (default: false, \
     an existing location is an error)",
);
const COMPRESSION: OptionSpec = OptionSpec::new(
    "compression",
    OptionKind::Choice(&["zstd", "gzip", "none"]),
    "the chunks' compressor (default: zstd)",
);
const CHUNKS: OptionSpec = OptionSpec::new(
    "chunks",
    OptionKind::Text,
    "elements per chunk along each dimension, 'dim_0=100000' (default: about 2 MiB of \
     elements a chunk)",
);

const DIMENSIONS: OptionSpec = OptionSpec::new(
    "dimensions",
    OptionKind::Names,
    "columns that are the grid's dimensions, comma-separated: writes a dataset (a group of \
     coordinates and data variables) that xarray opens (default: none, a struct array)",
);
const ZARR_FORMAT: OptionSpec = OptionSpec::new(
    "zarr_format",
    OptionKind::Choice(&["3", "2"]),
    "with dimensions: the Zarr format of the dataset, 3 or 2 (default: 3; a struct array is \
     always Zarr 3)",
);
const ATTRIBUTES: OptionSpec = OptionSpec::new(
    "attributes",
    OptionKind::Text,
    "with dimensions: the dataset's attributes, a JSON object (default: none)",
);

/// The options of `COPY ... STORED AS ZARR`, in the order `\options` lists them.
pub(crate) const WRITE_OPTIONS: &[OptionSpec] = &[
    OVERWRITE,
    COMPRESSION,
    CHUNKS,
    DIMENSIONS,
    ZARR_FORMAT,
    ATTRIBUTES,
];

/// The keys of `COPY ... STORED AS ZARR` (what makes a [`KindOptions`] a
/// [`ZarrWriteOptions`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ZarrWriteKeys;

impl Declared for ZarrWriteKeys {
    const SPECS: &'static [OptionSpec] = WRITE_OPTIONS;
    const TAKER: &'static str = "COPY ... STORED AS ZARR";
}

impl OptionKeys for ZarrWriteKeys {}

/// How `COPY ... TO ... STORED AS ZARR` writes: `overwrite`, `compression`, `chunks`, and the
/// storage settings of [`StorageOptions`](crate::StorageOptions) for remote locations.
pub type ZarrWriteOptions = KindOptions<ZarrWriteKeys>;

/// The compressor of every chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    Zstd,
    Gzip,
    None,
}

/// zstd's level: its own default, fast and a good ratio on numeric records.
pub(crate) const ZSTD_LEVEL: i32 = 3;
/// gzip's level: zarr-python's default for its gzip codec.
pub(crate) const GZIP_LEVEL: u32 = 5;

impl KindOptions<ZarrWriteKeys> {
    /// Replace a store already at the location (only once the new one is complete).
    pub fn with_overwrite(mut self, overwrite: bool) -> Self {
        (self.set).set(
            &OVERWRITE,
            crate::table_options::OptionValue::Flag(overwrite),
        );
        self
    }

    pub(crate) fn overwrite(&self) -> bool {
        self.set.flag(&OVERWRITE).unwrap_or(false)
    }

    /// The grid's dimensions (`dimensions`); `None` writes a struct array.
    pub(crate) fn dimensions(&self) -> Option<&[String]> {
        self.set.names(&DIMENSIONS)
    }

    /// The dataset's attributes (`attributes`): a JSON object, or an error naming the option.
    pub(crate) fn attributes(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        let Some(text) = self.set.text(&ATTRIBUTES) else {
            return Ok(serde_json::Map::new());
        };
        let invalid = |reason: String| Error::InvalidOption {
            option: ATTRIBUTES.key.to_string(),
            reason,
        };
        match serde_json::from_str(text) {
            Ok(serde_json::Value::Object(map)) => {
                if self.dimensions().is_none() {
                    return Err(invalid(
                        "a struct array has no attributes here; it applies with 'dimensions'"
                            .into(),
                    ));
                }
                Ok(map)
            }
            Ok(other) => Err(invalid(format!("expected a JSON object, found {other}"))),
            Err(e) => Err(invalid(format!("not JSON: {e}"))),
        }
    }

    /// The Zarr format of a gridded write (`zarr_format`): `2` without `dimensions` is an
    /// error naming the option, as the struct data type exists only in Zarr 3.
    pub(crate) fn zarr_version(&self) -> Result<ZarrVersion> {
        match self.set.choice(&ZARR_FORMAT) {
            Some("2") if self.dimensions().is_none() => Err(Error::InvalidOption {
                option: ZARR_FORMAT.key.to_string(),
                reason: "a struct array is written as Zarr 3 (Zarr 2 has no struct data type \
                         ndfusion writes); '2' applies with 'dimensions'"
                    .into(),
            }),
            Some("2") => Ok(ZarrVersion::V2),
            _ => Ok(ZarrVersion::V3),
        }
    }

    pub(crate) fn compression(&self) -> Compression {
        match self.set.choice(&COMPRESSION) {
            Some("gzip") => Compression::Gzip,
            Some("none") => Compression::None,
            _ => Compression::Zstd,
        }
    }

    /// The elements per chunk asked for along `dimension` (`chunks`), checked against the
    /// dimensions the write has: a dimension it does not have is an error naming it.
    pub(crate) fn chunk_length(
        &self,
        dimensions: &[&str],
        dimension: &str,
    ) -> Result<Option<usize>> {
        let Some(text) = self.set.text(&CHUNKS) else {
            return Ok(None);
        };
        let invalid = |reason: String| Error::InvalidOption {
            option: CHUNKS.key.to_string(),
            reason,
        };
        let mut found = None;
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, length)) = part.split_once('=') else {
                return Err(invalid(format!(
                    "expected name=length pairs ('dim_0=100000'), found '{part}'"
                )));
            };
            let name = name.trim();
            let length = match length.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(invalid(format!(
                        "the length of '{name}' must be a positive integer, found '{}'",
                        length.trim()
                    )))
                }
            };
            if !dimensions.contains(&name) {
                return Err(invalid(format!(
                    "the write has no dimension '{name}'; its dimensions: {}",
                    dimensions.join(", ")
                )));
            }
            if name == dimension {
                found = Some(length);
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn options(pairs: &[(&str, &str)]) -> Result<ZarrWriteOptions> {
        let map: HashMap<String, String> = (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ZarrWriteOptions::from_sql(&map)
    }

    #[test]
    fn keys_come_bare_or_with_datafusions_prefix() {
        let o = options(&[("format.overwrite", "true"), ("compression", "GZIP")]).unwrap();
        assert!(o.overwrite());
        assert_eq!(o.compression(), Compression::Gzip);
        let o = options(&[]).unwrap();
        assert!(!o.overwrite());
        assert_eq!(o.compression(), Compression::Zstd);
        assert_eq!(o.chunk_length(&["dim_0"], "dim_0").unwrap(), None);
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_option() {
        let err = options(&[("format.dimension", "x")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'dimension'")
                && err.contains("COPY ... STORED AS ZARR does not know this option")
                && err.contains(
                    "overwrite, compression, chunks, dimensions, zarr_format, attributes"
                ),
            "{err}"
        );
        let err = options(&[("compression", "lz4")]).unwrap_err().to_string();
        assert!(err.contains("expected one of zstd, gzip, none"), "{err}");
        let o = options(&[("chunks", "time=10")]).unwrap();
        let err = o.chunk_length(&["dim_0"], "dim_0").unwrap_err().to_string();
        assert!(
            err.contains("no dimension 'time'; its dimensions: dim_0"),
            "{err}"
        );
        let o = options(&[("chunks", "dim_0=0")]).unwrap();
        let err = o.chunk_length(&["dim_0"], "dim_0").unwrap_err().to_string();
        assert!(err.contains("positive integer, found '0'"), "{err}");
        let err = options(&[("zarr_format", "2")])
            .unwrap()
            .zarr_version()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'zarr_format'") && err.contains("applies with 'dimensions'"),
            "{err}"
        );
        let o = options(&[("zarr_format", "2"), ("dimensions", "x")]).unwrap();
        assert_eq!(o.zarr_version().unwrap(), ZarrVersion::V2);
        let err = options(&[("zarr_format", "4")]).unwrap_err().to_string();
        assert!(err.contains("expected one of 3, 2"), "{err}");
        let o = options(&[("chunks", " dim_0 = 7 ")]).unwrap();
        assert_eq!(o.chunk_length(&["dim_0"], "dim_0").unwrap(), Some(7));
    }
}
