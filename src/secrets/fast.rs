//! The redactor on a response's bytes, in one pass: what passes is copied
//! as it came, and only the values to hide (and the last-applied
//! annotation) are touched; no tree of the document is built.
//!
//! It knows the shapes the cluster answers with (a Secret or its
//! PartialObjectMetadata, their lists, a Table, a watch event of any of
//! them) under the same rules as the parsed redactor in `secrets.rs`, and
//! nothing else: at anything it does not read exactly as that redactor
//! would (an error, a Status, a key spelt with escapes, a key twice, a
//! number serde_json might refuse) it declines, and the parsed redactor
//! decides, with its own error. So it never passes what the parsed
//! redactor would refuse, and what it passes is the same document.

use super::scan::{Cursor, Decline, Text, Walk};
use super::{base64_marker, decoded_len_bytes, names_only, padded_len, Target, LAST_APPLIED};

/// A document redacted, or `None` when the parsed redactor must decide.
pub(super) fn document(body: &[u8], target: Target) -> Option<Vec<u8>> {
    let typed = secrets_target(target)?;
    let mut cursor = Cursor::new(body).ok()?;
    let mut redactor = Redactor {
        out: Vec::with_capacity(body.len() + 64),
        typed,
    };
    redactor.object(&mut cursor, false).ok()?;
    cursor.end().ok()?;
    Some(redactor.out)
}

/// A watch event (`type` and `object`, not ERROR) redacted, or `None`
/// when the parsed redactor must decide.
pub(super) fn event(line: &[u8], target: Target) -> Option<Vec<u8>> {
    let typed = secrets_target(target)?;
    let mut cursor = Cursor::new(line).ok()?;
    let mut redactor = Redactor {
        out: Vec::with_capacity(line.len() + 64),
        typed,
    };
    redactor.event(&mut cursor).ok()?;
    cursor.end().ok()?;
    Some(redactor.out)
}

/// Whether `data` markers are base64; `None` for a target other than
/// Secrets.
fn secrets_target(target: Target) -> Option<bool> {
    match target {
        Target::Secrets => Some(false),
        Target::TypedSecrets => Some(true),
        Target::Token => None,
    }
}

/// How a document's values are hidden, by its `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A Secret or its PartialObjectMetadata: `metadata`, `data`,
    /// `stringData`.
    Secret = 1,
    /// A list of them: `items`.
    List = 2,
    /// A Table: the objects of its `rows`.
    Table = 4,
}

fn class_of(kind: &[u8]) -> Walk<Class> {
    match kind {
        b"Secret" | b"PartialObjectMetadata" => Ok(Class::Secret),
        b"SecretList" | b"List" | b"PartialObjectMetadataList" => Ok(Class::List),
        b"Table" => Ok(Class::Table),
        // A Status passes unchanged and any other kind is refused: the
        // parsed redactor does both.
        _ => Err(Decline),
    }
}

/// The keys the redactor reads, each allowed once per object (a key twice
/// is read differently by different parsers).
const KIND: u8 = 1;
const METADATA: u8 = 2;
const DATA: u8 = 4;
const STRING_DATA: u8 = 8;
const ITEMS: u8 = 16;
const ROWS: u8 = 32;
const OBJECT: u8 = 64;
const TYPE: u8 = 128;
const ANNOTATIONS: u8 = 1;

fn once(seen: &mut u8, key: u8) -> Walk {
    if *seen & key != 0 {
        return Err(Decline);
    }
    *seen |= key;
    Ok(())
}

struct Redactor {
    out: Vec<u8>,
    /// `data` markers base64-encoded ([`Target::TypedSecrets`]).
    typed: bool,
}

/// Writes an object's entries, with commas between those that are kept.
struct Entries(bool);

/// What is known of an object being redacted.
struct Object {
    /// A list item or a row's object, rather than a document.
    item: bool,
    /// Its class, once its `kind` is read (an item's is known at once).
    known: Option<Class>,
    /// The classes its keys were redacted as before `kind` was read.
    assumed: u8,
    /// The keys read so far.
    seen: u8,
    entries: Entries,
}

impl Entries {
    fn key(&mut self, out: &mut Vec<u8>, key: Text) {
        if self.0 {
            out.push(b',');
        }
        self.0 = true;
        out.extend_from_slice(key.raw);
        out.push(b':');
    }
}

impl Redactor {
    fn copy(&mut self, cursor: &mut Cursor) -> Walk {
        let raw = cursor.skip()?;
        self.out.extend_from_slice(raw);
        Ok(())
    }

