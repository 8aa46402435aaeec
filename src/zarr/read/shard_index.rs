//! The index of a shard (`sharding_indexed`), checked before zarrs' sharding codec reads it:
//! zarrs adds each entry's offset and length and slices the shard with them, so an entry a
//! file crafted (offset 2^64 - 2) or a shard cut short would panic there, or wrap around.
//! Every entry must lie inside the shard's inner-chunk bytes.

use serde_json::Value;
use zarrs::array::ArrayMetadata;

use crate::zarr::metadata::array_meta::ArrayMeta;

/// An entry of an empty inner chunk: both fields all ones.
const EMPTY: u64 = u64::MAX;

/// Where a sharded array's index lies in each shard, and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShardIndex {
    /// Inner chunks per shard: one (offset, length) pair of u64 each.
    entries: usize,
    at_end: bool,
    big_endian: bool,
    /// A CRC-32C of the entries follows them.
    checksum: bool,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ShardIndexError {
    #[error("the shard holds {len} bytes, fewer than its index of {index} bytes")]
    Short { len: usize, index: usize },
    #[error(
        "the shard index puts inner chunk {entry} at offset {offset} of length {length}, which \
         points past the end of the shard's {chunks} bytes of inner chunks (the shard holds \
         {len} bytes)"
    )]
    Outside {
        entry: usize,
        offset: u64,
        length: u64,
        chunks: usize,
        len: usize,
    },
}

impl ShardIndex {
    /// The index layout of `meta`'s shards; `None` when the array is not sharded, or shards it
    /// in a way this check does not read (its index codecs are not `bytes` [+ `crc32c`]: zarrs
    /// reads those unchecked).
    pub(crate) fn of(meta: &ArrayMeta) -> Option<ShardIndex> {
        let ArrayMetadata::V3(v3) = &meta.zarrs_metadata else {
            return None;
        };
        let sharding = v3.codecs.iter().find(|c| c.name() == "sharding_indexed")?;
        let config: Value = sharding.to_configuration().ok()?;
        let inner: Vec<u64> = (config.get("chunk_shape")?.as_array()?.iter())
            .map(Value::as_u64)
            .collect::<Option<_>>()?;
        if inner.len() != meta.chunk_shape.len() {
            return None;
        }
        let entries = (meta.chunk_shape.iter().zip(&inner))
            .try_fold(1u64, |n, (&shard, &inner)| {
                n.checked_mul(shard.checked_div(inner)?)
            })
            .and_then(|n| usize::try_from(n).ok())?;
        let at_end = config.get("index_location").and_then(Value::as_str) != Some("start");
        let codecs = config.get("index_codecs")?.as_array()?;
        let names: Vec<&str> = codecs
            .iter()
            .filter_map(|c| c.get("name").and_then(Value::as_str))
            .collect();
        let checksum = match names.as_slice() {
            ["bytes"] => false,
            ["bytes", "crc32c"] => true,
            _ => return None,
        };
        let big_endian = codecs[0]
            .get("configuration")
            .and_then(|c| c.get("endian"))
            .and_then(Value::as_str)
            == Some("big");
        Some(ShardIndex {
            entries,
            at_end,
            big_endian,
            checksum,
        })
    }

    /// The index's size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.entries.saturating_mul(16) + if self.checksum { 4 } else { 0 }
    }

    /// The most a shard may add to its inner chunks' decoded bytes: its index, and a frame
    /// header's worth (64 bytes) per inner chunk.
    pub(crate) fn overhead(&self) -> u64 {
        (self.len() as u64).saturating_add((self.entries as u64).saturating_mul(64))
    }

    /// Whether the index sits at the end of the shard (else at its start).
    pub(crate) fn at_end(&self) -> bool {
        self.at_end
    }

    /// Checks a whole shard of `shard` bytes.
    pub(crate) fn check_shard(&self, shard: &[u8]) -> Result<(), ShardIndexError> {
        let index = self.len();
        if shard.len() < index {
            return Err(ShardIndexError::Short {
                len: shard.len(),
                index,
            });
        }
        let at = if self.at_end { shard.len() - index } else { 0 };
        self.check_index(&shard[at..at + index], shard.len())
    }

    /// Checks the index bytes `index` of a shard of `shard_len` bytes: each entry inside the
    /// shard's inner-chunk bytes (the shard without its index).
    pub(crate) fn check_index(
        &self,
        index: &[u8],
        shard_len: usize,
    ) -> Result<(), ShardIndexError> {
        let size = self.len();
        if index.len() != size || shard_len < size {
            return Err(ShardIndexError::Short {
                len: shard_len,
                index: size,
            });
        }
        let (start, end) = match self.at_end {
            true => (0, shard_len - size),
            false => (size, shard_len),
        };
        let word = |b: &[u8]| {
            let b: [u8; 8] = b.try_into().unwrap_or([0; 8]);
            match self.big_endian {
                true => u64::from_be_bytes(b),
                false => u64::from_le_bytes(b),
            }
        };
        for (entry, pair) in index[..self.entries * 16].chunks_exact(16).enumerate() {
            let (offset, length) = (word(&pair[..8]), word(&pair[8..]));
            if offset == EMPTY && length == EMPTY {
                continue;
            }
            let inside = offset >= start as u64
                && offset
                    .checked_add(length)
                    .is_some_and(|stop| stop <= end as u64);
            if !inside {
                return Err(ShardIndexError::Outside {
                    entry,
                    offset,
                    length,
                    chunks: end - start,
                    len: shard_len,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(entries: &[(u64, u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (o, n) in entries {
            out.extend_from_slice(&o.to_le_bytes());
            out.extend_from_slice(&n.to_le_bytes());
        }
        out
    }

    #[test]
    fn entries_must_lie_inside_the_inner_chunk_bytes() {
        let layout = ShardIndex {
            entries: 2,
            at_end: true,
            big_endian: false,
            checksum: false,
        };
        // 10 bytes of inner chunks, then the index.
        let ok = index(&[(0, 4), (EMPTY, EMPTY)]);
        assert!(layout.check_index(&ok, 10 + 32).is_ok());
        let mut shard = vec![0; 10];
        shard.extend_from_slice(&index(&[(4, 6), (0, 4)]));
        assert!(layout.check_shard(&shard).is_ok());
        for (entries, says) in [
            (
                vec![(u64::MAX - 1, 16), (0, 1)],
                "offset 18446744073709551614 of length 16",
            ),
            (vec![(0, 1 << 62), (0, 1)], "length 4611686018427387904"),
            // Reaching into the index itself.
            (
                vec![(0, 4), (8, 3)],
                "inner chunk 1 at offset 8 of length 3",
            ),
        ] {
            let err = layout
                .check_index(&index(&entries), 42)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(says) && err.contains("past the end of the shard's 10 bytes"),
                "{err}"
            );
        }
        let err = layout.check_shard(&[0; 20]).unwrap_err().to_string();
        assert!(
            err.contains("holds 20 bytes, fewer than its index of 32"),
            "{err}"
        );
        // An index at the start: inner chunks follow it.
        let start = ShardIndex {
            at_end: false,
            ..layout
        };
        assert!(start.check_index(&index(&[(32, 4), (36, 6)]), 42).is_ok());
        assert!(start.check_index(&index(&[(0, 4), (36, 6)]), 42).is_err());
    }
}
