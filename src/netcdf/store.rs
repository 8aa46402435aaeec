//! A netCDF file as the store of a Zarr group ([`StoreBackend`]): its metadata documents are
//! made from the header when the table opens (`classic.rs`), its chunks are read from the file
//! by byte range when a scan asks for them — a local file on blocking threads, an object with
//! ranged requests — so the dataset reader (scan, pushdown, CF decoding) is the Zarr one.

use std::ops::Range;
use std::sync::Arc;

use hdf5_reader::storage::DynStorage;
use zarrs::storage::byte_range::ByteRangeIterator;
use zarrs::storage::{
    AsyncMaybeBytesIterator, AsyncReadableStorageTraits, Bytes, MaybeBytes, StorageError, StoreKey,
};

use super::blocking::BlockingFile;
use super::classic::{classic_format, classic_layout, ClassicError, Rows, SMALL_GAP};
use super::layout::{chunk_indices, ChunkIndex, Layout, Source};
use super::skipped::restore;
use crate::error::{BoxError, Error, Result};
use crate::limits::METADATA_BYTES;
use crate::storage::StorageOptions;
use crate::zarr::store::{
    object_ranges, open_file, storage_error, Fetched, FileTarget, RangesRead, StoreBackend,
    ZarrStore,
};

/// The first bytes of an HDF5 file (netCDF-4 is HDF5) whose superblock is at its start.
pub(crate) const HDF5_MAGIC: &[u8] = b"\x89HDF\r\n\x1a\n";

/// Bytes of the file read first for its header (more when the header is longer).
const FIRST_READ: u64 = 16 << 10;

/// The store of the netCDF file at `location`, its header read (at most the metadata limit).
/// `wanted`: the variables the table shows (its `variables` option), when not all; `group`:
/// the group of a netCDF-4 file read, when not the root.
pub(crate) async fn open_netcdf(
    location: &str,
    options: &StorageOptions,
    group: Option<&str>,
    wanted: Option<&[String]>,
) -> Result<ZarrStore> {
    let limits = options.limits()?;
    let cannot = |reason: String| Error::NotFound {
        location: location.to_string(),
        reason,
    };
    let (file, len) = open_existing(location, options).await?;
    let max = limits.metadata_bytes;
    let mut want = FIRST_READ.min(len);
    loop {
        let head = read(&file, 0..want).await.map_err(&cannot)?;
        if hdf5_signature(&file, &head, len).await.is_some() {
            let (group, wanted) = (group.map(str::to_string), wanted.map(<[String]>::to_vec));
            let layout = hdf5_metadata(&file, len, max, move |storage| {
                let cached = super::nc4::cached(storage);
                super::nc4::nc4_layout(cached, max, group.as_deref(), wanted.as_deref())
            });
            let layout = layout.await.map_err(&cannot)?;
            return Ok(store_over(location, file, layout, limits));
        }
        let format = match head.get(..4).and_then(classic_format) {
            Some(format) => format,
            None => return Err(cannot(not_netcdf(&head))),
        };
        if let Some(group) = group {
            return Err(cannot(format!(
                "'path' names the group '{group}', but a netCDF-3 file has no groups (drop \
                 the option to read the file)"
            )));
        }
        match classic_layout(&head, format, len) {
            Ok(layout) => return Ok(store_over(location, file, layout, limits)),
            Err(ClassicError::ShortHeader(_)) if want < max.min(len) => {
                want = want.saturating_mul(4).min(max).min(len);
            }
            Err(ClassicError::ShortHeader(_)) => {
                return Err(cannot(format!(
                    "its header is longer than the {max} bytes a metadata document may have \
                     ({METADATA_BYTES})"
                )))
            }
            Err(ClassicError::Invalid(reason)) => return Err(cannot(reason)),
        }
    }
}

/// Where an HDF5 file's superblock is: at its start, or after a user block (HDF5 puts it at
/// 512, 1024, 2048, ... bytes; searched up to 1 MiB), `head` being the file's first bytes.
pub(crate) async fn hdf5_signature(file: &FileTarget, head: &[u8], len: u64) -> Option<u64> {
    let mut at = 0u64;
    while at + HDF5_MAGIC.len() as u64 <= len.min(USER_BLOCK_SEARCH) {
        let found = match head.get(at as usize..at as usize + HDF5_MAGIC.len()) {
            Some(bytes) => bytes == HDF5_MAGIC,
            None => {
                let range = at..at + HDF5_MAGIC.len() as u64;
                read(file, range)
                    .await
                    .is_ok_and(|b| b.as_ref() == HDF5_MAGIC)
            }
        };
        if found {
            return Some(at);
        }
        at = if at == 0 { 512 } else { at * 2 };
    }
    None
}

