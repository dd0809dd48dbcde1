//! UTC calendar text from unix seconds, without a clock or a date crate: the minute buckets
//! of the request counters must sort and compare as SQLite's own `strftime` text does.

/// `YYYY-MM-DDTHH:MM` (UTC) for `unix_seconds`, the prefix of SQLite's
/// `strftime('%Y-%m-%dT%H:%M:%fZ')` text, so buckets and stored times compare as strings.
pub fn iso_minute(unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(86_400);
    let secs = unix_seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (h, min) = ((secs / 3600) as u32, ((secs % 3600) / 60) as u32);
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}");
    }
    // digits by hand: every delivery counts into a minute's bucket, and `format!` was 1 % of
    // a duplicate's CPU (bench/README.md, "The first request")
    let mut out = String::with_capacity(16);
    let mut two = |sep: Option<char>, n: u32| {
        if let Some(sep) = sep {
            out.push(sep);
        }
        out.push(char::from(b'0' + (n / 10) as u8));
        out.push(char::from(b'0' + (n % 10) as u8));
    };
    two(None, y as u32 / 100);
    two(None, y as u32 % 100);
    two(Some('-'), m);
    two(Some('-'), d);
    two(Some('T'), h);
    two(Some(':'), min);
    out
}

/// `YYYY-MM-DDTHH:MM:SS.000Z` (UTC) for `unix_seconds`: a time as SQLite's `now!()` writes it.
pub fn iso_timestamp(unix_seconds: i64) -> String {
    format!(
        "{}:{:02}.000Z",
        iso_minute(unix_seconds),
        unix_seconds.rem_euclid(60)
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Unix seconds of SQLite's `YYYY-MM-DDTHH:MM:SS.sssZ` text.
pub fn unix_of_iso(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    // days from civil (Howard Hinnant)
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// An ISO-8601 time as the admin API takes it (`2026-11-30`, `2026-11-30T04:12`,
/// `2026-11-30T04:12:00`, with optional fraction and `Z` or `±HH:MM`, HH at most 14, as real
/// offsets are), trimmed; `None` if it is not one. SQLite's `strftime` turns it into the
/// stored form, and reads no offset past ±14:59 (it answers NULL, which would match nothing:
/// `paymos-sim/tests/times.rs` holds the two together).
pub fn normalize_iso8601(s: &str) -> Option<String> {
    // RFC 3339 lets `T` and `Z` be written in lower case; SQLite is given them upper
    let upper = s.trim().replace('t', "T").replace('z', "Z");
    let s = upper.as_str();
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    let field = |r: std::ops::Range<usize>| s.get(r).and_then(|v| v.parse::<u32>().ok());
    let in_range = |r: std::ops::Range<usize>, lo: u32, hi: u32| {
        field(r).is_some_and(|v| (lo..=hi).contains(&v))
    };
    if b.len() < 10 || !digits(0..4) || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (Some(year), Some(month), Some(day)) = (field(0..4), field(5..7), field(8..10)) else {
        return None;
    };
    // a day the month has: 2026-02-30 is refused, not read by SQLite as a day in March
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if !(1..=days).contains(&day) {
        return None;
    }
    if b.len() == 10 {
        return Some(s.to_string());
    }
    if b[10] != b'T' && b[10] != b' ' || b.len() < 16 || b[13] != b':' {
        return None;
    }
    if !in_range(11..13, 0, 23) || !in_range(14..16, 0, 59) {
        return None;
    }
    let mut i = 16;
    if b.get(i) == Some(&b':') {
        if !in_range(17..19, 0, 59) {
            return None;
        }
        i = 19;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start {
                return None;
            }
        }
    }
    let zone = &s[i..];
    let zone_ok = zone.is_empty()
        || zone == "Z"
        || (zone.len() == 6
            && matches!(zone.as_bytes()[0], b'+' | b'-')
            && zone.as_bytes()[3] == b':'
            && in_range(i + 1..i + 3, 0, 14)
            && in_range(i + 4..i + 6, 0, 59));
    zone_ok.then(|| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::{iso_minute, iso_timestamp, normalize_iso8601, unix_of_iso};

    #[test]
    fn iso8601_inputs() {
        for ok in [
            "2026-11-30",
            "2026-11-30T04:12",
            "2026-11-30T04:12:05",
            "2026-11-30T04:12:05.123Z",
            "2026-11-30T04:12:05+02:00",
            " 2026-11-30T04:12Z ",
            "2026-11-30t04:12:05z",
            "2028-02-29",
            "2000-02-29T12:00Z",
            "2026-12-31",
        ] {
            assert!(normalize_iso8601(ok).is_some(), "{ok}");
        }
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-11-30T25:00",
            "2026-11-30T04:12:05.Z",
            "2026-11-30T04:12+2",
            "2026-11-30T04:12+15:00",
            "1764450000",
            "2026-02-30",
            "2026-02-29",
            "2100-02-29T00:00Z",
            "2026-04-31",
        ] {
            assert_eq!(normalize_iso8601(bad), None, "{bad}");
        }
        // as SQLite reads them
        for (given, kept) in [
            ("2026-11-30t04:12z", "2026-11-30T04:12Z"),
            (" 2026-11-30 04:12+01:00", "2026-11-30 04:12+01:00"),
        ] {
            assert_eq!(normalize_iso8601(given).as_deref(), Some(kept));
        }
    }

    #[test]
    fn timestamps_read_back() {
        assert_eq!(iso_timestamp(1_764_450_007), "2025-11-29T21:00:07.000Z");
        assert_eq!(
            unix_of_iso(&iso_timestamp(1_764_450_007)),
            Some(1_764_450_007)
        );
    }

    #[test]
    fn iso_back_to_unix() {
        for t in [0i64, 951_782_400, 1_764_450_000, 1_798_761_599] {
            let text = format!("{}:{:02}.000Z", iso_minute(t), t.rem_euclid(60));
            assert_eq!(unix_of_iso(&text), Some(t), "{text}");
        }
        assert_eq!(unix_of_iso("2026-11"), None);
    }

    #[test]
    fn known_instants() {
        assert_eq!(iso_minute(0), "1970-01-01T00:00");
        assert_eq!(iso_minute(1_764_450_000), "2025-11-29T21:00");
        assert_eq!(iso_minute(951_782_400), "2000-02-29T00:00");
        assert_eq!(iso_minute(1_798_761_599), "2026-12-31T23:59");
        assert_eq!(iso_minute(-1), "1969-12-31T23:59");
    }

    #[test]
    fn digits_by_hand_are_formats_digits() {
        let reference = |t: i64| {
            let (y, m, d) = super::civil_from_days(t.div_euclid(86_400));
            let secs = t.rem_euclid(86_400);
            format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}",
                secs / 3600,
                (secs % 3600) / 60
            )
        };
        // from year 0 to past 9999 (the fallback), in uneven steps through every field
        let (first, last) = (-62_167_219_200_i64, 253_402_300_800 + 86_400 * 400);
        let mut t = first - 86_400;
        while t < last {
            assert_eq!(iso_minute(t), reference(t), "{t}");
            t += 7_777_777 + (t & 0xfff);
        }
        for t in [first - 60, first, 253_402_300_740, 253_402_300_800] {
            assert_eq!(iso_minute(t), reference(t), "{t}");
        }
    }

    #[test]
    fn sorts_as_time() {
        let a = iso_minute(1_764_450_000);
        let b = iso_minute(1_764_450_060);
        assert!(a < b);
        assert!(a.as_str() < "total", "minute buckets sort before 'total'");
    }
}
