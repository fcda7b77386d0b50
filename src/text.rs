//! Client-controlled text made safe to show to a person.
//!
//! Paths, names, user agents and reasons come from whoever sends a request.
//! Printed raw, a `\n` or `\r` forges a line in a table or a log, and an
//! escape sequence (`ESC [2K`) rewrites what a terminal shows. Every
//! human-readable output (CLI tables, log lines) passes such text through
//! [`escape_control`]; machine formats (JSON) have their own escaping.
//!
//! Also the two ways text is put together in more than one place: an
//! error with its causes ([`with_causes`]), and a number's digits written
//! without `core::fmt` where it runs per row or per item
//! ([`push_decimal`]).

use std::borrow::Cow;
use std::fmt;

/// `text` with every control character, and every character that reorders
/// what a terminal shows (bidirectional overrides and isolates), replaced by
/// a visible escape: `\n`, `\r`, `\t`, else `\u{1b}`. Text without any is
/// borrowed as is.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(Escaped(text).to_string())
}

/// Like [`escape_control`], but keeps line breaks: for text that is meant
/// to span lines (a diff, YAML), each line made safe on its own.
pub fn escape_control_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<Cow<'_, str>> = text.split('\n').map(escape_control).collect();
    Cow::Owned(lines.join("\n"))
}

/// The longest reason a person gives for a decision.
pub const MAX_REASON: usize = 1000;

/// A decision's reason as kept: trimmed, `None` when blank; refused when
/// longer than [`MAX_REASON`] characters or holding control characters
/// other than line breaks and tabs (the asker reads it on a terminal).
pub fn checked_reason(reason: Option<&str>) -> Result<Option<&str>, String> {
    let Some(reason) = reason.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    if reason.chars().count() > MAX_REASON {
        return Err(format!("a reason is at most {MAX_REASON} characters"));
    }
    if reason.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err("a reason holds no control characters but line breaks and tabs".into());
    }
    Ok(Some(reason))
}

/// Escapes as it formats, for log fields (`path = %Escaped(&path)`): nothing
/// is allocated unless the line is written.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c if needs_escape(c) => write!(f, "\\u{{{:x}}}", c as u32)?,
                c => fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
    }
}

/// C0 and C1 controls, DEL, and the bidirectional formatting characters.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The largest character boundary of `text` at or before `at` (where a
/// byte limit cuts it without splitting a character).
pub fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest character boundary of `text` at or after `at`.
pub fn ceil_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// `error` and each cause under it, `: `-separated, a cause left out when
/// the text so far already says it: a refused TLS handshake says only that,
/// and why (the server's certificate) is in its source; a refused
/// statement's "db error" has PostgreSQL's own message in its source.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// Append `n` in decimal, as `n.to_string()` writes it, without going
/// through `core::fmt`.
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The web pages pass a decision's reason as typed: the decision
    /// itself bounds it.
    #[test]
    fn a_decisions_reason_is_trimmed_bounded_and_without_control_characters() {
        assert_eq!(checked_reason(None), Ok(None));
        assert_eq!(checked_reason(Some("  ")), Ok(None));
        assert_eq!(checked_reason(Some(" ok\n\tfine ")), Ok(Some("ok\n\tfine")));
        assert!(checked_reason(Some("\u{1b}[2J")).is_err());
        assert!(checked_reason(Some(&"é".repeat(MAX_REASON + 1))).is_err());
        assert!(checked_reason(Some(&"é".repeat(MAX_REASON))).is_ok());
    }

    #[test]
    fn a_byte_limit_falls_on_a_character_boundary_before_or_after_it() {
        let text = "aé€b";
        assert_eq!(floor_char_boundary(text, 2), 1);
        assert_eq!(ceil_char_boundary(text, 2), 3);
        assert_eq!(floor_char_boundary(text, 4), 3);
        assert_eq!(ceil_char_boundary(text, 4), 6);
        assert_eq!(floor_char_boundary(text, 99), text.len());
    }

    #[test]
    fn control_characters_become_visible_escapes_and_plain_text_is_borrowed() {
        assert_eq!(escape_control("/api\n\r\x1b[2Kx\t"), "/api\\n\\r\\u{1b}[2Kx\\t");
        assert_eq!(escape_control("a\u{7f}\u{9b}b\u{202e}"), "a\\u{7f}\\u{9b}b\\u{202e}");
        assert!(matches!(escape_control("/api/v1/ünï"), Cow::Borrowed(_)));
        assert_eq!(
            escape_control_lines("+ a: x\n- b: \x1b[2K\r"),
            "+ a: x\n- b: \\u{1b}[2K\\r"
        );
        assert_eq!(Escaped("a\nb").to_string(), "a\\nb");
    }

    #[test]
    fn a_number_is_written_as_to_string_writes_it() {
        for n in [0, 7, 10, 99, 100, 65_535, u64::from(u32::MAX), u64::MAX] {
            let mut out = b"n=".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(out, format!("n={n}").into_bytes());
        }
    }

    #[test]
    fn an_error_says_each_cause_it_does_not_already_say() {
        #[derive(Debug)]
        struct Said(&'static str, Option<Box<Said>>);
        impl fmt::Display for Said {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Said {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|s| s as _)
            }
        }
        let refused = Said(
            "refused",
            Some(Box::new(Said("db error", Some(Box::new(Said("duplicate key", None)))))),
        );
        assert_eq!(with_causes(&refused), "refused: db error: duplicate key");
        let repeated = Said("connect: timed out", Some(Box::new(Said("timed out", None))));
        assert_eq!(with_causes(&repeated), "connect: timed out");
    }
}
