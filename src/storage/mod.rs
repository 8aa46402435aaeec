//! Where tables live: a `LOCATION` is a local path or an object-store URL (`s3://`, `gs://`,
//! `az://`, `abfs://`, `http(s)://`), reached with the settings of [`StorageOptions`]. Both
//! formats resolve their location here; each table gets one object store.

mod containers;
mod file_range;
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
mod http_client;
mod location;
mod options;
mod remote;

use std::path::PathBuf;

pub(crate) use containers::{parse_grants, ContainerGrant};
pub(crate) use file_range::read_file_range;
#[cfg(feature = "icechunk")]
pub(crate) use location::Service;
pub(crate) use location::{local_folder, redact_url, Location};
pub use options::StorageOptions;
pub(crate) use remote::RemoteStore;

use crate::error::Result;

/// A location resolved to where its bytes are.
#[derive(Debug, Clone)]
pub(crate) enum Resolved {
    /// A local path, read with the format's own local reader.
    Local(PathBuf),
    /// A path in an object store.
    Remote(RemoteStore),
}

/// Resolves `location` with `options`: a local path stays local unless the application gave an
/// object store, in which case it is a path in that store.
pub(crate) fn resolve(location: &str, options: &StorageOptions) -> Result<Resolved> {
    Ok(match Location::parse(location)? {
        Location::Local(path) => match options.object_store() {
            None => Resolved::Local(path),
            Some(store) => Resolved::Remote(RemoteStore::given(store.clone(), &path)?),
        },
        Location::Remote { url, service } => {
            Resolved::Remote(RemoteStore::open(&url, service, options)?)
        }
    })
}
