//! CF time units, `"<unit> since <reference date>"`, spelled as archives spell them:
//! `days since 1950-01-01 00:00:00 UTC` (Argo), `hours since 2000-01-01T00:00:00Z`,
//! `seconds since 1970-01-01 00:00:00 +01:00`, `days since 2000-1-1 0:0:0`,
//! `hours since 1900-01-01 00:00:0.0`, `days since 2000-01`. What pandas parses for xarray:
//! unpadded fields, `T` or spaces between date and time, fractional seconds, and a zone
//! (`Z`, `UTC`, `GMT`, `+hh:mm`, `+hhmm`, `+hh`) converted to UTC.

use super::calendar::Label;
use super::CfError;

pub(crate) const NS_PER_DAY: i64 = 86_400_000_000_000;

/// A parsed `units` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeUnits {
    /// Nanoseconds per unit.
    pub unit_ns: i64,
    /// The reference date's label.
    pub reference: Label,
    /// Nanoseconds after midnight of `reference` in UTC: the time of day less the zone's
    /// offset (negative or beyond a day when the zone moves the instant to another date).
    pub reference_ns: i64,
}

/// Whether xarray takes `units` for time units (it tries any text that holds "since").
pub(crate) fn is_time_units(units: &str) -> bool {
    units.contains("since")
}

pub(crate) fn parse_time_units(units: &str) -> Result<TimeUnits, CfError> {
    // xarray's pattern `(.+) since (.+)`: the last " since " splits.
    let (unit, date) = units
        .rsplit_once(" since ")
        .ok_or("expected '<unit> since <date>'")?;
    let unit_ns = unit_ns(unit.trim())?;
    let (reference, reference_ns) = parse_reference(date.trim())?;
    Ok(TimeUnits {
        unit_ns,
        reference,
        reference_ns,
    })
}

fn unit_ns(unit: &str) -> Result<i64, CfError> {
    Ok(match unit.to_ascii_lowercase().as_str() {
        "days" | "day" | "d" => NS_PER_DAY,
        "hours" | "hour" | "hrs" | "hr" | "h" => 3_600_000_000_000,
        "minutes" | "minute" | "mins" | "min" => 60_000_000_000,
        "seconds" | "second" | "secs" | "sec" | "s" => 1_000_000_000,
        "milliseconds" | "millisecond" | "msecs" | "msec" | "ms" => 1_000_000,
        "microseconds" | "microsecond" | "usecs" | "usec" | "us" => 1_000,
        "nanoseconds" | "nanosecond" | "nsecs" | "nsec" | "ns" => 1,
        other => return Err(CfError::Rule(format!("unknown time unit '{other}'"))),
    })
}

/// The label and UTC time of day (ns) of a reference date.
fn parse_reference(text: &str) -> Result<(Label, i64), CfError> {
    let bad = |why: &str| CfError::Rule(format!("cannot read the reference date '{text}': {why}"));
    let date_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(text.len());
    let (date, rest) = text.split_at(date_end);
    let mut fields = date.split('-');
    let mut field = |name: &str, default: Option<i64>| -> Result<i64, CfError> {
        match fields.next() {
            Some(f) if !f.is_empty() && f.len() <= 9 => {
                f.parse().map_err(|_| bad(&format!("bad {name}")))
            }
            None => default.ok_or_else(|| bad(&format!("no {name}"))),
            Some(_) => Err(bad(&format!("bad {name}"))),
        }
    };
    let year = field("year", None)?;
    let month = field("month", Some(1))?;
    let day = field("day", Some(1))?;
    if fields.next().is_some() {
        return Err(bad("too many date fields"));
    }
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return Err(bad("month or day out of range"));
    }
    let reference = Label {
        year,
        month: month as u32,
        day: day as u32,
    };

    let rest = rest.trim_start();
    let rest = rest.strip_prefix('T').unwrap_or(rest).trim_start();
    let time_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
        .unwrap_or(rest.len());
    let (time, zone) = rest.split_at(time_end);
    let time_ns = if time.is_empty() {
        0
    } else {
        parse_time_of_day(time).ok_or_else(|| bad("bad time of day"))?
    };
    let offset_ns = parse_zone(zone.trim()).ok_or_else(|| bad("bad time zone"))?;
    Ok((reference, time_ns - offset_ns))
}

