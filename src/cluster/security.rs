//! How a cluster's processes and clients know each other: a shared secret (the token) on every
//! gRPC call, and TLS on every link, so that neither the token nor the `OPTIONS` secrets that
//! travel inside plans cross the network in clear.
//!
//! What Ballista 54.1 lets us plug in, link by link:
//! - client -> scheduler, client -> executor (results), executor -> scheduler, executor ->
//!   executor (shuffles): every endpoint Ballista creates goes through an endpoint override
//!   (`EndpointOverrideFn`), where TLS is set (the scheme becomes `https`: tonic uses TLS only
//!   for `https` URIs) and the token rides in the `user-agent` header. Ballista's gRPC metadata
//!   interceptor reaches only the client's calls to the scheduler; the user agent reaches all.
//! - the scheduler's gRPC server and the executors' Flight servers: assembled here (tonic
//!   servers with a TLS identity and an interceptor that refuses a call without the token).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ballista_core::extension::EndpointOverrideFn;
use ballista_core::utils::{create_grpc_client_endpoint, GrpcClientConfig};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};
use tonic::{Request, Status};

use super::tls_check::{check_own_certificate, check_peer};
use crate::error::{Error, Result};

/// The environment variable that holds a cluster's token (instead of `--token-file`).
pub const TOKEN_ENV: &str = "NDFUSION_CLUSTER_TOKEN";

/// The user agent's part that carries the token.
const TOKEN_AGENT: &str = "ndfusion-cluster/";

/// A token shorter than this is refused: it could be guessed.
const MIN_TOKEN_LEN: usize = 16;

/// How a cluster process or client authenticates and encrypts: a token, TLS files, both, or
/// neither ([`ClusterSecurity::none`], the loopback default).
#[derive(Clone, Default)]
pub struct ClusterSecurity {
    token: Option<Arc<str>>,
    /// PEM of this process's certificate and key (servers), and of the CA that signed the
    /// cluster's certificates (everyone).
    certificate: Option<Arc<(Vec<u8>, Vec<u8>)>>,
    ca: Option<Arc<Vec<u8>>>,
    /// The files they came from, for the errors that name them.
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
}

impl std::fmt::Debug for ClusterSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSecurity")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("tls", &self.ca.is_some())
            .finish()
    }
}

impl ClusterSecurity {
    /// No token, no TLS.
    pub fn none() -> Self {
        Self::default()
    }

    /// Calls carry (and servers demand) `token`: at least 16 visible ASCII characters.
    pub fn with_token(mut self, token: &str) -> Result<Self> {
        let token = token.trim();
        check_token(token, "cluster")?;
        self.token = Some(token.into());
        Ok(self)
    }

    /// The token in the file at `path` (its first line).
    pub fn with_token_file(self, path: &Path) -> Result<Self> {
        let text = read(path, "token-file")?;
        let text = String::from_utf8_lossy(&text);
        let line = text.lines().next().unwrap_or_default().to_string();
        self.with_token(&line)
    }

    /// TLS on every link: `ca` (PEM) signed the cluster's certificates; `certificate` and
    /// `key` (PEM) are this process's, required of a scheduler and an executor.
    pub fn with_tls(mut self, ca: &Path, certificate: Option<(&Path, &Path)>) -> Result<Self> {
        self.ca = Some(Arc::new(read(ca, "tls-ca")?));
        self.ca_file = Some(ca.to_path_buf());
        if let Some((cert, key)) = certificate {
            self.certificate = Some(Arc::new((read(cert, "tls-cert")?, read(key, "tls-key")?)));
            self.cert_file = Some(cert.to_path_buf());
        }
        Ok(self)
    }

    /// A scheduler's or an executor's own certificate, checked against the CA when it starts
    /// (`tls_check.rs`): signed by it, valid now, not a CA itself, and covering `serves_on`
    /// when peers reach the process at that address (an executor's). Nothing without TLS.
    pub(crate) fn check_own_certificate(
        &self,
        what: &str,
        serves_on: Option<IpAddr>,
    ) -> Result<()> {
        let (Some(ca), Some(ca_file)) = (&self.ca, &self.ca_file) else {
            return Ok(());
        };
        let (Some(pair), Some(cert_file)) = (&self.certificate, &self.cert_file) else {
            return Ok(());
        };
        check_own_certificate(what, (ca, ca_file), (&pair.0, cert_file), serves_on)
    }

    /// The scheduler at `host:port`, when TLS is on, shakes hands with a certificate the CA
    /// vouches for (`tls_check.rs`): otherwise an error saying what rustls found.
    pub(crate) async fn check_scheduler(&self, host: &str, port: u16) -> Result<()> {
        match (&self.ca, &self.ca_file) {
            (Some(ca), Some(ca_file)) => check_peer(host, port, (ca, ca_file)).await,
            _ => Ok(()),
        }
    }

    pub(crate) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    pub(crate) fn has_tls(&self) -> bool {
        self.ca.is_some()
    }

