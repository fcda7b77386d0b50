//! SPDY/3 name/value header blocks: `u32 count`, then `u32 len, name,
//! u32 len, values joined by NUL` per header, compressed with one zlib
//! stream per direction for the whole connection, primed with the SPDY/3
//! dictionary and sync-flushed after every block.

use super::dictionary::dictionary;
use super::frame::{FrameError, Headers};
use bytes::{Buf, BufMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// Compresses header blocks for one direction of a connection.
pub struct HeaderEncoder {
    zlib: Compress,
}

impl std::fmt::Debug for HeaderEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderEncoder")
    }
}

impl HeaderEncoder {
    /// A fresh zlib stream primed with the SPDY/3 dictionary.
    pub fn new() -> Result<Self, FrameError> {
        let mut zlib = Compress::new(Compression::best(), true);
        zlib.set_dictionary(dictionary())
            .map_err(|e| FrameError::Compression(e.to_string()))?;
        Ok(Self { zlib })
    }

    /// The compressed form of `headers`, sync-flushed so the peer can decode
    /// it without waiting for more.
    pub fn encode(&mut self, headers: &Headers) -> Result<Vec<u8>, FrameError> {
        let block = raw_block(headers);
        let mut out = Vec::with_capacity(block.len() + 64);
        let mut input = &block[..];
        loop {
            out.reserve(256);
            let before = self.zlib.total_in();
            self.zlib
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(|e| FrameError::Compression(e.to_string()))?;
            let consumed = (self.zlib.total_in() - before) as usize;
            input = &input[consumed..];
            // Done once all input is in and zlib left spare room (so the
            // sync flush marker is complete).
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

/// Decompresses header blocks for one direction of a connection.
pub struct HeaderDecoder {
    zlib: Decompress,
}

impl std::fmt::Debug for HeaderDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeaderDecoder")
    }
}

impl Default for HeaderDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl HeaderDecoder {
    /// A fresh zlib stream; the dictionary is supplied when zlib asks.
    pub fn new() -> Self {
        Self {
            zlib: Decompress::new(true),
        }
    }

    /// Decode one compressed header block.
    pub fn decode(&mut self, mut input: &[u8]) -> Result<Headers, FrameError> {
        let mut out = Vec::with_capacity(input.len() * 4 + 64);
        loop {
            out.reserve(1024);
            let (before_in, before_out) = (self.zlib.total_in(), out.len());
            let result = self.zlib.decompress_vec(input, &mut out, FlushDecompress::Sync);
            let consumed = (self.zlib.total_in() - before_in) as usize;
            input = &input[consumed..];
            match result {
                Ok(Status::StreamEnd) => break,
                Ok(_) if input.is_empty() && out.len() < out.capacity() => break,
                // No progress with input left: a truncated or corrupt block.
                Ok(_) if consumed == 0 && out.len() == before_out => {
                    return Err(FrameError::Compression("no progress".into()))
                }
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.zlib
                        .set_dictionary(dictionary())
                        .map_err(|e| FrameError::Compression(e.to_string()))?;
                }
                Err(e) => return Err(FrameError::Compression(e.to_string())),
            }
        }
        parse_block(&out)
    }
}

/// The uncompressed name/value block.
fn raw_block(headers: &Headers) -> Vec<u8> {
    let mut block = Vec::new();
    block.put_u32(headers.len() as u32);
    for (name, values) in headers {
        let name = name.to_ascii_lowercase();
        block.put_u32(name.len() as u32);
        block.put_slice(name.as_bytes());
        let value = values.join("\0");
        block.put_u32(value.len() as u32);
        block.put_slice(value.as_bytes());
    }
    block
}

fn parse_block(mut block: &[u8]) -> Result<Headers, FrameError> {
    let count = take_u32(&mut block, "header block")?;
    let mut headers = Headers::new();
    for _ in 0..count {
        let name = take_string(&mut block)?.to_ascii_lowercase();
        let value = take_string(&mut block)?;
        let values = value.split('\0').map(str::to_string).collect();
        headers.push((name, values));
    }
    Ok(headers)
}

pub(super) fn take_u32(buf: &mut &[u8], what: &'static str) -> Result<u32, FrameError> {
    if buf.len() < 4 {
        return Err(FrameError::Truncated(what));
    }
    Ok(buf.get_u32())
}

fn take_string(buf: &mut &[u8]) -> Result<String, FrameError> {
    let len = take_u32(buf, "header block")? as usize;
    if buf.len() < len {
        return Err(FrameError::Truncated("header block"));
    }
    let s = std::str::from_utf8(&buf[..len]).map_err(|_| FrameError::NotUtf8)?;
    buf.advance(len);
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams::spdy::frame::header;

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), vec![v.to_string()]))
            .collect()
    }

    #[test]
    fn header_block_names_the_spdy3_dictionary_and_compresses() {
        let mut enc = HeaderEncoder::new().unwrap();
        let block = enc
            .encode(&headers(&[("content-type", "text/plain"), ("user-agent", "x")]))
            .unwrap();
        // zlib header with FDICT set, then the dictionary's Adler-32.
        assert_eq!(block[0] & 0x0f, 8);
        assert_ne!(block[1] & 0x20, 0);
        assert_eq!(&block[2..6], &0xe3c6_a7c2u32.to_be_bytes());
    }

    #[test]
    fn multi_valued_headers_are_joined_by_nul() {
        let (mut enc, mut dec) = (HeaderEncoder::new().unwrap(), HeaderDecoder::new());
        let h: Headers = vec![(
            "x-stream-protocol-version".into(),
            vec!["v4.channel.k8s.io".into(), "v3.channel.k8s.io".into()],
        )];
        let block = enc.encode(&h).unwrap();
        assert_eq!(dec.decode(&block).unwrap(), h);
        assert_eq!(header(&h, "x-stream-protocol-version"), Some("v4.channel.k8s.io"));
    }
}
