//! Times as people read them: "in 14 min", "3 h ago", with the exact UTC
//! time on hover and for machines (`<time datetime=… title=…>`).

use chrono::{DateTime, Utc};

/// `t` relative to `now`, as a `<time>` element.
pub fn time(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let exact = t.format("%Y-%m-%d %H:%M:%S UTC");
    format!(
        "<time datetime=\"{}\" title=\"{exact}\">{}</time>",
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        relative(t, now)
    )
}

/// "in 14 min", "3 h ago", "just now", "in 2 days".
pub fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (t - now).num_seconds();
    let span = secs.unsigned_abs();
    if span < 45 {
        return "just now".into();
    }
    let amount = match span {
        s if s < 3600 => format!("{} min", s.div_ceil(60).clamp(1, 59)),
        s if s < 48 * 3600 => format!("{} h", (s + 1800) / 3600),
        s => format!("{} days", (s + 43_200) / 86_400),
    };
    if secs > 0 {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    #[test]
    fn times_read_as_minutes_hours_or_days_from_now_with_the_exact_utc_time_on_hover() {
        let now = DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z").unwrap().to_utc();
        let at = |secs| relative(now + TimeDelta::seconds(secs), now);
        assert_eq!(at(14 * 60), "in 14 min");
        assert_eq!(at(-3 * 3600), "3 h ago");
        assert_eq!(at(10), "just now");
        assert_eq!(at(-90), "2 min ago");
        assert_eq!(at(12 * 3600 - 5), "in 12 h");
        assert_eq!(at(3 * 86_400), "in 3 days");
        assert_eq!(
            time(now + TimeDelta::minutes(14), now),
            "<time datetime=\"2026-03-01T12:14:00Z\" title=\"2026-03-01 12:14:00 UTC\">in 14 min</time>"
        );
    }
}
