//! Splitting a text into documents and parsing each into a generic JSON value.
//!
//! YAML goes through `serde_norway` (one `Value` per `---` document, merge keys applied) and is
//! then converted to `serde_json::Value`, so that every later step sees one representation and
//! the untyped kinds can be kept as JSON text. JSON streams go through `serde_json` directly.

use serde::Deserialize;
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

use crate::error::{LoadError, Origin};

/// One non-empty document: its 1-based number in the file and its content.
pub(crate) struct Document {
    pub number: u32,
    pub value: Json,
}

pub(crate) fn parse_documents(
    file: &str,
    text: &str,
    json: bool,
) -> Result<Vec<Document>, LoadError> {
    if json {
        parse_json(file, text)
    } else {
        parse_yaml(file, text)
    }
}

fn origin(file: &str, number: u32) -> Origin {
    Origin {
        file: file.into(),
        document: number,
        item: None,
    }
}

/// The 1-based number of the document at 0-based position `index`.
fn document_number(index: usize) -> u32 {
    u32::try_from(index).map_or(u32::MAX, |i| i.saturating_add(1))
}

fn parse_json(file: &str, text: &str) -> Result<Vec<Document>, LoadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    let stream = serde_json::Deserializer::from_str(text).into_iter::<Json>();
    for (i, value) in stream.enumerate() {
        let number = document_number(i);
        let value = value.map_err(|e| LoadError::Syntax {
            origin: origin(file, number),
            format: "JSON",
            line: e.line(),
            column: e.column(),
            message: strip_json_location(&e),
        })?;
        if !value.is_null() {
            out.push(Document { number, value });
        }
    }
    Ok(out)
}

/// `serde_json::Error`'s text without its trailing " at line L column C".
fn strip_json_location(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_string()
}

fn parse_yaml(file: &str, text: &str) -> Result<Vec<Document>, LoadError> {
    let mut out = Vec::new();
    for (i, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let number = document_number(i);
        let syntax = |e: serde_norway::Error| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((0, 0));
            let mark = format!(" at line {line} column {column}");
            let mut message = e.to_string().replacen(&mark, "", 1);
            if let Some(tab_line) = tab_indented_line(text, line) {
                message.push_str(&format!(
                    " (line {tab_line} is indented with a tab; YAML indentation must be spaces: \
                     replace the tab with spaces)"
                ));
            }
            LoadError::Syntax {
                origin: origin(file, number),
                format: "YAML",
                line,
                column,
                message,
            }
        };
        // Stop at the first error: the parser cannot recover from one.
        let mut value = Yaml::deserialize(document).map_err(syntax)?;
        value.apply_merge().map_err(syntax)?;
        if value.is_null() {
            continue;
        }
        let value = yaml_to_json(value, &mut String::new()).map_err(|(path, message)| {
            LoadError::InvalidValue {
                origin: origin(file, number),
                object: "object".to_string(),
                path: if path.is_empty() {
                    "(top level)".to_string()
                } else {
                    path
                },
                message,
            }
        })?;
        out.push(Document { number, value });
    }
    Ok(out)
}

/// The 1-based number of the last line at or before `line` (all lines when `line` is 0) whose
/// indentation holds a tab, the usual cause of a YAML syntax error near it.
fn tab_indented_line(text: &str, line: usize) -> Option<usize> {
    text.lines()
        .enumerate()
        .take(if line == 0 { usize::MAX } else { line })
        .filter(|(_, l)| {
            l.chars()
                .take_while(|c| c.is_whitespace())
                .any(|c| c == '\t')
        })
        .map(|(i, _)| i + 1)
        .last()
}

