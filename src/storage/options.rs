//! Settings for reaching object stores: credentials, endpoints and client behaviour, spelled
//! as DataFusion's own CLI spells them (`aws.region`, `gcp.service_account_path`, ...).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;

use crate::error::{Error, Result};
use crate::limits::Limits;

/// A storage setting ndfusion knows: its key and what it is for.
struct Setting {
    key: &'static str,
    /// Shown as `***` in `Debug`, EXPLAIN and errors.
    secret: bool,
}

const fn setting(key: &'static str, secret: bool) -> Setting {
    Setting { key, secret }
}

/// Every storage key, in the order EXPLAIN shows them.
const SETTINGS: &[Setting] = &[
    setting("aws.access_key_id", false),
    setting("aws.secret_access_key", true),
    setting("aws.session_token", true),
    setting("aws.region", false),
    setting("aws.endpoint", false),
    setting("aws.allow_http", false),
    setting("aws.skip_signature", false),
    setting("gcp.service_account_path", false),
    setting("gcp.skip_signature", false),
    setting("azure.account_name", false),
    setting("azure.access_key", true),
    setting("azure.endpoint", false),
    setting("azure.allow_http", false),
    setting("azure.skip_signature", false),
    setting("client.timeout", false),
    setting("client.connect_timeout", false),
    setting("client.max_retries", false),
    setting("client.retry_timeout", false),
    setting("client.allow_http", false),
];

/// How remote tables reach their object store.
///
/// Keys are those of `CREATE EXTERNAL TABLE ... OPTIONS (...)`:
///
/// | key | meaning |
/// |---|---|
/// | `aws.access_key_id`, `aws.secret_access_key`, `aws.session_token` | S3 credentials |
/// | `aws.region`, `aws.endpoint` | region; endpoint of an S3-compatible server |
/// | `aws.allow_http` | allow `http://` endpoints |
/// | `aws.skip_signature` | anonymous requests (public buckets) |
/// | `gcp.service_account_path`, `gcp.skip_signature` | GCS credentials file; anonymous |
/// | `azure.account_name`, `azure.access_key` | Azure storage account and key |
/// | `azure.endpoint`, `azure.allow_http`, `azure.skip_signature` | as for S3 |
/// | `client.timeout`, `client.connect_timeout` | seconds per request / per connection (30, 5) |
/// | `client.max_retries`, `client.retry_timeout` | retries of failed requests (10, 60 seconds) |
/// | `client.allow_http` | allow `http://` for HTTP locations (on for `http://` URLs) |
///
/// Without them the usual environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`) and instance
/// credentials apply. Secrets never appear in `Debug`, EXPLAIN or errors.
///
/// ```
/// let options = ndfusion::StorageOptions::new()
///     .with("aws.region", "us-east-1")?
///     .with("aws.skip_signature", "true")?;
/// assert!(format!("{options:?}").contains("aws.region=us-east-1"));
/// # Ok::<_, ndfusion::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct StorageOptions {
    values: BTreeMap<String, String>,
    object_store: Option<Arc<dyn ObjectStore>>,
    /// The limits reads go under; `None`: the process's defaults. Never sent to a cluster.
    limits: Option<Limits>,
}

impl StorageOptions {
    /// No settings: the environment's credentials apply.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one setting; an unknown key is an error listing the known ones.
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Result<Self> {
        let key = key.to_ascii_lowercase();
        let value = value.into();
        check_value(&key, &value)?;
        self.values.insert(key, value);
        Ok(self)
    }

    /// Settings from a map, as [`with`](Self::with) takes them one by one.
    pub fn from_map<K: AsRef<str>, V: Into<String>>(
        map: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        map.into_iter()
            .try_fold(Self::new(), |options, (k, v)| options.with(k.as_ref(), v))
    }

