//! A reader for the plain layout of YAML that manifests are written in, straight from the text
//! to a JSON value, several times faster than the YAML parser.
//!
//! It reads block mappings and sequences (a sequence may sit at its key's indentation), flow
//! mappings and sequences on one line, single- and double-quoted scalars on one line, plain
//! scalars on one line, comments, and a leading `---`. Plain scalars are resolved as the
//! general path resolves them (`null`, `~`, booleans in three spellings, integers in the
//! forms it takes, numerals with leading zeros as strings), and everything else it cannot be
//! sure of makes it give up (`None`): tabs, carriage returns, byte order marks, directives,
//! `...`, anchors, aliases, tags, block scalars, `?` keys, plain or quoted scalars over
//! several lines, a flow collection over several lines, floating-point numbers, integers
//! beyond 64 bits, keys that are not strings, a key given twice, merge keys (`<<`), and any
//! layout it does not know or that is not valid YAML. Then the caller parses the document
//! with the YAML parser, which gives the value or the error; so this reader changes no value
//! and no message, only the time (a property test compares the two on generated documents).

use serde_json::{Map, Value as Json};

/// The value of one document's text (which holds exactly one document, maybe after a `---`
/// line), or `None` when the YAML parser must read it. An empty document is `null`.
pub(crate) fn document(text: &str) -> Option<Json> {
    if !plain_text(text) {
        return None;
    }
    let mut lines = Vec::new();
    let mut started = false;
    for raw in text.split('\n') {
        let content = raw.trim_start_matches(' ');
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = raw.len() - content.len();
        if indent == 0 && (content.starts_with('%') || is_marker(content, "...")) {
            return None;
        }
        if indent == 0 && is_marker(content, "---") {
            // One marker, before any content, with nothing after it but a comment.
            let rest = content[3..].trim_start_matches(' ');
            if started || !(rest.is_empty() || rest.starts_with('#')) {
                return None;
            }
            started = true;
            continue;
        }
        started = true;
        lines.push(Line {
            indent,
            text: content.trim_end_matches(' '),
        });
    }
    if lines.is_empty() {
        return Some(Json::Null);
    }
    let mut reader = Reader { lines, pos: 1 };
    let first = reader.lines[0];
    let value = reader.node(first.indent, first.text)?;
    // Everything must have been read: a line left over is a layout this reader does not
    // know (or an error).
    (reader.pos == reader.lines.len()).then_some(value)
}

/// Whether `text` has only characters this reader takes: none of tab, carriage return, the
/// byte order mark, other line breaks, or the control characters the YAML parser refuses.
fn plain_text(text: &str) -> bool {
    let ascii_ok = |b: u8| b == b'\n' || (0x20..0x7f).contains(&b);
    if text.bytes().all(ascii_ok) {
        return true;
    }
    text.chars().all(|c| {
        if c.is_ascii() {
            ascii_ok(c as u8)
        } else {
            // C1 controls (and NEL, a line break to the parser), the line and paragraph
            // separators, the byte order mark and the two non-characters it refuses.
            !matches!(
                c,
                '\u{80}'
                    ..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
            )
        }
    })
}

/// `---` or `...` at the start of a line, alone or followed by a space.
fn is_marker(content: &str, marker: &str) -> bool {
    content
        .strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
}

#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    /// From the first non-space character, trailing spaces removed.
    text: &'a str,
}

struct Reader<'a> {
    /// The document's lines, without blank and comment-only lines.
    lines: Vec<Line<'a>>,
    /// The next line to read.
    pos: usize,
}

