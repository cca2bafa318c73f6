//! TLS on the `SSL` and `SASL_SSL` listeners, with `rustls`: the server
//! config built from Kafka's `ssl.*` settings (PEM only), and one
//! connection's TLS state driven over a non-blocking socket.
//!
//! Settings are looked up as Kafka's `SslFactory` sees them: the
//! listener-prefixed name (`listener.name.<name>.ssl.keystore.location`)
//! first, then the plain one. As in Kafka's `ChannelBuilders`, a `SASL_SSL`
//! listener asks for client certificates only when its listener-prefixed
//! `ssl.client.auth` says so.
//!
//! Edge-triggered polling and TLS: `rustls` keeps decrypted bytes that the
//! connection has not asked for yet, and handshake or ticket bytes that the
//! socket would not take. The server reads through [`TlsConn::read`], which
//! hands out buffered plaintext before it touches the socket, and flushes
//! with [`TlsConn::flush`] every time it pumps a connection, so no byte
//! waits for an event that has already fired.

use std::fs::File;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

use crate::network::session::Principal;
use crate::network::splice::Sink;

/// The `ssl.*` names a listener reads (each may also be given
/// listener-prefixed).
pub const SSL_CONFIG_NAMES: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.protocol",
    "ssl.cipher.suites",
    "ssl.principal.mapping.rules",
    "ssl.endpoint.identification.algorithm",
];

/// Settings whose values are lists (commas inside one value).
pub const SSL_LIST_NAMES: &[&str] = &["ssl.enabled.protocols", "ssl.cipher.suites"];

/// Kafka's `SslClientAuth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    Required,
    Requested,
    None,
}

fn invalid(name: &str, value: &str, why: &str) -> String {
    format!("Invalid value {value} for configuration {name}: {why}")
}

/// Checks one `ssl.*` value as Kafka's `ConfigDef` would when it is given.
pub fn check_value(name: &str, value: &str) -> Result<(), String> {
    match name {
        "ssl.client.auth" => client_auth(name, value).map(|_| ()),
        "ssl.keystore.type" | "ssl.truststore.type" if !value.eq_ignore_ascii_case("PEM") => {
            Err(format!(
                "{name}={value} is not supported: only PEM key and trust stores are read \
                 (convert a JKS or PKCS12 store with keytool and openssl)"
            ))
        }
        "ssl.principal.mapping.rules" if value.trim() != "DEFAULT" => Err(format!(
            "{name}={value} is not supported: the principal of a client certificate is its \
             distinguished name (the DEFAULT rule)"
        )),
        _ => Ok(()),
    }
}

fn client_auth(name: &str, value: &str) -> Result<ClientAuth, String> {
    match value.trim() {
        "required" => Ok(ClientAuth::Required),
        "requested" => Ok(ClientAuth::Requested),
        "none" => Ok(ClientAuth::None),
        _ => Err(invalid(
            name,
            value,
            "String must be one of: required, requested, none",
        )),
    }
}

/// Reads a setting: listener-prefixed first.
pub struct Lookup<'a> {
    /// The listener's name, as its prefix is spelt.
    pub listener: &'a str,
    /// The listener as messages show it (`SSL://0.0.0.0:9093`).
    pub shown: &'a str,
    pub get: &'a dyn Fn(&str) -> Option<String>,
}

impl Lookup<'_> {
    fn prefixed(&self, name: &str) -> Option<String> {
        (self.get)(&format!(
            "listener.name.{}.{name}",
            self.listener.to_ascii_lowercase()
        ))
    }

    fn value(&self, name: &str) -> Option<String> {
        self.prefixed(name).or_else(|| (self.get)(name))
    }
}