    /// Reads every location through `store`, an object store the application built: the
    /// location's path is taken relative to the store's root, and the settings above are not
    /// used.
    pub fn with_object_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.object_store = Some(store);
        self
    }

    /// Reads under `limits` (what a file may make ndfusion do) instead of the process's
    /// defaults. A session's factories set its limits here; they are not sent with a plan
    /// (executors read under their own).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// The limits reads go under: those given, else the process's defaults (an error naming
    /// the environment variable that cannot be read).
    pub(crate) fn limits(&self) -> Result<Limits> {
        self.limits.map_or_else(Limits::from_env, Ok)
    }

    /// The settings as `OPTIONS (...)` keys, secrets included (a cluster sends them with the
    /// plan, never shows them). An object store the application built cannot travel: an error.
    pub(crate) fn to_sql(&self) -> Result<std::collections::HashMap<String, String>> {
        if self.object_store.is_some() {
            return Err(Error::InvalidOption {
                option: "object_store".into(),
                reason: "a table read through an object store the application built cannot be \
                         sent to a cluster: give its location as a URL and storage settings"
                    .into(),
            });
        }
        Ok(self.values.clone().into_iter().collect())
    }

    /// Whether `key` (lower case) is a storage setting.
    pub(crate) fn is_storage_key(key: &str) -> bool {
        SETTINGS.iter().any(|s| s.key == key)
    }

    /// Every storage key, for messages listing the known options.
    pub(crate) fn keys() -> impl Iterator<Item = &'static str> {
        SETTINGS.iter().map(|s| s.key)
    }

    pub(crate) fn object_store(&self) -> Option<&Arc<dyn ObjectStore>> {
        self.object_store.as_ref()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty() && self.object_store.is_none()
    }
}

/// Reading the settings: only the remote stores compiled in do.
#[cfg_attr(
    not(any(feature = "s3", feature = "gcs", feature = "azure", feature = "http")),
    allow(dead_code)
)]
impl StorageOptions {
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// A boolean setting (`true`/`false`), checked when it was set.
    pub(crate) fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// A duration setting in seconds, checked when it was set.
    pub(crate) fn seconds(&self, key: &str) -> Option<Duration> {
        self.get(key)
            .and_then(|v| v.parse::<f64>().ok())
            .map(Duration::from_secs_f64)
    }

    /// A count setting, checked when it was set.
    pub(crate) fn count(&self, key: &str) -> Option<usize> {
        self.get(key).and_then(|v| v.parse().ok())
    }
}

/// Checks a key and the shape of its value (booleans, seconds, counts).
fn check_value(key: &str, value: &str) -> Result<()> {
    if !StorageOptions::is_storage_key(key) {
        return Err(Error::InvalidOption {
            option: key.to_string(),
            reason: format!(
                "unknown storage option; known: {}",
                StorageOptions::keys().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let invalid = |what: &str| {
        Err(Error::InvalidOption {
            option: key.to_string(),
            reason: format!("expected {what}, found '{value}'"),
        })
    };
    if key.ends_with("allow_http") || key.ends_with("skip_signature") {
        if !value.eq_ignore_ascii_case("true") && !value.eq_ignore_ascii_case("false") {
            return invalid("true or false");
        }
    } else if key.ends_with("timeout") {
        if !value
            .parse::<f64>()
            .is_ok_and(|s| s.is_finite() && s > 0.0 && s < 1e9)
        {
            return invalid("a positive number of seconds");
        }
    } else if key == "client.max_retries" && value.parse::<usize>().is_err() {
        return invalid("a non-negative integer");
    }
    Ok(())
}

impl fmt::Debug for StorageOptions {
    /// `key=value` pairs, secrets as `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = SETTINGS
            .iter()
            .filter_map(|s| {
                let value = self.values.get(s.key)?;
                Some(if s.secret {
                    format!("{}=***", s.key)
                } else {
                    format!("{}={value}", s.key)
                })
            })
            .collect();
        if self.object_store.is_some() {
            parts.push("object_store=<given>".into());
        }
        write!(f, "{}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let err = StorageOptions::new().with("aws.regoin", "x").unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with(
            "invalid option 'aws.regoin': unknown storage option; known: aws.access_key_id"
        ));
        let err = StorageOptions::new()
            .with("aws.allow_http", "yes")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid option 'aws.allow_http': expected true or false, found 'yes'"
        );
        assert!(StorageOptions::new()
            .with("client.retry_timeout", "-1")
            .is_err());
    }

    #[test]
    fn secrets_are_never_shown() {
        let options = StorageOptions::from_map([
            ("AWS.Secret_Access_Key", "hunter2"),
            ("aws.access_key_id", "AKIA1"),
            ("azure.access_key", "c2VjcmV0"),
        ])
        .unwrap();
        let shown = format!("{options:?}");
        assert_eq!(
            shown,
            "aws.access_key_id=AKIA1, aws.secret_access_key=***, azure.access_key=***"
        );
        assert_eq!(options.get("aws.secret_access_key"), Some("hunter2"));
    }
}