/// Whether `text` starts a block sequence entry: `-` alone or followed by a space.
fn is_entry(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// Whether what follows a value on its line is nothing or a comment.
fn only_comment(rest: &str) -> bool {
    let trimmed = rest.trim_start_matches(' ');
    trimmed.is_empty() || (trimmed.starts_with('#') && trimmed.len() < rest.len())
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.pos).copied()
    }

    /// A block node whose first line (already consumed, or the rest of a `- ` entry's line)
    /// is `text` at column `indent`.
    fn node(&mut self, indent: usize, text: &'a str) -> Option<Json> {
        if is_entry(text) {
            return self.sequence(indent, text);
        }
        if let Some((key, rest)) = split_key(text)? {
            return self.mapping(indent, key, rest);
        }
        inline_value(text)
    }

    /// The value of a key or entry with nothing after it on its line: the lines below
    /// indented more than `parent`, or (for a key) a sequence at the key's own indentation,
    /// or null.
    fn block_value(&mut self, parent: usize, sequence_at_parent: bool) -> Option<Json> {
        match self.peek() {
            Some(l) if l.indent > parent => {
                self.pos += 1;
                self.node(l.indent, l.text)
            }
            Some(l) if sequence_at_parent && l.indent == parent && is_entry(l.text) => {
                self.pos += 1;
                self.sequence(parent, l.text)
            }
            _ => Some(Json::Null),
        }
    }

    fn sequence(&mut self, indent: usize, first: &'a str) -> Option<Json> {
        let mut items = Vec::new();
        let mut text = first;
        loop {
            let after = &text[1..];
            let content = after.trim_start_matches(' ');
            let item = if content.is_empty() || content.starts_with('#') {
                self.block_value(indent, false)?
            } else {
                self.node(indent + 1 + (after.len() - content.len()), content)?
            };
            items.push(item);
            match self.peek() {
                Some(l) if l.indent == indent && is_entry(l.text) => {
                    self.pos += 1;
                    text = l.text;
                }
                Some(l) if l.indent > indent => return None,
                _ => return Some(Json::Array(items)),
            }
        }
    }

    fn mapping(&mut self, indent: usize, first_key: String, first_rest: &'a str) -> Option<Json> {
        let mut map = Map::new();
        let (mut key, mut rest) = (first_key, first_rest);
        loop {
            if key == "<<" {
                return None;
            }
            let value = if rest.is_empty() || rest.starts_with('#') {
                self.block_value(indent, true)?
            } else {
                inline_value(rest)?
            };
            if map.insert(key, value).is_some() {
                return None;
            }
            match self.peek() {
                Some(l) if l.indent == indent && !is_entry(l.text) => {
                    self.pos += 1;
                    (key, rest) = split_key(l.text)??;
                }
                Some(l) if l.indent >= indent => return None,
                _ => return Some(Json::Object(map)),
            }
        }
    }
}

/// A block mapping entry's key and what follows its `:` (spaces removed): `Some(None)` when
/// `text` is not a mapping entry, `None` when it is one this reader does not take.
fn split_key(text: &str) -> Option<Option<(String, &str)>> {
    let bytes = text.as_bytes();
    let (key, after) = match bytes[0] {
        b'"' | b'\'' => {
            let (key, end) = quoted(text)?;
            let after = text[end..].trim_start_matches(' ');
            let Some(after) = after.strip_prefix(':') else {
                return Some(None);
            };
            (key, after)
        }
        b'[' | b'{' => return Some(None),
        c if is_indicator(c) => return None,
        _ => {
            let mut found = None;
            for (i, &c) in bytes.iter().enumerate() {
                if c == b'#' && i > 0 && bytes[i - 1] == b' ' {
                    break;
                }
                if c == b':' && bytes.get(i + 1).is_none_or(|&n| n == b' ') {
                    found = Some(i);
                    break;
                }
            }
            let Some(i) = found else {
                return Some(None);
            };
            let key = text[..i].trim_end_matches(' ');
            if key.is_empty() {
                return None;
            }
            match resolve(key)? {
                Json::String(key) => (key, &text[i + 1..]),
                _ => return None,
            }
        }
    };
    if !(after.is_empty() || after.starts_with(' ')) {
        return None;
    }
    Some(Some((key, after.trim_start_matches(' '))))
}

/// Characters that give a plain scalar's first character another meaning.
fn is_indicator(c: u8) -> bool {
    matches!(
        c,
        b'-' | b'?'
            | b':'
            | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
    )
}

