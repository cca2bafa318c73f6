//! Kafka's `ScramFormatter` and what it computes with: the mechanisms,
//! the credential a password becomes, and the random strings that are
//! salts and nonces. Below both the exchange and the stored credentials,
//! which each need them.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// Kafka's `ScramMechanism` (clients' `org.apache.kafka.clients.admin`
/// one and the internal one: same names, types and bounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// `mechanismName()`: the SASL name.
    pub fn mechanism_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The Java enum constant's name, which Kafka's messages print
    /// (`"... for " + mechanism`).
    pub fn enum_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM_SHA_256",
            ScramMechanism::Sha512 => "SCRAM_SHA_512",
        }
    }

    pub fn from_mechanism_name(name: &str) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.mechanism_name() == name)
    }

    /// `type()`: the mechanism field of AlterUserScramCredentials,
    /// DescribeUserScramCredentials and `UserScramCredentialRecord`.
    pub fn type_id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// `fromType`; `None` is Kafka's `UNKNOWN` (0, or any other byte).
    pub fn from_type(t: i8) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.type_id() == t)
    }

    pub fn min_iterations(self) -> i32 {
        4096
    }

    pub fn max_iterations(self) -> i32 {
        16384
    }

    /// The length of a key, a signature and a salted password.
    pub fn hash_len(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }

    pub(super) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes keys of any length: `new_from_slice` cannot fail.
        match self {
            ScramMechanism::Sha256 => {
                let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    pub(super) fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's `Hi` (PBKDF2 with this HMAC, one block): the salted
    /// password. Kafka's `hi` computes U1 even for fewer than one
    /// iteration, so this does too.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: i32) -> Vec<u8> {
        let rounds = iterations.max(1) as u32;
        let mut out = vec![0u8; self.hash_len()];
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, rounds, &mut out)
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, rounds, &mut out)
            }
        }
        out
    }

    /// `storedKey(clientKey(saltedPassword))`.
    fn stored_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hash(&self.hmac(salted_password, b"Client Key"))
    }
}

/// What the broker keeps of a password: Kafka's `ScramCredential`.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // As Kafka's ScramCredentialValue.toString: the keys are not logged.
        write!(
            f,
            "ScramCredential(iterations={}, [hidden])",
            self.iterations
        )
    }
}

impl ScramCredential {
    /// `ScramFormatter.generateCredential(salt, saltedPassword, iterations)`:
    /// what AlterUserScramCredentials stores of the salted password a
    /// client sends.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: mechanism.stored_key(salted_password),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// The credential of `password` with a given salt.
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let salted = mechanism.salted_password(password.as_bytes(), salt, iterations);
        Self::from_salted_password(mechanism, salt, &salted, iterations)
    }

    /// `generateCredential(password, iterations)`: a fresh salt, made as
    /// Kafka makes it (`secureRandomBytes`: the bytes of a random string).
    pub fn generate(
        mechanism: ScramMechanism,
        password: &str,
        iterations: i32,
    ) -> Result<ScramCredential, String> {
        let salt = secure_random_string()?.into_bytes();
        Ok(Self::from_password(mechanism, password, &salt, iterations))
    }

    /// Whether `password` is the one this credential was made from,
    /// comparing stored keys in constant time.
    pub fn matches_password(&self, mechanism: ScramMechanism, password: &[u8]) -> bool {
        let salted = mechanism.salted_password(password, &self.salt, self.iterations);
        bool::from(mechanism.stored_key(&salted).ct_eq(&self.stored_key))
    }
}

/// `ScramFormatter.secureRandomString`: a random 130-bit number written
/// in base 36 (`new BigInteger(130, random).toString(36)`).
pub fn secure_random_string() -> Result<String, String> {
    let mut n = [0u8; 17];
    getrandom::fill(&mut n).map_err(|e| format!("no random bytes from the OS: {e}"))?;
    n[0] &= 0x03;
    Ok(to_base36(n.to_vec()))
}

pub(super) fn to_base36(mut n: Vec<u8>) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n.iter().any(|&b| b != 0) {
        let mut rem = 0u32;
        for b in n.iter_mut() {
            let cur = (rem << 8) | u32::from(*b);
            *b = (cur / 36) as u8;
            rem = cur % 36;
        }
        out.push(DIGITS[rem as usize]);
    }
    if out.is_empty() {
        out.push(b'0');
    }
    out.reverse();
    String::from_utf8(out).expect("ASCII digits")
}
