//! SPDY/3.1 frames: the binary layout and the zlib-compressed name/value
//! header blocks, as moby/spdystream (the library kubectl and the kubelet
//! use) writes and reads them.
//!
//! A control frame is `1 | version(15) | type(16) | flags(8) | length(24)`
//! then its payload; a data frame is `0 | stream-id(31) | flags(8) |
//! length(24)` then the data. Header blocks are `u32 count` then
//! `u32 len, name, u32 len, values joined by NUL` per header ([`super::headers`]).

use super::headers::take_u32;
pub use super::headers::{HeaderDecoder, HeaderEncoder};
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Protocol version carried in control frames.
pub const VERSION: u16 = 3;
/// FLAG_FIN on data, SYN_STREAM, SYN_REPLY and HEADERS frames.
pub const FLAG_FIN: u8 = 0x01;
/// FLAG_UNIDIRECTIONAL on SYN_STREAM.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// Largest payload a frame's 24-bit length can carry.
pub const MAX_LENGTH: usize = (1 << 24) - 1;

/// RST_STREAM status: PROTOCOL_ERROR.
pub const RST_PROTOCOL_ERROR: u32 = 1;
/// RST_STREAM status: INVALID_STREAM.
pub const RST_INVALID_STREAM: u32 = 2;
/// RST_STREAM status: REFUSED_STREAM.
pub const RST_REFUSED_STREAM: u32 = 3;

/// A header block: lower-case names, each with its values.
pub type Headers = Vec<(String, Vec<String>)>;

/// The first value of header `name` in `headers`.
pub fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.first())
        .map(String::as_str)
}

/// One SPDY frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// DATA.
    Data {
        /// Stream the data belongs to.
        stream_id: u32,
        /// FLAG_FIN: the sender's half of the stream is done.
        fin: bool,
        /// Payload.
        data: Bytes,
    },
    /// SYN_STREAM: the peer opens a stream.
    SynStream {
        /// New stream's id (odd from a client).
        stream_id: u32,
        /// Associated stream, 0 for none.
        associated: u32,
        /// Priority 0 (highest) to 7.
        priority: u8,
        /// FLAG_FIN / FLAG_UNIDIRECTIONAL.
        flags: u8,
        /// The stream's headers (`streamtype`, `port`, `requestid`, …).
        headers: Headers,
    },
    /// SYN_REPLY: accepts a stream the peer opened.
    SynReply {
        /// Stream replied to.
        stream_id: u32,
        /// FLAG_FIN.
        fin: bool,
        /// Reply headers (spdystream sends none).
        headers: Headers,
    },
    /// RST_STREAM: abort a stream.
    RstStream {
        /// Stream aborted.
        stream_id: u32,
        /// Status code (`RST_*`).
        status: u32,
    },
    /// SETTINGS: `(flags, id, value)` entries.
    Settings(Vec<(u8, u32, u32)>),
    /// PING: echoed by the receiver when the id has the sender's parity.
    Ping(u32),
    /// GOAWAY: the sender accepts no new streams.
    GoAway {
        /// Last stream the sender accepted.
        last_good: u32,
        /// Status (0 OK).
        status: u32,
    },
    /// HEADERS: more headers for a stream.
    Headers {
        /// Stream concerned.
        stream_id: u32,
        /// FLAG_FIN.
        fin: bool,
        /// Headers.
        headers: Headers,
    },
    /// WINDOW_UPDATE: the receiver can take `delta` more bytes.
    WindowUpdate {
        /// Stream concerned (0 for the connection in SPDY/3.1).
        stream_id: u32,
        /// Additional window.
        delta: u32,
    },
    /// A control frame type this codec does not know; skipped.
    Unknown(u16),
}

/// A malformed frame or header block.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The payload is shorter than its frame type needs.
    #[error("truncated {0} frame")]
    Truncated(&'static str),
    /// zlib refused the header block.
    #[error("header block: {0}")]
    Compression(String),
    /// Header names or values that are not UTF-8.
    #[error("header block is not UTF-8")]
    NotUtf8,
    /// The frame is larger than a 24-bit length allows.
    #[error("frame payload of {0} bytes is too large")]
    TooLarge(usize),
}

