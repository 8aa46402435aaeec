//! The HTTP client every object store ndfusion builds uses: object_store's reqwest client with
//! its timeouts, except that a redirect is followed only to the same origin (scheme, host and
//! port). A store's answer could otherwise send ndfusion, and the credentials or the process
//! environment's identity it signs requests with, to any host: a chunk answering `302` to an
//! address of an attacker's choice would return that address's content as rows.

use std::time::Duration;

use object_store::client::{HttpClient, HttpConnector};
use object_store::ClientOptions;

/// Redirects followed at most (within the origin).
const MAX_REDIRECTS: usize = 10;

/// Builds [`HttpClient`]s that refuse redirects to other origins.
#[derive(Debug, Clone)]
pub(crate) struct SameOriginConnector {
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub allow_http: bool,
}

impl HttpConnector for SameOriginConnector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let to = attempt.url().clone();
            let from = attempt.previous().first().cloned();
            match from {
                _ if attempt.previous().len() > MAX_REDIRECTS => attempt.error(format!(
                    "more than {MAX_REDIRECTS} redirects, the last to {}",
                    to.origin().ascii_serialization()
                )),
                Some(from) if from.origin() == to.origin() => attempt.follow(),
                _ => attempt.error(format!(
                    "redirect to another host refused: {} (ndfusion follows redirects only \
                     within the host a location names)",
                    to.origin().ascii_serialization()
                )),
            }
        });
        let client = reqwest::Client::builder()
            .user_agent(concat!("ndfusion/", env!("CARGO_PKG_VERSION")))
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            .https_only(!self.allow_http)
            .redirect(policy)
            .build()
            .map_err(|e| object_store::Error::Generic {
                store: "HTTP client",
                source: Box::new(e),
            })?;
        Ok(HttpClient::new(client))
    }
}
