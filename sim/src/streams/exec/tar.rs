//! Just enough tar for `kubectl cp`: writing ustar archives (`tar cf -`)
//! and reading what Go's `archive/tar` writes (`tar xf -`): ustar headers,
//! PAX `path` records and GNU long names.

use bytes::Bytes;

const BLOCK: usize = 512;

/// One archive member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Member name (relative, `/`-separated; directories without trailing `/`).
    pub name: String,
    /// Directory or regular file.
    pub kind: EntryKind,
    /// Permission bits.
    pub mode: u32,
}

/// What a member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A regular file and its contents.
    File(Bytes),
    /// A symlink, hard link, device or other member `tar x` here skips.
    Other,
}

/// A malformed archive.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TarError {
    /// The archive ends inside a header or member.
    #[error("Unexpected EOF in archive")]
    UnexpectedEof,
    /// A header's checksum does not match.
    #[error("This does not look like a tar archive")]
    BadHeader,
}

/// Write `entries` as a ustar archive with its two end-of-archive blocks.
/// `mtime` is the modification time stamped on every member.
pub fn write(entries: &[Entry], mtime: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries {
        let (typeflag, data): (u8, &[u8]) = match &entry.kind {
            EntryKind::Dir => (b'5', &[]),
            EntryKind::File(data) => (b'0', data),
            EntryKind::Other => continue,
        };
        let mut name = entry.name.clone();
        if typeflag == b'5' {
            name.push('/');
        }
        if name.len() > 100 {
            // GNU long-name member: what GNU tar writes for long paths.
            let mut long = name.clone().into_bytes();
            long.push(0);
            out.extend(header("././@LongLink", b'L', 0o644, long.len() as u64, mtime));
            pad_into(&mut out, &long);
        }
        out.extend(header(&name, typeflag, entry.mode, data.len() as u64, mtime));
        pad_into(&mut out, data);
    }
    out.extend([0u8; 2 * BLOCK]);
    out
}

fn pad_into(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(data);
    let rem = data.len() % BLOCK;
    if rem != 0 {
        out.extend(std::iter::repeat_n(0u8, BLOCK - rem));
    }
}

fn octal(field: &mut [u8], value: u64) {
    let width = field.len() - 1;
    let digits = format!("{value:0width$o}");
    let start = digits.len().saturating_sub(width);
    field[..width].copy_from_slice(&digits.as_bytes()[start..]);
    field[width] = 0;
}

fn header(name: &str, typeflag: u8, mode: u32, size: u64, mtime: u64) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    let name = name.as_bytes();
    let n = name.len().min(100);
    h[..n].copy_from_slice(&name[..n]);
    octal(&mut h[100..108], u64::from(mode & 0o7777));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], mtime);
    h[156] = typeflag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[265..269].copy_from_slice(b"root");
    h[297..301].copy_from_slice(b"root");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    octal(&mut h[148..155], u64::from(sum));
    h[155] = b' ';
    h
}

fn parse_number(field: &[u8]) -> u64 {
    // Base-256 (high bit set) for values octal cannot hold.
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        return field[1..]
            .iter()
            .fold(u64::from(field[0] & 0x7f), |acc, &b| (acc << 8) | u64::from(b));
    }
    let text: String = field
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .filter(|c| !c.is_whitespace())
        .collect();
    u64::from_str_radix(&text, 8).unwrap_or(0)
}

