//! A cluster `Table` (`meta.k8s.io/v1`) as list text: a header with the
//! columns the cluster shows by default (priority 0), `NAMESPACE` first when
//! rows come from several namespaces, one aligned line per row, then the
//! continue token and the count of the rest.
//!
//! [`text`] reads only what the text shows, typed ([`wire`]): strings are
//! borrowed from the answer, and the rest (a row's object: its labels,
//! annotations, owner references) is skipped without being built. A body of
//! another shape is read again as a whole JSON document and looked at
//! leniently ([`Table::from_value`]), so both readings give the same text.

mod wire;

use super::error::ToolError;
use serde_json::Value;
use std::borrow::Cow;

/// What of a Table the list text shows, borrowed from the answer.
#[derive(Debug, Default, PartialEq)]
pub struct Table<'a> {
    /// The index and upper-cased name of each column shown.
    columns: Vec<(usize, String)>,
    rows: Vec<Row<'a>>,
    /// Present and non-empty.
    continue_token: Option<Cow<'a, str>>,
    remaining: Option<u64>,
}

#[derive(Debug, Default, PartialEq)]
struct Row<'a> {
    /// Empty when the row's object does not say (or is not sent).
    namespace: Cow<'a, str>,
    cells: Vec<Cell<'a>>,
}

/// A row's cell: most are strings; `Other` is any other JSON value.
#[derive(Debug, PartialEq)]
enum Cell<'a> {
    Text(Cow<'a, str>),
    Other(Cow<'a, Value>),
}

/// The Table in a cluster's answer as text, cut to a tool result with
/// `advice` on asking for less; `what` names the objects for an empty
/// answer (`pods in shop`). `cluster.invalid_response` when the answer is
/// not JSON.
pub fn text(body: &[u8], what: &str, advice: &str) -> Result<String, ToolError> {
    let (text, whole) = match typed(body) {
        // A Table has its columns whatever its rows: one without is some
        // other answer (an aggregated API that ignores `as=Table`).
        Some(table) if !table.columns.is_empty() => table.render(what),
        _ => Table::from_value(&super::read_tools::json(body)?).render(what),
    };
    Ok(super::render::cut_made(text, whole, advice))
}

/// The typed read, or `None` when the body is not a Table of the shape
/// expected. UTF-8 is checked whole first: the skipped strings are not
/// otherwise, and the lenient reading refuses a body with bad UTF-8.
fn typed(body: &[u8]) -> Option<Table<'_>> {
    let text = std::str::from_utf8(body).ok()?;
    serde_json::from_str::<wire::Obj<wire::Table>>(text)
        .ok()
        .map(|wire::Obj(table)| table.into())
}

impl<'a> Table<'a> {
    /// Any JSON document read as a Table: a field missing or of another
    /// type counts as absent.
    pub fn from_value(document: &'a Value) -> Table<'a> {
        if document["kind"] != "Table" {
            if let Some(items) = document["items"].as_array() {
                return Table::of_items(document, items);
            }
        }
        let columns = document["columnDefinitions"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, c)| c["priority"].as_i64().unwrap_or(0) == 0)
            .map(|(i, c)| (i, c["name"].as_str().unwrap_or_default().to_ascii_uppercase()))
            .collect();
        let rows = document["rows"].as_array().map(Vec::as_slice).unwrap_or_default();
        let rows = rows
            .iter()
            .map(|r| Row {
                namespace: r["object"]["metadata"]["namespace"].as_str().unwrap_or_default().into(),
                cells: r["cells"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|c| match c {
                        Value::String(s) => Cell::Text(s.into()),
                        other => Cell::Other(Cow::Borrowed(other)),
                    })
                    .collect(),
            })
            .collect();
        let metadata = &document["metadata"];
        Table {
            columns,
            rows,
            continue_token: metadata["continue"].as_str().map(Cow::Borrowed),
            remaining: metadata["remainingItemCount"].as_u64(),
        }
        .without_empty_token()
    }

