//! CSV tables with a header row, read so that every problem names the file and the line.

use std::path::Path;

use crate::trace::{TraceError, limits};

/// One data row: its 1-based line number and its fields.
#[derive(Debug)]
pub struct Row {
    pub line: u64,
    pub fields: csv::StringRecord,
}

/// A CSV file read whole: the header's column names and the data rows.
#[derive(Debug)]
pub struct Table {
    pub file: String,
    pub headers: Vec<String>,
    pub rows: Vec<Row>,
}

/// Reads a file into a string, naming it in the error; text that is not UTF-8 is an error at
/// the line of the first byte that is not, with its offset.
pub fn read_file(path: &Path) -> Result<String, TraceError> {
    let file = path.display().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| TraceError::new(&file, 0, format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        let column = offset
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        TraceError::new(
            &file,
            line,
            format!("byte {offset} (column {column}) is not valid UTF-8; save the file as UTF-8"),
        )
    })
}

impl Table {
    /// Parses `text` (the contents of `file`). Blank lines are skipped; a row with another
    /// number of fields than the header is an error.
    pub fn parse(file: &str, text: &str) -> Result<Table, TraceError> {
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let headers: Vec<String> = reader
            .headers()
            .map_err(|e| TraceError::new(file, 1, format!("cannot read the header: {e}")))?
            .iter()
            .map(str::to_string)
            .collect();
        if headers.iter().all(String::is_empty) {
            return Err(TraceError::new(
                file,
                1,
                "no header row; the first line must name the columns",
            ));
        }
        // csv counts records, not blank lines; count lines from byte offsets instead.
        let newlines: Vec<usize> = text
            .bytes()
            .enumerate()
            .filter(|(_, b)| *b == b'\n')
            .map(|(i, _)| i)
            .collect();
        let bytes = text.as_bytes();
        let line_at = |byte: u64| {
            // A record's position may point at the blank lines before it.
            let mut at = byte as usize;
            while at < bytes.len() && matches!(bytes[at], b'\n' | b'\r') {
                at += 1;
            }
            newlines.partition_point(|&n| n < at) as u64 + 1
        };
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| {
                let line = e.position().map_or(0, |p| line_at(p.byte()));
                TraceError::new(file, line, format!("not valid CSV: {e}"))
            })?;
            let line = record.position().map_or(0, |p| line_at(p.byte()));
            if record.iter().all(str::is_empty) {
                continue;
            }
            if record.len() != headers.len() {
                return Err(TraceError::new(
                    file,
                    line,
                    format!(
                        "{} fields, but the header has {} ({})",
                        record.len(),
                        headers.len(),
                        headers.join(",")
                    ),
                ));
            }
            rows.push(Row {
                line,
                fields: record,
            });
        }
        Ok(Table {
            file: file.to_string(),
            headers,
            rows,
        })
    }

    /// The index of a required column.
    pub fn column(&self, name: &str) -> Result<usize, TraceError> {
        self.optional_column(name).ok_or_else(|| {
            TraceError::new(
                &self.file,
                1,
                format!(
                    "missing column {name:?}; the header has {}",
                    self.headers.join(",")
                ),
            )
        })
    }

    pub fn optional_column(&self, name: &str) -> Option<usize> {
        self.headers.iter().position(|h| h == name)
    }

    pub fn error(&self, row: &Row, message: impl Into<String>) -> TraceError {
        TraceError::new(&self.file, row.line, message)
    }

    /// A field as a non-negative whole number.
    pub fn int(&self, row: &Row, col: usize, what: &str) -> Result<i64, TraceError> {
        let raw = &row.fields[col];
        match raw.parse::<i64>() {
            Ok(v) if v >= 0 => Ok(v),
            _ => Err(self.error(row, format!("{}: {raw:?} is not {what}", self.headers[col]))),
        }
    }

    /// A field as a whole number from 0 to `max`; `limit` says what the bound is ("the GPUs
    /// one node may hold"). A number too large for any integer type is reported as too large,
    /// not as "not a number".
    pub fn bounded(
        &self,
        row: &Row,
        col: usize,
        what: &str,
        max: i64,
        limit: &str,
    ) -> Result<i64, TraceError> {
        let raw = &row.fields[col];
        let digits = raw.strip_prefix('+').unwrap_or(raw);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            match digits.parse::<i64>() {
                Ok(v) if v <= max => return Ok(v),
                _ => {
                    return Err(self.error(
                        row,
                        format!(
                            "{}: {raw} is more than {max}, {limit} (see \"Limits\" in README.md)",
                            self.headers[col]
                        ),
                    ));
                }
            }
        }
        self.int(row, col, what)
    }

    /// A field as a whole number of seconds, at most [`limits::SECONDS`].
    pub fn seconds(&self, row: &Row, col: usize) -> Result<u64, TraceError> {
        let v = self.bounded(
            row,
            col,
            "a whole number of seconds",
            limits::SECONDS as i64,
            "the longest time a trace may span, 100 years",
        )?;
        Ok(v as u64)
    }

    /// A field that names an object (a node, a pod): a DNS-1123 subdomain, as the API server
    /// requires, so no control character or slash reaches a name.
    pub fn object_name<'r>(&self, row: &'r Row, col: usize) -> Result<&'r str, TraceError> {
        let raw = &row.fields[col];
        let ok = raw.len() <= 253
            && raw.split('.').all(|label| {
                let b = label.as_bytes();
                b.first().is_some_and(u8::is_ascii_alphanumeric)
                    && b.last().is_some_and(u8::is_ascii_alphanumeric)
                    && b.iter()
                        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            });
        if ok {
            return Ok(raw);
        }
        Err(self.error(
            row,
            format!(
                "{}: {raw:?} is not a valid name: use lower-case letters, digits, '-' and '.', \
                 starting and ending with a letter or digit, at most 253 characters",
                self.headers[col]
            ),
        ))
    }

    /// Checks `value`, taken from the field, as a label value (at most 63 letters, digits,
    /// '-', '_' and '.', starting and ending with a letter or digit): GPU models become node
    /// labels, device attributes and strings inside CEL selectors.
    pub fn label_value(&self, row: &Row, col: usize, value: &str) -> Result<(), TraceError> {
        let b = value.as_bytes();
        let ok = b.len() <= 63
            && b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric)
            && b.iter()
                .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
        if ok {
            return Ok(());
        }
        Err(self.error(
            row,
            format!(
                "{}: {value:?} is not a valid GPU model: use letters, digits, '-', '_' and '.', \
                 starting and ending with a letter or digit, at most 63 characters",
                self.headers[col]
            ),
        ))
    }

    /// A field as a non-negative number (fractions allowed).
    pub fn number(&self, row: &Row, col: usize, what: &str) -> Result<f64, TraceError> {
        let raw = &row.fields[col];
        match raw.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(self.error(row, format!("{}: {raw:?} is not {what}", self.headers[col]))),
        }
    }
}

