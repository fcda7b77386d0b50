//! The one thing portcullis writes into a protobuf body: a held write's
//! precondition.
//!
//! A Kubernetes protobuf body is `k8s\0` and a `runtime.Unknown` message
//! (`typeMeta` 1, `raw` 2, `contentEncoding` 3, `contentType` 4) whose
//! `raw` is the object's own message. Protobuf merges a message field that
//! occurs twice and keeps the last value of a scalar one, as the API
//! server's generated decoders do: so a precondition is written by
//! appending to `raw` a field that holds only it, nothing else decoded or
//! re-encoded. Every Kubernetes object has its `ObjectMeta` as field 1;
//! `DeleteOptions` has its `Preconditions` as field 2.

/// The envelope's first bytes.
const MAGIC: &[u8] = b"k8s\0";

/// `ObjectMeta.resourceVersion` (6) within an object's `metadata` (1).
pub(super) fn resource_version(rv: &str) -> Vec<u8> {
    field(1, &field(6, rv.as_bytes()))
}

/// `DeleteOptions.preconditions` (2) holding its `uid` (1).
pub(super) fn uid_precondition(uid: &str) -> Vec<u8> {
    field(2, &field(1, uid.as_bytes()))
}

/// `body` with `addition` appended to its object's bytes; `None` when it
/// is not an envelope read whole here (malformed, or its object encoded).
pub(super) fn with_appended(body: &[u8], addition: &[u8]) -> Option<Vec<u8>> {
    let unknown = body.strip_prefix(MAGIC)?;
    // The last `raw`: (where its field starts, where its bytes start, end).
    let mut raw = None;
    let mut at = 0;
    while at < unknown.len() {
        let (key, key_len) = varint(&unknown[at..])?;
        // Every field of `runtime.Unknown` is length-delimited.
        if key & 7 != 2 {
            return None;
        }
        let (length, length_len) = varint(&unknown[at + key_len..])?;
        let content = at + key_len + length_len;
        let end = content.checked_add(usize::try_from(length).ok()?)?;
        if end > unknown.len() {
            return None;
        }
        match key >> 3 {
            2 => raw = Some((at, content, end)),
            // An encoded object (never sent by Kubernetes clients) cannot
            // be appended to.
            3 if end > content => return None,
            _ => {}
        }
        at = end;
    }
    let (start, content, end) = raw?;
    let object = &unknown[content..end];
    let mut out = Vec::with_capacity(body.len() + addition.len() + 10);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&unknown[..start]);
    put_varint(&mut out, 2 << 3 | 2);
    put_varint(&mut out, (object.len() + addition.len()) as u64);
    out.extend_from_slice(object);
    out.extend_from_slice(addition);
    out.extend_from_slice(&unknown[end..]);
    Some(out)
}

/// Length-delimited field `number` holding `bytes`.
fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 6);
    put_varint(&mut out, number << 3 | 2);
    put_varint(&mut out, bytes.len() as u64);
    out.extend_from_slice(bytes);
    out
}

/// A varint at the start of `bytes`, and how many bytes it took.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
        [MAGIC.to_vec(), field(1, &type_meta), field(2, raw), field(4, b"")].concat()
    }

    #[test]
    fn a_precondition_is_appended_to_the_objects_bytes_and_the_envelope_kept() {
        let meta = [field(1, b"flags"), field(3, b"shop")].concat();
        let object = [field(1, &meta), field(2, &"x".repeat(200).into_bytes())].concat();
        let body = envelope("v1", "ConfigMap", &object);
        let guarded = with_appended(&body, &resource_version("41")).unwrap();
        let expected = envelope("v1", "ConfigMap", &[object.clone(), resource_version("41")].concat());
        assert_eq!(
            guarded, expected,
            "the object's length (past 127: two bytes) is written anew"
        );
        let options = envelope("v1", "DeleteOptions", &field(4, b"Orphan"));
        let guarded = with_appended(&options, &uid_precondition("u-1")).unwrap();
        assert!(guarded.ends_with(&[uid_precondition("u-1"), field(4, b"")].concat()));
    }

    #[test]
    fn a_body_that_is_not_a_plain_envelope_is_not_appended_to() {
        assert_eq!(with_appended(b"{\"kind\":\"ConfigMap\"}", b"x"), None);
        assert_eq!(with_appended(b"k8s\0\x12\x05ab", b"x"), None, "cut short");
        assert_eq!(with_appended(b"k8s\0\x08\x01", b"x"), None, "not length-delimited");
        assert_eq!(with_appended(b"k8s\0\x0a\x00", b"x"), None, "no raw");
        let gzipped = [MAGIC.to_vec(), field(2, b"obj"), field(3, b"gzip")].concat();
        assert_eq!(with_appended(&gzipped, b"x"), None);
    }
}