/// How far into a file its HDF5 superblock is looked for (user blocks are rarely larger).
const USER_BLOCK_SEARCH: u64 = 1 << 20;

/// The file at `location` and its length: an error naming it when there is no file there
/// (and saying so when it is a Zarr store).
pub(crate) async fn open_existing(
    location: &str,
    options: &StorageOptions,
) -> Result<(FileTarget, u64)> {
    let cannot = |reason: String| Error::NotFound {
        location: location.to_string(),
        reason,
    };
    let file = open_file(location, options)?;
    let len = match file.not_a_file().await {
        Some(why) => Err(why),
        None => match file.size().await {
            Ok(Some(len)) => Ok(len),
            Ok(None) => Err("no such file".to_string()),
            Err(e) => return Err(cannot(crate::error::with_root_cause(e.as_ref()))),
        },
    };
    match len {
        Ok(len) => Ok((file, len)),
        Err(why) if is_zarr_store(location, options).await => Err(cannot(format!(
            "{why}: a Zarr store, read it with STORED AS ZARR"
        ))),
        Err(why) => Err(cannot(why)),
    }
}

/// The store serving `layout` from `file`, shown as `location`.
pub(crate) fn store_over(
    location: &str,
    file: FileTarget,
    layout: Layout,
    limits: crate::limits::Limits,
) -> ZarrStore {
    for why in &layout.left_out {
        log::warn!("{location}: {why}");
    }
    let backend = NetcdfBackend {
        shown: location.to_string(),
        file,
        layout: Arc::new(layout),
        metadata_bytes: limits.metadata_bytes,
    };
    ZarrStore::over(Arc::new(backend), limits)
}

/// The layout `make` builds from the HDF5 file `file` (`len` bytes), its metadata read on a
/// blocking thread, at most `max` bytes of it.
pub(crate) async fn hdf5_metadata(
    file: &FileTarget,
    len: u64,
    max: u64,
    make: impl FnOnce(DynStorage) -> std::result::Result<Layout, String> + Send + 'static,
) -> std::result::Result<Layout, String> {
    let storage = Arc::new(BlockingFile::new(
        file.clone(),
        len,
        tokio::runtime::Handle::current(),
        max,
    ));
    let reader = Arc::clone(&storage);
    let layout = tokio::task::spawn_blocking(move || make(reader))
        .await
        .map_err(|e| format!("reading its metadata failed: {e}"))?;
    layout.map_err(|why| match storage.exhausted() {
        true => format!(
            "its metadata (headers and chunk indexes) is larger than the {max} bytes a \
             metadata document may have ({METADATA_BYTES}): {why}"
        ),
        false => why,
    })
}

/// Whether `location` (no file) is a Zarr store: it holds Zarr metadata.
async fn is_zarr_store(location: &str, options: &StorageOptions) -> bool {
    for document in ["zarr.json", ".zgroup", ".zarray"] {
        let path = format!("{}/{document}", location.trim_end_matches('/'));
        if let Ok(file) = open_file(&path, options) {
            if let Ok(Some(_)) = file.size().await {
                return true;
            }
        }
    }
    false
}

/// Why a file whose first bytes are `head` is not one ndfusion reads as netCDF.
fn not_netcdf(head: &[u8]) -> String {
    if head.is_empty() {
        "an empty file, not a netCDF file".into()
    } else {
        let shown: Vec<String> = head.iter().take(4).map(|b| format!("{b:02x}")).collect();
        format!(
            "not a netCDF file: it starts with bytes {} (a netCDF-3 file starts with 'CDF' \
             and a version byte 1, 2 or 5, a netCDF-4 file with HDF5's signature)",
            shown.join(" ")
        )
    }
}

pub(crate) async fn read(
    file: &FileTarget,
    range: Range<u64>,
) -> std::result::Result<Bytes, String> {
    match file.read(range).await {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err("no such file".into()),
        Err(e) => Err(crate::error::with_root_cause(e.as_ref())),
    }
}

/// A netCDF file's variables as a Zarr group (cheap to clone: zarrs holds one too).
#[derive(Clone)]
pub(crate) struct NetcdfBackend {
    /// The file as it may be shown.
    shown: String,
    file: FileTarget,
    layout: Arc<Layout>,
    /// Bytes a chunk index may take to read (the metadata limit).
    metadata_bytes: u64,
}

