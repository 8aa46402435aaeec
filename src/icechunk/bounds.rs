//! Icechunk reads its own files whole (the repository's `repo` file, a snapshot, its
//! manifests): each one's size is checked before Icechunk reads it, against the bound of a
//! metadata document (`ndfusion.max_metadata_bytes`, 64 MiB by default), so a crafted repository cannot
//! make a table allocate what it likes. Native chunks ndfusion reads itself, a byte range of
//! a `chunks/` file at a time ([`RepositoryFiles::read`]).

use std::ops::Range;
use std::path::PathBuf;

use zarrs::storage::Bytes;

use futures::{StreamExt, TryStreamExt};
use icechunk::format::SnapshotId;
use icechunk::Repository;
use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::limits::{Limits, METADATA_BYTES};
use crate::storage::{resolve, RemoteStore, Resolved, StorageOptions};

/// Manifests whose sizes are asked for at once (remote: HEAD requests).
const SIZES_IN_FLIGHT: usize = 16;

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

    /// The size of `file` (`repo`, `snapshots/<id>`); `None` when there is none.
    async fn size(&self, file: &str) -> Result<Option<u64>> {
        let failed = |reason: String| Error::NotFound {
            location: format!("{}/{file}", self.location.trim_end_matches('/')),
            reason,
        };
        match &self.at {
            FilesAt::Local(root) => match std::fs::metadata(root.join(file)) {
                Ok(m) => Ok(Some(m.len())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(failed(e.to_string())),
            },
            FilesAt::Remote(remote) => match remote.store.head(&remote.path(file)).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(failed(crate::error::with_root_cause(&e))),
            },
        }
    }

    /// Bytes `range` of `file` (`chunks/<id>`): locally one positioned read on a blocking
    /// thread (Icechunk's local storage streams a file through object_store in 8 KiB
    /// pieces, each its own trip through the blocking pool), remotely one ranged GET. A range
    /// past the file's end is an error naming the file; nothing is allocated beyond what the
    /// file holds.
    pub(crate) async fn read(&self, file: &str, range: Range<u64>) -> Result<Bytes> {
        let shown = format!("{}/{file}", self.location.trim_end_matches('/'));
        let failed = |reason: String| Error::NotFound {
            location: shown.clone(),
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
                let wanted = format!("{range:?}");
                match tokio::task::spawn_blocking(read).await {
                    Ok(Ok(Ok(bytes))) => Ok(bytes),
                    Ok(Ok(Err(size))) => Err(failed(format!(
                        "the manifest places a chunk at bytes {wanted} of a file of {size} bytes"
                    ))),
                    Ok(Err(e)) => Err(failed(e.to_string())),
                    Err(e) => Err(failed(e.to_string())),
                }
            }
            FilesAt::Remote(remote) => {
                let path = remote.path(file);
                let wanted = range.end.saturating_sub(range.start);
                match remote.store.get_range(&path, range.clone()).await {
                    Ok(bytes) if bytes.len() as u64 == wanted => Ok(bytes),
                    Ok(bytes) => Err(failed(format!(
                        "the manifest places a chunk at bytes {range:?}, of which the store \
                         returned {}",
                        bytes.len()
                    ))),
                    Err(e) => Err(failed(crate::error::with_root_cause(&e))),
                }
            }
        }
    }

    /// An error when `file` is larger than a metadata document may be.
    async fn check(&self, file: &str) -> Result<()> {
        let max = self.limits.metadata_bytes;
        match self.size(file).await? {
            Some(size) if size > max => Err(Error::InvalidMetadata {
                path: format!("{}/{file}", self.location.trim_end_matches('/')),
                reason: format!(
                    "the file is {size} bytes, more than the {max} an Icechunk file may have \
                     ({METADATA_BYTES}); it is not read"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Before Icechunk reads the repository's description (every version it resolves).
    pub(crate) async fn check_repo_file(&self) -> Result<()> {
        self.check("repo").await
    }

    /// Before Icechunk reads snapshot `id` and then its manifests: the snapshot's size, then
    /// (the snapshot parsed) each manifest's.
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
            async move { self.check(&file).await }
        });
        futures::stream::iter(checks)
            .buffer_unordered(SIZES_IN_FLIGHT)
            .try_collect::<()>()
            .await
    }
}