    /// A document (`item` false: its `kind` decides) or a list item or a
    /// row's object (`item`: a Secret, its `kind` possibly left out, or its
    /// PartialObjectMetadata). Keys redacted before `kind` is read are
    /// redacted as the kind that has them, which `kind` must then be.
    fn object(&mut self, cursor: &mut Cursor, item: bool) -> Walk {
        let mut object = Object {
            item,
            known: item.then_some(Class::Secret),
            assumed: 0,
            seen: 0,
            entries: Entries(false),
        };
        self.out.push(b'{');
        cursor.object(|cursor, key| self.entry(cursor, key, &mut object))?;
        self.out.push(b'}');
        match object.known {
            Some(class) if object.assumed & !(class as u8) == 0 => Ok(()),
            _ => Err(Decline),
        }
    }

    fn entry(&mut self, cursor: &mut Cursor, key: Text, object: &mut Object) -> Walk {
        let (bit, role) = match key.plain()? {
            b"kind" => return self.kind(cursor, key, object),
            b"metadata" => (METADATA, Class::Secret),
            b"data" => (DATA, Class::Secret),
            b"stringData" => (STRING_DATA, Class::Secret),
            b"items" => (ITEMS, Class::List),
            b"rows" => (ROWS, Class::Table),
            _ => {
                object.entries.key(&mut self.out, key);
                return self.copy(cursor);
            }
        };
        once(&mut object.seen, bit)?;
        object.entries.key(&mut self.out, key);
        let class = object.known.unwrap_or_else(|| {
            object.assumed |= role as u8;
            role
        });
        if class != role {
            return self.copy(cursor);
        }
        match bit {
            METADATA => self.metadata(cursor),
            DATA => self.values(cursor, true),
            STRING_DATA => self.values(cursor, false),
            ITEMS => self.items(cursor),
            _ => self.rows(cursor),
        }
    }

    fn kind(&mut self, cursor: &mut Cursor, key: Text, object: &mut Object) -> Walk {
        once(&mut object.seen, KIND)?;
        let kind = cursor.string()?;
        let class = class_of(kind.plain()?)?;
        if object.item && class != Class::Secret {
            return Err(Decline);
        }
        object.known = Some(class);
        object.entries.key(&mut self.out, key);
        self.out.extend_from_slice(kind.raw);
        Ok(())
    }

    /// A watch event that is not an ERROR: its object redacted as a
    /// document.
    fn event(&mut self, cursor: &mut Cursor) -> Walk {
        let mut seen = 0u8;
        let mut entries = Entries(false);
        self.out.push(b'{');
        cursor.object(|cursor, key| {
            match key.plain()? {
                b"type" => {
                    once(&mut seen, TYPE)?;
                    let kind = cursor.string()?;
                    // An ERROR event carries a Status, left as it is.
                    if kind.plain()? == b"ERROR" {
                        return Err(Decline);
                    }
                    entries.key(&mut self.out, key);
                    self.out.extend_from_slice(kind.raw);
                    return Ok(());
                }
                b"object" => {
                    once(&mut seen, OBJECT)?;
                    entries.key(&mut self.out, key);
                    return self.object(cursor, false);
                }
                // Not an event but a whole object.
                b"kind" => return Err(Decline),
                _ => {}
            }
            entries.key(&mut self.out, key);
            self.copy(cursor)
        })?;
        self.out.push(b'}');
        match seen == TYPE | OBJECT {
            true => Ok(()),
            false => Err(Decline),
        }
    }

    /// A Secret's metadata, without `managedFields`, its annotations
    /// hidden.
    fn metadata(&mut self, cursor: &mut Cursor) -> Walk {
        self.object_or_null(cursor, |this, cursor, entries, seen, key| match key.plain()? {
            b"managedFields" => cursor.skip().map(drop),
            b"annotations" => {
                once(seen, ANNOTATIONS)?;
                entries.key(&mut this.out, key);
                this.annotations(cursor)
            }
            _ => {
                entries.key(&mut this.out, key);
                this.copy(cursor)
            }
        })
    }