impl std::fmt::Debug for NetcdfBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NetCDF({})", self.shown)
    }
}

/// What a key of the store is.
enum Object<'a> {
    Document(&'a [u8]),
    /// Chunk `index` (along the first dimension) of a variable stored as rows.
    Chunk(&'a Rows, u64),
    /// A stored chunk: these bytes of the file.
    Stored(Range<u64>),
    /// A chunk stored with filters skipped: these bytes of the file, completed with
    /// `skipped::restore` (its size known only then: read whole).
    Skipped(Range<u64>, &'a ChunkIndex, u32),
    /// A variable's bytes held in memory.
    Inline(&'a Bytes),
}

impl NetcdfBackend {
    /// The object at `key`, `None` when there is none. A chunked variable's index is read
    /// here, when a query first needs one of its chunks.
    async fn object(&self, key: &str) -> std::result::Result<Option<Object<'_>>, BoxError> {
        if let Some(doc) = self.layout.documents.get(key) {
            return Ok(Some(Object::Document(doc)));
        }
        // An array at the root (an HDF5 dataset) has keys without a folder.
        let (name, indices) = key.rsplit_once('/').unwrap_or(("", key));
        let Some(source) = self.layout.variables.get(name) else {
            return Ok(None);
        };
        if let Source::Chunks(lazy) = source {
            let template = lazy.template();
            let Some(at) = chunk_indices(indices, template.grid.len()) else {
                return Ok(None);
            };
            let stored = lazy.chunk(&self.file, self.metadata_bytes, &at).await;
            let stored = stored.map_err(|why| {
                let variable = match name {
                    "" => "its dataset".to_string(),
                    name => format!("variable '{name}'"),
                };
                format!("{}: {variable}: its chunk index: {why}", self.shown)
            })?;
            return Ok(stored.map(|chunk| match chunk.filter_mask {
                0 => Object::Stored(chunk.range),
                mask => Object::Skipped(chunk.range, template, mask),
            }));
        }
        Ok(self.object_in(source, indices))
    }

    /// Chunk `indices` of a variable stored in rows or held in memory.
    fn object_in<'a>(&self, source: &'a Source, indices: &str) -> Option<Object<'a>> {
        match source {
            Source::Rows(rows) => {
                let at = chunk_indices(indices, rows.rank)?;
                // A chunk spans the whole of every dimension after the first: their index is 0.
                let first = at.first().copied().unwrap_or(0);
                if at.iter().skip(1).any(|&i| i != 0) {
                    return None;
                }
                rows.chunk(first)?;
                Some(Object::Chunk(rows, first))
            }
            Source::Chunks(_) => None,
            Source::Inline(bytes) => {
                let at = chunk_indices(indices, indices.split('.').count())?;
                at.iter().all(|&i| i == 0).then_some(Object::Inline(bytes))
            }
        }
    }

    /// The size of the object at `key`; `None` when there is none. A chunk stored with
    /// filters skipped has its size only once restored: it is read (such chunks are the
    /// rare ones a compressor could not shrink).
    async fn size(&self, key: &str) -> std::result::Result<Option<u64>, BoxError> {
        Ok(match self.object(key).await? {
            None => None,
            Some(Object::Document(doc)) => Some(doc.len() as u64),
            Some(Object::Chunk(rows, _)) => Some(rows.chunk_bytes()),
            Some(Object::Stored(range)) => Some(range.end - range.start),
            Some(Object::Inline(bytes)) => Some(bytes.len() as u64),
            Some(Object::Skipped(range, index, mask)) => {
                Some(self.restored(range, index, mask).await?.len() as u64)
            }
        })
    }

    /// The whole object at `key`; `None` when there is none.
    async fn get(&self, key: &str) -> std::result::Result<Option<Bytes>, BoxError> {
        if let Some(Object::Skipped(range, index, mask)) = self.object(key).await? {
            return self.restored(range, index, mask).await.map(Some);
        }
        let Some(size) = self.size(key).await? else {
            return Ok(None);
        };
        let whole = 0..size;
        let parts = self.parts(key, vec![whole]).await?;
        Ok(parts.and_then(|p| p.into_iter().next()))
    }

    /// The chunk at bytes `range` of the file, stored with the filters of `mask` skipped, as
    /// the variable's codecs decode it (`skipped::restore`).
    async fn restored(
        &self,
        range: Range<u64>,
        index: &ChunkIndex,
        mask: u32,
    ) -> std::result::Result<Bytes, BoxError> {
        let stored = self.read_file(vec![range]).await?.remove(0);
        restore(&index.filters, mask, stored, index.typesize)
            .map_err(|why| format!("{}: {why}", self.shown).into())
    }

    /// Bytes `ranges` of the file, in one call of it.
    async fn read_file(
        &self,
        ranges: Vec<Range<u64>>,
    ) -> std::result::Result<Vec<Bytes>, BoxError> {
        match self.file.read_ranges(ranges).await {
            Ok(Some(read)) => Ok(read),
            Ok(None) => Err(format!("{} no longer exists", self.shown).into()),
            Err(e) => {
                let cause = crate::error::with_root_cause(e.as_ref());
                Err(format!("{}: {cause}", self.shown).into())
            }
        }
    }

    /// Bytes `ranges` (each inside it) of the object at `key`; `None` when there is none.
    async fn parts(
        &self,
        key: &str,
        ranges: Vec<Range<u64>>,
    ) -> std::result::Result<Option<Vec<Bytes>>, BoxError> {
        match self.object(key).await? {
            None => Ok(None),
            Some(Object::Document(doc)) => Ok(Some(slices(&Bytes::copy_from_slice(doc), ranges))),
            Some(Object::Inline(bytes)) => Ok(Some(slices(bytes, ranges))),
            Some(Object::Stored(stored)) => {
                let size = stored.end - stored.start;
                let within: Vec<Range<u64>> = (ranges.iter())
                    .map(|r| stored.start + r.start.min(size)..stored.start + r.end.min(size))
                    .collect();
                self.read_file(within).await.map(Some)
            }
            Some(Object::Skipped(range, index, mask)) => {
                let chunk = self.restored(range, index, mask).await?;
                Ok(Some(slices(&chunk, ranges)))
            }
            Some(Object::Chunk(rows, index)) => {
                self.chunk_parts(rows, index, ranges).await.map(Some)
            }
        }
    }

    /// Bytes `ranges` of chunk `index` as the Zarr reader expects a chunk: its rows one after
    /// another, zeros past the last row. Only the bytes the ranges cover are read
    /// (`Rows::pieces`), pieces a few bytes apart joined into one read, all in one call of the
    /// file (one blocking task locally; concurrent, coalesced requests remotely).
    async fn chunk_parts(
        &self,
        rows: &Rows,
        index: u64,
        ranges: Vec<Range<u64>>,
    ) -> std::result::Result<Vec<Bytes>, BoxError> {
        if let Some(bad) = ranges.iter().find(|r| r.end > rows.chunk_bytes()) {
            return Err(format!("{}: no bytes {bad:?} of chunk {index}", self.shown).into());
        }
        let wanted: Vec<Vec<Range<u64>>> = (ranges.iter())
            .map(|r| rows.pieces(index, r.clone()))
            .collect();
        // The reads: the pieces by offset, each joining the read before it when it overlaps
        // it or the gap is small.
        let mut sorted: Vec<&Range<u64>> = wanted.iter().flatten().collect();
        sorted.sort_by_key(|p| p.start);
        let mut reads: Vec<Range<u64>> = Vec::new();
        for piece in sorted {
            let gap = SMALL_GAP.max(3 * (piece.end - piece.start));
            match reads.last_mut() {
                Some(last) if piece.start <= last.end.saturating_add(gap) => {
                    last.end = last.end.max(piece.end)
                }
                _ => reads.push(piece.clone()),
            }
        }
        let read = match reads.is_empty() {
            true => Vec::new(),
            false => self.read_file(reads.clone()).await?,
        };
        // A piece's bytes: a slice of the read that holds it (reads are sorted and apart).
        let slice = |piece: &Range<u64>| -> Bytes {
            let at = reads.partition_point(|r| r.end < piece.end);
            let base = reads[at].start;
            read[at].slice((piece.start - base) as usize..(piece.end - base) as usize)
        };
        let mut out = Vec::with_capacity(ranges.len());
        for (range, pieces) in ranges.iter().zip(&wanted) {
            let len = (range.end - range.start) as usize;
            match pieces.as_slice() {
                [one] if (one.end - one.start) as usize == len => out.push(slice(one)),
                _ => {
                    let mut bytes = Vec::with_capacity(len);
                    for piece in pieces {
                        bytes.extend_from_slice(&slice(piece));
                    }
                    bytes.resize(len, 0);
                    out.push(bytes.into());
                }
            }
        }
        Ok(out)
    }
}