    /// The server side of TLS, `None` without TLS; an error when a server has no certificate.
    pub(crate) fn server_tls(&self, what: &str) -> Result<Option<ServerTlsConfig>> {
        if self.ca.is_none() {
            return Ok(None);
        }
        use_ring();
        let (cert, key) = self
            .certificate
            .as_deref()
            .ok_or_else(|| Error::InvalidOption {
                option: "tls-cert".into(),
                reason: format!("the {what} serves TLS: it needs --tls-cert and --tls-key"),
            })?;
        Ok(Some(
            ServerTlsConfig::new().identity(Identity::from_pem(cert, key)),
        ))
    }

    /// What every gRPC client endpoint Ballista creates goes through: TLS (with the cluster's
    /// CA) and the token; `None` when there is neither.
    pub(crate) fn endpoint_override(&self) -> Option<EndpointOverrideFn> {
        if self.token.is_none() && self.ca.is_none() {
            return None;
        }
        use_ring();
        let security = self.clone();
        Some(Arc::new(move |endpoint: tonic::transport::Endpoint| {
            let mut endpoint = endpoint;
            if let Some(ca) = &security.ca {
                // tonic speaks TLS only to `https` URIs; Ballista writes `http` ones.
                let uri = endpoint.uri().to_string();
                if let Some(rest) = uri.strip_prefix("http://") {
                    endpoint = create_grpc_client_endpoint(
                        format!("https://{rest}"),
                        Some(&GrpcClientConfig::default()),
                    )?;
                }
                let tls =
                    ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca.as_slice()));
                endpoint = endpoint.tls_config(tls)?;
            }
            if let Some(token) = &security.token {
                endpoint = endpoint.user_agent(format!("{TOKEN_AGENT}{token}"))?;
            }
            Ok(endpoint)
        }))
    }

    /// The check servers run on every call: the token, when there is one.
    pub(crate) fn interceptor(
        &self,
    ) -> impl Fn(Request<()>) -> std::result::Result<Request<()>, Status> + Clone + Send + Sync
    {
        let token = self.token.clone();
        move |request: Request<()>| {
            let Some(token) = &token else {
                return Ok(request);
            };
            let presented = request
                .metadata()
                .get("user-agent")
                .and_then(|v| v.to_str().ok())
                .and_then(|agent| {
                    agent
                        .split_whitespace()
                        .find_map(|part| part.strip_prefix(TOKEN_AGENT))
                });
            match presented {
                Some(p) if same(p.as_bytes(), token.as_bytes()) => Ok(request),
                Some(_) => Err(Status::unauthenticated(
                    "refused by the cluster: wrong cluster token",
                )),
                None => Err(Status::unauthenticated(
                    "refused by the cluster: this cluster requires a token \
                     (--token-file or NDFUSION_CLUSTER_TOKEN)",
                )),
            }
        }
    }
}

/// An error unless `token` (of a `what`: cluster, server) could be a secret sent in a header:
/// at least 16 visible ASCII characters.
pub(crate) fn check_token(token: &str, what: &str) -> Result<()> {
    let invalid = |reason: String| Error::InvalidOption {
        option: "token".into(),
        reason,
    };
    if token.len() < MIN_TOKEN_LEN {
        return Err(invalid(format!(
            "a {what} token needs at least {MIN_TOKEN_LEN} characters"
        )));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid(format!(
            "a {what} token is visible ASCII characters without spaces"
        )));
    }
    Ok(())
}

/// Makes ring this process's rustls provider (once; a provider already chosen stays).
fn use_ring() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Compares in time that does not depend on where the bytes differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn read(path: &Path, option: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::InvalidOption {
        option: option.into(),
        reason: format!("cannot read {}: {e}", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_refuse_calls_without_the_token() {
        let secured = ClusterSecurity::none()
            .with_token("0123456789abcdef-token")
            .unwrap();
        let check = secured.interceptor();
        let call = |agent: Option<&str>| {
            let mut request = Request::new(());
            if let Some(agent) = agent {
                request
                    .metadata_mut()
                    .insert("user-agent", agent.parse().unwrap());
            }
            check(request)
                .map(|_| ())
                .map_err(|s| s.message().to_string())
        };
        assert!(call(Some("ndfusion-cluster/0123456789abcdef-token tonic/0.14.9")).is_ok());
        let err = call(Some("ndfusion-cluster/0123456789abcdef-tokeX tonic/0.14.9")).unwrap_err();
        assert!(err.contains("wrong cluster token"), "{err}");
        let err = call(Some("tonic/0.14.9")).unwrap_err();
        assert!(err.contains("requires a token"), "{err}");
        assert!(call(None).is_err());
        assert!(ClusterSecurity::none().interceptor()(Request::new(())).is_ok());
        assert!(ClusterSecurity::none().with_token("short").is_err());
        assert!(ClusterSecurity::none()
            .with_token("has a space in it, long enough")
            .is_err());
        assert!(!format!("{secured:?}").contains("0123456789"));
    }
}