/// Encode `frame`, compressing header blocks with `encoder`.
pub fn encode(frame: &Frame, encoder: &mut HeaderEncoder) -> Result<Bytes, FrameError> {
    let mut out = BytesMut::new();
    match frame {
        Frame::Data { stream_id, fin, data } => {
            check_len(data.len())?;
            out.put_u32(stream_id & 0x7fff_ffff);
            out.put_u32(flags_len(u8::from(*fin), data.len()));
            out.put_slice(data);
        }
        Frame::SynStream {
            stream_id,
            associated,
            priority,
            flags,
            headers,
        } => {
            let block = encoder.encode(headers)?;
            control(&mut out, 1, *flags, 10 + block.len())?;
            out.put_u32(*stream_id);
            out.put_u32(*associated);
            out.put_u8(priority << 5);
            out.put_u8(0);
            out.put_slice(&block);
        }
        Frame::SynReply {
            stream_id,
            fin,
            headers,
        } => put_headers(&mut out, 2, *stream_id, *fin, &encoder.encode(headers)?)?,
        Frame::Headers {
            stream_id,
            fin,
            headers,
        } => put_headers(&mut out, 8, *stream_id, *fin, &encoder.encode(headers)?)?,
        Frame::RstStream { stream_id, status } => put_words(&mut out, 3, &[*stream_id, *status])?,
        Frame::Settings(entries) => put_settings(&mut out, entries)?,
        Frame::Ping(id) => put_words(&mut out, 6, &[*id])?,
        Frame::GoAway { last_good, status } => put_words(&mut out, 7, &[*last_good, *status])?,
        Frame::WindowUpdate { stream_id, delta } => put_words(&mut out, 9, &[*stream_id, *delta])?,
        Frame::Unknown(_) => {}
    }
    Ok(out.freeze())
}

/// SYN_REPLY and HEADERS: a stream id, then the compressed header block.
fn put_headers(out: &mut BytesMut, kind: u16, stream_id: u32, fin: bool, block: &[u8]) -> Result<(), FrameError> {
    control(out, kind, u8::from(fin), 4 + block.len())?;
    out.put_u32(stream_id);
    out.put_slice(block);
    Ok(())
}

/// A control frame whose payload is a few 32-bit words.
fn put_words(out: &mut BytesMut, kind: u16, words: &[u32]) -> Result<(), FrameError> {
    control(out, kind, 0, 4 * words.len())?;
    for word in words {
        out.put_u32(*word);
    }
    Ok(())
}

fn put_settings(out: &mut BytesMut, entries: &[(u8, u32, u32)]) -> Result<(), FrameError> {
    control(out, 4, 0, 4 + 8 * entries.len())?;
    out.put_u32(entries.len() as u32);
    for (flags, id, value) in entries {
        out.put_u32((u32::from(*flags) << 24) | (id & 0xff_ffff));
        out.put_u32(*value);
    }
    Ok(())
}

fn check_len(len: usize) -> Result<(), FrameError> {
    if len > MAX_LENGTH {
        return Err(FrameError::TooLarge(len));
    }
    Ok(())
}

fn flags_len(flags: u8, len: usize) -> u32 {
    (u32::from(flags) << 24) | (len as u32 & 0xff_ffff)
}

fn control(out: &mut BytesMut, kind: u16, flags: u8, len: usize) -> Result<(), FrameError> {
    check_len(len)?;
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u32(flags_len(flags, len));
    Ok(())
}

/// The 8-byte header every frame starts with: returns (is_control,
/// first word, flags, payload length).
pub fn parse_prefix(prefix: [u8; 8]) -> (bool, u32, u8, usize) {
    let first = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let flags = prefix[4];
    let len = u32::from_be_bytes([0, prefix[5], prefix[6], prefix[7]]) as usize;
    (first & 0x8000_0000 != 0, first, flags, len)
}

/// Decode one frame from its 8-byte prefix and its payload.
pub fn decode(prefix: [u8; 8], payload: Bytes, decoder: &mut HeaderDecoder) -> Result<Frame, FrameError> {
    let (is_control, first, flags, _) = parse_prefix(prefix);
    if !is_control {
        return Ok(Frame::Data {
            stream_id: first & 0x7fff_ffff,
            fin: flags & FLAG_FIN != 0,
            data: payload,
        });
    }
    let mut p = &payload[..];
    let fin = flags & FLAG_FIN != 0;
    let frame = match (first & 0xffff) as u16 {
        1 => decode_syn_stream(p, flags, decoder)?,
        kind @ (2 | 8) => {
            let stream_id = take_u32(&mut p, "SYN_REPLY")? & 0x7fff_ffff;
            let headers = decoder.decode(p)?;
            if kind == 2 {
                Frame::SynReply {
                    stream_id,
                    fin,
                    headers,
                }
            } else {
                Frame::Headers {
                    stream_id,
                    fin,
                    headers,
                }
            }
        }
        3 => Frame::RstStream {
            stream_id: take_u32(&mut p, "RST_STREAM")? & 0x7fff_ffff,
            status: take_u32(&mut p, "RST_STREAM")?,
        },
        4 => decode_settings(p)?,
        6 => Frame::Ping(take_u32(&mut p, "PING")?),
        7 => Frame::GoAway {
            last_good: take_u32(&mut p, "GOAWAY")? & 0x7fff_ffff,
            status: take_u32(&mut p, "GOAWAY").unwrap_or(0),
        },
        9 => Frame::WindowUpdate {
            stream_id: take_u32(&mut p, "WINDOW_UPDATE")? & 0x7fff_ffff,
            delta: take_u32(&mut p, "WINDOW_UPDATE")? & 0x7fff_ffff,
        },
        other => Frame::Unknown(other),
    };
    Ok(frame)
}

