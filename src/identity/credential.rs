//! Opaque bearer tokens: `pcl_` + 31 base62 random characters (184 bits) +
//! a 6-character base62 CRC-32 checksum.
//!
//! The prefix makes a leaked token recognisable to secret scanners, and the
//! checksum lets portcullis refuse a mistyped or made-up token without a store
//! lookup. Only the SHA-256 of a token is ever stored.

use rand::Rng;

/// Every portcullis token starts with this.
pub const PREFIX: &str = "pcl_";
const RANDOM_CHARS: usize = 31;
const CHECKSUM_CHARS: usize = 6;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Length of a well-formed token.
pub const TOKEN_LEN: usize = PREFIX.len() + RANDOM_CHARS + CHECKSUM_CHARS;

/// A freshly minted token. Shown to its owner once, never stored.
pub struct NewToken {
    /// The whole secret token.
    pub token: String,
    /// SHA-256 of the token, hex: what the store keeps.
    pub hash: String,
    /// The first characters, safe to show in lists and audit rows.
    pub display_prefix: String,
}

impl std::fmt::Debug for NewToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewToken")
            .field("display_prefix", &self.display_prefix)
            .finish_non_exhaustive()
    }
}

/// Why a presented token is not even worth looking up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MalformedToken {
    /// Not `pcl_…` of the right length and alphabet.
    #[error("not a portcullis token")]
    Shape,
    /// The checksum does not match: a typo or a made-up token.
    #[error("token checksum does not match")]
    Checksum,
}

/// Mint a new token.
pub fn mint() -> NewToken {
    let mut rng = rand::rng();
    let random: String = (0..RANDOM_CHARS)
        .map(|_| BASE62[rng.random_range(0..BASE62.len())] as char)
        .collect();
    let sum = checksum(random.as_bytes());
    let token = format!("{PREFIX}{random}{}", String::from_utf8_lossy(&sum));
    NewToken {
        hash: hash(&token),
        display_prefix: display_prefix(&token),
        token,
    }
}

/// Check a presented token's shape and checksum.
pub fn check(token: &str) -> Result<(), MalformedToken> {
    let body = token.strip_prefix(PREFIX).ok_or(MalformedToken::Shape)?;
    if token.len() != TOKEN_LEN || !body.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(MalformedToken::Shape);
    }
    let (random, sum) = body.split_at(RANDOM_CHARS);
    if checksum(random.as_bytes()) != sum.as_bytes() {
        return Err(MalformedToken::Checksum);
    }
    Ok(())
}

/// SHA-256 of a token, lower-case hex: how the store keeps it.
pub fn hash(token: &str) -> String {
    lower_hex(&digest(token))
}

/// SHA-256 of a token, as bytes: the credential cache's key, so a request
/// whose token is cached never writes the hex. ring's SHA-256, as the audit
/// chain's: this runs on every request.
pub fn digest(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut bytes = [0; 32];
    bytes.copy_from_slice(digest.as_ref());
    bytes
}

/// `bytes` in lower-case hex, encoded by hand rather than through `format!`:
/// digests are encoded on every request and every audit row.
pub fn lower_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Bytes into a buffer of the final size, not `String::push` (a char's
    // UTF-8 encoding and a capacity check per digit) nor a collected
    // iterator (which grew its vector as it went): two digests a request.
    let mut hex = vec![0; bytes.len() * 2];
    for (pair, byte) in hex.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(byte >> 4)];
        pair[1] = HEX[usize::from(byte & 0xf)];
    }
    String::from_utf8(hex).expect("hex digits are ASCII")
}

/// The part of a token that may be shown: `pcl_` and 6 characters. Also used
/// for presented tokens that fail, so it never reveals enough to use one.
pub fn display_prefix(token: &str) -> String {
    token.chars().take(PREFIX.len() + 6).collect()
}

/// [`display_prefix`] of a presented value that begins as a portcullis
/// token does; nothing of any other.
pub fn shown_if_ours(presented: &str) -> String {
    if presented.starts_with(PREFIX) {
        display_prefix(presented)
    } else {
        String::new()
    }
}

/// The base62 digits of the CRC-32 (IEEE) of `random`.
fn checksum(random: &[u8]) -> [u8; CHECKSUM_CHARS] {
    let mut n = crc32fast::hash(random);
    let mut out = [b'0'; CHECKSUM_CHARS];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn a_digest_is_written_in_lower_case_hex_two_digits_a_byte() {
        assert_eq!(lower_hex(&[0x00, 0x0f, 0xa0, 0xff, 0x5c]), "000fa0ff5c");
        assert_eq!(lower_hex(&[]), "");
    }

    #[test]
    fn minted_tokens_pass_their_own_check() {
        for _ in 0..100 {
            let new = mint();
            assert_eq!(new.token.len(), TOKEN_LEN);
            assert!(new.token.starts_with(PREFIX));
            assert_eq!(check(&new.token), Ok(()));
            assert_eq!(new.hash, hash(&new.token));
            assert_eq!(new.hash.len(), 64);
        }
    }

    #[test]
    fn a_hash_is_the_lower_case_hex_of_the_sha256() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let token = mint().token;
        assert_eq!(hash(&token), format!("{:x}", Sha256::digest(token.as_bytes())));
    }

    #[test]
    fn a_typo_fails_the_checksum() {
        let token = mint().token;
        let mut chars: Vec<char> = token.chars().collect();
        chars[10] = if chars[10] == 'a' { 'b' } else { 'a' };
        let typo: String = chars.into_iter().collect();
        assert_eq!(check(&typo), Err(MalformedToken::Checksum));
    }

    #[test]
    fn other_shapes_are_malformed() {
        for bad in ["", "pcl_", "Bearer x", "pcl_short", &format!("xyz_{}", "a".repeat(37))] {
            assert_eq!(check(bad), Err(MalformedToken::Shape), "{bad}");
        }
        let token = mint().token;
        assert_eq!(check(&format!("{token}x")), Err(MalformedToken::Shape));
    }

    #[test]
    fn randomness_is_at_least_178_bits() {
        let bits = (RANDOM_CHARS as f64) * (62f64).log2();
        assert!(bits >= 178.0, "{bits}");
    }

    /// The bit-at-a-time CRC-32 every token minted so far was summed with.
    fn crc32_bitwise(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32_bitwise(b"123456789"), 0xCBF4_3926);
    }

    proptest::proptest! {
        /// Tokens already handed out keep passing their check.
        #[test]
        fn the_checksum_is_the_one_tokens_were_minted_with(random in "[0-9A-Za-z]{31}") {
            let mut n = crc32_bitwise(random.as_bytes());
            let mut old = [b'0'; CHECKSUM_CHARS];
            for slot in old.iter_mut().rev() {
                *slot = BASE62[(n % 62) as usize];
                n /= 62;
            }
            proptest::prop_assert_eq!(checksum(random.as_bytes()), old);
            let token = format!("{PREFIX}{random}{}", String::from_utf8_lossy(&old));
            proptest::prop_assert_eq!(check(&token), Ok(()));
        }

        #[test]
        fn any_bytes_are_written_as_format_writes_them_in_hex(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let formatted: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            proptest::prop_assert_eq!(lower_hex(&bytes), formatted);
        }
    }

    #[test]
    fn debug_output_hides_the_token() {
        let new = mint();
        assert!(!format!("{new:?}").contains(&new.token));
    }
}
