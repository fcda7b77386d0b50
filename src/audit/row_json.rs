//! A row's JSON, written by hand byte for byte as `serde_json::to_vec`
//! writes it: these bytes are hashed into the chain, so they may never
//! differ. serde_json spent some 11,000 instructions a row on it (about
//! 260 a field in `SerializeMap::serialize_entry`, the key escaped each
//! time); here the keys are constants and a string is copied in runs.

use super::row::AuditRow;
use super::stamp::Stamp;
use chrono::{DateTime, Utc};

/// The row's fields once, in the struct's order, each with how its value
/// is written; hands the list to `$then!` after its own arguments. Each
/// user destructures the row with the list and no `..`, so a field added to
/// [`AuditRow`] and not here does not compile.
macro_rules! row_fields {
    ($then:ident!($($args:tt)*)) => {
        $then!($($args)*;
            id: text,
            started_at: time,
            ended_at: time,
            cluster: text,
            principal_kind: text,
            login: text,
            credential_id: text,
            credential_prefix: text,
            session: text,
            tool: text,
            client: text,
            method: text,
            path: text,
            query: text,
            verb: text,
            api_group: text,
            api_version: text,
            resource: text,
            subresource: text,
            namespace: text,
            name: text,
            code: number,
            reason: text,
            refused: text,
            bytes_in: number,
            bytes_out: number,
            duration_ms: number,
            write: flag,
            discovery: flag,
            dry_run: flag,
            redacted: flag,
            truncated: flag,
            secret_revealed: flag,
            held: flag,
            approved: flag,
            // `skip_serializing_if = "String::is_empty"` on both.
            via: text_unless_empty,
            kind: text_unless_empty,
        )
    };
}

/// Writes each field with its writer, each key a constant (`{"id":` then
/// `,"started_at":` and so on); says whether a text held a NUL.
macro_rules! fields {
    ($row:expr, $out:expr; $first:ident: $first_as:ident, $($field:ident: $as:ident,)+) => {{
        let AuditRow { $first, $($field),+ } = $row;
        let mut nul = $first_as($out, concat!("{\"", stringify!($first), "\":"), $first);
        $(nul |= $as($out, concat!(",\"", stringify!($field), "\":"), $field);)+
        $out.push(b'}');
        nul
    }};
}

/// Applies `nul_free`'s function of each field's writer to it.
macro_rules! each_field_nul_free {
    ($row:expr; $($field:ident: $as:ident,)+) => {{
        let AuditRow { $($field),+ } = $row;
        $(nul_free::$as($field);)+
    }};
}

/// Append `row`'s JSON to `out`: `serde_json::to_vec(row)`, byte for byte.
/// Says whether a text held a NUL (see [`without_nul`]).
#[must_use]
pub fn write(row: &AuditRow, out: &mut Vec<u8>) -> bool {
    row_fields!(fields!(row, out))
}

/// `row` with each NUL in its texts replaced by U+FFFD. PostgreSQL's text
/// cannot hold a NUL, so a row carrying one from a client (a path's `%00`,
/// an MCP tool's name) would fail its commit, and the writer, keeping
/// every row, would try it again for ever: the row keeps what the client
/// sent, visibly marked, rather than stop the audit.
pub fn without_nul(row: &mut AuditRow) {
    row_fields!(each_field_nul_free!(row))
}

/// For [`without_nul`], by the field's writer: texts lose their NULs, the
/// rest hold none.
mod nul_free {
    pub fn text(value: &mut String) {
        if value.contains('\0') {
            *value = super::super::row::bounded_nul_free(value);
        }
    }

    pub fn text_unless_empty(value: &mut String) {
        text(value)
    }

    pub fn time<T>(_: &mut T) {}

    pub fn number<T>(_: &mut T) {}

    pub fn flag<T>(_: &mut T) {}
}

fn text(out: &mut Vec<u8>, key: &str, value: &str) -> bool {
    out.extend_from_slice(key.as_bytes());
    escaped(out, value)
}

fn text_unless_empty(out: &mut Vec<u8>, key: &str, value: &str) -> bool {
    !value.is_empty() && text(out, key, value)
}

