//! A reader for the catalog's plain CSV files: one header line, comma-separated fields, no
//! quoting. Every field access names its column so errors point at file, line and column.

use std::str::FromStr;

use crate::error::DataError;

pub(crate) struct Table<'a> {
    file: &'a str,
    header: Vec<&'a str>,
    text: &'a str,
}

/// One data row: its line number and fields, with the table's header for lookups.
pub(crate) struct Row<'t, 'a> {
    table: &'t Table<'a>,
    pub line: usize,
    fields: Vec<&'a str>,
}

impl<'a> Table<'a> {
    /// Checks the header against the columns the caller reads.
    pub fn parse(file: &'a str, text: &'a str, expected: &[&str]) -> Result<Self, DataError> {
        let first = text
            .lines()
            .next()
            .ok_or_else(|| DataError::new(file, 1, None, "empty file"))?;
        let header: Vec<&str> = first.trim_end_matches('\r').split(',').collect();
        if header != expected {
            return Err(DataError::new(
                file,
                1,
                None,
                format!(
                    "header is [{}], expected [{}]",
                    header.join(","),
                    expected.join(",")
                ),
            ));
        }
        Ok(Table { file, header, text })
    }

    pub fn rows(&self) -> impl Iterator<Item = Result<Row<'_, 'a>, DataError>> + '_ {
        self.text
            .lines()
            .enumerate()
            .skip(1)
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                let line = i + 1;
                let fields: Vec<&str> = l.trim_end_matches('\r').split(',').collect();
                if fields.len() != self.header.len() {
                    return Err(DataError::new(
                        self.file,
                        line,
                        None,
                        format!("{} fields, expected {}", fields.len(), self.header.len()),
                    ));
                }
                Ok(Row {
                    table: self,
                    line,
                    fields,
                })
            })
    }
}

impl<'a> Row<'_, 'a> {
    pub fn str(&self, column: &str) -> Result<&'a str, DataError> {
        match self.table.header.iter().position(|h| *h == column) {
            Some(i) => Ok(self.fields[i]),
            None => Err(self.error(column, "no such column")),
        }
    }

    /// A field that must not be empty.
    pub fn required(&self, column: &str) -> Result<&'a str, DataError> {
        let v = self.str(column)?;
        if v.is_empty() {
            Err(self.error(column, "empty value"))
        } else {
            Ok(v)
        }
    }

    pub fn num<T: FromStr>(&self, column: &str) -> Result<T, DataError> {
        let v = self.str(column)?;
        v.parse()
            .map_err(|_| self.error(column, format!("{v:?} is not a valid number")))
    }

    /// An empty field is `None`.
    pub fn opt_num<T: FromStr>(&self, column: &str) -> Result<Option<T>, DataError> {
        if self.str(column)?.is_empty() {
            Ok(None)
        } else {
            self.num(column).map(Some)
        }
    }

    /// `0` or `1`.
    pub fn flag(&self, column: &str) -> Result<bool, DataError> {
        match self.str(column)? {
            "0" => Ok(false),
            "1" => Ok(true),
            v => Err(self.error(column, format!("{v:?} is not 0 or 1"))),
        }
    }

    pub fn error(&self, column: &str, reason: impl Into<String>) -> DataError {
        DataError::new(self.table.file, self.line, Some(column), reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_file_line_and_column() {
        let t = Table::parse("x.csv", "a,b\n1,2\n3,z\n4\n", &["a", "b"]).unwrap();
        let rows: Vec<_> = t.rows().collect();
        let r1 = rows[0].as_ref().unwrap();
        assert_eq!(r1.num::<u32>("b").unwrap(), 2);
        let e = rows[1].as_ref().unwrap().num::<u32>("b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.csv:3: column \"b\": \"z\" is not a valid number"
        );
        let e = rows[2].as_ref().err().unwrap();
        assert_eq!((e.line, e.column.clone()), (4, None));
    }

    #[test]
    fn header_mismatch_is_an_error() {
        let e = Table::parse("x.csv", "a,c\n", &["a", "b"]).err().unwrap();
        assert_eq!(e.line, 1);
        assert!(e.reason.contains("expected [a,b]"));
    }
}
