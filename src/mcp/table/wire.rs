//! The Table as the cluster sends it, reduced to what the text shows. A
//! field of another type than here (or given twice) fails the typed read,
//! which [`super::text`] then leaves to [`super::Table::from_value`]. What
//! it skips is checked as JSON but not built; a lone UTF-16 surrogate
//! escaped in a skipped string (which no Go encoder writes) is let through.

use super::Cell;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Number, Value};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A JSON object read as `T`. A derived struct would also take an array,
/// by position, where the lenient reading sees no fields.
pub struct Obj<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectOnly<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        deserializer.deserialize_map(ObjectOnly(PhantomData))
    }
}

/// A string, borrowed from the answer unless it has escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(CellVisitor).and_then(|cell| match cell {
            Cell::Text(s) => Ok(Str(s)),
            Cell::Other(_) => Err(D::Error::custom("not a string")),
        })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Cell<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CellVisitor)
    }
}

/// A value other than a string is built as `serde_json` builds a `Value`,
/// so that it prints the same.
struct CellVisitor;

impl<'de> Visitor<'de> for CellVisitor {
    type Value = Cell<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Cell<'de>, E> {
        Ok(Cell::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<Cell<'de>, E> {
        Ok(Cell::Text(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: Error>(self, v: String) -> Result<Cell<'de>, E> {
        Ok(Cell::Text(Cow::Owned(v)))
    }
    fn visit_bool<E: Error>(self, v: bool) -> Result<Cell<'de>, E> {
        Ok(other(Value::Bool(v)))
    }
    fn visit_i64<E: Error>(self, v: i64) -> Result<Cell<'de>, E> {
        Ok(other(Value::Number(v.into())))
    }
    fn visit_u64<E: Error>(self, v: u64) -> Result<Cell<'de>, E> {
        Ok(other(Value::Number(v.into())))
    }
    fn visit_f64<E: Error>(self, v: f64) -> Result<Cell<'de>, E> {
        Ok(other(Number::from_f64(v).map_or(Value::Null, Value::Number)))
    }
    fn visit_unit<E: Error>(self) -> Result<Cell<'de>, E> {
        Ok(other(Value::Null))
    }
    fn visit_none<E: Error>(self) -> Result<Cell<'de>, E> {
        Ok(other(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Cell<'de>, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Cell<'de>, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(other)
    }
}

fn other<'a>(value: Value) -> Cell<'a> {
    Cell::Other(Cow::Owned(value))
}

#[derive(Deserialize)]
pub struct Table<'a> {
    #[serde(rename = "columnDefinitions", borrow)]
    columns: Option<Vec<Obj<Column<'a>>>>,
    #[serde(borrow)]
    rows: Option<Vec<Obj<Row<'a>>>>,
    #[serde(borrow)]
    metadata: Option<Obj<ListMeta<'a>>>,
}

#[derive(Deserialize)]
struct Column<'a> {
    #[serde(borrow)]
    name: Option<Str<'a>>,
    priority: Option<i64>,
}

#[derive(Deserialize)]
struct Row<'a> {
    #[serde(borrow)]
    cells: Option<Vec<Cell<'a>>>,
    #[serde(borrow)]
    object: Option<Obj<Object<'a>>>,
}

#[derive(Deserialize)]
struct Object<'a> {
    #[serde(borrow)]
    metadata: Option<Obj<ObjectMeta<'a>>>,
}

#[derive(Deserialize)]
struct ObjectMeta<'a> {
    #[serde(borrow)]
    namespace: Option<Str<'a>>,
}

#[derive(Deserialize, Default)]
struct ListMeta<'a> {
    #[serde(rename = "continue", borrow)]
    continue_token: Option<Str<'a>>,
    #[serde(rename = "remainingItemCount")]
    remaining: Option<u64>,
}

impl<'a> From<Table<'a>> for super::Table<'a> {
    fn from(table: Table<'a>) -> super::Table<'a> {
        let columns = table
            .columns
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .filter(|(_, Obj(c))| c.priority.unwrap_or(0) == 0)
            .map(|(i, Obj(c))| (i, c.name.map(|n| n.0).unwrap_or_default().to_ascii_uppercase()))
            .collect();
        let rows = table
            .rows
            .unwrap_or_default()
            .into_iter()
            .map(|Obj(r)| super::Row {
                namespace: r
                    .object
                    .and_then(|Obj(o)| o.metadata)
                    .and_then(|Obj(m)| m.namespace)
                    .map(|n| n.0)
                    .unwrap_or_default(),
                cells: r.cells.unwrap_or_default(),
            })
            .collect();
        let metadata = table.metadata.map(|Obj(m)| m).unwrap_or_default();
        super::Table {
            columns,
            rows,
            continue_token: metadata.continue_token.map(|t| t.0),
            remaining: metadata.remaining,
        }
        .without_empty_token()
    }
}
