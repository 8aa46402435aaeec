//! An Icechunk repository opened from a `LOCATION` and its storage settings, with the virtual
//! chunk containers the table authorizes.

use std::collections::HashMap;

use icechunk::config::Credentials;
use icechunk::virtual_chunks::VirtualChunkContainer;
use icechunk::{ObjectStoreConfig, Repository, RepositoryConfig, Storage};

use crate::error::{Error, Result};
use crate::icechunk::bounds::RepositoryFiles;
use crate::storage::ContainerGrant;
use crate::storage::{local_folder, Location, Service, StorageOptions};

/// A repository opened, with its files as ndfusion sees them (to check them before Icechunk
/// reads them).
pub(crate) struct OpenRepository {
    pub repo: Repository,
    pub files: RepositoryFiles,
    /// The `repo` file's ETag (object stores) as it was checked before Icechunk read it.
    pub repo_tag: Option<String>,
}

/// Opens the repository at `location` (a local folder, `s3://`, `gs://` or `az://` prefix)
/// with `storage`'s settings; `grants` are the virtual chunk containers its chunks may be
/// read from (none: virtual chunks are refused).
pub(crate) async fn open_repository(
    location: &str,
    storage: &StorageOptions,
    grants: &[ContainerGrant],
) -> Result<OpenRepository> {
    // First: a bad NDFUSION_MAX_* variable is reported before anything is read.
    let files = RepositoryFiles::new(location, storage)?;
    let backend = repository_storage(location, storage).await?;
    let repo_tag = files.check_before_open().await?;
    let failed = |e: &dyn std::fmt::Display| Error::NotFound {
        location: location.to_string(),
        reason: e.to_string(),
    };
    // Opened straight away; only a failure asks whether a repository is there at all (one
    // round of requests fewer on an object store for every table that opens).
    let repo = match Repository::open(std::sync::Arc::clone(&backend))
        .execute()
        .await
    {
        Ok(repo) => repo,
        Err(e) => {
            let exists = Repository::exists(backend, None)
                .await
                .map_err(|e| failed(&e))?;
            return Err(match exists {
                true => failed(&e),
                false => Error::NotFound {
                    location: location.to_string(),
                    reason: "not an Icechunk repository (no repository information or `main` \
                             branch there)"
                        .into(),
                },
            });
        }
    };
    let repo = match grants {
        [] => repo,
        grants => {
            let (config, credentials) = authorize(location, repo.config(), grants, storage)?;
            (repo.reopen(Some(config), Some(credentials)).await).map_err(|e| failed(&e))?
        }
    };
    Ok(OpenRepository {
        repo,
        files,
        repo_tag,
    })
}

