//! Icechunk reads its own files whole (the repository's `repo` file, a snapshot, its
//! manifests) and decompresses them (zstd) into what their frames claim: each one is checked
//! before Icechunk reads it, against the bound of a metadata document
//! (`ndfusion.max_metadata_bytes`, 64 MiB by default), so a crafted repository cannot make a
//! table allocate what it likes. The check reads the file's front (its size and first bytes,
//! one ranged GET remotely): the file's size, and the size its zstd frame declares, must be
//! within the bound; a frame that declares none (older writers) is decompressed here, bounded,
//! before Icechunk decompresses it unbounded. A snapshot's manifests must also have the sizes
//! the snapshot gives them (Icechunk allocates that much before reading one). Native chunks
//! ndfusion reads itself, a byte range of a `chunks/` file at a time ([`RepositoryFiles::read`]).

use std::ops::Range;
use std::path::PathBuf;

use zarrs::storage::Bytes;

use futures::{StreamExt, TryStreamExt};
use icechunk::format::format_constants::{
    CompressionAlgorithmBin, ICECHUNK_COMPRESSION_OFFSET, ICECHUNK_FILE_HEADER_LEN,
    ICECHUNK_FORMAT_MAGIC_BYTES,
};
use icechunk::format::SnapshotId;
use icechunk::Repository;
use object_store::{GetOptions, GetRange, ObjectStoreExt};

use crate::error::{Error, Result};
use crate::limits::{Limits, METADATA_BYTES};
use crate::storage::{resolve, RemoteStore, Resolved, StorageOptions};
use crate::zarr::read::decompress::{Bound, Compressor, DecompressError};

/// Manifests checked at once (remote: a ranged GET each).
const CHECKS_IN_FLIGHT: usize = 16;

/// How much of a file's front a check reads: Icechunk's 39-byte header and the zstd frame's
/// header after it (at most 18 bytes: RFC 8878, 3.1.1.1).
const FRONT_BYTES: u64 = 64;

/// A file's size, its first (up to [`FRONT_BYTES`]) bytes, and its ETag where the store gives
/// one (object stores do; local files: none).
#[derive(Debug)]
struct Front {
    size: u64,
    bytes: Bytes,
    e_tag: Option<String>,
}

/// What the front of a file says of the size it decompresses to.
#[derive(Debug, PartialEq)]
enum Declared {
    /// Not a zstd-compressed Icechunk file: Icechunk refuses it itself, before decompressing.
    NotCompressed,
    /// The frame's header gives its decompressed size.
    Size(u64),
    /// The frame's header gives none (or cannot be read): only decompressing it tells.
    Unsaid,
}

impl Declared {
    fn of(front: &[u8]) -> Declared {
        let compressed = front.starts_with(ICECHUNK_FORMAT_MAGIC_BYTES)
            && front.get(ICECHUNK_COMPRESSION_OFFSET)
                == Some(&(CompressionAlgorithmBin::Zstd as u8));
        let Some(frame) = front.get(ICECHUNK_FILE_HEADER_LEN..).filter(|_| compressed) else {
            return Declared::NotCompressed;
        };
        match zstd::zstd_safe::get_frame_content_size(frame) {
            Ok(Some(size)) => Declared::Size(size),
            _ => Declared::Unsaid,
        }
    }
}

/// The files of one repository, as ndfusion sees them (not through Icechunk).
#[derive(Debug, Clone)]
pub(crate) struct RepositoryFiles {
    location: String,
    at: FilesAt,
    limits: Limits,
}

#[derive(Debug, Clone)]
enum FilesAt {
    Local(PathBuf),
    Remote(RemoteStore),
}

impl RepositoryFiles {
    /// The files of the repository at `location`, checked under the storage's limits.
    pub(crate) fn new(location: &str, storage: &StorageOptions) -> Result<Self> {
        let at = match resolve(location, storage)? {
            Resolved::Local(path) => FilesAt::Local(path),
            Resolved::Remote(remote) => FilesAt::Remote(remote),
        };
        Ok(RepositoryFiles {
            location: location.to_string(),
            at,
            limits: storage.limits()?,
        })
    }

