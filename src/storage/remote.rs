//! Building the object store of a remote location, with the settings of [`StorageOptions`].

use std::sync::Arc;
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
use std::time::Duration;

use object_store::path::Path;
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
use object_store::{ClientOptions, RetryConfig};
use object_store::{GetOptions, GetRange, ObjectStore};
use url::Url;

#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
use super::http_client::SameOriginConnector;
use super::location::{redact_url, Service};
use super::options::StorageOptions;
use crate::error::{Error, Result};

/// The object store of a remote table and the table's path in it.
#[derive(Debug, Clone)]
pub(crate) struct RemoteStore {
    pub store: Arc<dyn ObjectStore>,
    /// Where the table is in the store (relative to the bucket, container or host).
    pub root: Path,
    /// The location's URL (scheme and bucket or host name the store); `ndfusion-store:///path`
    /// for a path in a store the application gave.
    pub url: Url,
    /// The location as it may be shown (no credentials).
    pub shown: String,
}

impl RemoteStore {
    /// The store for `url`, built from `options` (or the store the application gave).
    pub(crate) fn open(url: &Url, service: Service, options: &StorageOptions) -> Result<Self> {
        let root = Path::from_url_path(url.path()).map_err(|e| Error::InvalidLocation {
            location: redact_url(url),
            reason: format!("invalid path: {e}"),
        })?;
        let store = match options.object_store() {
            Some(given) => Arc::clone(given),
            None => build(url, service, options)?,
        };
        Ok(RemoteStore {
            store,
            root,
            url: url.clone(),
            shown: redact_url(url).trim_end_matches('/').to_string(),
        })
    }

    /// A local-looking `path` in a store the application gave.
    pub(crate) fn given(store: Arc<dyn ObjectStore>, path: &std::path::Path) -> Result<Self> {
        let shown = path.to_string_lossy().to_string();
        let invalid = |reason: String| Error::InvalidLocation {
            location: shown.clone(),
            reason,
        };
        let relative = shown.trim_start_matches('/');
        let root = Path::parse(relative).map_err(|e| invalid(e.to_string()))?;
        let url = Url::parse(&format!("ndfusion-store:///{relative}"))
            .map_err(|e| invalid(e.to_string()))?;
        Ok(RemoteStore {
            store,
            root,
            url,
            shown: shown.trim_end_matches('/').to_string(),
        })
    }

    /// The path of `key` (`zarr.json`, `c/0/1`) below the table's root.
    pub(crate) fn path(&self, key: &str) -> Path {
        let mut path = self.root.clone();
        for part in key.split('/').filter(|p| !p.is_empty()) {
            path = path.clone().join(part);
        }
        path
    }

    /// Why nothing was found at the root: the bucket (or container) is missing, or nothing is
    /// stored below the root. `None` when neither can be told (HTTP has no listing).
    pub(crate) async fn why_absent(&self) -> Option<String> {
        // An object at the location itself: a netCDF file opened as a Zarr store?
        let head = GetOptions {
            range: Some(GetRange::Bounded(0..8)),
            ..GetOptions::default()
        };
        if let Ok(result) = self.store.get_opts(&self.root, head).await {
            if let Some(hint) = (result.bytes().await.ok())
                .and_then(|bytes| crate::netcdf::file_format_hint(&bytes))
            {
                return Some(hint.into());
            }
        }
        match self.store.list_with_delimiter(Some(&self.root)).await {
            Ok(listing) if listing.objects.is_empty() && listing.common_prefixes.is_empty() => {
                Some("nothing is stored at this location".into())
            }
            Ok(_) => None,
            Err(e) => self.missing_container(&e.to_string()),
        }
    }

    /// "the bucket 'b' does not exist", when a store's error says so.
    pub(crate) fn missing_container(&self, error: &str) -> Option<String> {
        let missing = ["NoSuchBucket", "ContainerNotFound", "bucket does not exist"]
            .iter()
            .any(|code| error.contains(code));
        let what = if self.url.scheme().starts_with("a") {
            "container"
        } else {
            "bucket"
        };
        missing.then(|| {
            format!(
                "the {what} '{}' does not exist",
                self.url.host_str().unwrap_or_default()
            )
        })
    }

    /// The location of `key` as a user would write it, for messages.
    pub(crate) fn display(&self, key: &str) -> String {
        if key.is_empty() {
            self.shown.clone()
        } else {
            format!("{}/{key}", self.shown)
        }
    }
}

#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
fn client_options(options: &StorageOptions, allow_http: bool) -> ClientOptions {
    let connector = connector(options, allow_http);
    ClientOptions::new()
        .with_timeout(connector.timeout)
        .with_connect_timeout(connector.connect_timeout)
        .with_allow_http(connector.allow_http)
}

/// The HTTP client of every store: the same timeouts, redirects only within the origin.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
fn connector(options: &StorageOptions, allow_http: bool) -> SameOriginConnector {
    SameOriginConnector {
        timeout: options
            .seconds("client.timeout")
            .unwrap_or(Duration::from_secs(30)),
        connect_timeout: options
            .seconds("client.connect_timeout")
            .unwrap_or(Duration::from_secs(5)),
        allow_http: allow_http || options.flag("client.allow_http"),
    }
}