fn decode_syn_stream(mut p: &[u8], flags: u8, decoder: &mut HeaderDecoder) -> Result<Frame, FrameError> {
    if p.len() < 10 {
        return Err(FrameError::Truncated("SYN_STREAM"));
    }
    let stream_id = p.get_u32() & 0x7fff_ffff;
    let associated = p.get_u32() & 0x7fff_ffff;
    let priority = p.get_u8() >> 5;
    p.advance(1);
    Ok(Frame::SynStream {
        stream_id,
        associated,
        priority,
        flags,
        headers: decoder.decode(p)?,
    })
}

fn decode_settings(mut p: &[u8]) -> Result<Frame, FrameError> {
    let count = take_u32(&mut p, "SETTINGS")?;
    let mut entries = Vec::new();
    for _ in 0..count {
        let id = take_u32(&mut p, "SETTINGS")?;
        let value = take_u32(&mut p, "SETTINGS")?;
        entries.push(((id >> 24) as u8, id & 0xff_ffff, value));
    }
    Ok(Frame::Settings(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: &Frame, enc: &mut HeaderEncoder, dec: &mut HeaderDecoder) -> Frame {
        let bytes = encode(frame, enc).unwrap();
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&bytes[..8]);
        let (_, _, _, len) = parse_prefix(prefix);
        assert_eq!(len, bytes.len() - 8, "length field covers the payload");
        decode(prefix, bytes.slice(8..), dec).unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), vec![v.to_string()]))
            .collect()
    }

    #[test]
    fn every_frame_type_survives_an_encode_decode_round_trip() {
        let (mut enc, mut dec) = (HeaderEncoder::new().unwrap(), HeaderDecoder::new());
        let frames = [
            Frame::Data {
                stream_id: 5,
                fin: true,
                data: Bytes::from_static(b"hello"),
            },
            Frame::Data {
                stream_id: 7,
                fin: false,
                data: Bytes::new(),
            },
            Frame::SynStream {
                stream_id: 1,
                associated: 0,
                priority: 0,
                flags: 0,
                headers: headers(&[("streamtype", "error")]),
            },
            Frame::SynReply {
                stream_id: 1,
                fin: false,
                headers: Headers::new(),
            },
            Frame::Headers {
                stream_id: 3,
                fin: true,
                headers: headers(&[("a", "b")]),
            },
            Frame::RstStream {
                stream_id: 9,
                status: RST_REFUSED_STREAM,
            },
            Frame::Settings(vec![(0, 7, 65536), (1, 4, 100)]),
            Frame::Ping(2),
            Frame::GoAway {
                last_good: 11,
                status: 0,
            },
            Frame::WindowUpdate {
                stream_id: 3,
                delta: 4096,
            },
        ];
        for frame in &frames {
            assert_eq!(&round_trip(frame, &mut enc, &mut dec), frame);
        }
    }

    #[test]
    fn header_blocks_share_one_zlib_stream_per_direction() {
        let (mut enc, mut dec) = (HeaderEncoder::new().unwrap(), HeaderDecoder::new());
        for i in 0..20 {
            let h = headers(&[("streamtype", "data"), ("port", "80"), ("requestid", &i.to_string())]);
            let frame = Frame::SynStream {
                stream_id: 2 * i + 1,
                associated: 0,
                priority: 0,
                flags: 0,
                headers: h,
            };
            assert_eq!(round_trip(&frame, &mut enc, &mut dec), frame);
        }
    }

    #[test]
    fn truncated_control_frames_are_errors_not_panics() {
        let mut dec = HeaderDecoder::new();
        let prefix = [0x80, 3, 0, 3, 0, 0, 0, 2];
        assert!(decode(prefix, Bytes::from_static(&[0, 1]), &mut dec).is_err());
        let syn = [0x80, 3, 0, 1, 0, 0, 0, 3];
        assert!(decode(syn, Bytes::from_static(&[0, 0, 1]), &mut dec).is_err());
    }
}