#[async_trait::async_trait]
impl StoreBackend for NetcdfBackend {
    /// Chunks are assembled from ranged reads of the file: always asynchronous.
    fn is_remote(&self) -> bool {
        true
    }

    async fn get_at_most(
        &self,
        key: &str,
        max: u64,
    ) -> std::result::Result<Option<Fetched>, BoxError> {
        // A chunk stored with filters skipped is not read when its stored bytes are too many.
        if let Some(Object::Skipped(range, ..)) = self.object(key).await? {
            if range.end - range.start > max {
                return Ok(Some(Fetched::TooLarge(range.end - range.start)));
            }
        }
        match self.size(key).await? {
            None => Ok(None),
            Some(size) if size > max => Ok(Some(Fetched::TooLarge(size))),
            Some(_) => Ok(self.get(key).await?.map(Fetched::Bytes)),
        }
    }

    async fn get_range(
        &self,
        key: &str,
        range: Range<u64>,
    ) -> std::result::Result<Option<(Bytes, u64)>, BoxError> {
        let Some(size) = self.size(key).await? else {
            return Ok(None);
        };
        if range.start > size || range.start > range.end {
            return Err(format!(
                "bytes {}..{} of '{key}', which holds {size}",
                range.start, range.end
            )
            .into());
        }
        let parts = self.parts(key, [range].into()).await?;
        Ok(parts.and_then(|p| p.into_iter().next()).map(|b| (b, size)))
    }