    /// A list the server did not answer as a Table: its objects by name,
    /// rather than "none found".
    fn of_items(document: &'a Value, items: &'a [Value]) -> Table<'a> {
        let text = |v: &'a Value| Cow::Borrowed(v.as_str().unwrap_or_default());
        let rows = items
            .iter()
            .map(|item| Row {
                namespace: text(&item["metadata"]["namespace"]),
                cells: vec![Cell::Text(text(&item["metadata"]["name"]))],
            })
            .collect();
        let metadata = &document["metadata"];
        Table {
            columns: vec![(0, "NAME".into())],
            rows,
            continue_token: metadata["continue"].as_str().map(Cow::Borrowed),
            remaining: metadata["remainingItemCount"].as_u64(),
        }
        .without_empty_token()
    }

    fn without_empty_token(mut self) -> Table<'a> {
        self.continue_token = self.continue_token.filter(|t| !t.is_empty());
        self
    }

    /// The text, and the bytes it would have if its lines past the tool
    /// result's limit were made too; `what` names the objects for an empty
    /// answer.
    pub fn render(&self, what: &str) -> (String, usize) {
        let (mut text, mut whole) = match self.rows.first() {
            None => {
                let text = format!("No {what} found.\n");
                let whole = text.len();
                (text, whole)
            }
            Some(first) => {
                let several = self.rows.iter().any(|r| r.namespace != first.namespace);
                let mut cells = Vec::with_capacity((self.rows.len() + 1) * (self.columns.len() + 1));
                if several {
                    cells.push(Cow::Borrowed("NAMESPACE"));
                }
                // A custom resource's column names are its author's: on one
                // line and cut too.
                cells.extend(self.columns.iter().map(|(_, name)| within(on_one_line(name))));
                for row in &self.rows {
                    if several {
                        cells.push(Cow::Borrowed(&*row.namespace));
                    }
                    cells.extend(self.columns.iter().map(|(i, _)| shown(row.cells.get(*i))));
                }
                match self.columns.len() + usize::from(several) {
                    0 => ("\n".repeat(self.rows.len() + 1), self.rows.len() + 1),
                    width => aligned(&cells, width),
                }
            }
        };
        if let Some(token) = &self.continue_token {
            let line = match self.remaining {
                Some(n) => format!("continue: {token} ({n} more)\n"),
                None => format!("continue: {token}\n"),
            };
            whole += line.len();
            if text.len() == whole - line.len() {
                text.push_str(&line);
            }
        }
        (text, whole)
    }
}

/// The most characters of a cell shown; a longer one ends in `…`. A list
/// is one line per row and each column as wide as its widest cell, so one
/// wide cell would otherwise be paid for in every row (an Event's reason,
/// a custom resource's column, are any length the writer likes).
const MAX_CELL_CHARS: usize = 256;

/// A cell as shown: `<none>` when empty or absent, on one line, at most
/// [`MAX_CELL_CHARS`].
fn shown<'c>(cell: Option<&'c Cell<'_>>) -> Cow<'c, str> {
    within(one_line(cell))
}

/// `text`, or its first characters and `…` past [`MAX_CELL_CHARS`].
fn within(text: Cow<'_, str>) -> Cow<'_, str> {
    match text.char_indices().nth(MAX_CELL_CHARS) {
        None => text,
        Some(_) => {
            let end = text
                .char_indices()
                .nth(MAX_CELL_CHARS - 1)
                .map_or(text.len(), |(i, _)| i);
            Cow::Owned(format!("{}…", &text[..end]))
        }
    }
}

fn one_line<'c>(cell: Option<&'c Cell<'_>>) -> Cow<'c, str> {
    match cell {
        None => Cow::Borrowed("<none>"),
        Some(Cell::Text(s)) if s.is_empty() => Cow::Borrowed("<none>"),
        Some(Cell::Text(s)) => on_one_line(s),
        Some(Cell::Other(value)) if value.is_null() => Cow::Borrowed("<none>"),
        Some(Cell::Other(value)) => Cow::Owned(value.to_string()),
    }
}

/// `text` with its line breaks and tabs as spaces.
fn on_one_line(text: &str) -> Cow<'_, str> {
    if text.contains(['\n', '\r', '\t']) {
        Cow::Owned(text.replace(['\n', '\r', '\t'], " "))
    } else {
        Cow::Borrowed(text)
    }
}

/// `cells`, `width` to a line, each column padded to its widest cell (in
/// characters) and two spaces; the last cell of a line is not padded.
/// Lines past the tool result's limit are not made, only counted (the
/// second figure, the bytes of the whole): the text is cut there anyway
/// ([`super::render::cut_made`], which says so).
fn aligned(cells: &[Cow<'_, str>], width: usize) -> (String, usize) {
    let counts: Vec<usize> = cells.iter().map(|c| c.chars().count()).collect();
    let mut widths = vec![0; width];
    for (i, count) in counts.iter().enumerate() {
        widths[i % width] = widths[i % width].max(*count);
    }
    let line = widths.iter().sum::<usize>() + 2 * width + 1;
    let limit = super::render::MAX_RESULT_BYTES;
    let mut text = String::with_capacity((line * cells.len() / width).min(limit + line));
    let mut whole = 0;
    for (i, (cell, count)) in cells.iter().zip(&counts).enumerate() {
        let last = i % width == width - 1;
        let after = if last { 1 } else { widths[i % width] - count + 2 };
        whole += cell.len() + after;
        if text.len() > limit {
            continue;
        }
        text.push_str(cell);
        if last {
            text.push('\n');
        } else {
            text.extend(std::iter::repeat_n(' ', after));
        }
    }
    (text, whole)
}

#[cfg(test)]
mod tests;