/// The repository's virtual chunk containers as the table allows them: each grant names a
/// container of the repository (by URL prefix, or by name with a new place for it), and gets
/// the credentials of the table's storage settings. A grant that matches no container is an
/// error: it would authorize nothing.
fn authorize(
    location: &str,
    stored: &RepositoryConfig,
    grants: &[ContainerGrant],
    storage: &StorageOptions,
) -> Result<(RepositoryConfig, HashMap<String, Option<Credentials>>)> {
    let mut containers: Vec<VirtualChunkContainer> =
        stored.virtual_chunk_containers().cloned().collect();
    containers.sort_by(|a, b| a.url_prefix().cmp(b.url_prefix()));
    let mut config = RepositoryConfig::default();
    config.clear_virtual_chunk_containers();
    let mut credentials = HashMap::new();
    for grant in grants {
        let container = match grant {
            ContainerGrant::Prefix(prefix) => containers
                .iter()
                .find(|c| c.url_prefix() == prefix)
                .cloned()
                .map(|c| with_storage_settings(c, storage)),
            ContainerGrant::Moved { name, prefix } => containers
                .iter()
                .find(|c| c.name() == Some(name.as_str()))
                .map(|_| moved(name, prefix, storage))
                .transpose()?,
        };
        let Some(container) = container else {
            let known: Vec<String> = containers.iter().map(describe).collect();
            return Err(Error::InvalidOption {
                option: "virtual_chunk_containers".into(),
                reason: format!(
                    "the repository at {location} has no virtual chunk container {}; it has: {}",
                    grant,
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            });
        };
        credentials.insert(
            container.url_prefix().to_string(),
            Some(container_credentials(&container.store, storage)),
        );
        config
            .set_virtual_chunk_container(container)
            .map_err(|reason| Error::InvalidOption {
                option: "virtual_chunk_containers".into(),
                reason,
            })?;
    }
    // Containers not granted stay declared (their chunks then fail naming them) but
    // unauthorized.
    for container in containers {
        let granted = config
            .virtual_chunk_containers()
            .any(|c| c.url_prefix() == container.url_prefix() || same_name(c, &container));
        if !granted {
            let _ = config.set_virtual_chunk_container(container);
        }
    }
    Ok((config, credentials))
}

fn same_name(a: &VirtualChunkContainer, b: &VirtualChunkContainer) -> bool {
    a.name().is_some() && a.name() == b.name()
}

/// A container as messages show it: its URL prefix, and its name when it has one.
pub(crate) fn describe(container: &VirtualChunkContainer) -> String {
    match container.name() {
        Some(name) => format!("{name}={}", container.url_prefix()),
        None => container.url_prefix().to_string(),
    }
}

/// Container `name` at a new URL prefix (the files moved, or a checkout elsewhere).
fn moved(name: &str, prefix: &str, storage: &StorageOptions) -> Result<VirtualChunkContainer> {
    let invalid = |reason: String| Error::InvalidOption {
        option: "virtual_chunk_containers".into(),
        reason: format!("{name}={prefix}: {reason}"),
    };
    let store = match Location::parse(prefix).map_err(|e| invalid(e.to_string()))? {
        Location::Local(path) => ObjectStoreConfig::LocalFileSystem(path),
        Location::Remote {
            service: Service::S3,
            ..
        } => ObjectStoreConfig::S3Compatible(s3_options(storage)),
        Location::Remote { .. } => {
            return Err(invalid(
                "a container can be moved to a local folder or an s3:// prefix".into(),
            ))
        }
    };
    let container = VirtualChunkContainer::new_named(name.to_string(), prefix.to_string(), store)
        .map_err(invalid)?;
    Ok(container)
}

/// An S3 container reached with the table's own S3 settings where it sets them (endpoint,
/// region, HTTP, anonymous): the table's storage settings say how to reach that server.
fn with_storage_settings(
    container: VirtualChunkContainer,
    storage: &StorageOptions,
) -> VirtualChunkContainer {
    let (ObjectStoreConfig::S3(stored) | ObjectStoreConfig::S3Compatible(stored)) =
        &container.store
    else {
        return container;
    };
    let mut options = stored.clone();
    if let Some(endpoint) = storage.get("aws.endpoint") {
        options.endpoint_url = Some(endpoint.to_string());
        options.force_path_style = true;
    }
    if let Some(region) = storage.get("aws.region") {
        options.region = Some(region.to_string());
    }
    options.allow_http |= storage.flag("aws.allow_http");
    options.anonymous |= storage.flag("aws.skip_signature");
    let store = ObjectStoreConfig::S3Compatible(options);
    match container.name() {
        Some(name) => VirtualChunkContainer::new_named(
            name.to_string(),
            container.url_prefix().to_string(),
            store,
        ),
        None => VirtualChunkContainer::new(container.url_prefix().to_string(), store),
    }
    .unwrap_or(container)
}

/// The credentials a container's chunks are fetched with: the table's storage settings for
/// its kind of store, else the environment's.
fn container_credentials(store: &ObjectStoreConfig, storage: &StorageOptions) -> Credentials {
    match store {
        ObjectStoreConfig::S3(_) | ObjectStoreConfig::S3Compatible(_) => {
            Credentials::S3(s3_credentials(storage))
        }
        _ => Credentials::LocalFileSystemAccess,
    }
}

fn s3_options(storage: &StorageOptions) -> icechunk::config::S3Options {
    let mut options = icechunk::config::S3Options::default();
    options.region = storage.get("aws.region").map(str::to_string);
    options.endpoint_url = storage.get("aws.endpoint").map(str::to_string);
    options.anonymous = storage.flag("aws.skip_signature");
    options.allow_http = storage.flag("aws.allow_http") || storage.flag("client.allow_http");
    // An endpoint is an S3-compatible server: buckets in the path, as object_store does.
    options.force_path_style = storage.get("aws.endpoint").is_some();
    options
}

fn s3_credentials(storage: &StorageOptions) -> icechunk::config::S3Credentials {
    use icechunk::config::{S3Credentials, S3StaticCredentials};
    match (
        storage.get("aws.access_key_id"),
        storage.get("aws.secret_access_key"),
    ) {
        _ if storage.flag("aws.skip_signature") => S3Credentials::Anonymous,
        (Some(key), Some(secret)) => S3Credentials::Static(S3StaticCredentials {
            access_key_id: key.to_string(),
            secret_access_key: secret.to_string(),
            session_token: storage.get("aws.session_token").map(str::to_string),
            expires_after: None,
        }),
        _ => S3Credentials::FromEnv,
    }
}

/// Icechunk's storage for `location`: its own object-store backends, configured from the
/// table's storage settings (the keys of Zarr tables).
async fn repository_storage(
    location: &str,
    storage: &StorageOptions,
) -> Result<std::sync::Arc<dyn Storage + Send + Sync>> {
    if storage.object_store().is_some() {
        return Err(Error::InvalidOption {
            option: "object_store".into(),
            reason: "an Icechunk repository is read through Icechunk's own storage: give its \
                     location as a URL and storage settings"
                .into(),
        });
    }
    let failed = |e: &dyn std::fmt::Display| Error::NotFound {
        location: location.to_string(),
        reason: e.to_string(),
    };
    match Location::parse(location)? {
        Location::Local(path) => {
            // A missing folder is reported as such, not as an empty repository.
            local_folder(location, &path, "an Icechunk repository folder")?;
            icechunk::new_local_filesystem_storage(&path)
                .await
                .map_err(|e| failed(&e))
        }
        Location::Remote { url, service } => remote_storage(location, &url, service, storage).await,
    }
}

/// The bucket (or container) and the prefix in it.
fn bucket_and_prefix(url: &url::Url) -> (String, Option<String>) {
    let bucket = url.host_str().unwrap_or_default().to_string();
    let prefix = url.path().trim_matches('/');
    (bucket, (!prefix.is_empty()).then(|| prefix.to_string()))
}

#[allow(unused_variables)]
async fn remote_storage(
    location: &str,
    url: &url::Url,
    service: Service,
    storage: &StorageOptions,
) -> Result<std::sync::Arc<dyn Storage + Send + Sync>> {
    let failed = |e: &dyn std::fmt::Display| Error::NotFound {
        location: location.to_string(),
        reason: e.to_string(),
    };
    let (bucket, prefix) = bucket_and_prefix(url);
    match service {
        #[cfg(feature = "s3")]
        Service::S3 => icechunk::storage::new_s3_object_store_storage(
            s3_options(storage),
            bucket,
            prefix,
            Some(s3_credentials(storage)),
            Vec::new(),
            Vec::new(),
        )
        .await
        .map_err(|e| failed(&e)),
        #[cfg(feature = "gcs")]
        Service::Gcs => {
            use icechunk::config::{GcsCredentials, GcsStaticCredentials};
            let credentials = match storage.get("gcp.service_account_path") {
                _ if storage.flag("gcp.skip_signature") => GcsCredentials::Anonymous,
                Some(path) => {
                    GcsCredentials::Static(GcsStaticCredentials::ServiceAccount(path.into()))
                }
                None => GcsCredentials::FromEnv,
            };
            icechunk::storage::new_gcs_storage(
                bucket,
                prefix,
                Some(credentials),
                None,
                Vec::new(),
                Vec::new(),
            )
            .map_err(|e| failed(&e))
        }
        #[cfg(feature = "azure")]
        Service::Azure => {
            use icechunk::config::{AzureCredentials, AzureStaticCredentials};
            let Some(account) = storage.get("azure.account_name") else {
                return Err(Error::InvalidOption {
                    option: "azure.account_name".into(),
                    reason: format!("{location}: an Icechunk repository on Azure needs it"),
                });
            };
            let credentials = match storage.get("azure.access_key") {
                _ if storage.flag("azure.skip_signature") => AzureCredentials::Anonymous,
                Some(key) => {
                    AzureCredentials::Static(AzureStaticCredentials::AccessKey(key.to_string()))
                }
                None => AzureCredentials::FromEnv,
            };
            let mut config = HashMap::new();
            if let Some(endpoint) = storage.get("azure.endpoint") {
                config.insert("azure_storage_endpoint".to_string(), endpoint.to_string());
            }
            if storage.flag("azure.allow_http") {
                config.insert("azure_allow_http".to_string(), "true".to_string());
            }
            icechunk::storage::new_azure_blob_storage(
                account.to_string(),
                bucket,
                prefix,
                Some(credentials),
                Some(config),
            )
            .await
            .map_err(|e| failed(&e))
        }
        other => Err(Error::InvalidLocation {
            location: location.to_string(),
            reason: match other {
                Service::Http => {
                    "an Icechunk repository is read from a local folder or an s3://, gs:// or \
                     az:// prefix"
                        .to_string()
                }
                _ => format!(
                    "ndfusion was built without the '{}' feature",
                    other.feature()
                ),
            },
        }),
    }
}
