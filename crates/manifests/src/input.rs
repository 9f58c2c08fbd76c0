//! Turning the sources (files, directories, stdin) into named texts, in a deterministic order.

use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::Source;
use crate::error::LoadError;

/// The name stdin goes by in messages.
pub(crate) const STDIN_NAME: &str = "<stdin>";

/// One input text and the name messages use for it.
pub(crate) struct Input {
    pub name: String,
    pub text: String,
    /// Whether the text is parsed as a stream of JSON values rather than YAML documents.
    pub json: bool,
}

/// Reads every source in order. A directory contributes its `*.yaml`, `*.yml` and `*.json`
/// files, recursively, sorted by path; entries whose name starts with `.` are skipped.
pub(crate) fn read_sources(
    sources: &[Source],
    stdin: &mut dyn Read,
    warnings: &mut Vec<String>,
) -> Result<Vec<Input>, LoadError> {
    let mut inputs = Vec::new();
    for source in sources {
        match source {
            Source::Stdin => {
                let mut bytes = Vec::new();
                stdin
                    .read_to_end(&mut bytes)
                    .map_err(|source| LoadError::Read {
                        path: PathBuf::from(STDIN_NAME),
                        source,
                    })?;
                let text = utf8(STDIN_NAME, bytes)?;
                let json = looks_like_json(&text);
                inputs.push(Input {
                    name: STDIN_NAME.to_string(),
                    text,
                    json,
                });
            }
            Source::Path(path) => {
                let meta = fs::metadata(path).map_err(|source| LoadError::Read {
                    path: path.clone(),
                    source,
                })?;
                if meta.is_dir() {
                    let mut files = Vec::new();
                    let mut visited = BTreeSet::new();
                    collect_dir(path, &mut files, &mut visited)?;
                    files.sort();
                    if files.is_empty() {
                        warnings.push(format!(
                            "warning: directory {} holds no *.yaml, *.yml or *.json files",
                            path.display()
                        ));
                    }
                    for file in files {
                        inputs.push(read_file(&file)?);
                    }
                } else {
                    inputs.push(read_file(path)?);
                }
            }
        }
    }
    Ok(inputs)
}

fn read_file(path: &Path) -> Result<Input, LoadError> {
    let bytes = fs::read(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let name = path.display().to_string();
    let text = utf8(&name, bytes)?;
    let json = is_json(path, &text);
    Ok(Input { name, text, json })
}

/// The bytes as text, or an error naming the first byte that is not UTF-8 and its line and
/// column (1-based, the column counted in bytes).
fn utf8(name: &str, bytes: Vec<u8>) -> Result<String, LoadError> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..offset];
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        LoadError::NotUtf8 {
            file: name.to_string(),
            offset,
            line: before.iter().filter(|&&b| b == b'\n').count() + 1,
            column: offset - line_start + 1,
        }
    })
}

/// Whether a text is read as JSON: by its extension (`.json`; `.yaml`/`.yml` are YAML),
/// otherwise by its first character.
pub(crate) fn is_json(path: &Path, text: &str) -> bool {
    match extension(path).as_deref() {
        Some("json") => true,
        Some("yaml" | "yml") => false,
        _ => looks_like_json(text),
    }
}

fn extension(path: &Path) -> Option<String> {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
}

/// JSON when the first non-blank character opens an object, as kubectl decides.
fn looks_like_json(text: &str) -> bool {
    text.trim_start_matches('\u{feff}')
        .trim_start()
        .starts_with('{')
}

fn collect_dir(
    dir: &Path,
    files: &mut Vec<PathBuf>,
    visited: &mut BTreeSet<PathBuf>,
) -> Result<(), LoadError> {
    let read_err = |source| LoadError::Read {
        path: dir.to_path_buf(),
        source,
    };
    // Symbolic links may form cycles; visit every real directory once.
    let real = fs::canonicalize(dir).map_err(read_err)?;
    if !visited.insert(real) {
        return Ok(());
    }
    for entry in fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let meta = fs::metadata(&path).map_err(|source| LoadError::Read {
            path: path.clone(),
            source,
        })?;
        if meta.is_dir() {
            collect_dir(&path, files, visited)?;
        } else if matches!(extension(&path).as_deref(), Some("yaml" | "yml" | "json")) {
            files.push(path);
        }
    }
    Ok(())
}
