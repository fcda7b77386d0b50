//! Human durations exactly as kubectl and kube-apiserver's printers write
//! them (`k8s.io/apimachinery/pkg/util/duration`).

use chrono::{DateTime, Utc};
use serde_json::Value;

/// `HumanDuration`: `45s`, `3m20s`, `15m`, `5h30m`, `20h`, `3d4h`, `20d`,
/// `2y30d`, `9y`; `<invalid>` for more than a second in the future.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_remainder(minutes, "m", seconds % 60, "s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return with_remainder(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return with_remainder(hours / 24, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return with_remainder(hours / 24 / 365, "y", (hours / 24) % 365, "d");
    }
    format!("{}y", hours / 24 / 365)
}

/// `3m` or `3m20s`: the smaller unit only when it is not zero.
fn with_remainder(big: i64, big_unit: &str, small: i64, small_unit: &str) -> String {
    if small == 0 {
        format!("{big}{big_unit}")
    } else {
        format!("{big}{big_unit}{small}{small_unit}")
    }
}

/// Parse an RFC 3339 timestamp field (`creationTimestamp`, `eventTime`).
pub fn timestamp(value: &Value) -> Option<DateTime<Utc>> {
    let text = value.as_str()?;
    DateTime::parse_from_rfc3339(text).ok().map(|t| t.with_timezone(&Utc))
}

/// `translateTimestampSince`: the age of `value`, `<unknown>` when absent.
pub fn since(value: &Value, now: DateTime<Utc>) -> String {
    match timestamp(value) {
        Some(t) => human_duration((now - t).num_seconds()),
        None => "<unknown>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 30 * 60, "5h30m"),
            (20 * 3600, "20h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (2 * 86400, "2d"),
            (20 * 86400, "20d"),
            (2 * 365 * 86400 + 30 * 86400, "2y30d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human_duration(seconds), expected, "{seconds}s");
        }
    }

    #[test]
    fn a_missing_timestamp_is_unknown() {
        let now = Utc::now();
        assert_eq!(since(&Value::Null, now), "<unknown>");
        assert_eq!(since(&Value::from("not a time"), now), "<unknown>");
        let five_minutes_ago = (now - chrono::Duration::minutes(5)).to_rfc3339();
        assert_eq!(since(&Value::from(five_minutes_ago), now), "5m");
    }
}
