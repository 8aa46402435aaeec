//! TLS mistakes said plainly. A failed handshake reaches a cluster's processes as "could not
//! connect" (tonic drops rustls's reason), and the side whose certificate is wrong says
//! nothing. So each scheduler and executor checks its own certificate against the CA when it
//! starts, and a client or an executor shakes hands with the scheduler once before Ballista
//! connects: either reports what rustls found, which file and which peer.

use std::net::{IpAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, ClientConnection, RootCertStore};

use crate::error::{Error, Result};

/// How long the handshake with the scheduler may take before the check gives up (and leaves
/// the connection to Ballista, which reports what it finds).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The cluster's CA, as rustls trusts it.
fn roots(ca: &[u8], ca_file: &Path) -> Result<Arc<RootCertStore>> {
    let invalid = |reason: String| Error::InvalidOption {
        option: "tls-ca".into(),
        reason: format!("{}: {reason}", ca_file.display()),
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca) {
        let cert = cert.map_err(|e| invalid(format!("not a PEM certificate: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| invalid(format!("not a CA certificate rustls accepts: {e}")))?;
    }
    if roots.is_empty() {
        return Err(invalid("holds no certificate".into()));
    }
    Ok(Arc::new(roots))
}

/// Checks that the certificate in `cert_file` (PEM, its chain after it) is one the CA in
/// `ca_file` signed, valid now, usable as a server's own, and — when `serves_on` is an
/// address peers use as it is (an executor's) — that it covers that address. `what` names
/// the process.
pub(crate) fn check_own_certificate(
    what: &str,
    (ca, ca_file): (&[u8], &Path),
    (cert, cert_file): (&[u8], &Path),
    serves_on: Option<IpAddr>,
) -> Result<()> {
    let roots = roots(ca, ca_file)?;
    let invalid = |reason: String| Error::InvalidOption {
        option: "tls-cert".into(),
        reason: format!("{}: {reason}", cert_file.display()),
    };
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not a PEM certificate: {e}")))?;
    let Some((own, intermediates)) = chain.split_first() else {
        return Err(invalid("holds no certificate".into()));
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider)
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    // Peers may name a process serving on every address anything: then the chain is
    // checked here, the name by whoever connects.
    let named = serves_on.filter(|ip| !ip.is_unspecified());
    let name = ServerName::IpAddress(named.unwrap_or(IpAddr::from([0, 0, 0, 0])).into());
    match verifier.verify_server_cert(own, intermediates, &name, &[], UnixTime::now()) {
        Ok(_) => Ok(()),
        Err(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) if named.is_none() => Ok(()),
        Err(e) => Err(invalid(format!(
            "the {what}'s certificate cannot serve TLS: {} (checked against the CA in {})",
            explain(&e),
            ca_file.display()
        ))),
    }
}

/// Shakes hands with the scheduler at `host:port` as the cluster's processes will, trusting
/// the CA in `ca_file`: an error saying what rustls found when the scheduler's certificate is
/// refused. A scheduler that cannot be reached (or does not answer in time) passes: the
/// connection that follows reports that.
pub(crate) async fn check_peer(host: &str, port: u16, (ca, ca_file): (&[u8], &Path)) -> Result<()> {
    let roots = roots(ca, ca_file)?;
    let (host, ca_file) = (host.to_string(), ca_file.to_path_buf());
    tokio::task::spawn_blocking(move || handshake(&host, port, roots, &ca_file))
        .await
        .map_err(|e| Error::Internal(format!("TLS check task failed: {e}")))?
}

fn handshake(host: &str, port: u16, roots: Arc<RootCertStore>, ca_file: &Path) -> Result<()> {
    let peer = format!("the scheduler at {host}:{port}");
    let Ok(name) = ServerName::try_from(host.to_string()) else {
        return Err(Error::InvalidOption {
            option: "cluster".into(),
            reason: format!("'{host}' is not a host name TLS can check a certificate for"),
        });
    };
    let Some(address) = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
    else {
        return Ok(());
    };
    let Ok(mut socket) = TcpStream::connect_timeout(&address, HANDSHAKE_TIMEOUT) else {
        return Ok(());
    };
    let _ = socket.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let _ = socket.set_write_timeout(Some(HANDSHAKE_TIMEOUT));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Internal(format!("TLS client configuration: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let mut connection = ClientConnection::new(Arc::new(config), name)
        .map_err(|e| Error::Internal(format!("TLS client: {e}")))?;
    while connection.is_handshaking() {
        if let Err(e) = connection.complete_io(&mut socket) {
            let rustls_error =
                (e.get_ref()).and_then(|inner| inner.downcast_ref::<rustls::Error>());
            return match rustls_error {
                Some(refused) => Err(Error::InvalidOption {
                    option: "tls-ca".into(),
                    reason: format!(
                        "TLS with {peer} failed, trusting the CA in {}: {}",
                        ca_file.display(),
                        explain(refused)
                    ),
                }),
                // A timeout or a closed connection: not a certificate problem.
                None => Ok(()),
            };
        }
    }
    Ok(())
}

/// rustls's reason, with what it means for a cluster's certificates.
fn explain(e: &rustls::Error) -> String {
    let why = match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "the certificate has expired: make a new one".into()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "the certificate is not valid yet (is this machine's clock right?)".into()
            }
            CertificateError::UnknownIssuer => {
                "the certificate is not signed by the cluster's CA (--tls-ca)".into()
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                "the certificate does not cover the name or address it is reached at: add it \
                 to the certificate's subjectAltName"
                    .into()
            }
            CertificateError::Other(other) if other.to_string().contains("CaUsedAsEndEntity") => {
                "the certificate is a CA certificate, which TLS refuses as a server's own: a \
                 self-signed certificate cannot serve as its own CA; make a CA and a \
                 certificate it signs (README, \"Scaling out: a Ballista cluster\")"
                    .into()
            }
            _ => String::new(),
        },
        _ => String::new(),
    };
    match why.is_empty() {
        true => e.to_string(),
        false => format!("{e}: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Writes, with openssl, a CA and certificates it signs (`node`: for 127.0.0.1; `other`:
    /// for 127.0.0.2 only; `expired`), a second CA, and a self-signed certificate (CA:TRUE, as
    /// `openssl req -x509` makes them) for 127.0.0.1.
    fn certificates(dir: &Path) {
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "ca2"] {
            let (key, pem, subj) = (
                format!("{ca}.key"),
                format!("{ca}.pem"),
                format!("/CN={ca}"),
            );
            run(&[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    &key,
                    "-out",
                    &pem,
                    "-days",
                    "2",
                    "-subj",
                    &subj,
                    "-addext",
                    "basicConstraints=critical,CA:TRUE",
                    "-addext",
                    "keyUsage=critical,keyCertSign,cRLSign",
                ],
            ]
            .concat());
        }
        run(&[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "self.key",
                "-out",
                "self.pem",
                "-days",
                "2",
                "-subj",
                "/CN=self",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ],
        ]
        .concat());
        for (name, ip, days) in [
            ("node", "127.0.0.1", "2"),
            ("other", "127.0.0.2", "2"),
            ("expired", "127.0.0.1", "-1"),
        ] {
            std::fs::write(dir.join(format!("{name}.cnf")), format!(
                "subjectAltName=IP:{ip}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n")).unwrap();
            let (key, csr, pem, cnf) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.pem"),
                format!("{name}.cnf"),
            );
            run(&[
                &["req"][..],
                &ec,
                &["-keyout", &key, "-out", &csr, "-subj", "/CN=node"],
            ]
            .concat());
            run(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                days,
                "-extfile",
                &cnf,
            ]);
        }
    }

    /// A TLS server on 127.0.0.1 serving `cert`, for one handshake; its port.
    fn serve_once(dir: &Path, cert: &str, key: &str) -> u16 {
        use rustls::pki_types::PrivateKeyDer;
        let chain = CertificateDer::pem_file_iter(dir.join(cert))
            .unwrap()
            .collect::<std::result::Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(dir.join(key)).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut connection = rustls::ServerConnection::new(Arc::new(config)).unwrap();
            while connection.is_handshaking() && connection.complete_io(&mut socket).is_ok() {}
        });
        port
    }

    /// A client or an executor names what is wrong with the scheduler's certificate.
    #[tokio::test]
    async fn a_client_names_what_is_wrong_with_the_schedulers_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        certificates(d);
        let peer = |ca: &str, cert: &str, key: &str| {
            let port = serve_once(d, cert, key);
            let ca_file = d.join(ca);
            let ca = std::fs::read(&ca_file).unwrap();
            async move {
                let result = check_peer("127.0.0.1", port, (&ca, &ca_file)).await;
                (port, result.map_err(|e| e.to_string()))
            }
        };
        assert!(peer("ca.pem", "node.pem", "node.key").await.1.is_ok());
        for (ca, cert, key, expected) in [
            (
                "self.pem",
                "self.pem",
                "self.key",
                "a self-signed certificate cannot serve as its own CA",
            ),
            (
                "ca.pem",
                "expired.pem",
                "expired.key",
                "the certificate has expired",
            ),
            (
                "ca2.pem",
                "node.pem",
                "node.key",
                "not signed by the cluster's CA",
            ),
            (
                "ca.pem",
                "other.pem",
                "other.key",
                "does not cover the name or address",
            ),
        ] {
            let (port, result) = peer(ca, cert, key).await;
            let err = result.unwrap_err();
            assert!(err.contains(expected), "{cert}: {err}");
            let at = format!(
                "TLS with the scheduler at 127.0.0.1:{port} failed, trusting the CA in {}",
                d.join(ca).display()
            );
            assert!(err.contains(&at), "{err}");
        }
        // Nobody listening: left to the connection that follows.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let ca_file = d.join("ca.pem");
        let ca = std::fs::read(&ca_file).unwrap();
        assert!(check_peer("127.0.0.1", port, (&ca, &ca_file)).await.is_ok());
    }

    #[test]
    fn a_process_names_what_is_wrong_with_its_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        certificates(d);
        let check = |ca: &str, cert: &str, serves_on: Option<&str>| {
            let (ca_file, cert_file) = (d.join(ca), d.join(cert));
            let (ca, cert) = (
                std::fs::read(&ca_file).unwrap(),
                std::fs::read(&cert_file).unwrap(),
            );
            let serves_on = serves_on.map(|ip| ip.parse().unwrap());
            check_own_certificate("executor", (&ca, &ca_file), (&cert, &cert_file), serves_on)
                .map_err(|e| e.to_string())
        };
        check("ca.pem", "node.pem", Some("127.0.0.1")).unwrap();
        // A scheduler's name is checked by whoever connects.
        check("ca.pem", "other.pem", None).unwrap();
        for (ca, cert, serves_on, expected) in [
            (
                "self.pem",
                "self.pem",
                None,
                "a self-signed certificate cannot serve as its own CA",
            ),
            ("ca.pem", "expired.pem", None, "the certificate has expired"),
            (
                "ca2.pem",
                "node.pem",
                None,
                "not signed by the cluster's CA",
            ),
            (
                "ca.pem",
                "other.pem",
                Some("127.0.0.1"),
                "does not cover the name or address",
            ),
        ] {
            let err = check(ca, cert, serves_on).unwrap_err();
            assert!(err.contains(expected), "{cert}: {err}");
            assert!(
                err.contains(&format!(
                    "invalid option 'tls-cert': {}",
                    d.join(cert).display()
                )),
                "{err}"
            );
        }
    }
}
