//! An opened Zarr array: its location, parsed metadata, store, zarrs' view of it, and how its
//! chunks are read.

use zarrs::array::codec::{BytesCodec, ZstdCodec};
use zarrs::array::{Array, CodecTraits};
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits};

use crate::error::{Error, Result};
#[cfg(test)]
use crate::storage::StorageOptions;
use crate::zarr::metadata::array_meta::ArrayMeta;
use crate::zarr::read::bounded_codecs;
use crate::zarr::read::shard_index::ShardIndex;
use crate::zarr::store::ZarrStore;

/// How the chunks of an array are read, chosen once from its codecs when it is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadStrategy {
    /// The `bytes` codec alone: a stored chunk is its packed elements in C order, so its size
    /// is known and any box of it is a set of byte runs. Read in part, in pieces locally.
    Plain,
    /// Every codec reads and decodes in part (sharding over uncompressed inner chunks,
    /// transpose): a box is read through zarrs' partial decoder, which fetches only the inner
    /// chunks and byte ranges it touches.
    PartialDecoder,
    /// `bytes` + `zstd`: the chunk is fetched whole, but decompressed only up to the last
    /// selected element.
    ZstdPrefix,
    /// Anything else: the chunk is fetched whole and decoded by zarrs' codec chain.
    CodecChain,
}

/// A Zarr array opened for reading as a table.
pub(crate) struct ZarrArray {
    /// The location as the user gave it, for messages.
    pub location: String,
    pub meta: ArrayMeta,
    pub store: ZarrStore,
    /// zarrs' view of the array over `store`: chunk keys, the codec chain, async partial
    /// decoders.
    pub zarrs: Array<dyn AsyncReadableStorageTraits>,
    /// The same over the blocking local store (local arrays only), for reads made on the
    /// thread that decodes them: the bytes are then still in that core's cache when gathered.
    pub blocking_zarrs: Option<Array<dyn ReadableStorageTraits>>,
    pub strategy: ReadStrategy,
    /// Where each shard's index lies, for sharded arrays: checked before zarrs reads a shard.
    pub shard_index: Option<ShardIndex>,
}

impl std::fmt::Debug for ZarrArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrArray")
            .field("location", &self.location)
            .field("shape", &self.meta.shape)
            .field("chunk_shape", &self.meta.chunk_shape)
            .field("store", &self.store)
            .field("strategy", &self.strategy)
            .finish()
    }
}

impl ZarrArray {
    /// Opens the array at `location`: a local folder, a `file://` URL, or an object-store URL
    /// naming the array (the prefix holding `zarr.json` or `.zarray`). A group is an error.
    #[cfg(test)]
    pub(crate) async fn open(location: &str, storage: &StorageOptions) -> Result<Self> {
        let store = ZarrStore::open(location, storage, &[]).await?;
        match crate::zarr::metadata::node::read_node(&store, location).await? {
            crate::zarr::metadata::node::Node::Array(meta) => Self::new(store, "", location, *meta),
            crate::zarr::metadata::node::Node::Group(_) => {
                Err(Error::Internal(format!("{location} is a group")))
            }
        }
    }

    /// The array at `node` (`""` for the store's root, `temp` for a group member) of `store`,
    /// whose metadata is `meta`. `location` names the array in messages.
    pub(crate) fn new(
        store: ZarrStore,
        node: &str,
        location: &str,
        meta: ArrayMeta,
    ) -> Result<Self> {
        let meta_path = format!("{}/{}", location.trim_end_matches('/'), meta.file_name());
        let node_path = format!("/{node}");
        // zarrs builds the codecs below: its decompressors must be the bounded ones.
        let cap = store.limits().string_chunk_bytes;
        let (zarrs, blocking_zarrs) = bounded_codecs::with_bounded_codecs(cap, || {
            let zarrs = Array::new_with_metadata(
                store.zarrs_storage(),
                &node_path,
                meta.zarrs_metadata.clone(),
            )
            .map_err(|e| {
                let reason = e.to_string();
                if reason.contains("codec") {
                    Error::UnsupportedCodec {
                        path: meta_path.clone(),
                        reason,
                    }
                } else {
                    Error::InvalidMetadata {
                        path: meta_path.clone(),
                        reason,
                    }
                }
            })?;
            let blocking_zarrs = match store.blocking() {
                Some(fs) => Some(
                    Array::new_with_metadata(
                        fs as std::sync::Arc<dyn ReadableStorageTraits>,
                        &node_path,
                        meta.zarrs_metadata.clone(),
                    )
                    .map_err(|e| Error::InvalidMetadata {
                        path: meta_path.clone(),
                        reason: e.to_string(),
                    })?,
                ),
                None => None,
            };
            Ok::<_, Error>((zarrs, blocking_zarrs))
        })?;
        let strategy = read_strategy(&zarrs);
        let shard_index = ShardIndex::of(&meta);
        Ok(ZarrArray {
            location: location.to_string(),
            meta,
            store,
            zarrs,
            blocking_zarrs,
            strategy,
            shard_index,
        })
    }

    /// The store key of a chunk (`c/0/1`, `0.1`).
    pub(crate) fn chunk_key(&self, indices: &[u64]) -> String {
        self.zarrs.chunk_key(indices).to_string()
    }
}

/// The strategy of an array's chain.
fn read_strategy(array: &Array<dyn AsyncReadableStorageTraits>) -> ReadStrategy {
    let codecs = array.codecs();
    let capability = codecs.partial_decoder_capability();
    match codecs.bytes_to_bytes_codecs() {
        [] if is_packed(array) => ReadStrategy::Plain,
        [zstd] if is_packed(array) && zstd.as_any().is::<ZstdCodec>() => ReadStrategy::ZstdPrefix,
        _ if capability.partial_read && capability.partial_decode => ReadStrategy::PartialDecoder,
        _ => ReadStrategy::CodecChain,
    }
}

/// Whether the array-to-bytes codec is `bytes` with nothing before it: a decoded chunk is its
/// packed elements in C order.
fn is_packed(array: &Array<dyn AsyncReadableStorageTraits>) -> bool {
    let codecs = array.codecs();
    codecs.array_to_array_codecs().is_empty()
        && codecs.array_to_bytes_codec().as_any().is::<BytesCodec>()
}
