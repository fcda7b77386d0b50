//! The SPDY/3 header-compression dictionary (SPDY draft 3, section 2.6.10.1).
//!
//! Built from its parts rather than pasted as 1,423 hex bytes: a list of
//! length-prefixed header names and values, then a run of common strings.
//! The unit tests pin its length and its Adler-32 (the id a peer's zlib
//! stream names), so a typo cannot go unnoticed.

/// Names and values the dictionary lists as `u32 length + bytes`.
const WORDS: &[&str] = &[
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

/// The strings that follow the length-prefixed words, concatenated as is.
const TAIL: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information",
    "204 No Content",
    "301 Moved Permanently",
    "400 Bad Request",
    "401 Unauthorized",
    "403 Forbidden",
    "404 Not Found",
    "500 Internal Server Error",
    "501 Not Implemented",
    "503 Service Unavailable",
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT",
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,",
    "text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch",
    "charset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
);

/// The dictionary bytes.
pub fn dictionary() -> &'static [u8] {
    static DICT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    DICT.get_or_init(|| {
        let mut out = Vec::with_capacity(1423);
        for word in WORDS {
            out.extend_from_slice(&(word.len() as u32).to_be_bytes());
            out.extend_from_slice(word.as_bytes());
        }
        out.extend_from_slice(TAIL.as_bytes());
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adler32(data: &[u8]) -> u32 {
        let (mut a, mut b) = (1u32, 0u32);
        for &byte in data {
            a = (a + u32::from(byte)) % 65521;
            b = (b + a) % 65521;
        }
        (b << 16) | a
    }

    #[test]
    fn dictionary_has_the_spdy3_length_and_starts_and_ends_like_the_spec() {
        let dict = dictionary();
        assert_eq!(dict.len(), 1423);
        assert_eq!(&dict[..11], b"\x00\x00\x00\x07options");
        assert!(dict.ends_with(b",*,enq=0."));
        // The dictionary id every SPDY/3 zlib stream names in its header.
        assert_eq!(adler32(dict), 0xe3c6_a7c2);
    }
}