/// What `stamp::serialize` (the fields' `serialize_with`) hands serde_json,
/// which escapes it as any string.
fn time(out: &mut Vec<u8>, key: &str, t: &DateTime<Utc>) -> bool {
    out.extend_from_slice(key.as_bytes());
    // Digits, separators and a sign: nothing JSON escapes.
    out.push(b'"');
    out.extend_from_slice(Stamp::auto_si(t).as_bytes());
    out.push(b'"');
    false
}

fn flag(out: &mut Vec<u8>, key: &str, value: &bool) -> bool {
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(if *value { b"true" } else { b"false" });
    false
}

/// Decimal digits, as serde_json writes unsigned integers.
fn number<N: Copy + Into<u64>>(out: &mut Vec<u8>, key: &str, value: &N) -> bool {
    out.extend_from_slice(key.as_bytes());
    crate::text::push_decimal(out, (*value).into());
    false
}

/// `value` quoted and escaped as serde_json's `format_escaped_str`: `"`,
/// `\` and the bytes below 0x20 escaped (`\b \f \n \r \t` short, the rest
/// `\u00xx` in lower-case hex), everything else (DEL, non-ASCII) as is.
/// Says whether `value` held a NUL.
fn escaped(out: &mut Vec<u8>, value: &str) -> bool {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = value.as_bytes();
    let mut nul = false;
    out.push(b'"');
    // Bytes are copied in runs up to the next one to escape; an escaped byte
    // is ASCII, so a run never splits a character.
    let mut run = 0;
    loop {
        let at = next_to_escape(bytes, run);
        out.extend_from_slice(&bytes[run..at]);
        let Some(&byte) = bytes.get(at) else { break };
        run = at + 1;
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => {
                nul |= byte == 0;
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 0xf)],
                ]);
            }
        }
    }
    out.push(b'"');
    nul
}

