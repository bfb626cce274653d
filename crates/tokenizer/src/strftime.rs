//! `strftime_now` for chat templates: formats the current UTC time with C strftime specifiers.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// The current time (UTC) formatted with `format`.
pub(crate) fn format_now(format: &str) -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    format_unix(secs, format)
}

/// A broken-down UTC time.
struct Tm {
    year: i64,
    month: usize, // 1..=12
    day: i64,
    yday: i64,   // 1..=366
    wday: usize, // 0 = Sunday
    hour: i64,
    minute: i64,
    second: i64,
}

impl Tm {
    fn from_unix(secs: i64) -> Self {
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        let yday = (1..month).map(|m| month_len(year, m)).sum::<i64>() + day;
        Self {
            year,
            month,
            day,
            yday,
            wday: (days + 4).rem_euclid(7) as usize, // 1970-01-01 was a Thursday
            hour: sod / 3600,
            minute: sod % 3600 / 60,
            second: sod % 60,
        }
    }
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn month_len(year: i64, month: usize) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// (year, month, day) of a day count since 1970-01-01, in the proleptic Gregorian calendar.
/// Works in 400-year cycles counted from 0000-03-01, so that leap days fall at a cycle's end.
fn civil_from_days(days: i64) -> (i64, usize, i64) {
    let from_march_0000 = days + 719_468;
    let cycle = from_march_0000.div_euclid(146_097);
    let day_of_cycle = from_march_0000.rem_euclid(146_097);
    let year_of_cycle =
        (day_of_cycle - day_of_cycle / 1460 + day_of_cycle / 36_524 - day_of_cycle / 146_096) / 365;
    let day_of_year =
        day_of_cycle - (365 * year_of_cycle + year_of_cycle / 4 - year_of_cycle / 100);
    let march_month = (5 * day_of_year + 2) / 153; // 0 = March
    let day = day_of_year - (153 * march_month + 2) / 5 + 1;
    let month = if march_month < 10 {
        march_month + 3
    } else {
        march_month - 9
    };
    let year = year_of_cycle + cycle * 400 + i64::from(month <= 2);
    (year, month as usize, day)
}

/// Formats `secs` (Unix time, UTC) like C's strftime in the C locale. `%-d` style flags drop
/// padding; unknown specifiers are copied through.
pub(crate) fn format_unix(secs: i64, format: &str) -> String {
    let tm = Tm::from_unix(secs);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = chars.next();
        let no_pad = spec == Some('-');
        if no_pad {
            spec = chars.next();
        }
        let num = |out: &mut String, v: i64, width: usize| {
            let _ = if no_pad {
                write!(out, "{v}")
            } else {
                write!(out, "{v:0width$}")
            };
        };
        let hour12 = if tm.hour % 12 == 0 { 12 } else { tm.hour % 12 };
        let month_name = MONTHS[tm.month - 1];
        let day_name = WEEKDAYS[tm.wday];
        match spec {
            Some('Y') => num(&mut out, tm.year, 4),
            Some('y') => num(&mut out, tm.year.rem_euclid(100), 2),
            Some('m') => num(&mut out, tm.month as i64, 2),
            Some('d') => num(&mut out, tm.day, 2),
            Some('e') => {
                let _ = write!(out, "{:2}", tm.day);
            }
            Some('j') => num(&mut out, tm.yday, 3),
            Some('H') => num(&mut out, tm.hour, 2),
            Some('I') => num(&mut out, hour12, 2),
            Some('M') => num(&mut out, tm.minute, 2),
            Some('S') => num(&mut out, tm.second, 2),
            Some('p') => out.push_str(if tm.hour < 12 { "AM" } else { "PM" }),
            Some('B') => out.push_str(month_name),
            Some('b' | 'h') => out.push_str(&month_name[..3]),
            Some('A') => out.push_str(day_name),
            Some('a') => out.push_str(&day_name[..3]),
            Some('u') => num(&mut out, if tm.wday == 0 { 7 } else { tm.wday as i64 }, 1),
            Some('w') => num(&mut out, tm.wday as i64, 1),
            Some('F') => out.push_str(&format_unix(secs, "%Y-%m-%d")),
            Some('T') => out.push_str(&format_unix(secs, "%H:%M:%S")),
            Some('D') => out.push_str(&format_unix(secs, "%m/%d/%y")),
            Some('c') => out.push_str(&format_unix(secs, "%a %b %e %H:%M:%S %Y")),
            Some('Z') => out.push_str("UTC"),
            Some('z') => out.push_str("+0000"),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                if no_pad {
                    out.push('-');
                }
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::format_unix;

    #[test]
    fn formats_known_instants() {
        // 2024-02-29 13:05:09 UTC, a Thursday, day 60 of a leap year.
        let t = 1_709_211_909;
        assert_eq!(format_unix(t, "%Y-%m-%d %H:%M:%S"), "2024-02-29 13:05:09");
        assert_eq!(format_unix(t, "%d %b %Y"), "29 Feb 2024");
        assert_eq!(
            format_unix(t, "%A %B %-d, %I %p, day %j"),
            "Thursday February 29, 01 PM, day 060"
        );
        assert_eq!(format_unix(0, "%c %Z %%"), "Thu Jan  1 00:00:00 1970 UTC %");
        assert_eq!(format_unix(-86_400, "%F"), "1969-12-31");
        assert_eq!(format_unix(951_782_400, "%F %a"), "2000-02-29 Tue");
        assert_eq!(format_unix(0, "%Q%"), "%Q%");
    }
}