/// Converts a YAML value to JSON the way Kubernetes' YAML decoder does: scalar mapping keys
/// become strings, tags are dropped. Fails (with the field path) on values JSON cannot hold.
fn yaml_to_json(value: Yaml, path: &mut String) -> Result<Json, (String, String)> {
    Ok(match value {
        Yaml::Null => Json::Null,
        Yaml::Bool(b) => Json::Bool(b),
        Yaml::Number(n) => {
            if let Some(u) = n.as_u64() {
                Json::from(u)
            } else if let Some(i) = n.as_i64() {
                Json::from(i)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                match serde_json::Number::from_f64(f) {
                    Some(n) => Json::Number(n),
                    None => {
                        return Err((
                            path.clone(),
                            format!("{f} is not a finite number; write a finite number"),
                        ));
                    }
                }
            }
        }
        Yaml::String(s) => Json::String(s),
        Yaml::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                out.push(yaml_to_json(item, path)?);
                path.truncate(len);
            }
            Json::Array(out)
        }
        Yaml::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (key, item) in map {
                let key = match key {
                    Yaml::String(s) => s,
                    Yaml::Bool(b) => b.to_string(),
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Null => "null".to_string(),
                    _ => {
                        return Err((
                            path.clone(),
                            "a mapping key is a list or a mapping; keys must be strings"
                                .to_string(),
                        ));
                    }
                };
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key);
                let item = yaml_to_json(item, path)?;
                path.truncate(len);
                out.insert(key, item);
            }
            Json::Object(out)
        }
        Yaml::Tagged(tagged) => yaml_to_json(tagged.value, path)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_documents_are_numbered_and_empty_ones_skipped() {
        let docs = parse_documents("f.yaml", "---\na: 1\n---\n---\nb: x\n", false).unwrap();
        let numbers: Vec<u32> = docs.iter().map(|d| d.number).collect();
        assert_eq!(numbers, vec![1, 3]);
        assert_eq!(docs[1].value["b"], "x");
    }

    #[test]
    fn empty_text_has_no_documents() {
        assert!(parse_documents("f.yaml", "", false).unwrap().is_empty());
        assert!(
            parse_documents("f.yaml", "# only a comment\n", false)
                .unwrap()
                .is_empty()
        );
        assert!(parse_documents("f.json", "  ", true).unwrap().is_empty());
    }

    #[test]
    fn yaml_syntax_error_names_document_and_line() {
        let text = "a: 1\n---\nb: 2\nc: [1, 2\nd: 3\n";
        let err = parse_documents("f.yaml", text, false).err().unwrap();
        let LoadError::Syntax { origin, line, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(origin.document, 2);
        assert!(*line >= 4, "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with("f.yaml (document 2): invalid YAML at line"),
            "{msg}"
        );
    }

    #[test]
    fn a_tab_in_indentation_is_named_with_its_line() {
        let text = "apiVersion: v1\nkind: Node\nmetadata:\n\tname: n\n";
        let err = parse_documents("f.yaml", text, false).err().unwrap();
        let msg = err.to_string();
        assert!(msg.contains("line 4 is indented with a tab"), "{msg}");
        // A tab inside a value is no indentation and gets no such note.
        let err = parse_documents("f.yaml", "a: \"x\tb\"\nc: [1\n", false)
            .err()
            .unwrap();
        assert!(!err.to_string().contains("tab"), "{err}");
    }

    #[test]
    fn json_stream_and_its_errors() {
        let docs = parse_documents("f.json", "{\"a\": 1}\n{\"b\": 2}", true).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].number, 2);
        let err = parse_documents("f.json", "{\"a\": 1}\n{\"b\": }", true)
            .err()
            .unwrap();
        let msg = err.to_string();
        assert!(
            msg.starts_with("f.json (document 2): invalid JSON at line 2, column"),
            "{msg}"
        );
        assert!(!msg.contains(" at line 2 column"), "{msg}");
    }

    #[test]
    fn merge_keys_and_scalar_keys() {
        let text = "base: &b {x: 1}\nm:\n  <<: *b\n  y: 2\nn:\n  1: one\n  true: yes\n";
        let docs = parse_documents("f.yaml", text, false).unwrap();
        let v = &docs[0].value;
        assert_eq!(v["m"]["x"], 1);
        assert_eq!(v["m"]["y"], 2);
        assert_eq!(v["n"]["1"], "one");
        assert_eq!(v["n"]["true"], "yes");
    }

    #[test]
    fn non_finite_numbers_are_rejected_with_a_path() {
        let err = parse_documents("f.yaml", "a:\n  b: [1, .inf]\n", false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("field a.b[1]"), "{err}");
    }
}