/// The `rustls` server config of one TLS listener (`sasl`: a SASL_SSL
/// one), or a message that says what is wrong with its settings (the daemon
/// then refuses to start).
pub fn server_config(lookup: &Lookup<'_>, sasl: bool) -> Result<Arc<ServerConfig>, String> {
    let who = format!("listener {}", lookup.shown);
    for name in [
        "ssl.keystore.type",
        "ssl.truststore.type",
        "ssl.principal.mapping.rules",
    ] {
        if let Some(v) = lookup.value(name) {
            check_value(name, &v)?;
        }
    }
    if lookup.value("ssl.key.password").is_some() {
        return Err(format!(
            "{who}: ssl.key.password is not supported: give the private key unencrypted \
             (openssl pkcs8 -topk8 -nocrypt) and protect the file with its mode"
        ));
    }
    let (chain, key) = keystore(lookup, &who)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let provider = with_cipher_suites(provider, lookup, &who)?;
    let versions = protocol_versions(lookup, &who)?;
    let auth = match sasl {
        // Kafka: on SASL_SSL only the listener-prefixed setting counts.
        true => lookup.prefixed("ssl.client.auth"),
        false => lookup.value("ssl.client.auth"),
    };
    let auth = match auth {
        Some(v) => client_auth("ssl.client.auth", &v)?,
        None => ClientAuth::None,
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("{who}: cannot serve TLS: {e}"))?;
    let builder = match auth {
        ClientAuth::None => builder.with_no_client_auth(),
        _ => {
            let roots = truststore(lookup, &who)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("{who}: cannot check client certificates: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        format!("{who}: the keystore's private key and certificate cannot serve TLS: {e}")
    })?;
    Ok(Arc::new(config))
}

/// `ssl.keystore.location` (a PEM file holding the key and the chain), or
/// `ssl.keystore.certificate.chain` and `ssl.keystore.key` (PEM text).
fn keystore(
    lookup: &Lookup<'_>,
    who: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let location = lookup.value("ssl.keystore.location");
    let chain_text = lookup.value("ssl.keystore.certificate.chain");
    let key_text = lookup.value("ssl.keystore.key");
    let (chain_pem, key_pem, chain_from, key_from) = match (location, chain_text, key_text) {
        (Some(path), None, None) => {
            let bytes = std::fs::read(&path)
                .map_err(|e| format!("{who}: cannot read ssl.keystore.location {path}: {e}"))?;
            let from = format!("ssl.keystore.location {path}");
            (bytes.clone(), bytes, from.clone(), from)
        }
        (None, Some(chain), Some(key)) => (
            chain.into_bytes(),
            key.into_bytes(),
            "ssl.keystore.certificate.chain".to_string(),
            "ssl.keystore.key".to_string(),
        ),
        (None, None, None) => {
            return Err(format!(
                "{who}: a TLS listener needs a key and a certificate: set ssl.keystore.location \
                 (with ssl.keystore.type=PEM) or ssl.keystore.certificate.chain and \
                 ssl.keystore.key"
            ));
        }
        (Some(_), _, _) => {
            return Err(format!(
                "{who}: give either ssl.keystore.location or ssl.keystore.certificate.chain and \
                 ssl.keystore.key, not both"
            ));
        }
        (None, _, _) => {
            return Err(format!(
                "{who}: ssl.keystore.certificate.chain and ssl.keystore.key go together"
            ));
        }
    };
    let chain = certificates(&chain_pem)
        .map_err(|e| format!("{who}: {chain_from} holds no readable certificate: {e}"))?;
    if contains_label(&key_pem, "ENCRYPTED PRIVATE KEY") {
        return Err(format!(
            "{who}: {key_from} holds an encrypted private key, which is not supported: decrypt \
             it (openssl pkcs8 -topk8 -nocrypt) and protect the file with its mode"
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("{who}: {key_from} holds no readable private key: {e}"))?;
    Ok((chain, key))
}

fn contains_label(pem: &[u8], label: &str) -> bool {
    let needle = format!("-----BEGIN {label}-----");
    pem.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Every certificate in PEM text; an error when there is none.
fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block".to_string());
    }
    Ok(certs)
}

/// The certificates client certificates must chain to.
fn truststore(lookup: &Lookup<'_>, who: &str) -> Result<RootCertStore, String> {
    let (pem, from) = match (
        lookup.value("ssl.truststore.location"),
        lookup.value("ssl.truststore.certificates"),
    ) {
        (Some(path), None) => (
            std::fs::read(&path)
                .map_err(|e| format!("{who}: cannot read ssl.truststore.location {path}: {e}"))?,
            format!("ssl.truststore.location {path}"),
        ),
        (None, Some(text)) => (text.into_bytes(), "ssl.truststore.certificates".to_string()),
        (None, None) => {
            return Err(format!(
                "{who}: ssl.client.auth asks for client certificates, so it needs the \
                 certificates they chain to: set ssl.truststore.location (PEM) or \
                 ssl.truststore.certificates"
            ));
        }
        (Some(_), Some(_)) => {
            return Err(format!(
                "{who}: give either ssl.truststore.location or ssl.truststore.certificates, not both"
            ));
        }
    };
    let mut roots = RootCertStore::empty();
    for cert in certificates(&pem)
        .map_err(|e| format!("{who}: {from} holds no readable certificate: {e}"))?
    {
        roots
            .add(cert)
            .map_err(|e| format!("{who}: {from} holds a certificate that cannot be a root: {e}"))?;
    }
    Ok(roots)
}

/// `ssl.enabled.protocols`: TLSv1.2 and TLSv1.3 (Kafka's default). Older
/// versions are left out with a warning, as a current JDK disables them.
fn protocol_versions(
    lookup: &Lookup<'_>,
    who: &str,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let text = lookup
        .value("ssl.enabled.protocols")
        .unwrap_or_else(|| "TLSv1.2,TLSv1.3".to_string());
    let mut out = Vec::new();
    for p in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match p {
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            other => log::warn!(
                "{who}: ssl.enabled.protocols names {other}, which is not served (TLSv1.2 and \
                 TLSv1.3 are); it is left out"
            ),
        }
    }
    if out.is_empty() {
        return Err(invalid(
            "ssl.enabled.protocols",
            &text,
            "no protocol served here: give TLSv1.2, TLSv1.3 or both",
        ));
    }
    Ok(out)
}

/// `ssl.cipher.suites`: the IANA names of the suites to offer (all of the
/// provider's when not given).
fn with_cipher_suites(
    provider: Arc<CryptoProvider>,
    lookup: &Lookup<'_>,
    who: &str,
) -> Result<Arc<CryptoProvider>, String> {
    let Some(text) = lookup.value("ssl.cipher.suites") else {
        return Ok(provider);
    };
    let wanted: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if wanted.is_empty() {
        return Ok(provider);
    }
    let mut suites = Vec::new();
    for name in &wanted {
        match provider
            .cipher_suites
            .iter()
            .find(|s| s.suite().as_str() == Some(*name))
        {
            Some(s) => suites.push(*s),
            None => {
                let known: Vec<&str> = provider
                    .cipher_suites
                    .iter()
                    .filter_map(|s| s.suite().as_str())
                    .collect();
                return Err(format!(
                    "{who}: ssl.cipher.suites names {name}, which is not served; these are: {}",
                    known.join(", ")
                ));
            }
        }
    }
    let mut p = (*provider).clone();
    p.cipher_suites = suites;
    Ok(Arc::new(p))
}

/// Kafka's principal of a client certificate under the DEFAULT mapping
/// rule: `X500Principal.getName()`, the subject in RFC 2253 form (the last
/// RDN first, `CN=client,OU=eng,O=Example`).
pub fn certificate_principal(der: &[u8]) -> Result<String, String> {
    use x509_parser::asn1_rs::ToDer;
    use x509_parser::prelude::*;
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| e.to_string())?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter_rdn() {
        let mut parts = Vec::new();
        for atv in rdn.iter() {
            let oid = atv.attr_type().to_id_string();
            let keyword = match oid.as_str() {
                "2.5.4.3" => Some("CN"),
                "2.5.4.6" => Some("C"),
                "2.5.4.7" => Some("L"),
                "2.5.4.8" => Some("ST"),
                "2.5.4.10" => Some("O"),
                "2.5.4.11" => Some("OU"),
                "2.5.4.9" => Some("STREET"),
                "0.9.2342.19200300.100.1.25" => Some("DC"),
                "0.9.2342.19200300.100.1.1" => Some("UID"),
                _ => None,
            };
            let text = atv.as_str().ok();
            parts.push(match (keyword, text) {
                (Some(k), Some(v)) => format!("{k}={}", escape_rfc2253(v)),
                // RFC 2253 §2.4: an unknown type, or a value that is not a
                // string, is the dotted OID and `#` with the value's DER.
                _ => {
                    let hex: String = atv
                        .attr_value()
                        .to_der_vec()
                        .unwrap_or_default()
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect();
                    format!("{}=#{hex}", keyword.map(str::to_string).unwrap_or(oid))
                }
            });
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

/// RFC 2253 §2.4's escapes.
fn escape_rfc2253(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What reading a TLS connection found.
pub enum TlsError {
    /// The handshake or a record failed (a garbage hello, an unknown client
    /// certificate, a bad record): the connection is done.
    Protocol(rustls::Error),
    Io(io::Error),
}

/// One connection's TLS state.
pub struct TlsConn {
    conn: ServerConnection,
    /// Whether the handshake's end was already seen.
    established: bool,
    /// The client certificate's principal, once the handshake is done and
    /// until the server takes it.
    principal: Option<Principal>,
}

thread_local! {
    /// File bytes on their way into `rustls`: one buffer per network
    /// thread, not one per connection (10,000 idle TLS connections that
    /// once fetched would otherwise hold 128 KiB each).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The most plaintext `rustls` buffers for sending before the socket takes it.
const SEND_BUFFER: usize = 256 * 1024;
/// The most file bytes read for one write.
const FILE_CHUNK: usize = 128 * 1024;

impl TlsConn {
    pub fn new(config: Arc<ServerConfig>) -> Result<TlsConn, rustls::Error> {
        let mut conn = ServerConnection::new(config)?;
        conn.set_buffer_limit(Some(SEND_BUFFER));
        Ok(TlsConn {
            conn,
            established: false,
            principal: None,
        })
    }

    pub fn handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The principal the handshake established, once (`User:` and the
    /// client certificate's DN, or ANONYMOUS without one).
    pub fn take_principal(&mut self) -> Option<Principal> {
        self.principal.take()
    }

    /// Writes what `rustls` holds for the socket until it would block.
    pub fn flush<S: Write>(&mut self, sock: &mut S) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(sock) {
                Ok(0) => {
                    return Err(io::Error::new(
                        ErrorKind::WriteZero,
                        "the socket took no bytes",
                    ));
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn flush_ignoring_block<S: Write>(&mut self, sock: &mut S) -> io::Result<()> {
        match self.flush(sock) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(()),
            r => r,
        }
    }

    /// Plaintext from the connection: what `rustls` already holds, else
    /// what the socket brings. `Ok(0)` is the peer's end; `WouldBlock`,
    /// wait for the socket.
    pub fn read<S: Read + Write>(
        &mut self,
        sock: &mut S,
        buf: &mut [u8],
    ) -> Result<usize, TlsError> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                // The peer closed without close_notify: Kafka's clients do.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(TlsError::Io(e)),
            }
            match self.conn.read_tls(sock) {
                Ok(0) => {
                    // The socket ended; what rustls still holds is read above.
                    self.process()?;
                    return match self.conn.reader().read(buf) {
                        Ok(n) => Ok(n),
                        Err(_) => Ok(0),
                    };
                }
                Ok(_) => {
                    self.process()?;
                    self.flush_ignoring_block(sock).map_err(TlsError::Io)?;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(TlsError::Io(e)),
            }
        }
    }

    fn process(&mut self) -> Result<(), TlsError> {
        self.conn
            .process_new_packets()
            .map_err(TlsError::Protocol)?;
        if !self.established && !self.conn.is_handshaking() {
            self.established = true;
            let name = match self.conn.peer_certificates().and_then(|c| c.first()) {
                Some(cert) => certificate_principal(cert.as_ref()).map_err(|e| {
                    TlsError::Protocol(rustls::Error::General(format!(
                        "the client certificate's subject cannot be read: {e}"
                    )))
                })?,
                None => "ANONYMOUS".to_string(),
            };
            self.principal = Some(Principal::user(&name));
        }
        Ok(())
    }

    /// Sends what a failed handshake owes the peer (its alert), best effort.
    pub fn send_alert<S: Write>(&mut self, sock: &mut S) {
        let _ = self.flush(sock);
    }

    /// close_notify, best effort, before the socket closes.
    pub fn close<S: Write>(&mut self, sock: &mut S) {
        self.conn.send_close_notify();
        let _ = self.flush(sock);
    }

    /// Plaintext to send: how many bytes `rustls` took (all of them will
    /// reach the socket); `WouldBlock` when its buffer is full and the
    /// socket takes nothing.
    pub fn write<S: Write>(&mut self, sock: &mut S, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let n = self.conn.writer().write(buf)?;
            self.flush_ignoring_block(sock)?;
            if n > 0 {
                return Ok(n);
            }
            if self.conn.wants_write() {
                return Err(ErrorKind::WouldBlock.into());
            }
        }
    }

    /// Bytes of `file` from `position` (at most `len`), read and sent
    /// through TLS: `sendfile` cannot encrypt.
    pub fn send_file<S: Write>(
        &mut self,
        sock: &mut S,
        file: &File,
        position: u64,
        len: u64,
    ) -> io::Result<u64> {
        let want = (len as usize).min(FILE_CHUNK);
        SCRATCH.with(|scratch| {
            let mut chunk = scratch.borrow_mut();
            chunk.resize(FILE_CHUNK, 0);
            let got = file.read_at(&mut chunk[..want], position)?;
            if got == 0 && want > 0 {
                return Err(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "segment file ended before the fetched bytes",
                ));
            }
            // rustls copies what it takes; the rest is read again next time.
            self.write(sock, &chunk[..got]).map(|n| n as u64)
        })
    }
}

/// A response written through a connection's TLS.
pub struct TlsSink<'a, S> {
    pub tls: &'a mut TlsConn,
    pub sock: &'a mut S,
}

impl<S: Write> Sink for TlsSink<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tls.write(self.sock, buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut total = 0;
        for b in bufs.iter().filter(|b| !b.is_empty()) {
            match self.tls.write(self.sock, b) {
                Ok(n) => {
                    total += n;
                    if n < b.len() {
                        break;
                    }
                }
                Err(e) if total == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(total)
    }

    fn send_file(&mut self, file: &File, position: u64, len: u64) -> io::Result<u64> {
        self.tls.send_file(self.sock, file, position, len)
    }

    // TLS records already leave whole.
    fn cork(&mut self, _on: bool) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape_rfc2253("a,b"), "a\\,b");
        assert_eq!(escape_rfc2253(" a "), "\\ a\\ ");
        assert_eq!(escape_rfc2253("#x"), "\\#x");
        assert_eq!(escape_rfc2253("plain"), "plain");
    }

    #[test]
    fn client_auth_values() {
        assert_eq!(
            client_auth("ssl.client.auth", "requested").unwrap(),
            ClientAuth::Requested
        );
        assert_eq!(
            client_auth("ssl.client.auth", "sometimes").unwrap_err(),
            "Invalid value sometimes for configuration ssl.client.auth: String must be one of: \
             required, requested, none"
        );
    }
}

#[cfg(test)]
mod conn_tests {
    use super::*;

    struct Fake {
        input: Vec<u8>,
        output: Vec<u8>,
    }
    impl Read for Fake {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.input.is_empty() {
                return Err(ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.input.len());
            buf[..n].copy_from_slice(&self.input[..n]);
            self.input.drain(..n);
            Ok(n)
        }
    }
    impl Write for Fake {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A ClientHello of junk is a protocol error at once, never a wait for
    /// more bytes.
    #[test]
    fn garbage_hello_fails() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let chain = vec![cert.cert.der().clone()];
        let key = PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .unwrap();
        let mut t = TlsConn::new(Arc::new(config)).unwrap();
        let mut sock = Fake {
            input: b"\x16\x03\x01\x00\x08\x01\x00\x00\x04junk".to_vec(),
            output: Vec::new(),
        };
        let mut buf = [0u8; 4];
        match t.read(&mut sock, &mut buf) {
            Err(TlsError::Protocol(_)) => {}
            Err(TlsError::Io(e)) => panic!("an I/O error, not a protocol error: {e}"),
            Ok(n) => panic!("{n} bytes of plaintext from junk"),
        }
        t.send_alert(&mut sock);
        assert_eq!(sock.output.first(), Some(&21), "an alert record is sent");
    }
}
