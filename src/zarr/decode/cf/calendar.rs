//! CF calendars: day numbers of date labels in each calendar, and the Gregorian date a label
//! names. Non-standard calendars (CMIP's `noleap`, `360_day`, ...) decode to Timestamps of their
//! labels, so a `noleap` date 2000-03-01 reads as the Gregorian 2000-03-01 (durations across a
//! 29 February differ from the calendar's). cftime's rules, which xarray uses; there is no
//! Apache-licensed Rust port of cftime, and the arithmetic is this file.

/// The calendars of the CF conventions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Calendar {
    /// `standard`, `gregorian`, `proleptic_gregorian`: read as the proleptic Gregorian calendar
    /// (as pandas does; cftime's `standard` switches to Julian before 1582-10-15).
    Gregorian,
    /// `noleap`, `365_day`.
    NoLeap,
    /// `all_leap`, `366_day`.
    AllLeap,
    /// `360_day`: twelve months of 30 days.
    Day360,
    /// `julian`: a leap year every fourth year.
    Julian,
}

/// A date label: year, month (1-12), day (1-31).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Label {
    pub year: i64,
    pub month: u32,
    pub day: u32,
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

const NOLEAP_MONTHS: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const ALL_LEAP_MONTHS: [i64; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

impl Calendar {
    /// The calendar a `calendar` attribute names (case-insensitive), `None` when unknown.
    pub(crate) fn from_name(name: &str) -> Option<Calendar> {
        Some(match name.to_ascii_lowercase().as_str() {
            "standard" | "gregorian" | "proleptic_gregorian" => Calendar::Gregorian,
            "noleap" | "365_day" => Calendar::NoLeap,
            "all_leap" | "366_day" => Calendar::AllLeap,
            "360_day" => Calendar::Day360,
            "julian" => Calendar::Julian,
            _ => return None,
        })
    }

    /// Whether `label` exists in this calendar.
    pub(crate) fn is_valid(self, label: Label) -> bool {
        if !(1..=12).contains(&label.month) || label.day < 1 {
            return false;
        }
        i64::from(label.day) <= self.month_length(label.year, label.month)
    }

    fn month_length(self, year: i64, month: u32) -> i64 {
        let m = (month - 1) as usize;
        match self {
            Calendar::Day360 => 30,
            Calendar::NoLeap => NOLEAP_MONTHS[m],
            Calendar::AllLeap => ALL_LEAP_MONTHS[m],
            Calendar::Julian if year.rem_euclid(4) == 0 => ALL_LEAP_MONTHS[m],
            Calendar::Julian => NOLEAP_MONTHS[m],
            Calendar::Gregorian if gregorian_leap(year) => ALL_LEAP_MONTHS[m],
            Calendar::Gregorian => NOLEAP_MONTHS[m],
        }
    }

    /// Days from this calendar's 0000-01-01 to `label` (a valid label).
    pub(crate) fn days(self, label: Label) -> i64 {
        let Label { year, month, day } = label;
        let before_month: i64 = (1..month).map(|m| self.month_length(year, m)).sum();
        let before_year = match self {
            Calendar::Day360 => 360 * year,
            Calendar::NoLeap => 365 * year,
            Calendar::AllLeap => 366 * year,
            // Year 0 is a leap year in both (proleptic) calendars.
            Calendar::Julian => 365 * year + (year + 3).div_euclid(4),
            Calendar::Gregorian => {
                365 * year + (year + 3).div_euclid(4) - (year + 99).div_euclid(100)
                    + (year + 399).div_euclid(400)
            }
        };
        before_year + before_month + i64::from(day) - 1
    }

    /// The label `days` after this calendar's 0000-01-01.
    pub(crate) fn label(self, days: i64) -> Label {
        let (year, mut day_of_year) = match self {
            Calendar::Day360 => (days.div_euclid(360), days.rem_euclid(360)),
            Calendar::NoLeap => (days.div_euclid(365), days.rem_euclid(365)),
            Calendar::AllLeap => (days.div_euclid(366), days.rem_euclid(366)),
            Calendar::Julian => {
                // Four-year cycles of 1461 days, each starting with a leap year.
                let (cycle, mut rest) = (days.div_euclid(1461), days.rem_euclid(1461));
                let mut year = 4 * cycle;
                if rest >= 366 {
                    rest -= 366;
                    year += 1 + rest / 365;
                    rest %= 365;
                }
                (year, rest)
            }
            Calendar::Gregorian => {
                let civil = civil_from_days(days - DAYS_0000_TO_1970);
                return civil;
            }
        };
        let mut month = 1;
        while month < 12 && day_of_year >= self.month_length(year, month) {
            day_of_year -= self.month_length(year, month);
            month += 1;
        }
        Label {
            year,
            month,
            day: (day_of_year + 1) as u32,
        }
    }
}

fn gregorian_leap(year: i64) -> bool {
    year.rem_euclid(4) == 0 && (year.rem_euclid(100) != 0 || year.rem_euclid(400) == 0)
}

/// Days from 0000-01-01 to 1970-01-01 in the proleptic Gregorian calendar.
const DAYS_0000_TO_1970: i64 = 719_528;

/// Days since 1970-01-01 of a Gregorian label, `None` when no Gregorian calendar has it
/// (2000-02-30, 2001-02-29).
pub(crate) fn gregorian_days_since_1970(label: Label) -> Option<i64> {
    Calendar::Gregorian
        .is_valid(label)
        .then(|| Calendar::Gregorian.days(label) - DAYS_0000_TO_1970)
}

/// The Gregorian label `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> Label {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Label { year, month, day }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(year: i64, month: u32, day: u32) -> Label {
        Label { year, month, day }
    }

    #[test]
    fn labels_and_days_round_trip_in_every_calendar() {
        for calendar in [
            Calendar::Gregorian,
            Calendar::NoLeap,
            Calendar::AllLeap,
            Calendar::Day360,
            Calendar::Julian,
        ] {
            let start = calendar.days(label(1850, 1, 1));
            let mut previous: Option<Label> = None;
            for days in start - 800..start + 80_000 {
                let l = calendar.label(days);
                assert!(calendar.is_valid(l), "{calendar:?} {l}");
                assert_eq!(calendar.days(l), days, "{calendar:?} {l}");
                if let Some(p) = previous {
                    assert!((l.year, l.month, l.day) > (p.year, p.month, p.day));
                }
                previous = Some(l);
            }
        }
    }

    #[test]
    fn calendars_follow_cftime() {
        // Values checked against cftime.num2date (tests/data/archives/expected.json holds more).
        let days_after = |c: Calendar, from: Label, n: i64| c.label(c.days(from) + n);
        assert_eq!(
            days_after(Calendar::NoLeap, label(2000, 1, 1), 59),
            label(2000, 3, 1)
        );
        assert_eq!(
            days_after(Calendar::Day360, label(2000, 1, 1), 59),
            label(2000, 2, 30)
        );
        assert_eq!(
            days_after(Calendar::AllLeap, label(2001, 1, 1), 60),
            label(2001, 3, 1)
        );
        assert_eq!(
            days_after(Calendar::Julian, label(2000, 1, 1), 3650),
            label(2009, 12, 29)
        );
        assert_eq!(
            days_after(Calendar::Gregorian, label(1970, 1, 1), 0),
            label(1970, 1, 1)
        );
        assert!(Calendar::Julian.is_valid(label(1900, 2, 29)));
        assert_eq!(gregorian_days_since_1970(label(1900, 2, 29)), None);
        assert_eq!(gregorian_days_since_1970(label(2000, 2, 30)), None);
        assert_eq!(gregorian_days_since_1970(label(2000, 3, 1)), Some(11_017));
        assert_eq!(gregorian_days_since_1970(label(1969, 12, 31)), Some(-1));
        assert_eq!(Calendar::from_name("NoLeap"), Some(Calendar::NoLeap));
        assert_eq!(Calendar::from_name("lunar"), None);
    }
}