/// Parses `YYYY-MM-DD HH:MM:SS` (or `YYYY-MM-DD`, or with a `T`) as seconds since the Unix
/// epoch, reading the time as UTC.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = match s.split_once([' ', 'T']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    if d.next().is_some()
        || !(1..=9999).contains(&y)
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&day)
    {
        return None;
    }
    let secs = match time {
        None => 0,
        Some(t) => {
            let mut p = t.split(':');
            let h: i64 = p.next()?.parse().ok()?;
            let mi: i64 = p.next()?.parse().ok()?;
            let se: i64 = p.next().map_or(Some(0), |x| x.parse().ok())?;
            if p.next().is_some()
                || !(0..=23).contains(&h)
                || !(0..=59).contains(&mi)
                || !(0..=60).contains(&se)
            {
                return None;
            }
            h * 3600 + mi * 60 + se
        }
    };
    Some(days_from_civil(y, m, day) * 86400 + secs)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("1970-01-01 00:00:00"), Some(0));
        assert_eq!(parse_timestamp("2017-10-09 07:01:55"), Some(1_507_532_515));
        assert_eq!(parse_timestamp("2017-10-09"), Some(1_507_507_200));
        assert_eq!(parse_timestamp("2000-03-01T00:00"), Some(951_868_800));
        assert_eq!(parse_timestamp("2017-13-01"), None);
        assert_eq!(parse_timestamp("yesterday"), None);
        // Years past 9999 would overflow the day count; negative times of day are no times.
        assert_eq!(parse_timestamp("99999999999999999-01-01"), None);
        assert_eq!(parse_timestamp("2017-10-09 -1:00"), None);
    }

    #[test]
    fn text_that_is_not_utf8_is_located() {
        let dir = std::env::temp_dir().join(format!("lockstep-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.csv");
        std::fs::write(&path, b"a,b\n1,K\xf6ln\n").unwrap();
        let err = read_file(&path).expect_err("not UTF-8");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(err.line, 2);
        assert!(
            err.message
                .starts_with("byte 7 (column 4) is not valid UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn ragged_row_names_file_and_line() {
        let err = Table::parse("t.csv", "a,b\n1,2\n\n3\n").expect_err("ragged");
        assert_eq!(
            err.to_string(),
            "t.csv:4: 1 fields, but the header has 2 (a,b)"
        );
    }

    #[test]
    fn bounded_numbers_say_they_are_too_large() {
        let t = Table::parse("t.csv", "n\n129\n18446744073709551616\nx\n-1\n128\n").expect("valid");
        let got: Vec<String> = t
            .rows
            .iter()
            .map(
                |r| match t.bounded(r, 0, "a whole number", 128, "the most a node holds") {
                    Ok(v) => v.to_string(),
                    Err(e) => e.to_string(),
                },
            )
            .collect();
        assert_eq!(
            got,
            [
                "t.csv:2: n: 129 is more than 128, the most a node holds (see \"Limits\" in README.md)",
                "t.csv:3: n: 18446744073709551616 is more than 128, the most a node holds (see \"Limits\" in README.md)",
                "t.csv:4: n: \"x\" is not a whole number",
                "t.csv:5: n: \"-1\" is not a whole number",
                "128",
            ]
        );
    }

    #[test]
    fn missing_column_is_reported_at_the_header() {
        let t = Table::parse("t.csv", "a,b\n1,2\n").expect("valid");
        let err = t.column("c").expect_err("missing");
        assert_eq!(
            err.to_string(),
            "t.csv:1: missing column \"c\"; the header has a,b"
        );
    }
}