/// A value written on one line after a key or an entry: a quoted scalar, a flow collection
/// or a plain scalar, then at most a comment.
fn inline_value(text: &str) -> Option<Json> {
    match text.as_bytes()[0] {
        b'"' | b'\'' => {
            let (s, end) = quoted(text)?;
            only_comment(&text[end..]).then_some(Json::String(s))
        }
        b'[' | b'{' => {
            let mut i = 0;
            let value = flow(text.as_bytes(), text, &mut i, 0)?;
            only_comment(&text[i..]).then_some(value)
        }
        // `-1` is a number, `-` and `- x` are not scalars.
        b'-' if text.len() > 1 && text.as_bytes()[1] != b' ' => plain(text),
        c if is_indicator(c) => None,
        _ => plain(text),
    }
}

/// A plain scalar in block context up to its comment.
fn plain(text: &str) -> Option<Json> {
    let bytes = text.as_bytes();
    let mut end = bytes.len();
    for (i, &c) in bytes.iter().enumerate() {
        if c == b'#' && i > 0 && bytes[i - 1] == b' ' {
            end = i;
            break;
        }
        // `a: b` would be a mapping where none may start; a trailing `:` a key.
        if c == b':' && bytes.get(i + 1).is_none_or(|&n| n == b' ') {
            return None;
        }
    }
    resolve(text[..end].trim_end_matches(' '))
}

/// Flow collections nested deeper than this are left to the parser.
const MAX_FLOW_DEPTH: usize = 64;

/// A flow value at `*i` (spaces before it skipped); `*i` ends after it.
fn flow(bytes: &[u8], text: &str, i: &mut usize, depth: usize) -> Option<Json> {
    skip_spaces(bytes, i);
    match *bytes.get(*i)? {
        b'[' => {
            let mut items = Vec::new();
            if open(bytes, i, depth, b']')? {
                return Some(Json::Array(items));
            }
            loop {
                items.push(flow(bytes, text, i, depth + 1)?);
                skip_spaces(bytes, i);
                match *bytes.get(*i)? {
                    b',' => *i += 1,
                    b']' => {
                        *i += 1;
                        return Some(Json::Array(items));
                    }
                    _ => return None,
                }
            }
        }
        b'{' => {
            let mut map = Map::new();
            if open(bytes, i, depth, b'}')? {
                return Some(Json::Object(map));
            }
            loop {
                let key = match flow(bytes, text, i, depth + 1)? {
                    Json::String(key) if key != "<<" => key,
                    _ => return None,
                };
                // `key: value`: the colon right after the key, then a space.
                if bytes.get(*i) != Some(&b':') || bytes.get(*i + 1) != Some(&b' ') {
                    return None;
                }
                *i += 2;
                let value = flow(bytes, text, i, depth + 1)?;
                if map.insert(key, value).is_some() {
                    return None;
                }
                skip_spaces(bytes, i);
                match *bytes.get(*i)? {
                    b',' => *i += 1,
                    b'}' => {
                        *i += 1;
                        return Some(Json::Object(map));
                    }
                    _ => return None,
                }
            }
        }
        b'"' | b'\'' => {
            let (s, end) = quoted(&text[*i..])?;
            *i += end;
            Some(Json::String(s))
        }
        // `-v` is a plain scalar, `-` alone or before a bracket or comma is not.
        b'-' if !matches!(
            bytes.get(*i + 1),
            None | Some(b' ' | b',' | b'[' | b']' | b'{' | b'}')
        ) =>
        {
            flow_plain(bytes, text, i)
        }
        c if is_indicator(c) => None,
        _ => flow_plain(bytes, text, i),
    }
}

/// Steps over a flow collection's opening bracket at `*i`: `Some(true)` when `close` follows
/// at once (an empty collection, `*i` after it), `Some(false)` when entries follow, `None`
/// when the collection is nested too deep for this reader.
fn open(bytes: &[u8], i: &mut usize, depth: usize, close: u8) -> Option<bool> {
    if depth >= MAX_FLOW_DEPTH {
        return None;
    }
    *i += 1;
    skip_spaces(bytes, i);
    let empty = bytes.get(*i) == Some(&close);
    if empty {
        *i += 1;
    }
    Some(empty)
}