/// Transient failures (timeouts, 5xx, refused connections) are retried with exponential
/// backoff until `client.max_retries` retries or `client.retry_timeout` seconds have passed.
#[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
fn retry_config(options: &StorageOptions) -> RetryConfig {
    RetryConfig {
        max_retries: options.count("client.max_retries").unwrap_or(10),
        retry_timeout: options
            .seconds("client.retry_timeout")
            .unwrap_or(Duration::from_secs(60)),
        ..RetryConfig::default()
    }
}

#[allow(unused_variables)]
fn build(url: &Url, service: Service, options: &StorageOptions) -> Result<Arc<dyn ObjectStore>> {
    let shown = redact_url(url);
    #[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
    let failed = |e: object_store::Error| Error::ObjectStore {
        location: shown.clone(),
        source: e,
    };
    #[cfg(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http"))]
    let retry = retry_config(options);
    match service {
        #[cfg(feature = "s3")]
        Service::S3 => {
            // Credentials the table brings are the only ones it uses: none of the process's.
            let own = [
                "aws.access_key_id",
                "aws.secret_access_key",
                "aws.session_token",
            ];
            let mut b = match own.iter().any(|k| options.get(k).is_some()) {
                true => object_store::aws::AmazonS3Builder::new(),
                false => object_store::aws::AmazonS3Builder::from_env(),
            }
            .with_url(url.as_str())
            .with_retry(retry)
            .with_client_options(client_options(options, options.flag("aws.allow_http")))
            .with_http_connector(connector(options, options.flag("aws.allow_http")));
            if let Some(v) = options.get("aws.access_key_id") {
                b = b.with_access_key_id(v);
            }
            if let Some(v) = options.get("aws.secret_access_key") {
                b = b.with_secret_access_key(v);
            }
            if let Some(v) = options.get("aws.session_token") {
                b = b.with_token(v);
            }
            if let Some(v) = options.get("aws.region") {
                b = b.with_region(v);
            }
            if let Some(v) = options.get("aws.endpoint") {
                b = b.with_endpoint(v);
            }
            if options.flag("aws.skip_signature") {
                b = b.with_skip_signature(true);
            }
            Ok(Arc::new(b.build().map_err(failed)?))
        }
        #[cfg(feature = "gcs")]
        Service::Gcs => {
            let mut b = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry)
                .with_client_options(client_options(options, false))
                .with_http_connector(connector(options, false));
            if let Some(v) = options.get("gcp.service_account_path") {
                b = b.with_service_account_path(v);
            }
            if options.flag("gcp.skip_signature") {
                b = b.with_skip_signature(true);
            }
            Ok(Arc::new(b.build().map_err(failed)?))
        }
        #[cfg(feature = "azure")]
        Service::Azure => {
            let mut b = match options.get("azure.access_key").is_some() {
                true => object_store::azure::MicrosoftAzureBuilder::new(),
                false => object_store::azure::MicrosoftAzureBuilder::from_env(),
            }
            .with_url(url.as_str())
            .with_retry(retry)
            .with_client_options(client_options(options, options.flag("azure.allow_http")))
            .with_http_connector(connector(options, options.flag("azure.allow_http")));
            if let Some(v) = options.get("azure.account_name") {
                b = b.with_account(v);
            }
            if let Some(v) = options.get("azure.access_key") {
                b = b.with_access_key(v);
            }
            if let Some(v) = options.get("azure.endpoint") {
                b = b.with_endpoint(v.to_string());
            }
            if options.flag("azure.skip_signature") {
                b = b.with_skip_signature(true);
            }
            Ok(Arc::new(b.build().map_err(failed)?))
        }
        #[cfg(feature = "http")]
        Service::Http => {
            let mut base = url.clone();
            base.set_path("/");
            base.set_query(None);
            let store = object_store::http::HttpBuilder::new()
                .with_url(base.as_str())
                .with_retry(retry)
                .with_client_options(client_options(options, url.scheme() == "http"))
                .with_http_connector(connector(options, url.scheme() == "http"))
                .build()
                .map_err(failed)?;
            Ok(Arc::new(store))
        }
        #[allow(unreachable_patterns)]
        other => Err(Error::InvalidLocation {
            location: shown,
            reason: format!(
                "{}:// support is not compiled in (cargo feature '{}')",
                url.scheme(),
                other.feature()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_joined_below_the_root() {
        let url = Url::parse("s3://bucket/data/a.zarr").unwrap();
        let memory = Arc::new(object_store::memory::InMemory::new());
        let options = StorageOptions::new().with_object_store(memory.clone());
        let store = RemoteStore::open(&url, Service::S3, &options).unwrap();
        assert_eq!(store.path("c/0/1").as_ref(), "data/a.zarr/c/0/1");
        assert_eq!(store.path("zarr.json").as_ref(), "data/a.zarr/zarr.json");
        assert_eq!(store.display("c/0"), "s3://bucket/data/a.zarr/c/0");
        let given = RemoteStore::given(memory, std::path::Path::new("/data/b.zarr/")).unwrap();
        assert_eq!(given.path("c/0").as_ref(), "data/b.zarr/c/0");
        assert_eq!(given.display("c/0"), "/data/b.zarr/c/0");
    }
}
