//! Where a lance-nd table lives and how Lance reaches it: local paths through Lance's own
//! local store, remote locations through the object store ndfusion builds (the same settings
//! and store code as Zarr tables), handed to Lance as the provider of the location's scheme.

use std::collections::HashMap;
use std::sync::Arc;

use lance::dataset::builder::DatasetBuilder;
use lance::dataset::{WriteMode, WriteParams};
use lance::io::{ObjectStore as LanceObjectStore, ObjectStoreParams, ObjectStoreRegistry};
use lance::session::Session;
use lance::Dataset;
use lance_file::version::LanceFileVersion;
use lance_io::object_store::providers::ObjectStoreProvider;
use lance_io::object_store::{DEFAULT_CLOUD_IO_PARALLELISM, DEFAULT_DOWNLOAD_RETRY_COUNT};
use lance_table::io::commit::{CommitHandler, ConditionalPutCommitHandler};
use object_store::ObjectStore;
use url::Url;

use super::format::{check_marker, read_error};
use crate::error::Result;
use crate::storage::{resolve, RemoteStore, Resolved, StorageOptions};

/// A lance-nd table's location, resolved.
#[derive(Debug, Clone)]
pub(crate) struct TableLocation {
    /// The location as it may be shown (no credentials).
    pub shown: String,
    /// What Lance opens: the local path, or the URL whose scheme the session's registry
    /// serves from ndfusion's store.
    uri: String,
    /// For remote tables: a Lance session whose store registry knows `uri`'s scheme.
    session: Option<Arc<Session>>,
    /// For remote tables: the store, to tell why a table is absent.
    remote: Option<RemoteStore>,
}

impl TableLocation {
    pub(crate) fn resolve(location: &str, storage: &StorageOptions) -> Result<Self> {
        match resolve(location, storage)? {
            Resolved::Local(path) => Ok(TableLocation {
                shown: location.to_string(),
                uri: path.to_string_lossy().to_string(),
                session: None,
                remote: None,
            }),
            Resolved::Remote(remote) => {
                let registry = ObjectStoreRegistry::default();
                registry.insert(
                    remote.url.scheme(),
                    Arc::new(GivenStore(Arc::clone(&remote.store))),
                );
                let session = Session::new(
                    lance::dataset::DEFAULT_INDEX_CACHE_SIZE,
                    lance::dataset::DEFAULT_METADATA_CACHE_SIZE,
                    Arc::new(registry),
                );
                let mut url = remote.url.clone();
                url.set_path(&format!("/{}", remote.root));
                url.set_query(None);
                Ok(TableLocation {
                    shown: remote.display(""),
                    uri: url.to_string(),
                    session: Some(Arc::new(session)),
                    remote: Some(remote),
                })
            }
        }
    }

    /// The commit handler of remote tables: a manifest is committed with a conditional put
    /// (create if absent), so concurrent writers never overwrite each other's version.
    fn commit_handler(&self) -> Option<Arc<dyn CommitHandler>> {
        self.session
            .as_ref()
            .map(|_| Arc::new(ConditionalPutCommitHandler) as Arc<dyn CommitHandler>)
    }

    /// Opens the Lance table, whatever it holds; `Ok(None)` when there is none.
    pub(crate) async fn open_lance(&self) -> Result<Option<Dataset>> {
        let mut builder = DatasetBuilder::from_uri(&self.uri);
        if let Some(session) = &self.session {
            builder = builder.with_session(Arc::clone(session));
        }
        if let Some(handler) = self.commit_handler() {
            builder = builder.with_commit_handler(handler);
        }
        match builder.load().await {
            Ok(dataset) => Ok(Some(dataset)),
            Err(lance::Error::DatasetNotFound { .. }) => Ok(None),
            Err(e) => {
                let missing = self
                    .remote
                    .as_ref()
                    .and_then(|r| r.missing_container(&e.to_string()));
                match missing {
                    Some(reason) => Err(crate::error::Error::NotFound {
                        location: self.shown.clone(),
                        reason,
                    }),
                    None => Err(read_error(&self.shown, e)),
                }
            }
        }
    }

    /// Opens the table and checks that it is lance-nd.
    pub(crate) async fn open(&self) -> Result<Dataset> {
        let Some(dataset) = self.open_lance().await? else {
            return Err(crate::error::Error::NotFound {
                location: self.shown.clone(),
                reason: "no lance-nd table here (no Lance manifest)".into(),
            });
        };
        check_marker(&dataset, &self.shown)?;
        Ok(dataset)
    }

    /// Write parameters for `mode`: Lance file version 2.2 (nested field addition needs it)
    /// and, for remote tables, the session and commit handler.
    pub(crate) fn write_params(&self, mode: WriteMode) -> WriteParams {
        WriteParams {
            mode,
            data_storage_version: Some(LanceFileVersion::V2_2),
            session: self.session.clone(),
            commit_handler: self.commit_handler(),
            ..Default::default()
        }
    }

    /// What `Dataset::write` takes as the table's URI.
    pub(crate) fn uri(&self) -> &str {
        &self.uri
    }
}

/// Serves a scheme from one object store: the store a table's location resolved to.
#[derive(Debug)]
struct GivenStore(Arc<dyn ObjectStore>);

#[async_trait::async_trait]
impl ObjectStoreProvider for GivenStore {
    async fn new_store(
        &self,
        base_path: Url,
        params: &ObjectStoreParams,
    ) -> lance::Result<LanceObjectStore> {
        Ok(LanceObjectStore::new(
            Arc::clone(&self.0),
            base_path,
            params.block_size,
            params.object_store_wrapper.clone(),
            params.use_constant_size_upload_parts,
            // Not every store an application may give lists in lexical order.
            false,
            DEFAULT_CLOUD_IO_PARALLELISM,
            DEFAULT_DOWNLOAD_RETRY_COUNT,
            None::<&HashMap<String, String>>,
        ))
    }
}
