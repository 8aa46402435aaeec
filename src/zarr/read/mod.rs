//! Reading chunks: `array.rs` is an opened array and the read strategy its codecs call for;
//! `chunk_reader.rs` reads one chunk's selected cells by that strategy (`zstd_frame.rs`
//! decompresses a `bytes` + `zstd` chunk into exactly its size, or only the front a selection
//! needs; `decompress.rs` runs gzip, zlib, bz2, zstd and blosc bounded by the size of what
//! they decode, `unshuffle.rs` undoes the shuffle filter, and `bounded_codecs.rs` makes
//! those the codecs zarrs builds, for every chain);
//! `grid_scan.rs` is the scan of a chunk grid that arrays and datasets share; `metrics.rs`
//! its counters; `shard_index.rs` checks a shard's index before zarrs' sharding codec trusts
//! it.

pub(crate) mod array;
pub(crate) mod bounded_codecs;
pub(crate) mod box_reader;
pub(crate) mod chunk_reader;
pub(crate) mod decompress;
pub(crate) mod grid_scan;
pub(crate) mod metrics;
pub(crate) mod shard_index;
pub(crate) mod unshuffle;
pub(crate) mod zstd_frame;