    /// A Secret's annotations without the last-applied one, each value but
    /// those that name something replaced by its marker.
    fn annotations(&mut self, cursor: &mut Cursor) -> Walk {
        self.object_or_null(cursor, |this, cursor, entries, _, key| {
            let name = key.plain()?;
            if name == LAST_APPLIED.as_bytes() {
                return cursor.skip().map(drop);
            }
            entries.key(&mut this.out, key);
            if names_only(name) {
                return this.copy(cursor);
            }
            let len = this.len(cursor, false)?;
            this.marker(len, false);
            Ok(())
        })
    }

    /// Each value of `data` (`data`: base64, measured decoded) or of
    /// `stringData` replaced by its marker; a null value is empty.
    fn values(&mut self, cursor: &mut Cursor, data: bool) -> Walk {
        self.object_or_null(cursor, |this, cursor, entries, _, key| {
            entries.key(&mut this.out, key);
            let len = match cursor.null() {
                true => 0,
                false => this.len(cursor, data)?,
            };
            this.marker(len, data);
            Ok(())
        })
    }

    /// A value's length: `data` base64, measured decoded (read in one
    /// pass when it is base64 as it stands); `stringData` text, in bytes.
    fn len(&mut self, cursor: &mut Cursor, data: bool) -> Walk<usize> {
        if data {
            if let Some((body, whole)) = cursor.base64()? {
                return padded_len(body, whole).map_err(|_| Decline);
            }
        }
        let text = cursor.string()?;
        let decoded;
        let value = match text.plain() {
            Ok(plain) => plain,
            Err(Decline) => {
                decoded = text.decoded()?;
                decoded.as_bytes()
            }
        };
        match data {
            true => decoded_len_bytes(value).map_err(|_| Decline),
            false => Ok(value.len()),
        }
    }

    fn marker(&mut self, len: usize, data: bool) {
        if data && self.typed {
            self.out.push(b'"');
            self.out.extend_from_slice(base64_marker(len).as_bytes());
            self.out.push(b'"');
        } else {
            self.out.extend_from_slice(b"\"<redacted, ");
            crate::text::push_decimal(&mut self.out, len as u64);
            self.out.extend_from_slice(b" bytes>\"");
        }
    }

    /// A list's items, each a Secret or its PartialObjectMetadata.
    fn items(&mut self, cursor: &mut Cursor) -> Walk {
        self.array_or_null(cursor, |this, cursor| this.object(cursor, true))
    }

    /// A Table's rows, each with its object (a Secret or its
    /// PartialObjectMetadata), or none.
    fn rows(&mut self, cursor: &mut Cursor) -> Walk {
        self.array_or_null(cursor, |this, cursor| {
            this.entries(cursor, |this, cursor, entries, seen, key| {
                entries.key(&mut this.out, key);
                match key.plain()? {
                    b"object" => {
                        once(seen, OBJECT)?;
                        match cursor.null() {
                            true => this.out.extend_from_slice(b"null"),
                            false => this.object(cursor, true)?,
                        }
                        Ok(())
                    }
                    _ => this.copy(cursor),
                }
            })
        })
    }

    /// `null` as it is, or an object whose entries `entry` writes.
    fn object_or_null(
        &mut self,
        cursor: &mut Cursor,
        entry: impl FnMut(&mut Self, &mut Cursor, &mut Entries, &mut u8, Text) -> Walk,
    ) -> Walk {
        if cursor.null() {
            self.out.extend_from_slice(b"null");
            return Ok(());
        }
        self.entries(cursor, entry)
    }

    /// An object whose entries `entry` writes, with the keys it has seen.
    fn entries(
        &mut self,
        cursor: &mut Cursor,
        mut entry: impl FnMut(&mut Self, &mut Cursor, &mut Entries, &mut u8, Text) -> Walk,
    ) -> Walk {
        let mut entries = Entries(false);
        let mut seen = 0u8;
        self.out.push(b'{');
        cursor.object(|cursor, key| entry(self, cursor, &mut entries, &mut seen, key))?;
        self.out.push(b'}');
        Ok(())
    }

    /// `null` as it is, or an array whose elements `element` writes.
    fn array_or_null(&mut self, cursor: &mut Cursor, mut element: impl FnMut(&mut Self, &mut Cursor) -> Walk) -> Walk {
        if cursor.null() {
            self.out.extend_from_slice(b"null");
            return Ok(());
        }
        let mut first = true;
        self.out.push(b'[');
        cursor.array(|cursor| {
            if !first {
                self.out.push(b',');
            }
            first = false;
            element(self, cursor)
        })?;
        self.out.push(b']');
        Ok(())
    }
}

#[cfg(test)]
#[path = "fast_tests.rs"]
mod tests;
