//! A row's timestamps as text, written on the stack byte for byte as
//! chrono writes them. Every row carries two, written into its JSON (the
//! spool's line, the chain's hashed bytes) and into the store; chrono's
//! general formatter, through `core::fmt`, cost several times this on
//! every request. Years outside 0 to 9999 and leap seconds are left to
//! chrono itself.

use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};
use serde::Serializer;

/// `YYYY-MM-DDTHH:MM:SS.fffffffffZ`, the longest text written here.
const LONGEST: usize = 30;

/// A timestamp's RFC 3339 text (UTC, `Z`).
pub enum Stamp {
    /// Years 0 to 9999, no leap second.
    Fixed {
        /// The text, in its first `len` bytes.
        text: [u8; LONGEST],
        /// Its length.
        len: usize,
    },
    /// Anything else, as chrono writes it.
    Other(String),
}

/// How many digits of the second's fraction.
#[derive(Debug, Clone, Copy)]
enum Fraction {
    /// Always six: fixed width, so that text order is time order.
    Micros,
    /// None, three, six or nine, the fewest that hold it exactly.
    AutoSi,
}

impl Stamp {
    /// `t.to_rfc3339_opts(SecondsFormat::Micros, true)`: how the SQLite
    /// store keeps times.
    pub fn micros(t: &DateTime<Utc>) -> Stamp {
        Stamp::new(t, Fraction::Micros)
    }

    /// `t.to_rfc3339_opts(SecondsFormat::AutoSi, true)`: what chrono's
    /// `Serialize` writes, so what a row's JSON has always held.
    pub fn auto_si(t: &DateTime<Utc>) -> Stamp {
        Stamp::new(t, Fraction::AutoSi)
    }

    fn new(t: &DateTime<Utc>, fraction: Fraction) -> Stamp {
        // Each of `DateTime`'s calendar fields converts from UTC again; the
        // naive time is converted once.
        let n = t.naive_utc();
        let nanos = n.nanosecond();
        if !(0..=9999).contains(&n.year()) || nanos >= 1_000_000_000 {
            let format = match fraction {
                Fraction::Micros => SecondsFormat::Micros,
                Fraction::AutoSi => SecondsFormat::AutoSi,
            };
            return Stamp::Other(t.to_rfc3339_opts(format, true));
        }
        let (fraction, digits) = match fraction {
            Fraction::Micros => (nanos / 1_000, 6),
            Fraction::AutoSi if nanos == 0 => (0, 0),
            Fraction::AutoSi if nanos.is_multiple_of(1_000_000) => (nanos / 1_000_000, 3),
            Fraction::AutoSi if nanos.is_multiple_of(1_000) => (nanos / 1_000, 6),
            Fraction::AutoSi => (nanos, 9),
        };
        let mut text = [0u8; LONGEST];
        text[..19].copy_from_slice(b"0000-00-00T00:00:00");
        put(&mut text[0..4], n.year() as u32);
        put(&mut text[5..7], n.month());
        put(&mut text[8..10], n.day());
        put(&mut text[11..13], n.hour());
        put(&mut text[14..16], n.minute());
        put(&mut text[17..19], n.second());
        let mut len = 19;
        if digits > 0 {
            text[19] = b'.';
            put(&mut text[20..20 + digits], fraction);
            len = 20 + digits;
        }
        text[len] = b'Z';
        Stamp::Fixed { text, len: len + 1 }
    }

    /// The text's bytes (ASCII), without `as_str`'s check.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Stamp::Fixed { text, len } => &text[..*len],
            Stamp::Other(text) => text.as_bytes(),
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        match self {
            // Only ASCII digits and separators were written.
            Stamp::Fixed { .. } => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            Stamp::Other(text) => text,
        }
    }
}

/// `n`'s last `digits.len()` decimal digits, zero-padded.
fn put(digits: &mut [u8], mut n: u32) {
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// Serialise a timestamp as chrono does (`#[serde(serialize_with)]`).
pub fn serialize<S: Serializer>(t: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(Stamp::auto_si(t).as_str())
}

/// Any time from year -300 to 10300, with nanoseconds that reach each
/// width of the fraction and the leap second: for the tests of what writes
/// times.
#[cfg(test)]
pub(crate) fn any_time() -> impl proptest::strategy::Strategy<Value = DateTime<Utc>> {
    use proptest::prelude::*;
    let seconds = -71_700_000_000i64..263_000_000_000i64;
    let nanos = prop_oneof![
        Just(0u32),
        (0..1_000u32).prop_map(|ms| ms * 1_000_000),
        (0..1_000_000u32).prop_map(|us| us * 1_000),
        0..1_000_000_000u32,
        1_000_000_000..2_000_000_000u32,
    ];
    (seconds, nanos).prop_filter_map("not a valid time", |(s, n)| DateTime::from_timestamp(s, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_stamp_is_the_text_chrono_writes(t in any_time()) {
            let (micros, auto_si) = (Stamp::micros(&t), Stamp::auto_si(&t));
            prop_assert_eq!(micros.as_str(), t.to_rfc3339_opts(SecondsFormat::Micros, true));
            prop_assert_eq!(auto_si.as_str(), t.to_rfc3339_opts(SecondsFormat::AutoSi, true));
        }

        #[test]
        fn a_serialised_stamp_is_the_json_chrono_writes(t in any_time()) {
            let mut ours = Vec::new();
            serialize(&t, &mut serde_json::Serializer::new(&mut ours)).unwrap();
            prop_assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(&t).unwrap());
        }
    }

    #[test]
    fn each_width_of_the_fraction_and_the_fallbacks_are_written() {
        let at = |s: i64, n: u32| DateTime::from_timestamp(s, n).unwrap();
        let cases = [
            (at(0, 0), "1970-01-01T00:00:00Z"),
            (at(1, 5_000_000), "1970-01-01T00:00:01.005Z"),
            (at(1, 5_000), "1970-01-01T00:00:01.000005Z"),
            (at(1, 5), "1970-01-01T00:00:01.000000005Z"),
            (at(59, 1_500_000_000), "1970-01-01T00:00:60.500Z"),
            (at(253_402_300_800, 0), "+10000-01-01T00:00:00Z"),
        ];
        for (t, text) in cases {
            assert_eq!(Stamp::auto_si(&t).as_str(), text);
        }
        assert!(matches!(Stamp::auto_si(&at(1, 5)), Stamp::Fixed { .. }));
        assert!(matches!(Stamp::auto_si(&at(253_402_300_800, 0)), Stamp::Other(_)));
        assert_eq!(Stamp::micros(&at(1, 5_000_000)).as_str(), "1970-01-01T00:00:01.005000Z");
    }
}