    /// Whether the files are read over a network (an object store).
    pub(crate) fn over_network(&self) -> bool {
        matches!(self.at, FilesAt::Remote(_))
    }

    /// The limits the repository is read under.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// `file`'s path as messages show it.
    fn shown(&self, file: &str) -> String {
        format!("{}/{file}", self.location.trim_end_matches('/'))
    }

    /// The size and front of `file` (`repo`, `snapshots/<id>`); `None` when there is none.
    /// Remotely one ranged GET, whose answer also gives the object's size.
    async fn front(&self, file: &str) -> Result<Option<Front>> {
        let failed = |reason: String| Error::NotFound {
            location: self.shown(file),
            reason,
        };
        match &self.at {
            FilesAt::Local(root) => {
                let read = || -> std::io::Result<Front> {
                    let f = std::fs::File::open(root.join(file))?;
                    let size = f.metadata()?.len();
                    let len = size.min(FRONT_BYTES) as usize;
                    let bytes = crate::storage::read_file_range(&f, 0, len)?;
                    Ok(Front {
                        size,
                        bytes: Bytes::from(bytes),
                        e_tag: None,
                    })
                };
                match read() {
                    Ok(front) => Ok(Some(front)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(failed(e.to_string())),
                }
            }
            FilesAt::Remote(remote) => {
                let path = remote.path(file);
                let options = GetOptions {
                    range: Some(GetRange::Bounded(0..FRONT_BYTES)),
                    ..GetOptions::default()
                };
                let got = match remote.store.get_opts(&path, options).await {
                    Ok(got) => got,
                    Err(object_store::Error::NotFound { .. }) => return Ok(None),
                    // An empty object has no byte 0 to ask for (HTTP 416): its size says it.
                    Err(e) => match remote.store.head(&path).await {
                        Ok(meta) if meta.size == 0 => {
                            return Ok(Some(Front {
                                size: 0,
                                bytes: Bytes::new(),
                                e_tag: meta.e_tag,
                            }))
                        }
                        _ => return Err(failed(crate::error::with_root_cause(&e))),
                    },
                };
                let (size, e_tag) = (got.meta.size, got.meta.e_tag.clone());
                let bytes = (got.bytes().await).map_err(|e| failed(e.to_string()))?;
                Ok(Some(Front { size, bytes, e_tag }))
            }
        }
    }

    /// Bytes `range` of `file` (`chunks/<id>`): locally one positioned read on a blocking
    /// thread (Icechunk's local storage streams a file through object_store in 8 KiB
    /// pieces, each its own trip through the blocking pool), remotely one ranged GET. A range
    /// past the file's end is an error naming the file; nothing is allocated beyond what the
    /// file holds.
    pub(crate) async fn read(&self, file: &str, range: Range<u64>) -> Result<Bytes> {
        let held = match self.read_range(file, range.clone()).await? {
            Ok(bytes) => return Ok(bytes),
            Err(held) => held,
        };
        let reason = match self.over_network() {
            true => format!(
                "the manifest places a chunk at bytes {range:?}, of which the store returned \
                 {held}"
            ),
            false => {
                format!("the manifest places a chunk at bytes {range:?} of a file of {held} bytes")
            }
        };
        Err(Error::NotFound {
            location: self.shown(file),
            reason,
        })
    }

    /// An error when `file`, or what it decompresses to, is larger than a metadata document
    /// may be. Returns its front (`None`: there is no such file).
    async fn check(&self, file: &str) -> Result<Option<Front>> {
        let max = self.limits.metadata_bytes;
        let Some(front) = self.front(file).await? else {
            return Ok(None);
        };
        let refused = |what: String| Error::InvalidMetadata {
            path: self.shown(file),
            reason: format!(
                "{what} the {max} an Icechunk file may have ({METADATA_BYTES}); it is not read"
            ),
        };
        if front.size > max {
            return Err(refused(format!(
                "the file is {} bytes, more than",
                front.size
            )));
        }
        match Declared::of(&front.bytes) {
            Declared::NotCompressed => {}
            Declared::Size(size) if size > max => {
                return Err(refused(format!(
                    "the file decompresses to {size} bytes, more than"
                )));
            }
            Declared::Size(_) => {}
            Declared::Unsaid => {
                let whole = self.read_whole(file, front.size).await?;
                // Up to `max` bytes made and dropped: off the async workers.
                let decompressed = tokio::task::spawn_blocking(move || {
                    let frame = whole.get(ICECHUNK_FILE_HEADER_LEN..).unwrap_or_default();
                    Compressor::Zstd
                        .decompress(frame, Bound::AtMost(max as usize))
                        .map(|_| ())
                })
                .await
                .map_err(|e| Error::InvalidMetadata {
                    path: self.shown(file),
                    reason: format!("decompressing it failed: {e}"),
                })?;
                match decompressed {
                    Ok(()) => {}
                    Err(DecompressError::TooLong { .. }) => {
                        return Err(refused("the file decompresses to more than".to_string()));
                    }
                    Err(e) => {
                        return Err(Error::InvalidMetadata {
                            path: self.shown(file),
                            reason: format!("its zstd frame cannot be decompressed: {e}"),
                        })
                    }
                }
            }
        }
        Ok(Some(front))
    }

    /// All `size` bytes of `file`, which its front gave as its size (and the limit allows).
    async fn read_whole(&self, file: &str, size: u64) -> Result<Bytes> {
        match self.read_range(file, 0..size).await? {
            Ok(bytes) => Ok(bytes),
            Err(held) => Err(Error::NotFound {
                location: self.shown(file),
                reason: format!(
                    "the file changed while it was checked ({size} bytes, then {held})"
                ),
            }),
        }
    }

    /// Bytes `range` of `file`, or (`Err`) how many there are when fewer: locally the file's
    /// size, looked at before anything is allocated; remotely the bytes the store returned.
    async fn read_range(
        &self,
        file: &str,
        range: Range<u64>,
    ) -> Result<std::result::Result<Bytes, u64>> {
        let failed = |reason: String| Error::NotFound {
            location: self.shown(file),
            reason,
        };
        match &self.at {
            FilesAt::Local(root) => {
                let path = root.join(file);
                let read = move || -> std::io::Result<std::result::Result<Bytes, u64>> {
                    let f = std::fs::File::open(&path)?;
                    let size = f.metadata()?.len();
                    if range.start > range.end || range.end > size {
                        return Ok(Err(size));
                    }
                    let len = (range.end - range.start) as usize;
                    let buf = crate::storage::read_file_range(&f, range.start, len)?;
                    Ok(Ok(Bytes::from(buf)))
                };
                match tokio::task::spawn_blocking(read).await {
                    Ok(read) => read.map_err(|e| failed(e.to_string())),
                    Err(e) => Err(failed(e.to_string())),
                }
            }
            FilesAt::Remote(remote) => {
                let wanted = range.end.saturating_sub(range.start);
                match remote.store.get_range(&remote.path(file), range).await {
                    Ok(bytes) if bytes.len() as u64 == wanted => Ok(Ok(bytes)),
                    Ok(bytes) => Ok(Err(bytes.len() as u64)),
                    Err(e) => Err(failed(crate::error::with_root_cause(&e))),
                }
            }
        }
    }

    /// Before Icechunk opens the repository: its description, and what Icechunk's opening
    /// reads whole whatever the repository's layout (it probes the version 1 layout's
    /// `config.yaml` and `main` branch alongside), checked at once. Returns the description's
    /// ETag, as [`check_repo_file`](Self::check_repo_file) does.
    pub(crate) async fn check_before_open(&self) -> Result<Option<String>> {
        let (repo_tag, _, _) = futures::try_join!(
            self.check_repo_file(),
            self.check("config.yaml"),
            self.check("refs/branch.main/ref.json"),
        )?;
        Ok(repo_tag)
    }

    /// Before Icechunk reads the repository's description (every version it resolves).
    /// Returns the file's ETag where the store gives one: it changes whenever a branch or a
    /// tag moves (Icechunk's version 2 layout keeps them in that file).
    pub(crate) async fn check_repo_file(&self) -> Result<Option<String>> {
        Ok(self.check("repo").await?.and_then(|front| front.e_tag))
    }

    /// Before Icechunk reads snapshot `id` and then its manifests: the snapshot, then (the
    /// snapshot parsed) each manifest, which must also have the size the snapshot gives it
    /// (Icechunk allocates that size before reading it; 0 is an older writer's "unknown").
    pub(crate) async fn check_snapshot(&self, repo: &Repository, id: &SnapshotId) -> Result<()> {
        self.check(&format!("snapshots/{id}")).await?;
        let manifests = repo
            .lookup_manifest_files(id)
            .await
            .map_err(|e| Error::NotFound {
                location: self.location.clone(),
                reason: format!("reading snapshot {id}: {e}"),
            })?;
        let checks = manifests.map(|m| {
            let file = format!("manifests/{}", m.id);
            async move {
                let size = self.check(&file).await?.map(|front| front.size);
                match size {
                    Some(size) if m.size_bytes != 0 && m.size_bytes != size => {
                        Err(Error::InvalidMetadata {
                            path: self.shown(&file),
                            reason: format!(
                                "snapshot {id} gives the manifest {} bytes; the file has {size}",
                                m.size_bytes
                            ),
                        })
                    }
                    _ => Ok(()),
                }
            }
        });
        futures::stream::iter(checks)
            .buffer_unordered(CHECKS_IN_FLIGHT)
            .try_collect::<()>()
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// An Icechunk file: its header (a manifest, zstd) and `frame`.
    fn file(frame: &[u8]) -> Vec<u8> {
        let mut bytes = ICECHUNK_FORMAT_MAGIC_BYTES.to_vec();
        bytes.extend([b' '; 24]);
        bytes.extend([2, 2, CompressionAlgorithmBin::Zstd as u8]);
        assert_eq!(bytes.len(), ICECHUNK_FILE_HEADER_LEN);
        bytes.extend(frame);
        bytes
    }

    fn without_size(data: &[u8]) -> Vec<u8> {
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        encoder.include_contentsize(false).unwrap();
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn front(bytes: &[u8]) -> &[u8] {
        &bytes[..bytes.len().min(FRONT_BYTES as usize)]
    }

    #[test]
    fn the_front_says_what_a_frame_declares() {
        let declared = file(&zstd::bulk::compress(&[7; 1000], 3).unwrap());
        assert_eq!(Declared::of(front(&declared)), Declared::Size(1000));
        let unsaid = file(&without_size(&[7; 1000]));
        assert_eq!(Declared::of(front(&unsaid)), Declared::Unsaid);
        // A frame header cut short or damaged: only decompressing tells.
        assert_eq!(Declared::of(&unsaid[..41]), Declared::Unsaid);
        // Not an Icechunk file, or not a zstd one: Icechunk refuses it itself.
        assert_eq!(Declared::of(b"{\"not\": 1}"), Declared::NotCompressed);
        let mut stored = declared.clone();
        stored[ICECHUNK_COMPRESSION_OFFSET] = CompressionAlgorithmBin::None as u8;
        assert_eq!(Declared::of(front(&stored)), Declared::NotCompressed);
    }

    #[tokio::test]
    async fn a_check_decompresses_a_frame_without_a_size_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let files = |metadata_bytes| RepositoryFiles {
            location: "repo".into(),
            at: FilesAt::Local(dir.path().to_path_buf()),
            limits: Limits {
                metadata_bytes,
                ..Limits::default()
            },
        };
        let bytes = file(&without_size(&[7; 1000]));
        std::fs::write(dir.path().join("repo"), &bytes).unwrap();
        let checked = files(1000).check("repo").await.unwrap().unwrap();
        assert_eq!((checked.size, checked.e_tag), (bytes.len() as u64, None));
        let err = files(999).check("repo").await.unwrap_err().to_string();
        assert!(
            err.contains("repo/repo") && err.contains("decompresses to more than the 999"),
            "{err}"
        );
        // A frame that is no zstd: an error naming the file, before Icechunk reads it.
        let mut damaged = bytes.clone();
        damaged[ICECHUNK_FILE_HEADER_LEN] ^= 0xff;
        std::fs::write(dir.path().join("repo"), &damaged).unwrap();
        let err = files(1000).check("repo").await.unwrap_err().to_string();
        assert!(
            err.contains("its zstd frame cannot be decompressed"),
            "{err}"
        );
        assert!(files(1000).check("absent").await.unwrap().is_none());
    }
}
