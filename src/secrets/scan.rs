//! A validating JSON cursor over the bytes of a response: enough to walk a
//! document, hand back each value's bytes as they came so that they can be
//! copied, and stop ([`Decline`]) at anything serde_json might refuse or
//! read differently (an exponent, a surrogate escape, deep nesting), so that
//! the caller falls back to parsing the document whole.

use std::borrow::Cow;

/// The cursor stopped: the document is not one it reads exactly as
/// serde_json does (it may still be valid; the caller parses it whole).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Decline;

/// What walking a document gives, or [`Decline`].
pub(super) type Walk<T = ()> = Result<T, Decline>;

/// Nested arrays and objects at most; serde_json refuses 128.
const MAX_DEPTH: usize = 100;

/// A number longer than this may be out of f64's range, which serde_json
/// refuses.
const MAX_NUMBER: usize = 300;

/// A JSON string as it appears in the document, quotes included.
#[derive(Debug, Clone, Copy)]
pub(super) struct Text<'a> {
    pub raw: &'a [u8],
    escaped: bool,
}

impl<'a> Text<'a> {
    /// The text when it has no escapes, so that its bytes are its value.
    pub fn plain(&self) -> Walk<&'a [u8]> {
        match self.escaped {
            false => Ok(&self.raw[1..self.raw.len() - 1]),
            true => Err(Decline),
        }
    }

    /// The value, escapes decoded.
    pub fn decoded(&self) -> Walk<Cow<'a, str>> {
        if let Ok(plain) = self.plain() {
            return std::str::from_utf8(plain).map(Cow::Borrowed).map_err(|_| Decline);
        }
        serde_json::from_slice::<String>(self.raw)
            .map(Cow::Owned)
            .map_err(|_| Decline)
    }
}