fn cstr(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn checksum_ok(h: &[u8]) -> bool {
    let stored = parse_number(&h[148..156]);
    let sum: u64 = h
        .iter()
        .enumerate()
        .map(|(i, &b)| if (148..156).contains(&i) { 32 } else { u64::from(b) })
        .sum();
    stored == sum
}

/// The `path` record of a PAX extended header, if any.
fn pax_path(data: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(data);
    text.lines().find_map(|record| {
        let (_, kv) = record.split_once(' ')?;
        kv.strip_prefix("path=").map(str::to_string)
    })
}

/// Read every member of `archive`. Names lose leading `/` and `./`.
pub fn read(archive: &[u8]) -> Result<Vec<Entry>, TarError> {
    let mut entries = Vec::new();
    let mut pos = 0;
    let mut long_name: Option<String> = None;
    while pos + BLOCK <= archive.len() {
        let h = &archive[pos..pos + BLOCK];
        pos += BLOCK;
        if h.iter().all(|&b| b == 0) {
            return Ok(entries);
        }
        if !checksum_ok(h) {
            return Err(TarError::BadHeader);
        }
        let size = parse_number(&h[124..136]) as usize;
        let padded = size.div_ceil(BLOCK) * BLOCK;
        if pos + size > archive.len() {
            return Err(TarError::UnexpectedEof);
        }
        let data = &archive[pos..pos + size];
        pos = (pos + padded).min(archive.len());
        let typeflag = h[156];
        match typeflag {
            b'L' => long_name = Some(cstr(data)),
            b'x' => long_name = pax_path(data).or(long_name),
            b'g' => {}
            _ => entries.extend(member(h, data, long_name.take())),
        }
    }
    // Go's reader accepts an archive without end blocks; so do we.
    Ok(entries)
}

/// The member a regular header describes, named by the long name before
/// it if there was one, else by the ustar prefix and name; `None` for the
/// archive's root.
fn member(h: &[u8], data: &[u8], long_name: Option<String>) -> Option<Entry> {
    let mut name = cstr(&h[..100]);
    if &h[257..262] == b"ustar" && h[345] != 0 {
        name = format!("{}/{}", cstr(&h[345..500]), name);
    }
    let name = long_name.unwrap_or(name);
    let name = name
        .trim_start_matches("./")
        .trim_start_matches('/')
        .trim_end_matches('/');
    let kind = match h[156] {
        b'0' | 0 | b'7' => EntryKind::File(Bytes::copy_from_slice(data)),
        b'5' => EntryKind::Dir,
        _ => EntryKind::Other,
    };
    let mode = parse_number(&h[100..108]) as u32;
    if name.is_empty() {
        return None;
    }
    Some(Entry {
        name: name.to_string(),
        kind,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, data: &'static [u8]) -> Entry {
        Entry {
            name: name.into(),
            kind: EntryKind::File(Bytes::from_static(data)),
            mode: 0o644,
        }
    }

    #[test]
    fn archives_round_trip_with_dirs_files_and_long_names() {
        let long = format!("deep/{}", "n".repeat(150));
        let entries = vec![
            Entry {
                name: "tmp/dir".into(),
                kind: EntryKind::Dir,
                mode: 0o755,
            },
            file("tmp/dir/a.txt", b"hello\n"),
            file(&long, b""),
            file("tmp/dir/block", &[7u8; 512]),
        ];
        let archive = write(&entries, 1_700_000_000);
        assert_eq!(archive.len() % BLOCK, 0);
        assert_eq!(read(&archive).unwrap(), entries);
    }

    #[test]
    fn headers_carry_ustar_magic_and_a_valid_checksum() {
        let archive = write(&[file("x", b"1")], 0);
        assert_eq!(&archive[257..263], b"ustar\0");
        assert!(checksum_ok(&archive[..BLOCK]));
        assert_eq!(parse_number(&archive[124..136]), 1);
    }

    #[test]
    fn pax_path_records_override_the_header_name() {
        let mut archive = Vec::new();
        let record = b"30 path=a/very/long/name.txt\n";
        archive.extend(header("PaxHeaders/x", b'x', 0o644, record.len() as u64, 0));
        pad_into(&mut archive, record);
        archive.extend(header("short", b'0', 0o644, 2, 0));
        pad_into(&mut archive, b"ok");
        let entries = read(&archive).unwrap();
        assert_eq!(entries, vec![file("a/very/long/name.txt", b"ok")]);
    }

    #[test]
    fn corrupt_or_truncated_archives_are_errors() {
        let mut archive = write(&[file("x", b"data")], 0);
        archive[0] ^= 1;
        assert_eq!(read(&archive), Err(TarError::BadHeader));
        let archive = write(&[file("x", &[1u8; 600])], 0);
        assert_eq!(read(&archive[..BLOCK + 100]), Err(TarError::UnexpectedEof));
    }
}