/// A plain scalar in a flow collection, up to a comma, a bracket or (for a key) `: `.
fn flow_plain(bytes: &[u8], text: &str, i: &mut usize) -> Option<Json> {
    let start = *i;
    while let Some(&c) = bytes.get(*i) {
        match c {
            b',' | b'[' | b']' | b'{' | b'}' => break,
            // A colon or a comment inside a flow scalar: left to the parser.
            b':' | b'#' => {
                if c == b':' && bytes.get(*i + 1) == Some(&b' ') && *i > start {
                    break;
                }
                return None;
            }
            _ => *i += 1,
        }
    }
    let s = text[start..*i].trim_end_matches(' ');
    if s.is_empty() {
        return None;
    }
    // Spaces after the scalar belong to no one; the caller skips them.
    *i = start + s.len();
    resolve(s)
}

fn skip_spaces(bytes: &[u8], i: &mut usize) {
    while bytes.get(*i) == Some(&b' ') {
        *i += 1;
    }
}

/// A quoted scalar at the start of `text`, closed on this line: its value and the byte
/// offset after the closing quote.
fn quoted(text: &str) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    let quote = bytes[0];
    let mut out = String::new();
    let mut i = 1;
    let mut run = 1;
    loop {
        let c = *bytes.get(i)?;
        if c == quote {
            if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') {
                out.push_str(&text[run..=i]);
                i += 2;
                run = i;
                continue;
            }
            out.push_str(&text[run..i]);
            return Some((out, i + 1));
        }
        if c == b'\\' && quote == b'"' {
            out.push_str(&text[run..i]);
            let (ch, len) = escape(&bytes[i + 1..])?;
            out.push(ch);
            i += 1 + len;
            run = i;
            continue;
        }
        i += 1;
    }
}

/// A double-quoted scalar's escape after its backslash: the character and the bytes read.
/// Only the common escapes; the rest are left to the parser.
fn escape(after: &[u8]) -> Option<(char, usize)> {
    let hex = |len: usize| -> Option<(char, usize)> {
        let digits = std::str::from_utf8(after.get(1..=len)?).ok()?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let ch = char::from_u32(u32::from_str_radix(digits, 16).ok()?)?;
        Some((ch, 1 + len))
    };
    match *after.first()? {
        b'\\' => Some(('\\', 1)),
        b'"' => Some(('"', 1)),
        b'/' => Some(('/', 1)),
        b'n' => Some(('\n', 1)),
        b't' => Some(('\t', 1)),
        b'r' => Some(('\r', 1)),
        b'0' => Some(('\0', 1)),
        b'x' => hex(2),
        b'u' => hex(4),
        b'U' => hex(8),
        _ => None,
    }
}

/// A plain scalar's value as the general path resolves it; `None` for floating-point numbers
/// and integers beyond 64 bits, left to it.
fn resolve(s: &str) -> Option<Json> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Some(Json::Null),
        "true" | "True" | "TRUE" => return Some(Json::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Json::Bool(false)),
        _ => {}
    }
    let first = s.as_bytes()[0];
    // No integer or finite number starts otherwise (words like `inf` and `nan` parse only
    // as infinite or not-a-number floats, which are strings here).
    if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) {
        return Some(Json::String(s.to_string()));
    }
    if let Some(n) = unsigned(s, u64::from_str_radix) {
        return Some(Json::from(n));
    }
    if let Some(n) = negative(s, i64::from_str_radix) {
        return Some(Json::from(n));
    }
    if unsigned(s, u128::from_str_radix).is_some() || negative(s, i128::from_str_radix).is_some() {
        return None;
    }
    if !leading_zero_numeral(s) && float(s) {
        return None;
    }
    Some(Json::String(s.to_string()))
}

/// A numeral with leading zeros (`007`, `-00`): a string, not a number.
fn leading_zero_numeral(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    digits.len() > 1 && digits.starts_with('0') && digits[1..].bytes().all(|b| b.is_ascii_digit())
}

type Radix<T> = fn(&str, u32) -> Result<T, std::num::ParseIntError>;

/// A non-negative integer: decimal, `0x`, `0o` or `0b`, with an optional `+`.
fn unsigned<T>(s: &str, parse: Radix<T>) -> Option<T> {
    let body = s.strip_prefix('+').unwrap_or(s);
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(digits) = body.strip_prefix(prefix) {
            if digits.starts_with(['+', '-']) {
                return None;
            }
            if let Ok(n) = parse(digits, radix) {
                return Some(n);
            }
        }
    }
    if body.starts_with(['+', '-']) || leading_zero_numeral(s) {
        return None;
    }
    parse(body, 10).ok()
}

