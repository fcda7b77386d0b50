//! From a verified ID token's claims to the person it names: the login
//! normalised once, the email used only when verified, the domains checked,
//! the groups kept.
//!
//! A login becomes a Kubernetes user name (`user:<login>`): it is lower
//! case, so that `Ana` and `ana` are one person, and holds only what the
//! store accepts for any person (`a-z`, `0-9`, `.`, `_`, `-`, starting with
//! a letter or digit, at most 63), so no login carries a colon, a comma, a
//! space or anything else a user name sent for impersonation must not. An
//! email-shaped login keeps the part before the `@`, and only from a domain
//! the configuration lists (`login_domains`, else `allowed_email_domains`).
//! A claim that does not fit is refused, never mangled into someone else's
//! login.

use super::SignInError;
use crate::config::OidcConfig;
use crate::store::ProviderPerson;
use serde_json::Value;

/// The normalised login `raw` names, or why it cannot be one.
pub fn normalise(raw: &str) -> Result<String, String> {
    // ASCII only, so lower-casing maps nothing else onto it: Unicode's
    // lower case of the Kelvin sign (U+212A) is `k`, and "\u{212A}ate" at a
    // provider that tells it from "kate" would become her login.
    let lower = raw.trim().to_ascii_lowercase();
    let login = lower.split_once('@').map_or(lower.as_str(), |(local, _)| local);
    let fits = !login.is_empty()
        && login.len() <= 63
        && login
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_'))
        && login.as_bytes()[0].is_ascii_alphanumeric();
    if fits {
        Ok(login.to_string())
    } else {
        Err(format!(
            "{raw:?} cannot be a portcullis login: it needs 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"
        ))
    }
}

/// The person the verified `claims` name at `issuer`, under `config`'s
/// rules.
pub fn person(config: &OidcConfig, issuer: &str, claims: &Value) -> Result<ProviderPerson, SignInError> {
    let text = |name: &str| claims.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    let subject = text("sub").ok_or_else(|| SignInError::LoginClaim("the ID token has no sub".into()))?;
    // Some providers (Cognito) send the boolean as a string.
    let verified = matches!(claims.get("email_verified"), Some(Value::Bool(true)))
        || matches!(claims.get("email_verified"), Some(Value::String(s)) if s == "true");
    // As a login is: no other character is folded onto an ASCII one.
    let email = text("email").filter(|_| verified).map(str::to_ascii_lowercase);
    if !config.allowed_email_domains.is_empty() {
        let domain = email.as_deref().and_then(|e| e.rsplit_once('@')).map(|(_, d)| d);
        let allowed = domain.is_some_and(|d| config.allowed_email_domains.iter().any(|a| a.eq_ignore_ascii_case(d)));
        if !allowed {
            return Err(SignInError::EmailDomain(match (&email, text("email")) {
                (Some(e), _) => format!("{e} is not in a domain allowed to sign in"),
                (None, Some(_)) => "your email is not verified at the identity provider".into(),
                (None, None) => "the identity provider sent no email".into(),
            }));
        }
    }
    let raw = match &config.login_claim {
        Some(claim) if claim == "email" => email.clone(),
        Some(claim) => text(claim).map(str::to_string),
        None => text("preferred_username").map(str::to_string).or_else(|| email.clone()),
    };
    let claim = config.login_claim.as_deref().unwrap_or("preferred_username");
    let raw = raw.ok_or_else(|| SignInError::LoginClaim(format!("the ID token has no usable {claim} claim")))?;
    let login = login_of(config, &raw)?;
    Ok(ProviderPerson {
        issuer: issuer.to_string(),
        subject: subject.to_string(),
        login,
        email,
        groups: groups(claims.get(&config.groups_claim)),
    })
}

/// The login an email-shaped `raw` names only when its domain is one whose
/// people sign in by their name alone: otherwise `ana@gmail.com` (or a
/// guest of another tenant) would become the `ana` an operator added for
/// ana@example.com, and take over her grants at her first sign-in.
fn login_of(config: &OidcConfig, raw: &str) -> Result<String, SignInError> {
    if let Some((_, domain)) = raw.trim().split_once('@') {
        let listed = if config.login_domains.is_empty() {
            &config.allowed_email_domains
        } else {
            &config.login_domains
        };
        if !listed.iter().any(|d| d.eq_ignore_ascii_case(domain)) {
            return Err(SignInError::LoginClaim(format!(
                "{raw} is not in a domain whose people sign in here by their name (oidc.login_domains)"
            )));
        }
    }
    normalise(raw).map_err(SignInError::LoginClaim)
}

