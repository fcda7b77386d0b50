//! A CI job's token, checked: first its header, before anything is looked
//! up ([`read`]: only the asymmetric algorithms [`ACCEPTED`] pass; `alg:
//! none` and every HMAC, whose "key" would be public, are refused there),
//! then its signature against the issuer's key and its issuer, expiry and
//! `nbf` with [`SKEW_SECONDS`] of skew ([`verify`], through
//! `jsonwebtoken`). Audience, age and claims are the trust rules' to judge.

use super::{Refused, SKEW_SECONDS};
use crate::audit::refusal::Refusal;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

/// The signature algorithms accepted.
pub const ACCEPTED: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::PS256,
];

/// The longest token read (CI tokens are 1-2 KiB).
const MAX_TOKEN: usize = 16 * 1024;

/// A token whose header passed, its claims not yet trusted.
#[derive(Debug, Clone)]
pub struct Unverified {
    /// Its signature algorithm, one of [`ACCEPTED`].
    pub alg: Algorithm,
    /// The key id it names.
    pub kid: Option<String>,
    /// Its claims, as sent: only good for finding its issuer.
    pub claims: Map<String, Value>,
}

/// Read `token`'s header and claims, refusing any algorithm not
/// [`ACCEPTED`].
pub fn read(token: &str) -> Result<Unverified, Refused> {
    let malformed = |why: &str| Refused::new(Refusal::CiTokenMalformed, format!("the subject token {why}"));
    if token.len() > MAX_TOKEN {
        return Err(malformed("is too long for a JWT"));
    }
    let parts: Vec<&str> = token.split('.').collect();
    let [header, claims, _signature] = parts[..] else {
        return Err(malformed("is not a JWT (three dot-separated parts)"));
    };
    let header = part(header).ok_or_else(|| malformed("has an unreadable header"))?;
    let claims = part(claims).ok_or_else(|| malformed("has unreadable claims"))?;
    let alg = header.get("alg").and_then(Value::as_str).unwrap_or_default();
    let alg = accepted(alg)?;
    let kid = header.get("kid").and_then(Value::as_str).map(str::to_string);
    Ok(Unverified { alg, kid, claims })
}

/// One base64url part decoded as a JSON object.
fn part(text: &str) -> Option<Map<String, Value>> {
    let bytes = URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

fn accepted(alg: &str) -> Result<Algorithm, Refused> {
    if alg.eq_ignore_ascii_case("none") || alg.is_empty() {
        return Err(Refused::new(
            Refusal::CiTokenUnsigned,
            "the subject token is unsigned (alg none): only tokens signed by their issuer are accepted",
        ));
    }
    let shown: String = alg.chars().take(20).collect();
    let shown = crate::text::escape_control(&shown);
    if alg.to_ascii_uppercase().starts_with("HS") {
        return Err(Refused::new(
            Refusal::CiTokenAlgorithm,
            format!("the subject token is signed with {shown}, an HMAC with a shared secret: only an issuer's public-key signatures (RS256, ES256, …) are accepted"),
        ));
    }
    ACCEPTED.into_iter().find(|a| format!("{a:?}") == alg).ok_or_else(|| {
        Refused::new(
            Refusal::CiTokenAlgorithm,
            format!(
                "the subject token's algorithm {shown} is not accepted (RS256, RS384, RS512, ES256, ES384, PS256 are)"
            ),
        )
    })
}

/// Check `token`'s signature with `key`, and that it is `issuer`'s,
/// unexpired and valid already; its claims.
pub fn verify(token: &str, alg: Algorithm, key: &Jwk, issuer: &str) -> Result<Map<String, Value>, Refused> {
    if key
        .common
        .key_algorithm
        .is_some_and(|k| k.to_string() != format!("{alg:?}"))
    {
        return Err(Refused::new(
            Refusal::CiTokenAlgorithm,
            format!("the subject token says {alg:?}, but its key is for another algorithm"),
        ));
    }
    let key = DecodingKey::from_jwk(key).map_err(|_| {
        Refused::new(
            Refusal::CiTokenUnknownKey,
            "the issuer's key for this token cannot be used",
        )
    })?;
    let mut validation = Validation::new(alg);
    validation.leeway = SKEW_SECONDS as u64;
    validation.validate_nbf = true;
    // The audience is each trust rule's to judge.
    validation.validate_aud = false;
    validation.set_issuer(&[issuer]);
    validation.set_required_spec_claims(&["exp", "iss"]);
    jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|e| refused(e.kind()))
}