/// Where the walk is in a document that is valid UTF-8.
pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`, which must be UTF-8 (as serde_json
    /// requires of every string; everything else in JSON is ASCII).
    pub fn new(bytes: &'a [u8]) -> Walk<Self> {
        std::str::from_utf8(bytes).map_err(|_| Decline)?;
        Ok(Cursor { bytes, at: 0, depth: 0 })
    }

    /// Nothing but whitespace is left.
    pub fn end(&mut self) -> Walk {
        self.ws();
        match self.at == self.bytes.len() {
            true => Ok(()),
            false => Err(Decline),
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte that is not whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Walk {
        match self.peek() == Some(byte) {
            true => {
                self.at += 1;
                Ok(())
            }
            false => Err(Decline),
        }
    }

    /// A string value.
    pub fn string(&mut self) -> Walk<Text<'a>> {
        self.eat(b'"')?;
        let start = self.at - 1;
        let mut escaped = false;
        loop {
            self.at = special(self.bytes, self.at);
            match self.bytes.get(self.at) {
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    self.escape()?;
                }
                _ => return Err(Decline),
            }
        }
        self.at += 1;
        Ok(Text {
            raw: &self.bytes[start..self.at],
            escaped,
        })
    }

    /// One escape, at its backslash. A `\u` escape of a surrogate declines:
    /// serde_json refuses a lone one.
    fn escape(&mut self) -> Walk {
        match self.bytes.get(self.at + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.at += 2,
            Some(b'u') => {
                let hex = self.bytes.get(self.at + 2..self.at + 6).ok_or(Decline)?;
                let hex = std::str::from_utf8(hex).map_err(|_| Decline)?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(Decline);
                }
                let unit = u16::from_str_radix(hex, 16).map_err(|_| Decline)?;
                if (0xD800..=0xDFFF).contains(&unit) {
                    return Err(Decline);
                }
                self.at += 6;
            }
            _ => return Err(Decline),
        }
        Ok(())
    }

    /// A string that is base64 as it stands (its alphabet, then at most
    /// two `=`): how many characters it has before its padding and in all.
    /// `None`, the cursor unmoved, for any other string.
    pub fn base64(&mut self) -> Walk<Option<(usize, usize)>> {
        if self.peek() != Some(b'"') {
            return Err(Decline);
        }
        let start = self.at + 1;
        let body = alphabet_run(&self.bytes[start..]);
        let mut end = start + body;
        while end - start - body < 2 && self.bytes.get(end) == Some(&b'=') {
            end += 1;
        }
        if self.bytes.get(end) != Some(&b'"') {
            return Ok(None);
        }
        self.at = end + 1;
        Ok(Some((body, end - start)))
    }

    /// `null`, consumed if it is next.
    pub fn null(&mut self) -> bool {
        let null = self.peek() == Some(b'n') && self.bytes[self.at..].starts_with(b"null");
        if null {
            self.at += 4;
        }
        null
    }

    fn literal(&mut self) -> Walk {
        for word in [&b"null"[..], b"true", b"false"] {
            if self.bytes[self.at..].starts_with(word) {
                self.at += word.len();
                return Ok(());
            }
        }
        Err(Decline)
    }

    /// A number as JSON writes it, without an exponent (see [`MAX_NUMBER`]).
    fn number(&mut self) -> Walk {
        let start = self.at;
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.bytes.get(self.at) {
            // One leading zero, alone.
            Some(b'0') => {
                self.at += 1;
                if self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
                    return Err(Decline);
                }
            }
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(Decline),
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(Decline);
            }
        }
        match self.bytes.get(self.at) {
            Some(b'e' | b'E') => Err(Decline),
            _ if self.at - start > MAX_NUMBER => Err(Decline),
            _ => Ok(()),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        self.at - start
    }

    fn enter(&mut self, open: u8) -> Walk {
        self.eat(open)?;
        self.depth += 1;
        match self.depth > MAX_DEPTH {
            true => Err(Decline),
            false => Ok(()),
        }
    }

    /// Walk an object's entries: `entry` gets each key with the cursor at
    /// its value, and must consume the value.
    pub fn object(&mut self, mut entry: impl FnMut(&mut Self, Text<'a>) -> Walk) -> Walk {
        self.enter(b'{')?;
        if self.peek() != Some(b'}') {
            loop {
                let key = self.string()?;
                self.eat(b':')?;
                entry(self, key)?;
                if self.peek() != Some(b',') {
                    break;
                }
                self.at += 1;
            }
        }
        self.depth -= 1;
        self.eat(b'}')
    }

    /// Walk an array's elements: `element` must consume each.
    pub fn array(&mut self, mut element: impl FnMut(&mut Self) -> Walk) -> Walk {
        self.enter(b'[')?;
        if self.peek() != Some(b']') {
            loop {
                element(self)?;
                if self.peek() != Some(b',') {
                    break;
                }
                self.at += 1;
            }
        }
        self.depth -= 1;
        self.eat(b']')
    }

    /// Step over any value, checking it; its bytes as they came.
    pub fn skip(&mut self) -> Walk<&'a [u8]> {
        let start = match self.peek() {
            Some(_) => self.at,
            None => return Err(Decline),
        };
        match self.bytes[self.at] {
            b'{' => self.object(|cursor, _| cursor.skip().map(drop))?,
            b'[' => self.array(|cursor| cursor.skip().map(drop))?,
            b'"' => self.string().map(drop)?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => self.literal()?,
        }
        Ok(&self.bytes[start..self.at])
    }
}

/// The first byte at or after `from` that ends a string's plain run: a
/// quote, a backslash or a control character (`bytes.len()` if none),
/// looked for 32 bytes at a time.
fn special(bytes: &[u8], from: usize) -> usize {
    let is_special = |b: u8| (b == b'"') | (b == b'\\') | (b < 0x20);
    let rest = bytes.get(from..).unwrap_or_default();
    let mut at = 0;
    for chunk in rest.chunks_exact(32) {
        // Branch-free, so that a chunk is checked as a vector.
        if chunk.iter().fold(false, |found, b| found | is_special(*b)) {
            break;
        }
        at += 32;
    }
    from + at
        + rest[at..]
            .iter()
            .position(|b| is_special(*b))
            .unwrap_or(rest.len() - at)
}

/// How many bytes at the start of `bytes` are of standard base64's
/// alphabet (no padding), 32 at a time: values are most of a Secret list.
pub(super) fn alphabet_run(bytes: &[u8]) -> usize {
    // Branch-free, so that a chunk is checked as a vector.
    let of_alphabet =
        |b: u8| ((b | 0x20).wrapping_sub(b'a') < 26) | (b.wrapping_sub(b'0') < 10) | (b == b'+') | (b == b'/');
    let mut at = 0;
    for chunk in bytes.chunks_exact(32) {
        if !chunk.iter().fold(true, |all, b| all & of_alphabet(*b)) {
            break;
        }
        at += 32;
    }
    let rest = &bytes[at..];
    at + rest.iter().position(|b| !of_alphabet(*b)).unwrap_or(rest.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(text: &str) -> Walk<String> {
        let mut cursor = Cursor::new(text.as_bytes())?;
        let raw = cursor.skip()?;
        cursor.end()?;
        Ok(String::from_utf8_lossy(raw).into_owned())
    }

    #[test]
    fn what_serde_json_reads_alike_is_skipped_whole() {
        for text in [
            r#"{"a":[1,-2.5,0,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9"],"b":{}}"#,
            "[]",
            " [ { } , [ ] ] ",
            "\"h\u{e9}llo, w\u{f6}rld, 0123456789\"",
            "-0",
            "0.001",
        ] {
            assert_eq!(skipped(text), Ok(text.trim().to_string()), "{text}");
            assert!(serde_json::from_str::<serde_json::Value>(text).is_ok());
        }
    }

    #[test]
    fn what_serde_json_refuses_or_might_read_differently_is_declined() {
        for text in [
            "{\"a\":1,}",
            "[1,]",
            "01",
            "1.",
            "-",
            "1e5",
            "\"\\ud800\"",
            "\"\\x\"",
            "\"tab\there\"",
            "\"open",
            "{\"a\" 1}",
            "nul",
            "[1] 2",
            "{\"a\":1]",
            &"[".repeat(200),
            &"9".repeat(400),
        ] {
            assert_eq!(skipped(text), Err(Decline), "{text}");
        }
        assert_eq!(Cursor::new(b"\"\xff\"").err(), Some(Decline), "not UTF-8");
    }

    #[test]
    fn the_base64_alphabet_run_stops_at_the_first_other_byte_wherever_it_falls() {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for len in 0..80 {
            for stop in [b'=', b'"', b'-', b'_', b'@', b'[', b'`', b'{', b':', 0x80] {
                let mut bytes: Vec<u8> = alphabet.iter().cycle().take(len).copied().collect();
                bytes.push(stop);
                bytes.extend_from_slice(b"AAAA");
                assert_eq!(alphabet_run(&bytes), len, "{len} {stop}");
            }
        }
        assert_eq!(alphabet_run(alphabet), alphabet.len());
    }

    #[test]
    fn a_base64_string_is_read_with_its_padding_and_anything_else_is_left() {
        let read = |text: &str| {
            let mut cursor = Cursor::new(text.as_bytes())?;
            let found = cursor.base64()?;
            Ok::<_, Decline>((found, cursor.at))
        };
        assert_eq!(read(r#""YWI=","#), Ok((Some((3, 4)), 6)));
        assert_eq!(read(r#""YQ==""#), Ok((Some((2, 4)), 6)));
        assert_eq!(read(r#""""#), Ok((Some((0, 0)), 2)));
        for other in [r#""YQ===""#, r#""Y=Q""#, r#""a\/b""#, r#""a b""#, r#""é""#] {
            assert_eq!(read(other), Ok((None, 0)), "{other}");
        }
        assert_eq!(read("12"), Err(Decline));
    }

    #[test]
    fn the_plain_run_of_a_string_stops_at_the_first_special_byte_wherever_it_falls() {
        for len in 0..40 {
            for stop in [b'"', b'\\', b'\n', 0x1f] {
                let mut bytes = "é".repeat(len).into_bytes();
                let expected = bytes.len();
                bytes.push(stop);
                bytes.extend_from_slice(b"\"\\ a");
                assert_eq!(special(&bytes, 0), expected, "{len} {stop}");
            }
            assert_eq!(special(&vec![b'a'; len], 0), len);
        }
    }
}