/// A negative integer: decimal, `-0x`, `-0o` or `-0b`.
fn negative<T>(s: &str, parse: Radix<T>) -> Option<T> {
    for (prefix, radix) in [("-0x", 16), ("-0o", 8), ("-0b", 2)] {
        if let Some(digits) = s.strip_prefix(prefix)
            && let Ok(n) = parse(&format!("-{digits}"), radix)
        {
            return Some(n);
        }
    }
    if leading_zero_numeral(s) {
        return None;
    }
    parse(s, 10).ok()
}

/// Whether the general path reads `s` as a floating-point number.
fn float(s: &str) -> bool {
    let body = match s.strip_prefix('+') {
        Some(body) if body.starts_with(['+', '-']) => return false,
        Some(body) => body,
        None => s,
    };
    matches!(body, ".inf" | ".Inf" | ".INF")
        || matches!(s, "-.inf" | "-.Inf" | "-.INF" | ".nan" | ".NaN" | ".NAN")
        || body.parse::<f64>().is_ok_and(f64::is_finite)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// What the YAML parser reads: the values of the text's documents, or its error.
    fn general(text: &str) -> Result<Vec<Json>, String> {
        let mut out = Vec::new();
        for document in serde_norway::Deserializer::from_str(text) {
            let mut value =
                serde_norway::Value::deserialize(document).map_err(|e| e.to_string())?;
            value.apply_merge().map_err(|e| e.to_string())?;
            out.push(
                crate::documents::yaml_to_json(value, &mut String::new())
                    .map_err(|(_, message)| message)?,
            );
        }
        Ok(out)
    }

    /// The fast reader's value must be the parser's, when it gives one.
    static TAKEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static ALL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    fn agrees(text: &str) -> Result<(), TestCaseError> {
        let n = ALL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n % 5000 == 4999 {
            eprintln!(
                "TAKEN {} / {}",
                TAKEN.load(std::sync::atomic::Ordering::Relaxed),
                n + 1
            );
        }
        if let Some(fast) = document(text) {
            TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let general = general(text);
            let expected = match general.as_deref() {
                Ok([]) => Json::Null,
                Ok([one]) => one.clone(),
                _ => {
                    return Err(TestCaseError::fail(format!(
                        "read {fast} where the parser gives {general:?} from {text:?}"
                    )));
                }
            };
            prop_assert_eq!(fast, expected, "{:?}", text);
        }
        Ok(())
    }

    #[test]
    fn manifests_as_people_write_them() {
        let text = "\
# a pod
---
apiVersion: v1
kind: Pod
metadata:
  name: web-0   # the first
  labels: {app: web, tier: \"front\", 'x.io/y': ''}
  annotations:
    note: 'it''s \"quoted\"'
    url: http://example.com:80/a#b
spec:
  containers:
  - name: c
    image: registry.io/app:v1.2
    args: [--port, \"8080\", -v]
    ports:
    - containerPort: 8080
      protocol: TCP
    resources:
      requests: {cpu: 100m, memory: 500Mi}
  tolerations:
    - key: k
      operator: Exists
  nodeSelector:
  priority: -5
  replicas: 0x10
  octal: 0o17
  zip: 007
  yes: yes
  empty: ~
  on: true
";
        let value = document(text).expect("the fast reader takes it");
        assert_eq!(
            value,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": "web-0",
                    "labels": {"app": "web", "tier": "front", "x.io/y": ""},
                    "annotations": {"note": "it's \"quoted\"", "url": "http://example.com:80/a#b"},
                },
                "spec": {
                    "containers": [{
                        "name": "c", "image": "registry.io/app:v1.2",
                        "args": ["--port", "8080", "-v"],
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
                    }],
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                    "nodeSelector": null, "priority": -5, "replicas": 16, "octal": 15,
                    "zip": "007", "yes": "yes", "empty": null, "on": true,
                },
            })
        );
        assert_eq!(general(text).unwrap(), [value]);
    }

    #[test]
    fn what_it_does_not_take_is_left_to_the_parser() {
        for text in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: |\n  text\n",
            "a: >\n  text\n",
            "? a\n: b\n",
            "a: multi\n  line\n",
            "a: \"multi\n  line\"\n",
            "a: [1,\n  2]\n",
            "a: 1.5\n",
            "a: .inf\n",
            "a: 123456789012345678901234567890\n",
            "1: a\n",
            "true: a\n",
            "a: 1\na: 2\n",
            "<<: {a: 1}\n",
            "a:\tb\n",
            "a: b\r\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n...\n",
            "--- a: 1\n",
            "a: b: c\n",
            "a: 'x' y\n",
            "- a\nb: c\n",
            "a: {b: http://x}\n",
            "a: \"\\e\"\n",
            "a: 1\n---\nb: 2\n",
            "a: \u{85}\n",
        ] {
            assert_eq!(document(text), None, "{text:?}");
        }
    }

    #[test]
    fn empty_documents_are_null() {
        for text in ["", "\n", "---\n", "# only a comment\n", "---  # c\n\n"] {
            assert_eq!(document(text), Some(Json::Null), "{text:?}");
        }
    }

    /// Scalars as manifests write them, and some that read as something else.
    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "a",
                "web-0",
                "100m",
                "64Gi",
                "16",
                "0",
                "-1",
                "+2",
                "007",
                "0x1F",
                "-0x1f",
                "0o17",
                "0b101",
                "1.5",
                "1e3",
                "-.inf",
                ".nan",
                ".hidden",
                "true",
                "False",
                "NULL",
                "~",
                "null",
                "yes",
                "no",
                "on",
                "10.0.0.1",
                "a b",
                "a:b",
                "a#b",
                "a #b",
                "http://x:80/",
                "é",
                "18446744073709551616",
                "-9223372036854775809",
                "",
                "it's",
                "say \"hi\"",
                "-",
                "- x",
                "?",
                ":",
                "[a]",
                "{a}",
                "&a",
                "*a",
                "!t",
                "|",
                ">",
                "%",
                "@",
                "`",
                "'q'",
                "\"q\"",
                "\\",
                "\\n",
                "\\x41",
                "\\u00e9",
                "<<",
            ])
            .prop_map(str::to_string),
            "[a-z0-9 :#'\"\\-\\[\\]{},.]{0,8}",
        ]
    }

    /// A scalar written plain, single- or double-quoted.
    fn write_scalar(s: &str, style: u8) -> String {
        match style % 3 {
            0 => s.to_string(),
            1 => format!("'{}'", s.replace('\'', "''")),
            _ => format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")),
        }
    }

    #[derive(Debug, Clone)]
    enum Node {
        Scalar(String, u8),
        Seq(Vec<Node>, bool),
        Map(Vec<((String, u8), Node)>, bool),
    }

    fn nodes() -> impl Strategy<Value = Node> {
        let leaf = (scalar(), any::<u8>()).prop_map(|(s, style)| Node::Scalar(s, style));
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..4), any::<bool>())
                    .prop_map(|(items, flow)| Node::Seq(items, flow)),
                (
                    prop::collection::vec(((scalar(), any::<u8>()), inner), 0..4),
                    any::<bool>()
                )
                    .prop_map(|(entries, flow)| Node::Map(entries, flow)),
            ]
        })
    }

    fn write_flow(node: &Node) -> String {
        match node {
            Node::Scalar(s, style) => write_scalar(s, *style),
            Node::Seq(items, _) => {
                let items: Vec<String> = items.iter().map(write_flow).collect();
                format!("[{}]", items.join(", "))
            }
            Node::Map(entries, _) => {
                let entries: Vec<String> = entries
                    .iter()
                    .map(|((k, style), v)| {
                        format!("{}: {}", write_scalar(k, *style), write_flow(v))
                    })
                    .collect();
                format!("{{{}}}", entries.join(", "))
            }
        }
    }

    /// How a document is laid out: indentation step, spaces after `-` and after `:`,
    /// sequences at their key's indentation, mappings and sequences starting on their `- `
    /// line, comment lines.
    #[derive(Debug, Clone, Copy)]
    struct Layout {
        step: usize,
        dash_gap: usize,
        colon_gap: usize,
        compact: bool,
        inline: bool,
        comments: bool,
    }

    fn layouts() -> impl Strategy<Value = Layout> {
        (
            1usize..5,
            1usize..4,
            1usize..3,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(
                |(step, dash_gap, colon_gap, compact, inline, comments)| Layout {
                    step,
                    dash_gap,
                    colon_gap,
                    compact,
                    inline,
                    comments,
                },
            )
    }

    fn is_block(node: &Node) -> bool {
        matches!(node, Node::Seq(_, false) | Node::Map(_, false)) && !is_empty(node)
    }

    /// Block layout (where the node asks for it and is not empty), `indent` spaces deep.
    fn write_block(node: &Node, indent: usize, layout: Layout, out: &mut String) {
        let pad = " ".repeat(indent);
        match node {
            Node::Seq(items, false) if !items.is_empty() => {
                for item in items {
                    if !is_block(item) {
                        out.push_str(&pad);
                        out.push('-');
                        out.push_str(&" ".repeat(layout.dash_gap));
                        out.push_str(&write_flow(item));
                        out.push('\n');
                    } else if layout.inline {
                        // `- key: value` with the rest of the mapping below, or `- - item`.
                        let column = indent + 1 + layout.dash_gap;
                        let mut nested = String::new();
                        write_block(item, column, layout, &mut nested);
                        let nested = nested.trim_start_matches(' ');
                        out.push_str(&pad);
                        out.push('-');
                        out.push_str(&" ".repeat(layout.dash_gap));
                        out.push_str(nested);
                    } else {
                        out.push_str(&pad);
                        out.push_str("-\n");
                        write_block(item, indent + layout.step, layout, out);
                    }
                }
            }
            Node::Map(entries, false) if !entries.is_empty() => {
                for ((k, style), v) in entries {
                    if layout.comments {
                        out.push_str("# between entries\n");
                    }
                    out.push_str(&pad);
                    out.push_str(&write_scalar(k, *style));
                    out.push(':');
                    match v {
                        Node::Seq(items, false) if !items.is_empty() => {
                            out.push('\n');
                            let deeper = if layout.compact {
                                indent
                            } else {
                                indent + layout.step
                            };
                            write_block(v, deeper, layout, out);
                        }
                        Node::Map(entries, false) if !entries.is_empty() => {
                            out.push_str(if layout.comments { "  # note\n" } else { "\n" });
                            write_block(v, indent + layout.step, layout, out);
                        }
                        _ => {
                            out.push_str(&" ".repeat(layout.colon_gap));
                            out.push_str(&write_flow(v));
                            out.push_str(if layout.comments { " # after\n" } else { "\n" });
                        }
                    }
                }
            }
            _ => {
                out.push_str(&pad);
                out.push_str(&write_flow(node));
                out.push('\n');
            }
        }
    }

    fn is_empty(node: &Node) -> bool {
        match node {
            Node::Seq(items, _) => items.is_empty(),
            Node::Map(entries, _) => entries.is_empty(),
            Node::Scalar(..) => false,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn written_documents_read_as_the_parser_reads_them(
            node in nodes(),
            layout in layouts(),
            marker in any::<bool>(),
        ) {
            let mut text = if marker { "---\n".to_string() } else { String::new() };
            write_block(&node, 0, layout, &mut text);
            agrees(&text)?;
        }

        #[test]
        fn damaged_documents_are_read_as_the_parser_reads_them_or_left_to_it(
            node in nodes(),
            layout in layouts(),
            edits in prop::collection::vec(
                (any::<prop::sample::Index>(), prop::sample::select(vec![
                    " ", "  ", "\n", ":", ": ", "- ", "#", " #", "'", "\"", "[", "]", "{", "}",
                    ",", "---\n", "\n  ", "\n- ", "&", "*", "!", "|", "?", "\\", "", "x",
                ])),
                1..4,
            ),
        ) {
            let mut text = String::new();
            write_block(&node, 0, layout, &mut text);
            for (at, insert) in edits {
                let mut at = at.index(text.len() + 1);
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                text.insert_str(at, insert);
            }
            agrees(&text)?;
        }
    }
}