fn refused(kind: &ErrorKind) -> Refused {
    let (refusal, why) = match kind {
        ErrorKind::InvalidSignature | ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidRsaKey(_) => (
            Refusal::CiTokenSignature,
            "its signature is not its issuer's key's".to_string(),
        ),
        ErrorKind::ExpiredSignature => (Refusal::CiTokenExpired, "it has expired".into()),
        ErrorKind::ImmatureSignature => (Refusal::CiTokenNotYetValid, "it is not valid yet (nbf)".into()),
        ErrorKind::InvalidIssuer => (Refusal::CiTokenIssuer, "it is from another issuer".into()),
        ErrorKind::InvalidAlgorithm => (Refusal::CiTokenAlgorithm, "its algorithm does not fit its key".into()),
        ErrorKind::MissingRequiredClaim(claim) => (Refusal::CiTokenMalformed, format!("it has no {claim} claim")),
        ErrorKind::InvalidClaimFormat(claim) => (Refusal::CiTokenMalformed, format!("its {claim} claim is malformed")),
        _ => (Refusal::CiTokenMalformed, "it cannot be read as a JWT".into()),
    };
    Refused::new(refusal, format!("the subject token was refused: {why}"))
}

/// The token's audiences (`aud` is a string or a list of them).
pub fn audiences(claims: &Map<String, Value>) -> Vec<&str> {
    match claims.get("aud") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// A numeric date claim (`iat`, `exp`), in seconds since the epoch.
pub fn seconds(claims: &Map<String, Value>, name: &str) -> Option<i64> {
    claims
        .get(name)
        .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn jwt(header: Value) -> String {
        let encode = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
        format!("{}.{}.c2ln", encode(&header), encode(&json!({"iss": "https://i"})))
    }

    #[test]
    fn unsigned_and_hmac_tokens_are_refused_by_their_header_alone() {
        for alg in ["none", "None", ""] {
            let refused = read(&jwt(json!({"alg": alg}))).unwrap_err();
            assert_eq!(refused.refusal, Refusal::CiTokenUnsigned, "{alg}");
        }
        for alg in ["HS256", "HS384", "HS512", "hs256"] {
            let refused = read(&jwt(json!({"alg": alg}))).unwrap_err();
            assert_eq!(refused.refusal, Refusal::CiTokenAlgorithm, "{alg}");
            assert!(refused.description.contains("HMAC"), "{}", refused.description);
        }
        for alg in ["EdDSA", "PS512", "RSA-OAEP"] {
            assert_eq!(
                read(&jwt(json!({"alg": alg}))).unwrap_err().refusal,
                Refusal::CiTokenAlgorithm
            );
        }
    }

    #[test]
    fn an_accepted_header_gives_its_algorithm_key_id_and_unverified_claims() {
        for alg in ACCEPTED {
            let read = read(&jwt(json!({"alg": format!("{alg:?}"), "kid": "k1"}))).unwrap();
            assert_eq!((read.alg, read.kid.as_deref()), (alg, Some("k1")));
            assert_eq!(read.claims["iss"], "https://i");
        }
    }

    #[test]
    fn what_is_not_a_jwt_is_malformed() {
        for token in ["", "a.b", "a.b.c.d", "!!.e30.x", &"a".repeat(MAX_TOKEN + 1)] {
            assert_eq!(read(token).unwrap_err().refusal, Refusal::CiTokenMalformed, "{token}");
        }
    }

    #[test]
    fn the_audience_is_a_string_or_a_list_and_dates_are_seconds() {
        let one = json!({"aud": "a", "iat": 5}).as_object().unwrap().clone();
        let many = json!({"aud": ["a", "b", 3], "iat": 5.7}).as_object().unwrap().clone();
        assert_eq!(audiences(&one), ["a"]);
        assert_eq!(audiences(&many), ["a", "b"]);
        assert_eq!((seconds(&one, "iat"), seconds(&many, "iat")), (Some(5), Some(5)));
        assert_eq!(seconds(&one, "exp"), None);
    }
}
