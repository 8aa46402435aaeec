//! An opened Zarr array: its location, parsed metadata, and the zarrs handle that fetches and
//! decodes its chunks.

use std::path::PathBuf;
use std::sync::Arc;

use zarrs::array::codec::bytes_to_bytes::zstd::ZstdCodec;
use zarrs::array::codec::BytesCodec;
use zarrs::array::{Array, CodecTraits};
use zarrs::filesystem::FilesystemStore;
use zarrs::storage::storage_adapter::sync_to_async::{
    SyncToAsyncSpawnBlocking, SyncToAsyncStorageAdapter,
};
use zarrs::storage::{AsyncReadableStorageTraits, ReadableStorageTraits, StoreKey};

use super::metadata::{parse_v3, ArrayMeta};
use super::metadata_v2::parse_v2;
use crate::error::{Error, Result};

/// A Zarr array opened for reading as a table.
pub struct ZarrArray {
    /// The location as the user gave it, for messages.
    pub location: String,
    pub meta: ArrayMeta,
    pub array: Array<dyn AsyncReadableStorageTraits>,
    /// The same array over the same store, for reads made on the thread that decodes them
    /// (reads in part): the bytes are then still in that core's cache when gathered.
    pub blocking_array: Array<dyn ReadableStorageTraits>,
    /// The store under `blocking_array` (zarrs' `Array` does not hand out its store): stored
    /// sizes and byte runs of plain chunks.
    pub blocking_store: Arc<dyn ReadableStorageTraits>,
    /// Whether part of a chunk can be read for less than all of it: every codec reads and
    /// decodes partially (uncompressed, or sharded), so only the bytes or inner chunks of the
    /// wanted box are fetched and decoded.
    pub partial_reads: bool,
    /// Whether each chunk is stored as its packed elements in C order, uncompressed (the
    /// `bytes` codec alone): its stored size is known, and its bytes are the decoded chunk.
    pub plain_chunks: bool,
    /// Whether each chunk is its packed elements in C order compressed by zstd alone: the
    /// front of a chunk can then be decompressed without the rest.
    pub zstd_chunks: bool,
}

impl std::fmt::Debug for ZarrArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZarrArray")
            .field("location", &self.location)
            .field("shape", &self.meta.shape)
            .field("chunk_shape", &self.meta.chunk_shape)
            .field("partial_reads", &self.partial_reads)
            .field("plain_chunks", &self.plain_chunks)
            .field("zstd_chunks", &self.zstd_chunks)
            .finish()
    }
}

impl ZarrArray {
    /// Opens the array at `location`: a local folder path or a `file://` URL naming the array
    /// folder (the one holding `zarr.json` or `.zarray`).
    pub async fn open(location: &str) -> Result<Self> {
        let dir = local_dir(location)?;
        let store = FilesystemStore::new(&dir).map_err(|e| Error::NotFound {
            location: location.to_string(),
            reason: e.to_string(),
        })?;
        let store = Arc::new(store);
        let blocking_storage: Arc<dyn ReadableStorageTraits> = store.clone();
        let storage: Arc<dyn AsyncReadableStorageTraits> =
            Arc::new(SyncToAsyncStorageAdapter::new(store, TokioBlockingPool));

        let base = location.trim_end_matches('/');
        let get = |key: &'static str| {
            let storage = Arc::clone(&storage);
            async move {
                let store_key = StoreKey::new(key).map_err(|e| Error::Internal(e.to_string()))?;
                storage.get(&store_key).await.map_err(|e| Error::NotFound {
                    location: format!("{base}/{key}"),
                    reason: e.to_string(),
                })
            }
        };
        // The format is detected from the files present: zarr.json (v3) or .zarray (v2).
        let (meta_path, meta) = if let Some(text) = get("zarr.json").await? {
            let path = format!("{base}/zarr.json");
            let meta = parse_v3(&path, &text)?;
            (path, meta)
        } else if let Some(text) = get(".zarray").await? {
            let path = format!("{base}/.zarray");
            let attrs = get(".zattrs").await?;
            let meta = parse_v2(&path, &text, attrs.as_deref())?;
            (path, meta)
        } else {
            return Err(Error::NotFound {
                location: location.to_string(),
                reason:
                    "neither zarr.json nor .zarray here: LOCATION must name a Zarr array folder"
                        .into(),
            });
        };
        let invalid = |reason: String| Error::InvalidMetadata {
            path: meta_path.clone(),
            reason,
        };
        let array =
            Array::new_with_metadata(storage, "/", meta.zarrs_metadata.clone()).map_err(|e| {
                let reason = e.to_string();
                if reason.contains("codec") {
                    Error::UnsupportedCodec {
                        path: meta_path.clone(),
                        reason,
                    }
                } else {
                    invalid(reason)
                }
            })?;
        let blocking_array =
            Array::new_with_metadata(blocking_storage.clone(), "/", meta.zarrs_metadata.clone())
                .map_err(|e| invalid(e.to_string()))?;
        let codecs = array.codecs();
        let capability = codecs.partial_decoder_capability();
        let packed = codecs.array_to_array_codecs().is_empty()
            && codecs.array_to_bytes_codec().as_any().is::<BytesCodec>();
        let plain_chunks = packed && codecs.bytes_to_bytes_codecs().is_empty();
        let zstd_chunks =
            packed && matches!(codecs.bytes_to_bytes_codecs(), [c] if c.as_any().is::<ZstdCodec>());
        Ok(ZarrArray {
            location: location.to_string(),
            meta,
            array,
            blocking_array,
            blocking_store: blocking_storage,
            partial_reads: capability.partial_read && capability.partial_decode,
            plain_chunks,
            zstd_chunks,
        })
    }
}

/// Runs the filesystem store's reads on tokio's blocking pool. zarrs' filesystem store reads
/// into uninitialised buffers at an offset; object_store's `LocalFileSystem` zeroes each
/// buffer before reading into it, which cost 15% of an uncompressed scan (BENCHMARKS.md).
struct TokioBlockingPool;

impl SyncToAsyncSpawnBlocking for TokioBlockingPool {
    async fn spawn_blocking<F, R>(&self, f: F) -> R
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        tokio::task::spawn_blocking(f)
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

/// Resolves a LOCATION to a local folder; object-store URLs are not supported yet.
fn local_dir(location: &str) -> Result<PathBuf> {
    let path = if let Some(rest) = location.strip_prefix("file://") {
        let url = url::Url::parse(location).map_err(|e| Error::InvalidOption {
            option: "LOCATION".into(),
            reason: format!("'{location}' is not a valid file:// URL: {e}"),
        })?;
        url.to_file_path().map_err(|_| Error::InvalidOption {
            option: "LOCATION".into(),
            reason: format!("'{location}' does not name a local path ({rest})"),
        })?
    } else if location.contains("://") {
        return Err(Error::InvalidOption {
            option: "LOCATION".into(),
            reason: format!("'{location}': only local paths and file:// URLs are supported"),
        });
    } else {
        PathBuf::from(location)
    };
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => Ok(path),
        Ok(_) => Err(Error::NotFound {
            location: location.to_string(),
            reason: "not a folder: LOCATION must name a Zarr array folder".into(),
        }),
        Err(e) => Err(Error::NotFound {
            location: location.to_string(),
            reason: e.to_string(),
        }),
    }
}
