//! Output a person reads: timestamps to the second in UTC, and tables with a header row and
//! aligned columns. JSON output (`--json`) never goes through here.

use chrono::{DateTime, TimeZone, Utc};

/// A timestamp to the second, in UTC: `2026-12-01 03:36:14Z`.
pub(super) fn when<Tz: TimeZone>(at: &DateTime<Tz>) -> String {
    at.with_timezone(&Utc)
        .format("%Y-%m-%d %H:%M:%SZ")
        .to_string()
}

/// [`when`] of an RFC 3339 timestamp the server sent as text; anything else prints as sent.
pub(super) fn when_text(text: &str) -> String {
    DateTime::parse_from_rfc3339(text).map_or_else(|_| text.to_owned(), |at| when(&at))
}

/// Rows printed under a header, each column as wide as its widest cell.
pub(super) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row, the last column unpadded.
    pub(super) fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (idx, cell) in row.iter().enumerate() {
                if idx < widths.len() {
                    widths[idx] = widths[idx].max(cell.chars().count());
                }
            }
        }
        let mut text = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let last = row.len().saturating_sub(1);
            for (idx, cell) in row.iter().enumerate() {
                if idx == last {
                    text.push_str(cell);
                } else {
                    let width = widths.get(idx).copied().unwrap_or(0);
                    text.push_str(&format!("{cell:<width$}  "));
                }
            }
            text.push('\n');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_under_their_header() {
        let mut table = Table::new(&["ARTIFACT", "SIZE", "PRODUCER"]);
        table.row(vec!["blake3:ab".into(), "12".into(), "agent-1".into()]);
        table.row(vec!["b".into(), "1234567".into(), "x".into()]);
        assert_eq!(
            table.render(),
            "ARTIFACT   SIZE     PRODUCER\nblake3:ab  12       agent-1\nb          1234567  x\n"
        );
    }

    #[test]
    fn timestamps_print_to_the_second_in_utc() {
        let at = DateTime::parse_from_rfc3339("2026-12-01T04:36:14.123456+01:00").expect("time");
        assert_eq!(when(&at), "2026-12-01 03:36:14Z");
        assert_eq!(when_text("2026-12-01T03:36:14.5Z"), "2026-12-01 03:36:14Z");
        assert_eq!(when_text("soon"), "soon");
    }
}
