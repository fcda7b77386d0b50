//! Sealing held bodies at rest: ChaCha20-Poly1305 (ring), a random 96-bit
//! nonce per body, the held write's id as associated data so a sealed body
//! cannot be moved to another held write. The same key, through a derived
//! sub-key, signs sign-in cookies ([`Key::mac`]).

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use std::path::Path;

/// Why the key or a sealed body is unusable.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The key file cannot be read.
    #[error("cannot read the approvals key {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The key file does not hold 64 hex characters.
    #[error("the approvals key {0} must hold 32 bytes as 64 hex characters (e.g. `openssl rand -hex 32`)")]
    Malformed(String),
    /// The key is not the one the store's replicas share.
    #[error(
        "[approvals] key_file {0} is not the approvals key this store was first started with (its fingerprint \
         differs): every replica sharing the store must use the same key file"
    )]
    OtherKey(String),
    /// The store cannot keep or give the key's fingerprint.
    #[error("cannot check the approvals key against the store: {0}")]
    Store(String),
    /// Sealing failed (no randomness).
    #[error("cannot seal the body")]
    Seal,
    /// The sealed body is corrupt, or sealed with another key or for another id.
    #[error("the sealed body cannot be opened (another key, or altered)")]
    Open,
}

/// The approvals key.
pub struct Key {
    aead: LessSafeKey,
    mac: ring::hmac::Key,
    random: SystemRandom,
    fingerprint: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// Read the key file (64 hex characters, surrounding whitespace ignored).
    pub fn load(path: &Path) -> Result<Key, SealError> {
        let text = std::fs::read_to_string(path).map_err(|source| SealError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let bytes = hex(text.trim()).ok_or_else(|| SealError::Malformed(path.display().to_string()))?;
        Key::from_bytes(&bytes).ok_or_else(|| SealError::Malformed(path.display().to_string()))
    }

    /// A key from 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Key> {
        if bytes.len() != 32 {
            return None;
        }
        let aead = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, bytes).ok()?);
        // A separate key for cookies: the sealing key never signs anything.
        let derived = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, bytes),
            b"portcullis cookie",
        );
        // Tells keys apart in the store without revealing the key.
        let fingerprint = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, bytes),
            b"portcullis approvals key fingerprint",
        );
        Some(Key {
            aead,
            mac: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, derived.as_ref()),
            random: SystemRandom::new(),
            fingerprint: to_hex(fingerprint.as_ref()),
        })
    }

    /// The key's fingerprint (hex): HMAC-SHA256 of a fixed label under it,
    /// the same for the same key, never the key.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Seal `body` for held write `id`: nonce, then ciphertext and tag.
    pub fn seal(&self, id: &str, body: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).map_err(|_| SealError::Seal)?;
        let mut sealed = body.to_vec();
        self.aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(id.as_bytes()),
                &mut sealed,
            )
            .map_err(|_| SealError::Seal)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Open what [`Key::seal`] sealed for `id`.
    pub fn open(&self, id: &str, sealed: &[u8]) -> Result<Vec<u8>, SealError> {
        if sealed.len() < NONCE_LEN {
            return Err(SealError::Open);
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Open)?;
        let mut buffer = rest.to_vec();
        let plain = self
            .aead
            .open_in_place(nonce, Aad::from(id.as_bytes()), &mut buffer)
            .map_err(|_| SealError::Open)?;
        Ok(plain.to_vec())
    }

    /// HMAC-SHA256 of `data` under the cookie key, as hex.
    pub fn mac(&self, data: &[u8]) -> String {
        to_hex(ring::hmac::sign(&self.mac, data).as_ref())
    }

    /// Is `tag` the MAC of `data`? (constant time)
    pub fn verify(&self, data: &[u8], tag: &str) -> bool {
        hex(tag).is_some_and(|tag| ring::hmac::verify(&self.mac, data, &tag).is_ok())
    }
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_body_opens_only_for_its_own_id_and_key() {
        let key = Key::from_bytes(&[7; 32]).unwrap();
        let sealed = key.seal("h1", b"stringData: secret").unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"secret"), "the body is not in clear");
        assert_eq!(key.open("h1", &sealed).unwrap(), b"stringData: secret");
        assert!(key.open("h2", &sealed).is_err(), "bound to its id");
        let other = Key::from_bytes(&[8; 32]).unwrap();
        assert!(other.open("h1", &sealed).is_err(), "bound to its key");
        let mut altered = sealed.clone();
        altered[20] ^= 1;
        assert!(key.open("h1", &altered).is_err(), "authenticated");
    }

    #[test]
    fn a_key_file_must_hold_64_hex_characters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        std::fs::write(&path, crate::config::approvals::generate_key()).unwrap();
        assert!(Key::load(&path).is_ok());
        std::fs::write(&path, "abc").unwrap();
        assert!(matches!(Key::load(&path), Err(SealError::Malformed(_))));
        assert!(matches!(
            Key::load(&dir.path().join("none")),
            Err(SealError::Read { .. })
        ));
    }

    #[test]
    fn a_keys_fingerprint_tells_keys_apart_and_is_not_the_key() {
        let (one, two) = ([7; 32], [8; 32]);
        let fingerprint = Key::from_bytes(&one).unwrap().fingerprint().to_string();
        assert_eq!(fingerprint, Key::from_bytes(&one).unwrap().fingerprint());
        assert_ne!(fingerprint, Key::from_bytes(&two).unwrap().fingerprint());
        assert_eq!(fingerprint.len(), 64);
        assert_ne!(fingerprint, to_hex(&one));
        assert_ne!(
            fingerprint,
            Key::from_bytes(&one)
                .unwrap()
                .mac(b"portcullis approvals key fingerprint")
        );
    }

    #[test]
    fn cookie_macs_verify_only_unaltered_data() {
        let key = Key::from_bytes(&[1; 32]).unwrap();
        let tag = key.mac(b"ana|123");
        assert!(key.verify(b"ana|123", &tag));
        assert!(!key.verify(b"ana|124", &tag));
        assert!(!key.verify(b"ana|123", "zz"));
    }
}