    /// Every range in one call of the file (`chunk_parts`).
    async fn get_ranges(
        &self,
        key: &str,
        ranges: Vec<Range<u64>>,
    ) -> std::result::Result<RangesRead, BoxError> {
        let Some(size) = self.size(key).await? else {
            return Ok(RangesRead::Absent);
        };
        if let Some(bad) = ranges.iter().find(|r| r.start > r.end || r.end > size) {
            return Err(format!("bytes {bad:?} of '{key}', which holds {size}").into());
        }
        match self.parts(key, ranges).await? {
            Some(parts) => Ok(RangesRead::Read(parts, size)),
            None => Ok(RangesRead::Absent),
        }
    }

    async fn get_suffix(
        &self,
        key: &str,
        n: u64,
    ) -> std::result::Result<Option<(Bytes, u64)>, BoxError> {
        let Some(size) = self.size(key).await? else {
            return Ok(None);
        };
        let range = size.saturating_sub(n)..size;
        let parts = self.parts(key, [range].into()).await?;
        Ok(parts.and_then(|p| p.into_iter().next()).map(|b| (b, size)))
    }

    async fn list_children(&self) -> std::result::Result<Vec<String>, BoxError> {
        Ok(self.layout.order.clone())
    }

    fn member_order(&self) -> Option<Vec<String>> {
        Some(self.layout.order.clone())
    }

    fn zarrs_storage(&self) -> Arc<dyn AsyncReadableStorageTraits> {
        Arc::new(NetcdfStorage(self.clone()))
    }
}

/// Bytes `ranges` of `object`, each cut to its end.
fn slices(object: &Bytes, ranges: Vec<Range<u64>>) -> Vec<Bytes> {
    (ranges.into_iter())
        .map(|r| {
            let end = (r.end as usize).min(object.len());
            object.slice((r.start as usize).min(end)..end)
        })
        .collect()
}

/// The file's chunks as zarrs reads them.
struct NetcdfStorage(NetcdfBackend);

#[async_trait::async_trait]
impl AsyncReadableStorageTraits for NetcdfStorage {
    async fn get(&self, key: &StoreKey) -> std::result::Result<MaybeBytes, StorageError> {
        self.0.get(key.as_str()).await.map_err(storage_error)
    }

    async fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> std::result::Result<AsyncMaybeBytesIterator<'a>, StorageError> {
        let key = key.as_str();
        let Some(size) = self.0.size(key).await.map_err(storage_error)? else {
            return Ok(None);
        };
        let ranges = object_ranges(key, byte_ranges, size)?;
        // Every range in one read of the file.
        let parts = self.0.parts(key, ranges).await.map_err(storage_error)?;
        Ok(parts.map(|parts| {
            futures::StreamExt::boxed(futures::stream::iter(parts.into_iter().map(Ok)))
        }))
    }

    async fn size_key(&self, key: &StoreKey) -> std::result::Result<Option<u64>, StorageError> {
        self.0.size(key.as_str()).await.map_err(storage_error)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}
