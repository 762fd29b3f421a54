//! Reading Kubernetes objects from files: multi-document YAML or JSON, from a file, a directory
//! (every `.yaml`, `.yml` and `.json` in it, sorted) or standard input.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

/// One object read from a source, with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// The file name as given (or `-` for standard input).
    pub source: String,
    /// Position among the source's documents, counting from 0 and skipping empty ones.
    pub index: usize,
    pub value: serde_json::Value,
}

impl Document {
    pub fn api_version(&self) -> &str {
        self.value
            .get("apiVersion")
            .and_then(|v| v.as_str())
            .unwrap_or("")
    }

    pub fn kind(&self) -> &str {
        self.value
            .get("kind")
            .and_then(|v| v.as_str())
            .unwrap_or("")
    }

    pub fn name(&self) -> &str {
        self.value
            .pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .unwrap_or("")
    }

    /// `file[index] Kind/name`, the prefix of every message about this document.
    pub fn describe(&self) -> String {
        let kind = if self.kind().is_empty() {
            "<no kind>"
        } else {
            self.kind()
        };
        let name = if self.name().is_empty() {
            "<no name>"
        } else {
            self.name()
        };
        format!("{}[{}] {kind}/{name}", self.source, self.index)
    }
}

impl fmt::Display for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The most nodewright reads from one file or stream: far more than any manifest, catalog or
/// scenario, and little enough that a mistaken `/dev/zero` or a huge log cannot exhaust memory.
pub const MAX_INPUT_BYTES: u64 = 128 << 20;

#[derive(Debug, Error)]
pub enum ReadError {
    // The I/O error is part of the message, not a `source`: reports that print the chain
    // would say it twice.
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path}: larger than {} MiB, the most nodewright reads from one input", MAX_INPUT_BYTES >> 20)]
    TooLarge { path: String },
    #[error("{path}: not valid UTF-8 at line {line}, column {column} (byte {byte})")]
    Utf8 {
        path: String,
        line: usize,
        column: usize,
        byte: usize,
    },
    #[error("{source_name}[{index}]: not valid YAML or JSON: {message}")]
    Parse {
        source_name: String,
        index: usize,
        message: String,
    },
}

/// The text of `path` (`-` is standard input), at most [`MAX_INPUT_BYTES`] of it, as UTF-8.
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    let display = path.display().to_string();
    let io = |error| ReadError::Io {
        path: display.clone(),
        error,
    };
    let mut bytes = Vec::new();
    if display == "-" {
        std::io::stdin()
            .lock()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
    } else {
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_INPUT_BYTES + 1).read_to_end(&mut bytes))
            .map_err(io)?;
    }
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(ReadError::TooLarge { path: display });
    }
    utf8(&display, bytes)
}

/// `bytes` as text, or where the first byte that is not UTF-8 is (lines and columns from 1,
/// columns in characters, bytes from 0).
pub fn utf8(path: &str, bytes: Vec<u8>) -> Result<String, ReadError> {
    String::from_utf8(bytes).map_err(|e| {
        let byte = e.utf8_error().valid_up_to();
        let valid = std::str::from_utf8(&e.as_bytes()[..byte]).unwrap_or_default();
        let line_start = valid.rfind('\n').map_or(0, |i| i + 1);
        ReadError::Utf8 {
            path: path.to_string(),
            line: valid.matches('\n').count() + 1,
            column: valid[line_start..].chars().count() + 1,
            byte,
        }
    })
}

/// Parses every document in `text`. `source` names the origin in errors.
pub fn parse_documents(source: &str, text: &str) -> Result<Vec<Document>, ReadError> {
    let mut docs = Vec::new();
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ReadError::Parse {
                source_name: source.to_string(),
                index: 0,
                message: e.to_string(),
            })?;
        let items = match value {
            serde_json::Value::Array(items) => items,
            serde_json::Value::Object(ref o)
                if o.get("kind")
                    .and_then(|k| k.as_str())
                    .is_some_and(|k| k.ends_with("List")) =>
            {
                o.get("items")
                    .and_then(|i| i.as_array())
                    .cloned()
                    .unwrap_or_default()
            }
            other => vec![other],
        };
        for (index, value) in items.into_iter().enumerate() {
            docs.push(Document {
                source: source.to_string(),
                index,
                value,
            });
        }
        return Ok(docs);
    }
    for (raw_index, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = serde_json::Value::deserialize(de).map_err(|e| ReadError::Parse {
            source_name: source.to_string(),
            index: raw_index,
            message: e.to_string(),
        })?;
        if value.is_null() {
            continue;
        }
        let index = docs.len();
        docs.push(Document {
            source: source.to_string(),
            index,
            value,
        });
    }
    Ok(docs)
}

/// Reads `path`: `-` is standard input, a directory is every YAML/JSON file in it (sorted).
pub fn read_documents(path: &Path) -> Result<Vec<Document>, ReadError> {
    let display = path.display().to_string();
    if display != "-" && path.is_dir() {
        let io = |error| ReadError::Io {
            path: display.clone(),
            error,
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && matches!(
                        p.extension().and_then(|e| e.to_str()),
                        Some("yaml" | "yml" | "json")
                    )
            })
            .collect();
        files.sort();
        let mut docs = Vec::new();
        for f in files {
            docs.extend(read_documents(&f)?);
        }
        return Ok(docs);
    }
    parse_documents(&display, &read_text(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_stream_skips_empty_documents() {
        let docs = parse_documents(
            "a.yaml",
            "---\n# comment only\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\nkind: X\n",
        )
        .unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].describe(), "a.yaml[0] Pod/p");
        assert_eq!(docs[1].describe(), "a.yaml[1] X/<no name>");
    }

    #[test]
    fn json_list_and_array() {
        let docs = parse_documents(
            "l.json",
            r#"{"kind":"List","items":[{"kind":"A"},{"kind":"B"}]}"#,
        )
        .unwrap();
        assert_eq!(
            docs.iter().map(|d| d.kind()).collect::<Vec<_>>(),
            ["A", "B"]
        );
        assert!(parse_documents("bad.yaml", "a: [1,").is_err());
    }

    #[test]
    fn invalid_utf8_is_located() {
        let e = utf8("u.yaml", b"a: 1\nb: \"\xc3\xa9\xff\"\n".to_vec()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "u.yaml: not valid UTF-8 at line 2, column 6 (byte 11)"
        );
    }

    #[test]
    fn reads_stop_at_the_limit() {
        let e = read_text(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "/dev/zero: larger than 128 MiB, the most nodewright reads from one input"
        );
    }

    #[test]
    fn io_errors_are_said_once() {
        let e = read_documents(Path::new("/nonexistent/x.yaml")).unwrap_err();
        assert_eq!(
            anyhow_like(&e),
            "/nonexistent/x.yaml: No such file or directory (os error 2)"
        );
    }

    /// What `anyhow`'s `{:#}` prints: the error and each of its sources.
    fn anyhow_like(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            out.push_str(&format!(": {s}"));
            source = s.source();
        }
        out
    }

    #[test]
    fn yaml_errors_give_line_and_column_in_the_stream() {
        let e = parse_documents("s.yaml", "a: 1\n---\nb: [1,\nc: 2\n").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("s.yaml[1]: not valid YAML or JSON: "),
            "{text}"
        );
        assert!(text.contains("line 5 column 1"), "{text}");
    }
}
