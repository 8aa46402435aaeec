//! Icechunk reads its own files whole (the repository's `repo` file, a snapshot, its
//! manifests): each one's size is checked before Icechunk reads it, against the bound of a
//! metadata document (`ndfusion.max_metadata_bytes`, 64 MiB by default), so a crafted repository cannot
//! make a table allocate what it likes.

use std::path::PathBuf;

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
