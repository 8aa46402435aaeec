//! `ndfusion serve`: ndfusion's tables over Arrow Flight SQL, for any client that speaks it
//! (ADBC, JDBC, DBeaver, Go and Java services).
//!
//! How a call flows: the token check ([`auth`]) runs on every call before the service sees
//! it; `GetFlightInfo` plans the statement (the schema its answer will have) and returns a
//! ticket that names it again; `DoGet` plans it once more in a fresh copy of the server's
//! session, checks it ([`policy`]: what a client may run, where it may read and write), and
//! streams the batches as the plan makes them ([`query`]: admission, the deadline, the log
//! line). Prepared statements ([`prepared`]) keep their SQL and bound parameters on the
//! server under a random handle; a statement's `?` placeholders are numbered as it is
//! planned ([`placeholders`]). The catalog calls ([`catalog`]) describe the server's
//! session. A client ends an answer being sent by dropping its stream, or from another call
//! by its `FlightInfo` (`CancelFlightInfo`, `CancelQuery`: [`cancel`]).
//!
//! Every query runs in its own copy of the server's session state: the tables (the catalog
//! is shared, so a table a client creates with `--allow-ddl` is everyone's) and the memory
//! pool (`--memory-limit`: one pool for all queries) are the server's, but a client's `SET`
//! changes only its own statement.

mod auth;
mod cancel;
mod catalog;
mod placeholders;
mod policy;
mod prepared;
mod query;
mod service;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use datafusion::prelude::SessionContext;
use tokio::net::TcpListener;
use tonic::transport::{Identity, ServerTlsConfig};

use crate::cluster::AllowedLocations;
use crate::error::{Error, Result};

/// The environment variable that holds a server's token (instead of `--token-file`).
pub const SERVE_TOKEN_ENV: &str = "NDFUSION_SERVE_TOKEN";

/// How a server admits and bounds its clients' calls. The default: no token, no TLS,
/// queries only, any location, no endpoint of a client's choosing, no limits.
#[derive(Clone, Debug)]
pub struct ServeSettings {
    /// Every call must carry `authorization: Bearer <token>` (or basic auth with the token as
    /// the password on `Handshake`, which returns the bearer). `None`: no check.
    pub token: Option<String>,
    /// PEM certificate (chain) and key: the server speaks TLS.
    pub tls: Option<(Vec<u8>, Vec<u8>)>,
    /// Clients may run DDL, `COPY` and `INSERT` (otherwise `PERMISSION_DENIED`), then only
    /// for locations `allowed` allows.
    pub allow_ddl: bool,
    /// Where clients' statements may read and write, and which endpoints their storage
    /// options may name (the cluster's rules; `AllowedLocations::everything()` lets them
    /// name any).
    pub allowed: AllowedLocations,
    /// Queries that may run at once; more are refused with `RESOURCE_EXHAUSTED`.
    pub max_concurrent_queries: Option<usize>,
    /// A query running longer ends with `DEADLINE_EXCEEDED`.
    pub query_timeout: Option<Duration>,
    /// Listen on a non-loopback address without a token and TLS (with a warning).
    pub insecure: bool,
}

impl Default for ServeSettings {
    fn default() -> Self {
        Self {
            token: None,
            tls: None,
            allow_ddl: false,
            allowed: AllowedLocations::everything().with_endpoints(Vec::<String>::new()),
            max_concurrent_queries: None,
            query_timeout: None,
            insecure: false,
        }
    }
}

impl ServeSettings {
    /// TLS with the certificate and key in these PEM files.
    pub fn with_tls_files(mut self, cert: &Path, key: &Path) -> Result<Self> {
        let read = |path: &Path, option: &str| {
            std::fs::read(path).map_err(|e| Error::InvalidOption {
                option: option.into(),
                reason: format!("cannot read {}: {e}", path.display()),
            })
        };
        self.tls = Some((read(cert, "tls-cert")?, read(key, "tls-key")?));
        Ok(self)
    }

    /// The token: at least 16 visible ASCII characters (the cluster's rule).
    pub fn with_token(mut self, token: &str) -> Result<Self> {
        let token = token.trim();
        crate::cluster::check_token(token, "server")?;
        self.token = Some(token.to_string());
        Ok(self)
    }

    /// A server bound to an address other hosts reach refuses to start without a token and
    /// TLS, unless `insecure` says so (then with a warning on stderr).
    fn check_exposure(&self, bind: SocketAddr) -> Result<()> {
        let missing = [
            (self.token.is_none()).then_some("a token (--token-file or NDFUSION_SERVE_TOKEN)"),
            (self.tls.is_none()).then_some("TLS (--tls-cert, --tls-key)"),
        ];
        crate::cluster::refuse_exposure(bind, &missing, self.insecure, "the server")
    }
}

/// A bound, not yet serving, Flight SQL server.
pub struct FlightSqlServer {
    listener: TcpListener,
    ctx: SessionContext,
    settings: ServeSettings,
}

impl FlightSqlServer {
    /// Binds `bind` (port 0: a free port, see [`local_addr`](Self::local_addr)) to serve the
    /// tables of `ctx`.
    pub async fn bind(
        bind: SocketAddr,
        ctx: SessionContext,
        settings: ServeSettings,
    ) -> Result<Self> {
        settings.check_exposure(bind)?;
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|e| Error::InvalidOption {
                option: "bind".into(),
                reason: format!("cannot listen on {bind}: {e}"),
            })?;
        Ok(Self {
            listener,
            ctx,
            settings,
        })
    }

    /// The address clients reach the server at.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::Internal(format!("the server's address: {e}")))
    }

    /// Serves until `stop` completes; then accepts no new call and returns once the running
    /// ones have ended (the caller bounds that wait).
    pub async fn serve_until(self, stop: impl std::future::Future<Output = ()>) -> Result<()> {
        let mut builder = tonic::transport::Server::builder();
        if let Some((cert, key)) = &self.settings.tls {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let tls = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
            builder = builder.tls_config(tls).map_err(|e| Error::InvalidOption {
                option: "tls-cert".into(),
                reason: format!("cannot serve TLS with this certificate and key: {e}"),
            })?;
        }
        let service = service::FlightSqlEndpoint::new(self.ctx, self.settings.clone());
        let checked = tonic::service::interceptor::InterceptedService::new(
            arrow_flight::flight_service_server::FlightServiceServer::new(service),
            auth::interceptor(self.settings.token.clone()),
        );
        let incoming = tokio_stream_of(self.listener);
        builder
            .add_service(checked)
            .serve_with_incoming_shutdown(incoming, stop)
            .await
            .map_err(|e| Error::Internal(format!("the Flight SQL server stopped: {e}")))
    }
}

/// The listener's connections as the stream tonic serves.
fn tokio_stream_of(
    listener: TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |listener| async move {
        let next = listener.accept().await.map(|(stream, _)| {
            let _ = stream.set_nodelay(true);
            stream
        });
        Some((next, listener))
    })
}