/// The first byte at or after `from` that [`escaped`] must escape (the
/// length if none). Eight bytes are tested at once, since a row's texts
/// are mostly long runs with nothing to escape: a byte's high bit is set
/// in `hit` where it is below 0x20 (a borrow can also set it in a later
/// byte, never an earlier one, so the lowest is exact), or where the
/// byte XOR `"` or XOR `\` is zero. Bytes from 0x80 never match.
fn next_to_escape(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    let zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGH;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8).and_then(|chunk| <[u8; 8]>::try_from(chunk).ok()) {
        let word = u64::from_le_bytes(chunk);
        let below = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
        let hit = below | zero(word ^ (ONES * u64::from(b'"'))) | zero(word ^ (ONES * u64::from(b'\\')));
        if hit != 0 {
            return at + (hit.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    let rest = bytes[at..].iter().position(|&b| b < 0x20 || b == b'"' || b == b'\\');
    at + rest.unwrap_or(bytes.len() - at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::stamp::any_time;
    use proptest::prelude::*;

    fn ours(row: &AuditRow) -> String {
        let mut out = Vec::new();
        let _ = write(row, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn serde(row: &AuditRow) -> String {
        serde_json::to_string(row).unwrap()
    }

    fn at(seconds: i64, nanos: u32) -> DateTime<Utc> {
        DateTime::from_timestamp(seconds, nanos).unwrap()
    }

    /// Every field set, none to its default: built without `..`, so a new
    /// field must be given here too.
    fn every_field_set() -> AuditRow {
        AuditRow {
            id: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into(),
            started_at: at(1_764_918_146, 120_000_000),
            ended_at: at(1_764_918_147, 354_567_000),
            cluster: "prod".into(),
            principal_kind: "person".into(),
            login: "ana \"quoted\"\nnewline é ✓ \u{7f}".into(),
            credential_id: "cred-1".into(),
            credential_prefix: "pcl_ab12".into(),
            session: "sess-1".into(),
            tool: "kubectl_get".into(),
            client: "10.0.0.7".into(),
            method: "PATCH".into(),
            path: "/apis/apps/v1/namespaces/default/deployments/web/scale".into(),
            query: "dryRun=All&fieldManager=a\\b".into(),
            verb: "patch".into(),
            api_group: "apps".into(),
            api_version: "v1".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            namespace: "default".into(),
            name: "web".into(),
            code: 403,
            reason: "Forbidden".into(),
            refused: "not_agent".into(),
            bytes_in: 17,
            bytes_out: u64::MAX,
            duration_ms: 1_234,
            write: true,
            discovery: true,
            dry_run: true,
            redacted: true,
            truncated: true,
            secret_revealed: true,
            held: true,
            approved: true,
            via: "oauth:cli".into(),
            kind: "alert".into(),
        }
    }

    #[test]
    fn a_row_with_every_field_set_is_written_as_serde_json_writes_it() {
        let row = every_field_set();
        assert_eq!(ours(&row), serde(&row));
        // Every key serde writes differs from the default row's value, so
        // none is passed over unseen.
        let full = serde_json::to_value(&row).unwrap();
        let default = serde_json::to_value(AuditRow::default()).unwrap();
        for (key, value) in full.as_object().unwrap() {
            assert_ne!(Some(value), default.get(key), "{key} is at its default");
        }
    }

    #[test]
    fn a_nul_in_any_text_is_replaced_before_the_row_is_encoded_and_the_rest_kept() {
        let clean = every_field_set();
        let texts = |row: &AuditRow| -> Vec<(String, String)> {
            let value = serde_json::to_value(row).unwrap();
            let object = value.as_object().unwrap();
            let mut texts: Vec<_> = object
                .iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
                .collect();
            texts.retain(|(key, _)| key != "started_at" && key != "ended_at");
            texts
        };
        // Each text of the row in turn carries a NUL.
        for (key, _) in texts(&clean) {
            let mut value = serde_json::to_value(&clean).unwrap();
            let text = value[&key].as_str().unwrap().to_string();
            value[&key] = format!("a\0{text}\0").into();
            let with_nul: AuditRow = serde_json::from_value(value).unwrap();
            let mut out = Vec::new();
            assert!(write(&with_nul, &mut out), "{key}: its NUL is seen");
            let encoded = crate::audit::chain::Encoded::new(with_nul);
            let row = encoded.row();
            let stored = serde_json::to_value(row).unwrap();
            assert_eq!(stored[&key], format!("a\u{fffd}{text}\u{fffd}"), "{key}");
            assert_eq!(
                encoded.json(),
                serde_json::to_vec(row).unwrap(),
                "{key}: the bytes are the row's"
            );
            assert!(!String::from_utf8_lossy(encoded.json()).contains("\\u0000"), "{key}");
            let others = |row: &AuditRow| texts(row).into_iter().filter(|(k, _)| *k != key).collect::<Vec<_>>();
            assert_eq!(others(row), others(&clean), "{key}: the other texts are as they were");
        }
        let mut out = Vec::new();
        assert!(!write(&clean, &mut out), "no NUL, none seen");
    }

    #[test]
    fn a_default_row_leaves_out_via_and_kind_as_serde_json_does() {
        let row = AuditRow::default();
        let json = ours(&row);
        assert_eq!(json, serde(&row));
        assert!(json.starts_with(r#"{"id":"","started_at":"1970-01-01T00:00:00Z","#));
        assert!(json.ends_with(r#","held":false,"approved":false}"#));
        let only_kind = AuditRow {
            kind: "system".into(),
            ..AuditRow::default()
        };
        assert!(ours(&only_kind).ends_with(r#""approved":false,"kind":"system"}"#));
        assert_eq!(ours(&only_kind), serde(&only_kind));
    }

    #[test]
    fn quotes_backslashes_and_control_characters_are_escaped_and_the_rest_copied() {
        let mut out = Vec::new();
        escaped(&mut out, "a\"b\\c/\u{0}\u{1f}\u{8}\u{c}\n\r\t\u{b}\u{7f}é😀");
        assert_eq!(out, br#""a\"b\\c/\u0000\u001f\b\f\n\r\t\u000b"#.iter().chain("\u{7f}é😀\"".as_bytes()).copied().collect::<Vec<u8>>());
        let mut out = Vec::new();
        number(&mut out, "", &0u16);
        number(&mut out, ",", &u64::MAX);
        assert_eq!(out, b"0,18446744073709551615");
    }

    #[test]
    fn the_byte_to_escape_is_found_at_each_place_in_a_word_and_after_a_borrow() {
        let naive = |bytes: &[u8], from: usize| {
            (from..bytes.len())
                .find(|&i| bytes[i] < 0x20 || bytes[i] == b'"' || bytes[i] == b'\\')
                .unwrap_or(bytes.len())
        };
        for byte in 0..=255u8 {
            for at in 0..20 {
                // Before it, bytes a borrow would flag wrongly (0x20, 0x21,
                // and one above each special byte); after it, 0x1f.
                let mut bytes = [b' ', b'!', b'#', b']', 0x80, 0xff].repeat(4);
                bytes[at] = byte;
                bytes[at + 1..].iter_mut().step_by(5).for_each(|b| *b = 0x1f);
                for from in [0, at / 2, at] {
                    assert_eq!(
                        next_to_escape(&bytes, from),
                        naive(&bytes, from),
                        "{byte:#x} at {at} from {from}"
                    );
                }
            }
        }
        assert_eq!(next_to_escape(b"", 0), 0);
        assert_eq!(next_to_escape(b"plain text, longer than a word", 3), 30);
    }

    #[test]
    fn times_outside_years_0_to_9999_and_leap_seconds_are_written_as_serde_json_writes_them() {
        for (started_at, ended_at) in [
            (at(253_402_300_800, 0), at(-62_167_219_201, 5)),
            (at(59, 1_500_000_000), at(0, 0)),
        ] {
            let row = AuditRow {
                started_at,
                ended_at,
                ..AuditRow::default()
            };
            assert_eq!(ours(&row), serde(&row));
        }
    }

    /// Text of any characters, leaning on those JSON escapes, DEL, and
    /// characters of two, three and four bytes; often empty.
    fn any_text() -> impl Strategy<Value = String> {
        let char = prop_oneof![
            4 => any::<char>(),
            2 => (0u8..0x20).prop_map(char::from),
            2 => prop::sample::select(vec!['"', '\\', '/', '\u{7f}', 'é', '✓', '😀', '\u{2028}', 'a']),
        ];
        prop_oneof![
            1 => Just(String::new()),
            4 => prop::collection::vec(char, 0..40).prop_map(String::from_iter),
        ]
    }

    fn any_row() -> impl Strategy<Value = AuditRow> {
        let texts = prop::collection::vec(any_text(), 23);
        let numbers = (any::<u16>(), any::<[u64; 3]>(), any::<[bool; 8]>());
        (texts, any_time(), any_time(), numbers).prop_map(|(texts, started_at, ended_at, (code, n, b))| {
            let mut t = texts.into_iter();
            let mut next = move || t.next().unwrap_or_default();
            AuditRow {
                id: next(),
                started_at,
                ended_at,
                cluster: next(),
                principal_kind: next(),
                login: next(),
                credential_id: next(),
                credential_prefix: next(),
                session: next(),
                tool: next(),
                client: next(),
                method: next(),
                path: next(),
                query: next(),
                verb: next(),
                api_group: next(),
                api_version: next(),
                resource: next(),
                subresource: next(),
                namespace: next(),
                name: next(),
                code,
                reason: next(),
                refused: next(),
                bytes_in: n[0],
                bytes_out: n[1],
                duration_ms: n[2],
                write: b[0],
                discovery: b[1],
                dry_run: b[2],
                redacted: b[3],
                truncated: b[4],
                secret_revealed: b[5],
                held: b[6],
                approved: b[7],
                via: next(),
                kind: next(),
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_row_is_written_byte_for_byte_as_serde_json_writes_it(row in any_row()) {
            let mut out = b"before".to_vec();
            let nul = write(&row, &mut out);
            prop_assert_eq!(&out[..6], b"before");
            let theirs = serde_json::to_vec(&row).unwrap();
            prop_assert_eq!(&out[6..], theirs.as_slice());
            let held_nul = serde_json::to_value(&row).unwrap().as_object().unwrap().values()
                .any(|value| value.as_str().is_some_and(|text| text.contains('\0')));
            prop_assert_eq!(nul, held_nul);
        }
    }
}
