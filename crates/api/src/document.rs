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

#[derive(Debug, Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{source_name}[{index}]: not valid YAML or JSON: {message}")]
    Parse {
        source_name: String,
        index: usize,
        message: String,
    },
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
    if display == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|source| ReadError::Io {
                path: display.clone(),
                source,
            })?;
        return parse_documents("-", &text);
    }
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|source| ReadError::Io {
                path: display.clone(),
                source,
            })?
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
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: display.clone(),
        source,
    })?;
    parse_documents(&display, &text)
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
}