/// `h`, `h:m`, `h:m:s`, `h:m:s.fff`: nanoseconds after midnight.
fn parse_time_of_day(text: &str) -> Option<i64> {
    let mut parts = text.split(':');
    let hours: i64 = small(parts.next()?)?;
    let minutes: i64 = parts.next().map_or(Some(0), small)?;
    let seconds = parts.next().unwrap_or("0");
    if parts.next().is_some() || hours > 24 || minutes > 59 {
        return None;
    }
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    let whole: i64 = small(whole)?;
    if whole > 60 || fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let fraction_ns: i64 = if fraction.is_empty() {
        0
    } else {
        fraction.parse::<i64>().ok()? * 10i64.pow(9 - fraction.len() as u32)
    };
    Some(((hours * 60 + minutes) * 60 + whole) * 1_000_000_000 + fraction_ns)
}

fn small(text: &str) -> Option<i64> {
    (!text.is_empty() && text.len() <= 2 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// The zone's offset east of UTC in nanoseconds.
fn parse_zone(zone: &str) -> Option<i64> {
    if zone.is_empty()
        || ["Z", "UTC", "GMT"]
            .iter()
            .any(|z| zone.eq_ignore_ascii_case(z))
    {
        return Some(0);
    }
    let (sign, digits) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let digits: String = digits.chars().filter(|&c| c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (hours, minutes) = match digits.len() {
        1 | 2 => (digits.parse::<i64>().ok()?, 0),
        3 => (digits[..1].parse().ok()?, digits[1..].parse().ok()?),
        4 => (digits[..2].parse().ok()?, digits[2..].parse().ok()?),
        _ => return None,
    };
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some(sign * (hours * 60 + minutes) * 60_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(text: &str) -> (i64, String, i64) {
        let u = parse_time_units(text).unwrap();
        (u.unit_ns, u.reference.to_string(), u.reference_ns)
    }

    #[test]
    fn spellings_in_the_wild() {
        const H: i64 = 3_600_000_000_000;
        const MIN: i64 = 60_000_000_000;
        for (text, want) in [
            (
                "days since 1950-01-01 00:00:00 UTC",
                (NS_PER_DAY, "1950-01-01", 0),
            ),
            ("hours since 2000-01-01T00:00:00Z", (H, "2000-01-01", 0)),
            (
                "seconds since 1970-01-01 00:00:00 +01:00",
                (1_000_000_000, "1970-01-01", -H),
            ),
            (
                "minutes since 2000-01-01T06:00:00-05:30",
                (MIN, "2000-01-01", 11 * H + 30 * MIN),
            ),
            ("days since 2000-1-1 0:0:0", (NS_PER_DAY, "2000-01-01", 0)),
            ("hours since 1900-01-01 00:00:0.0", (H, "1900-01-01", 0)),
            (
                "seconds since 1970-01-01 00:00:00 GMT",
                (1_000_000_000, "1970-01-01", 0),
            ),
            (
                "days since 2000-01-01 12",
                (NS_PER_DAY, "2000-01-01", 12 * H),
            ),
            ("days since 2000-01", (NS_PER_DAY, "2000-01-01", 0)),
            ("Days since 1-1-1", (NS_PER_DAY, "0001-01-01", 0)),
            (
                "milliseconds since 2000-01-01 00:00:01.25",
                (1_000_000, "2000-01-01", 1_250_000_000),
            ),
            (
                "hours since 2000-01-01 00:00 +0530",
                (H, "2000-01-01", -(5 * H + 30 * MIN)),
            ),
        ] {
            assert_eq!(units(text), (want.0, want.1.to_string(), want.2), "{text}");
        }
    }

    #[test]
    fn what_is_not_a_date_is_an_error_naming_it() {
        for text in [
            "days since yesterday",
            "days since 2000-13-01",
            "days since 2000-01-01 25:00",
            "days since 2000-01-01 00:00:00 PST8",
            "fortnights since 2000-01-01",
            "days after 2000-01-01",
        ] {
            assert!(parse_time_units(text).is_err(), "{text}");
        }
        let err = parse_time_units("days since 2000-01-01 U C")
            .unwrap_err()
            .to_string();
        assert!(err.contains("'2000-01-01 U C'"), "{err}");
    }
}