/// A groups claim: an array of strings, or one string.
fn groups(claim: Option<&Value>) -> Vec<String> {
    match claim {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config() -> OidcConfig {
        toml::from_str("issuer = \"https://idp\"\nclient_id = \"p\"\nclient_secret_file = \"s\"").unwrap()
    }

    #[test]
    fn a_login_is_lower_case_and_never_holds_what_a_kubernetes_user_name_must_not() {
        assert_eq!(normalise("Ana").unwrap(), "ana");
        assert_eq!(normalise(" ANA ").unwrap(), normalise("ana").unwrap());
        assert_eq!(normalise("Ana.Lopez@Example.com").unwrap(), "ana.lopez");
        for bad in [
            "",
            "system:admin",
            "a,b",
            "ana lopez",
            "-ana",
            "josé",
            "\u{212A}ate",
            "\u{212A}ate@example.com",
            "a/b",
            &"a".repeat(64),
        ] {
            assert!(normalise(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_login_is_preferred_username_else_a_verified_email_and_groups_are_kept() {
        let mut c = config();
        c.login_domains = vec!["example.com".into()];
        let claims = json!({"sub": "1", "preferred_username": "Ana", "groups": ["devs", 3]});
        let p = person(&c, "https://idp", &claims).unwrap();
        assert_eq!(
            (p.login.as_str(), p.groups.as_slice()),
            ("ana", &["devs".to_string()][..])
        );
        let claims = json!({"sub": "1", "email": "Bo@example.com", "email_verified": true, "groups": "ops"});
        let p = person(&c, "https://idp", &claims).unwrap();
        assert_eq!((p.login.as_str(), p.email.as_deref()), ("bo", Some("bo@example.com")));
        assert_eq!(p.groups, ["ops"]);
        let unverified = json!({"sub": "1", "email": "bo@example.com", "email_verified": false});
        assert!(matches!(
            person(&c, "https://idp", &unverified),
            Err(SignInError::LoginClaim(_))
        ));
    }

    #[test]
    fn only_verified_emails_in_an_allowed_domain_sign_in_when_domains_are_set() {
        let mut c = config();
        c.allowed_email_domains = vec!["example.com".into()];
        let ok = json!({"sub": "1", "preferred_username": "ana", "email": "ana@EXAMPLE.com", "email_verified": "true"});
        assert!(person(&c, "https://idp", &ok).is_ok());
        for bad in [
            json!({"sub": "1", "preferred_username": "ana", "email": "ana@evil.test", "email_verified": true}),
            json!({"sub": "1", "preferred_username": "ana", "email": "ana@example.com", "email_verified": false}),
            json!({"sub": "1", "preferred_username": "ana"}),
        ] {
            assert!(
                matches!(person(&c, "https://idp", &bad), Err(SignInError::EmailDomain(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_email_shaped_login_signs_in_only_from_a_listed_domain() {
        let refused = |c: &OidcConfig, claims: Value| match person(c, "https://idp", &claims) {
            Err(SignInError::LoginClaim(said)) => said,
            other => panic!("{claims} was not refused: {other:?}"),
        };
        let mut c = config();
        let upn = json!({"sub": "1", "preferred_username": "Ana@Example.com"});
        let said = refused(&c, upn.clone());
        assert!(said.contains("Ana@Example.com is not in a domain"), "{said}");
        let gmail = json!({"sub": "2", "email": "ana@gmail.com", "email_verified": true});
        refused(&c, gmail.clone());

        // allowed_email_domains lists them when login_domains is unset ...
        c.allowed_email_domains = vec!["example.com".into(), "gmail.com".into()];
        let verified = json!({"sub": "1", "preferred_username": "Ana@Example.com", "email": "ana@example.com", "email_verified": true});
        assert_eq!(person(&c, "https://idp", &verified).unwrap().login, "ana");
        // ... and login_domains alone when set (here without
        // allowed_email_domains, whose verified email a UPN lacks).
        c.allowed_email_domains = Vec::new();
        c.login_domains = vec!["EXAMPLE.com".into()];
        assert_eq!(person(&c, "https://idp", &upn).unwrap().login, "ana");
        refused(&c, gmail);
        for other in [
            "ana@example.com.evil.test",
            "ana@evil.test@example.com",
            "ana@sub.example.com",
            "ana@",
        ] {
            refused(&c, json!({"sub": "3", "preferred_username": other}));
        }
        // A login without an `@` is the provider's own name for the person.
        assert_eq!(
            person(&c, "https://idp", &json!({"sub": "4", "preferred_username": "Bo"}))
                .unwrap()
                .login,
            "bo"
        );
    }
}
