//! A certificate authority made by the test, with `rcgen`: the CA, a server
//! certificate for `localhost` and `127.0.0.1`, and client certificates,
//! written as PEM files the way Kafka's PEM stores hold them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub dir: PathBuf,
    /// The CA's certificate (a truststore).
    pub ca_pem: PathBuf,
}

/// A certificate and its key, as files and as text.
pub struct Issued {
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
    /// Key then certificate chain in one file (`ssl.keystore.location`
    /// with `ssl.keystore.type=PEM`).
    pub keystore: PathBuf,
    pub cert_text: String,
    pub key_text: String,
}

impl TestCa {
    pub fn new(dir: &Path) -> TestCa {
        std::fs::create_dir_all(dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "commitfs test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let ca_pem = dir.join("ca.pem");
        std::fs::write(&ca_pem, issuer.pem()).unwrap();
        TestCa {
            issuer,
            dir: dir.to_path_buf(),
            ca_pem,
        }
    }

    /// A server certificate for `localhost` and `127.0.0.1`.
    pub fn server(&self, name: &str) -> Issued {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        self.issue(name, params)
    }

    /// A client certificate whose subject is `dn`, given first RDN first
    /// (as the certificate encodes it).
    pub fn client(&self, name: &str, dn: &[(DnType, &str)]) -> Issued {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        for (t, v) in dn {
            params.distinguished_name.push(t.clone(), *v);
        }
        self.issue(name, params)
    }

    fn issue(&self, name: &str, params: CertificateParams) -> Issued {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let cert_text = cert.pem();
        let key_text = key.serialize_pem();
        let cert_pem = self.dir.join(format!("{name}.crt.pem"));
        let key_pem = self.dir.join(format!("{name}.key.pem"));
        let keystore = self.dir.join(format!("{name}.keystore.pem"));
        std::fs::write(&cert_pem, &cert_text).unwrap();
        std::fs::write(&key_pem, &key_text).unwrap();
        std::fs::write(&keystore, format!("{key_text}{cert_text}")).unwrap();
        Issued {
            cert_pem,
            key_pem,
            keystore,
            cert_text,
            key_text,
        }
    }
}
