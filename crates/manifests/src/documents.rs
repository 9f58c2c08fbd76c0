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
    let mut out = Vec::new();
    parse_in_batches(file, text, json, &mut |batch| {
        out.extend(batch);
        Ok(())
    })?;
    Ok(out)
}

/// Text read into values at a time by [`parse_in_batches`]: a document's parsed value takes
/// many times the bytes of its text, too much to hold for a whole large input at once.
const BATCH_BYTES: usize = 2 << 20;

/// A consumer of documents in input order, a batch at a time.
pub(crate) type Route<'a> = dyn FnMut(Vec<Document>) -> Result<(), LoadError> + 'a;

/// Parses `text` as [`parse_documents`] does, handing the documents to `route` in batches of
/// about [`BATCH_BYTES`] of text, in order, so that only one batch's values are alive at
/// once; returns how many documents there were. The outcome is that of parsing the whole text
/// and then routing its documents: an error in the text (syntax, limits) anywhere is returned
/// before an error of `route` (the rest of the text is still parsed, without keeping values,
/// to find one).
pub(crate) fn parse_in_batches(
    file: &str,
    text: &str,
    json: bool,
    route: &mut Route,
) -> Result<usize, LoadError> {
    parse_in_batches_of(file, text, json, BATCH_BYTES, route)
}

fn parse_in_batches_of(
    file: &str,
    text: &str,
    json: bool,
    batch_bytes: usize,
    route: &mut Route,
) -> Result<usize, LoadError> {
    if json {
        parse_json(file, text, batch_bytes, route)
    } else {
        parse_yaml(file, text, batch_bytes, route)
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

fn parse_json(
    file: &str,
    text: &str,
    batch_bytes: usize,
    route: &mut Route,
) -> Result<usize, LoadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut batch = Vec::new();
    let mut batch_start = 0;
    let mut count = 0;
    // The error of `route`, returned unless the text has one of its own further on.
    let mut routed: Result<(), LoadError> = Ok(());
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Json>();
    let mut next = 0;
    while let Some(value) = stream.next() {
        let i = next;
        next += 1;
        let number = document_number(i);
        if i >= MAX_DOCUMENTS {
            return Err(LoadError::Limit {
                origin: origin(file, number),
                message: format!("more than {MAX_DOCUMENTS} documents in one file; split the file"),
            });
        }
        let value = value.map_err(|e| LoadError::Syntax {
            origin: origin(file, number),
            format: "JSON",
            line: e.line(),
            column: e.column(),
            message: strip_json_location(&e),
        })?;
        if routed.is_err() {
            continue;
        }
        if !value.is_null() {
            batch.push(Document { number, value });
        }
        if stream.byte_offset() - batch_start >= batch_bytes {
            batch_start = stream.byte_offset();
            count += batch.len();
            routed = route(std::mem::take(&mut batch));
        }
    }
    routed?;
    count += batch.len();
    if !batch.is_empty() {
        route(batch)?;
    }
    Ok(count)
}

/// `serde_json::Error`'s text without its trailing " at line L column C".
fn strip_json_location(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_string()
}

/// Nesting levels (mappings and lists inside each other) a document may have.
pub const MAX_DEPTH: usize = 100;
/// Bytes in one document.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;
/// Documents in one file.
pub const MAX_DOCUMENTS: usize = 1_000_000;

/// What a cheap pass over a YAML text finds before the parser sees it: where each document
/// starts. It fails on a document nested deeper than [`MAX_DEPTH`] (the parser takes time
/// that grows faster than the text on such input), larger than [`MAX_DOCUMENT_BYTES`], or on
/// more than [`MAX_DOCUMENTS`] documents.
///
/// Nesting is counted from block indentation (each deeper indentation, each `- `, `? ` or
/// `: ` that opens an entry, and a sequence written under its key at the key's indentation,
/// is a level) plus open flow brackets (`[` and `{` that start a value, and every bracket
/// inside one), skipping comments, quoted strings, anchors, tags and block scalars. On
/// anything the YAML writer or a JSON writer produces the count is the real depth or one
/// more (a property test checks it); odd hand-written layouts may be counted a little off,
/// which moves the limit by a few levels, never by the orders of magnitude that make the
/// parser slow.
struct Prescan {
    /// 1-based line where each document starts (by serde_norway's document numbering).
    starts: Vec<usize>,
    /// The deepest nesting counted in any document.
    #[cfg_attr(not(test), allow(dead_code))]
    deepest: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Quote {
    None,
    Single,
    Double,
}

pub(crate) fn check_yaml_limits(file: &str, text: &str) -> Result<(), LoadError> {
    prescan_yaml(file, text).map(|_| ())
}

fn prescan_yaml(file: &str, text: &str) -> Result<Prescan, LoadError> {
    prescan_yaml_within(file, text, MAX_DOCUMENT_BYTES, MAX_DOCUMENTS)
}

fn prescan_yaml_within(
    file: &str,
    text: &str,
    max_bytes: usize,
    max_documents: usize,
) -> Result<Prescan, LoadError> {
    let too_deep = |document: usize, line: usize| LoadError::Limit {
        origin: origin(file, document_number(document - 1)),
        message: format!(
            "nested more than {MAX_DEPTH} levels deep at line {line}; \
             lockstep reads at most {MAX_DEPTH} levels of mappings and lists inside each other \
             and Kubernetes objects are far shallower: check that this is the file you meant"
        ),
    };
    let mut starts = vec![1];
    let mut deepest = 0;
    // Per document.
    let mut has_content = false;
    let mut has_marker = false;
    let mut doc_bytes = 0usize;
    // Block levels: the indentation of each, and whether it is a sequence written at its
    // parent key's own indentation (`key:` then `- item` below it, not indented).
    let mut indents: Vec<(usize, bool)> = Vec::new();
    // Whether the last line ended with a key whose value follows on the next lines.
    let mut key_open = false;
    let mut flow = 0usize;
    let mut quote = Quote::None;
    // A block scalar's lines are those indented more than this.
    let mut block_scalar: Option<usize> = None;
    for (index, raw) in text.split('\n').enumerate() {
        let number = index + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let marker = quote == Quote::None
            && flow == 0
            && (line.starts_with("---") || line.starts_with("..."))
            && line[3..]
                .chars()
                .next()
                .is_none_or(|c| c == ' ' || c == '\t');
        if marker {
            let start = line.starts_with("---");
            if has_content || has_marker || !start {
                if has_content || has_marker {
                    starts.push(number);
                    if starts.len() > max_documents {
                        return Err(LoadError::Limit {
                            origin: origin(file, document_number(starts.len() - 1)),
                            message: format!(
                                "more than {max_documents} documents in one file; \
                                 split the file"
                            ),
                        });
                    }
                }
                has_content = false;
                doc_bytes = 0;
                indents.clear();
                key_open = false;
                block_scalar = None;
            }
            has_marker = start;
            if !start {
                continue;
            }
        }
        doc_bytes += raw.len() + 1;
        if doc_bytes > max_bytes {
            return Err(LoadError::Limit {
                origin: origin(file, document_number(starts.len() - 1)),
                message: format!(
                    "the document is larger than {} at line {number}; \
                     split it into several documents",
                    if max_bytes.is_multiple_of(1 << 20) {
                        format!("{} MiB", max_bytes >> 20)
                    } else {
                        format!("{max_bytes} bytes")
                    }
                ),
            });
        }
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        if let Some(parent) = block_scalar {
            if rest.trim().is_empty() || indent > parent {
                continue;
            }
            block_scalar = None;
        }
        let bytes = line.as_bytes();
        let mut i = if marker { 3 } else { indent };
        // The column of the last `-`, `?` or `:` that opens an entry on this line.
        let mut indicator = None;
        // Block structure, for lines that start outside quotes and flow collections.
        if quote == Quote::None && flow == 0 && !marker {
            if rest.is_empty() || rest.starts_with('#') || rest.starts_with('%') {
                continue;
            }
            has_content = true;
            let entry = bytes[indent] == b'-' && bytes.get(indent + 1).is_none_or(|&c| c == b' ');
            while indents.last().is_some_and(|&(top, _)| top > indent) {
                indents.pop();
            }
            if indents.last() == Some(&(indent, true)) && !entry {
                indents.pop();
            }
            if key_open && entry && indents.last().is_some_and(|&(top, _)| top == indent) {
                indents.push((indent, true));
            } else if indents.last().is_none_or(|&(top, _)| top < indent) {
                indents.push((indent, false));
            }
            // `- ` and `? ` entries (and `: ` values of `? ` keys) open a level each.
            while i < bytes.len()
                && matches!(bytes[i], b'-' | b'?' | b':')
                && bytes.get(i + 1).is_none_or(|&c| c == b' ')
            {
                indicator = Some(i);
                i += 1;
                while i < bytes.len() && bytes[i] == b' ' {
                    i += 1;
                }
                if indents.last().is_none_or(|&(top, _)| top < i) && i < bytes.len() {
                    indents.push((i, false));
                }
            }
        } else if !rest.trim().is_empty() {
            has_content = true;
        }
        // The rest of the line: flow brackets, quotes, comments, block scalar headers.
        let key_column = i;
        let block_line = quote == Quote::None && flow == 0 && !marker;
        let mut last_colon = false;
        let mut value_start = true;
        let mut plain = false;
        while i < bytes.len() {
            let c = bytes[i];
            match quote {
                Quote::Double => {
                    if c == b'\\' {
                        i += 1;
                    } else if c == b'"' {
                        quote = Quote::None;
                    }
                }
                Quote::Single => {
                    if c == b'\'' {
                        if bytes.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            quote = Quote::None;
                        }
                    }
                }
                Quote::None => match c {
                    b' ' | b'\t' => {}
                    b'#' if i == 0 || matches!(bytes[i - 1], b' ' | b'\t') => break,
                    // An anchor or a tag comes before the value it names: skip it and
                    // keep looking for the value.
                    b'&' | b'!' if value_start => {
                        while i + 1 < bytes.len()
                            && !matches!(bytes[i + 1], b' ' | b'\t' | b',' | b'[' | b'{')
                        {
                            i += 1;
                        }
                    }
                    b'"' | b'\'' if value_start => {
                        last_colon = false;
                        quote = if c == b'"' {
                            Quote::Double
                        } else {
                            Quote::Single
                        };
                        value_start = false;
                    }
                    b'[' | b'{' if value_start || (flow > 0 && !plain) => {
                        last_colon = false;
                        flow += 1;
                        deepest = deepest.max(indents.len() + flow);
                        if indents.len() + flow > MAX_DEPTH {
                            return Err(too_deep(starts.len(), number));
                        }
                        value_start = true;
                        plain = false;
                    }
                    b']' | b'}' if flow > 0 => {
                        flow -= 1;
                        plain = false;
                    }
                    b',' if flow > 0 => {
                        value_start = true;
                        plain = false;
                    }
                    b':' if flow > 0
                        || bytes.get(i + 1).is_none_or(|&n| n == b' ' || n == b'\t') =>
                    {
                        last_colon = flow == 0;
                        value_start = true;
                        plain = false;
                    }
                    b'|' | b'>' if value_start && flow == 0 => {
                        last_colon = false;
                        let header = line[i + 1..].split('#').next().unwrap_or("");
                        if header
                            .trim()
                            .bytes()
                            .all(|h| h == b'-' || h == b'+' || h.is_ascii_digit())
                        {
                            // Its lines are indented more than the node holding it: the
                            // entry when it follows `- `, `? ` or `: ` at once, else the key.
                            block_scalar = Some(match indicator {
                                Some(col) if i == key_column => col,
                                _ => key_column,
                            });
                            break;
                        }
                        value_start = false;
                        plain = true;
                    }
                    _ => {
                        last_colon = false;
                        value_start = false;
                        plain = true;
                    }
                },
            }
            i += 1;
        }
        if block_line {
            key_open = last_colon && flow == 0 && quote == Quote::None;
        }
        deepest = deepest.max(indents.len() + flow);
        if indents.len() + flow > MAX_DEPTH {
            return Err(too_deep(starts.len(), number));
        }
    }
    Ok(Prescan { starts, deepest })
}

/// YAML texts at least this large are parsed in parallel, in pieces of whole documents.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

fn parse_yaml(
    file: &str,
    text: &str,
    batch_bytes: usize,
    route: &mut Route,
) -> Result<usize, LoadError> {
    let prescan = prescan_yaml(file, text)?;
    let layout = Layout::new(text, &prescan);
    let threads = crate::threads_for(text.len(), PARALLEL_MIN_BYTES);
    let mut batches = layout.batches(batch_bytes);
    let mut count = 0;
    while let Some(batch) = batches.next() {
        let Some(documents) = parse_yaml_pieces(&layout, batch.clone(), threads) else {
            // A single pass gives the exact error (or the documents, from this batch on).
            let rest: Vec<Document> = parse_yaml_in_order(file, text, &prescan)?
                .into_iter()
                .filter(|d| d.number as usize > batch.start)
                .collect();
            count += rest.len();
            if !rest.is_empty() {
                route(rest)?;
            }
            return Ok(count);
        };
        count += documents.len();
        if documents.is_empty() {
            continue;
        }
        if let Err(e) = route(documents) {
            // An error in the text further on comes first, as if it were all parsed first.
            for batch in batches {
                if parse_yaml_pieces(&layout, batch, threads).is_none() {
                    parse_yaml_in_order(file, text, &prescan)?;
                    break;
                }
            }
            return Err(e);
        }
    }
    Ok(count)
}

/// Where a YAML text's lines and documents start.
struct Layout<'t> {
    text: &'t str,
    prescan: &'t Prescan,
    /// Byte offset of each line's start.
    line_offsets: Vec<usize>,
}

impl<'t> Layout<'t> {
    fn new(text: &'t str, prescan: &'t Prescan) -> Layout<'t> {
        let mut line_offsets = vec![0usize];
        line_offsets.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Layout {
            text,
            prescan,
            line_offsets,
        }
    }

    fn documents(&self) -> usize {
        self.prescan.starts.len()
    }

    /// Byte offset where document `d` starts (the text's end for the one after the last).
    fn start(&self, d: usize) -> usize {
        self.prescan
            .starts
            .get(d)
            .map_or(self.text.len(), |&line| self.line_offsets[line - 1])
    }

    /// Whether document `d`'s start line opens with `---`: the parser reads the text from
    /// there as it reads it in one pass, so the text can be cut there.
    fn cuttable(&self, d: usize) -> bool {
        self.line_offsets
            .get(self.prescan.starts[d] - 1)
            .is_some_and(|&o| self.text[o..].starts_with("---"))
    }

    /// Runs of whole documents of at least `bytes` of text (but the last), cut where the
    /// text can be cut.
    fn batches(&self, bytes: usize) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let n = self.documents();
        let mut from = 0;
        std::iter::from_fn(move || {
            if from >= n {
                return None;
            }
            let begin = self.start(from);
            let to = (from + 1..n)
                .find(|&d| self.start(d) - begin >= bytes && self.cuttable(d))
                .unwrap_or(n);
            let batch = from..to;
            from = to;
            Some(batch)
        })
    }
}

/// Parses documents `range` of the text in up to `threads` pieces at once (in place when
/// one), each a run of whole documents starting at a `---` line, each document by
/// [`read_documents_fast`] (else the piece by the parser straight to JSON values,
/// [`crate::yaml_json`]), and numbers the documents as one pass would. `range` starts at the
/// text's start or at a document that [`Layout::cuttable`] allows. `None` when a piece has an
/// error, anything the fast path leaves to the general one, or yields another number of
/// documents than the prescan found in it: the caller then parses the whole text in order,
/// which gives the exact error (or result) a single pass gives.
fn parse_yaml_pieces(
    layout: &Layout,
    range: std::ops::Range<usize>,
    threads: usize,
) -> Option<Vec<Document>> {
    let text = layout.text;
    // Cut points: document indexes the text can be cut at, near equal shares.
    let n = range.len();
    let mut cuts = vec![range.start];
    for k in 1..threads {
        let want = range.start + n * k / threads;
        // Fewer pieces where the text cannot be cut.
        let Some(cut) = (want..range.end).find(|&d| layout.cuttable(d)) else {
            break;
        };
        if cut > *cuts.last()? {
            cuts.push(cut);
        }
    }
    cuts.push(range.end);
    let pieces: Vec<(usize, usize, &str)> = cuts
        .windows(2)
        .map(|w| {
            let piece = &text[layout.start(w[0])..layout.start(w[1])];
            (w[0], w[1] - w[0], piece)
        })
        .collect();
    let parse = |(first, count, piece): (usize, usize, &str)| {
        if let Some(out) = read_documents_fast(layout, first, count) {
            return Some(out);
        }
        let mut out = Vec::new();
        let mut seen = 0usize;
        for document in serde_norway::Deserializer::from_str(piece) {
            let number = document_number(first + seen);
            seen += 1;
            let value = crate::yaml_json::document(document)?;
            if value.is_null() {
                continue;
            }
            out.push(Document { number, value });
        }
        (seen == count).then_some(out)
    };
    if let [piece] = pieces[..] {
        return parse(piece);
    }
    let parsed: Vec<Option<Vec<Document>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = pieces
            .iter()
            .map(|&piece| scope.spawn(move || parse(piece)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let mut out = Vec::new();
    for piece in parsed {
        out.extend(piece?);
    }
    Some(out)
}

/// Documents `first..first + count` of the layout's text, each read by
/// [`crate::yaml_fast`] or, where it gives up, by the YAML parser on the document's own text.
/// `None` when a document the fast reader gives up on does not start with `---` (its text
/// alone might read otherwise) or the parser fails or finds another number of documents in
/// it: the caller then parses the piece as a whole.
fn read_documents_fast(layout: &Layout, first: usize, count: usize) -> Option<Vec<Document>> {
    let mut out = Vec::with_capacity(count);
    for d in first..first + count {
        let own = &layout.text[layout.start(d)..layout.start(d + 1)];
        let value = match crate::yaml_fast::document(own) {
            Some(value) => value,
            // Its own text is what the parser sees of it: the text's start, or a `---` line.
            None if d == 0 || own.starts_with("---") => {
                let mut documents = serde_norway::Deserializer::from_str(own);
                let value = crate::yaml_json::document(documents.next()?)?;
                if documents.next().is_some() {
                    return None;
                }
                value
            }
            None => return None,
        };
        if !value.is_null() {
            out.push(Document {
                number: document_number(d),
                value,
            });
        }
    }
    Some(out)
}

fn parse_yaml_in_order(
    file: &str,
    text: &str,
    prescan: &Prescan,
) -> Result<Vec<Document>, LoadError> {
    let mut out = Vec::new();
    for (i, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let number = document_number(i);
        let syntax = |e: serde_norway::Error| yaml_error(file, number, text, prescan, e);
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

/// A parser error as a [`LoadError`] that says where and what to do: errors without a place
/// (aliases that expand too far) are placed at the document's first line, and an integer too
/// large for 64 bits is a bad value, not bad syntax.
fn yaml_error(
    file: &str,
    number: u32,
    text_in: &str,
    prescan: &Prescan,
    e: serde_norway::Error,
) -> LoadError {
    let text = e.to_string();
    let Some(location) = e.location() else {
        let start = prescan
            .starts
            .get(number as usize - 1)
            .copied()
            .unwrap_or(1);
        let message = if text.contains("repetition limit exceeded") {
            format!(
                "the document starting at line {start} uses aliases (*name) that expand to too \
                 much data; write the values out or use fewer aliases"
            )
        } else {
            format!("{text} in the document starting at line {start}; fix the document")
        };
        return LoadError::Invalid {
            origin: origin(file, number),
            message,
        };
    };
    let (line, column) = (location.line(), location.column());
    let mut message = text.replacen(&format!(" at line {line} column {column}"), "", 1);
    if let Some((path, rest)) = message.split_once("invalid type: integer `")
        && let Some((digits, _)) = rest.split_once('`')
    {
        let path = path.trim_end_matches(": ");
        return LoadError::InvalidValue {
            origin: origin(file, number),
            object: format!("line {line}, column {column}"),
            path: if path.is_empty() {
                "(top level)".to_string()
            } else {
                path.to_string()
            },
            message: format!(
                "the integer {digits} does not fit in 64 bits; write a smaller number, or quote \
                 it if it is text"
            ),
        };
    }
    if let Some(tab_line) = tab_indented_line(text_in, line) {
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
}

/// Converts a YAML value to JSON the way Kubernetes' YAML decoder does: scalar mapping keys
/// become strings, tags are dropped. Fails (with the field path) on values JSON cannot hold.
pub(crate) fn yaml_to_json(value: Yaml, path: &mut String) -> Result<Json, (String, String)> {
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

    /// A text of many documents of every layout: empty ones, end markers, comments, block
    /// scalars, flow collections, merge keys, a first document without a marker.
    fn many_documents() -> String {
        let mut text = String::from("first: 0\n");
        for i in 0..300 {
            text.push_str(match i % 7 {
                0 => "---\n",
                1 => "--- # a comment\n",
                2 => "...\n---\n",
                3 => "---\n---\n",
                4 => "--- \n",
                5 => "---\n# only a comment\n---\n",
                _ => "---\n\n",
            });
            text.push_str(&match i % 5 {
                0 => format!("kind: Pod\nmetadata: {{name: p{i}, labels: {{a: \"{i}\"}}}}\n"),
                1 => format!("script: |\n  line one {i}\n  --- not a marker, indented\nn: {i}\n"),
                2 => format!("base: &b {{x: {i}}}\nuse:\n  <<: *b\n  y: 2\n"),
                3 => format!("- {i}\n- [a, b, {{c: d}}]\n"),
                _ => format!("quoted: \"--- {i}\"\nlist:\n- a\n- b\n"),
            });
        }
        text
    }

    #[test]
    fn documents_parsed_in_pieces_are_those_of_one_pass() {
        let text = many_documents();
        let prescan = prescan_yaml("f.yaml", &text).unwrap();
        let whole = parse_yaml_in_order("f.yaml", &text, &prescan).unwrap();
        assert!(whole.len() > 250, "{}", whole.len());
        let layout = Layout::new(&text, &prescan);
        for threads in [2, 3, 8] {
            let all = 0..layout.documents();
            let pieces = parse_yaml_pieces(&layout, all, threads).expect("no error");
            assert_eq!(pieces.len(), whole.len());
            for (a, b) in pieces.iter().zip(&whole) {
                assert_eq!(
                    (a.number, &a.value),
                    (b.number, &b.value),
                    "threads {threads}"
                );
            }
        }
    }

    /// The documents of `text` read in batches of `bytes` of text, and how many batches.
    fn batched(text: &str, json: bool, bytes: usize) -> (Vec<(u32, Json)>, usize) {
        let mut out = Vec::new();
        let mut batches = 0;
        parse_in_batches_of("f.yaml", text, json, bytes, &mut |batch| {
            batches += 1;
            out.extend(batch.into_iter().map(|d| (d.number, d.value)));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
        (out, batches)
    }

    #[test]
    fn documents_read_in_batches_are_those_of_one_pass() {
        let text = many_documents();
        let prescan = prescan_yaml("f.yaml", &text).unwrap();
        let whole: Vec<(u32, Json)> = parse_yaml_in_order("f.yaml", &text, &prescan)
            .unwrap()
            .into_iter()
            .map(|d| (d.number, d.value))
            .collect();
        for bytes in [1, 100, 1000, usize::MAX] {
            let (got, batches) = batched(&text, false, bytes);
            assert_eq!(got, whole, "batches of {bytes} bytes");
            if bytes == 1000 {
                assert!(batches > 5, "{batches} batches");
            }
        }
        let json: String = (0..200)
            .map(|i| format!("{{\"n\": {i}}}\nnull\n"))
            .collect();
        let (whole, _) = batched(&json, true, usize::MAX);
        assert_eq!(whole.len(), 200);
        for bytes in [1, 50, 1000] {
            let (got, batches) = batched(&json, true, bytes);
            assert_eq!(got, whole, "batches of {bytes} bytes");
            assert!(batches > 1);
        }
    }

    #[test]
    fn an_error_in_the_text_comes_before_an_error_routing_an_earlier_batch() {
        // The consumer refuses the first batch; what is returned, and how often it was called.
        let refuse_first = |text: &str, json: bool| {
            let mut calls = 0;
            let e = parse_in_batches_of("f.yaml", text, json, 500, &mut |_| {
                calls += 1;
                Err(LoadError::Limit {
                    origin: origin("f.yaml", 1),
                    message: "refused".into(),
                })
            })
            .unwrap_err()
            .to_string();
            (e, calls)
        };
        let yaml = many_documents();
        let (e, calls) = refuse_first(&(yaml.clone() + "---\nbad: [unclosed\n"), false);
        assert!(e.contains("invalid YAML"), "{e}");
        assert_eq!(calls, 1);
        let (e, calls) = refuse_first(&yaml, false);
        assert!(e.contains("refused"), "{e}");
        assert_eq!(calls, 1);

        let json: String = (0..200).map(|i| format!("{{\"n\": {i}}}\n")).collect();
        let (e, calls) = refuse_first(&(json.clone() + "{\"n\": "), true);
        assert!(e.contains("invalid JSON"), "{e}");
        assert_eq!(calls, 1);
        let (e, _) = refuse_first(&json, true);
        assert!(e.contains("refused"), "{e}");
    }

    #[test]
    fn an_error_in_a_piece_is_left_to_the_pass_in_order() {
        let mut text = many_documents();
        text.push_str("---\nbad: [unclosed\n---\nafter: 1\n");
        let prescan = prescan_yaml("f.yaml", &text).unwrap();
        let layout = Layout::new(&text, &prescan);
        assert!(parse_yaml_pieces(&layout, 0..layout.documents(), 2).is_none());
        // The whole parse reports it as a pass in order does, pieces or not.
        let e = parse_yaml_in_order("f.yaml", &text, &prescan)
            .err()
            .unwrap();
        let padded = text.clone() + &"# padding\n".repeat(PARALLEL_MIN_BYTES / 10 + 1);
        let e_big = parse_documents("f.yaml", &padded, false).err().unwrap();
        assert_eq!(e.to_string(), e_big.to_string());
    }

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

    fn limit_error(text: &str) -> String {
        match parse_documents("f.yaml", text, false) {
            Err(e @ LoadError::Limit { .. }) => e.to_string(),
            Err(e) => panic!("not a limit error: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    /// Deeply nested documents fail before the parser sees them (the parser takes tens of
    /// seconds on these in a release build).
    #[test]
    fn deep_nesting_fails_at_once() {
        let started = std::time::Instant::now();
        let flow = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let maps = format!("a: {}1{}\n", "{a: ".repeat(50_000), "}".repeat(50_000));
        let json_like = format!("a: {}1{}\n", "{\"a\":".repeat(50_000), "}".repeat(50_000));
        let dashes = format!("{}x\n", "- ".repeat(50_000));
        let anchored = format!("a: {}1\n", "&x [!!seq [".repeat(200));
        let mut block = String::new();
        for i in 0..150 {
            block.push_str(&" ".repeat(i));
            block.push_str("k:\n");
        }
        for text in [&flow, &maps, &json_like, &dashes, &block, &anchored] {
            let e = limit_error(text);
            assert!(
                e.starts_with("f.yaml (document 1): nested more than 100 levels deep at line"),
                "{e}"
            );
        }
        let second = format!("a: 1\n---\nb: {}\n", "[".repeat(200));
        assert!(
            limit_error(&second)
                .starts_with("f.yaml (document 2): nested more than 100 levels deep at line 3")
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
    }

    /// What is not nesting is not counted: block scalars, quoted and plain brackets, comments.
    #[test]
    fn ordinary_documents_pass_the_nesting_check() {
        let mut script = String::from("data:\n  run.sh: |\n");
        for i in 0..150 {
            script.push_str(&format!("    {}echo {i}\n", " ".repeat(i)));
        }
        script.push_str("other: x\n");
        let brackets = format!(
            "a: \"{}\"\nb: x{}\nc: '{}'\n# {}\nd: [1, \"]]]\", [2, {{e: f}}]]\n",
            "[".repeat(300),
            "{".repeat(300),
            "[".repeat(300),
            "[".repeat(300)
        );
        let mut deep_enough = String::new();
        for i in 0..90 {
            deep_enough.push_str(&" ".repeat(i));
            deep_enough.push_str("k:\n");
        }
        deep_enough.push_str(&" ".repeat(90));
        deep_enough.push_str("v: 1\n");
        for text in [&script, &brackets, &deep_enough] {
            parse_documents("f.yaml", text, false).expect("valid");
        }
    }

    #[test]
    fn document_size_and_count_are_bounded() {
        let e = prescan_yaml_within("f.yaml", "a: 1\n---\nb: 1234567890\n", 10, 100)
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "f.yaml (document 2): the document is larger than 10 bytes at line 3; split it into \
             several documents (see \"Limits\" in README.md)"
        );
        let e = prescan_yaml_within("f.yaml", "a: 1\n---\nb: 2\n---\nc: 3\n", 100, 2)
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "f.yaml (document 3): more than 2 documents in one file; split the file \
             (see \"Limits\" in README.md)"
        );
        let p = prescan_yaml_within("f.yaml", "---\na: 1\n---\n---\nb: x\n", 100, 100).unwrap();
        assert_eq!(p.starts, vec![1, 3, 4]);
    }

    #[test]
    fn alias_bombs_and_huge_integers_say_what_they_are() {
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            bomb.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{prev}"); 9].join(", ")
            ));
        }
        let text = format!("x: 1\n---\n{bomb}");
        let e = parse_documents("f.yaml", &text, false)
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "f.yaml (document 2): the document starting at line 2 uses aliases (*name) that \
             expand to too much data; write the values out or use fewer aliases"
        );
        let e = parse_documents("f.yaml", "a:\n  b: 18446744073709551616\n", false)
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "f.yaml (document 1): line 2, column 6: field a.b: the integer 18446744073709551616 \
             does not fit in 64 bits; write a smaller number, or quote it if it is text"
        );
    }

    /// Nesting depth of a value: a scalar is 0, a list or mapping one more than its deepest
    /// item.
    fn depth(v: &Json) -> usize {
        match v {
            Json::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
            Json::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    fn values() -> impl proptest::strategy::Strategy<Value = Json> {
        use proptest::prelude::*;
        // Strings full of YAML's special characters.
        let text = "[a-z \\[\\]{}#:,&!|>'\"*?\\-\n\t\\\\]{0,12}";
        let leaf = prop_oneof![
            Just(Json::Null),
            any::<bool>().prop_map(Json::from),
            any::<i64>().prop_map(Json::from),
            text.prop_map(Json::from),
        ];
        leaf.prop_recursive(40, 200, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
                proptest::collection::btree_map(text, inner, 0..4)
                    .prop_map(|m| Json::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// The pre-scan never refuses what the YAML writer or a JSON writer produces at a
        /// depth the parser accepts, and the document reads back unchanged; nested below
        /// 101 levels of lists the same value is refused.
        #[test]
        fn prescan_accepts_written_documents_and_refuses_deep_ones(v in values()) {
            proptest::prop_assume!(depth(&v) <= 60);
            let block = serde_norway::to_string(&v).unwrap();
            let flow = serde_json::to_string(&v).unwrap();
            for text in [&block, &flow] {
                let docs = parse_documents("f.yaml", text, false)
                    .map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}\n{text}")))?;
                let back = docs.first().map_or(Json::Null, |d| d.value.clone());
                proptest::prop_assert_eq!(&back, &v);
                // The count follows the real depth closely: a scalar document counts its one
                // indentation level, and no level is missed or counted twice.
                let counted = prescan_yaml("f.yaml", text).unwrap().deepest;
                let want = depth(&v).max(1);
                proptest::prop_assert!(
                    counted >= want && counted <= want + 1,
                    "counted {} for depth {}:\n{}", counted, depth(&v), text
                );
            }
            let mut deep = v.clone();
            for _ in 0..101 {
                deep = Json::Array(vec![deep]);
            }
            for text in [serde_norway::to_string(&deep).unwrap(), serde_json::to_string(&deep).unwrap()] {
                let refused = matches!(prescan_yaml("f.yaml", &text), Err(LoadError::Limit { .. }));
                proptest::prop_assert!(refused, "{}", text);
            }
        }
    }

    /// What the general path alone gives for `text`: the documents, or the error's text.
    fn general(text: &str) -> Result<Vec<(u32, Json)>, String> {
        let prescan = prescan_yaml("f.yaml", text).map_err(|e| e.to_string())?;
        parse_yaml_in_order("f.yaml", text, &prescan)
            .map(|docs| docs.into_iter().map(|d| (d.number, d.value)).collect())
            .map_err(|e| e.to_string())
    }

    fn read(text: &str) -> Result<Vec<(u32, Json)>, String> {
        parse_documents("f.yaml", text, false)
            .map(|docs| docs.into_iter().map(|d| (d.number, d.value)).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_fast_path_gives_what_the_general_path_gives_or_leaves_it_to_it() {
        let cases = [
            // Merge keys: one mapping, a list (the first wins), nested, overridden, quoted.
            "base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n",
            "a: &a {x: 1}\nb: &b {x: 2, z: 3}\nc:\n  <<: [*a, *b]\n",
            "a: &a {x: {<<: {deep: 1}}}\nc: {<<: *a, w: 0}\n",
            "a: {\"<<\": {x: 1}, x: 2}\n",
            // Merge values that are not mappings: the general path's error.
            "a: {<<: 1}\n",
            "a: {<<: [1]}\n",
            "a: {<<: [[{x: 1}]]}\n",
            "a: {<<: !t {x: 1}}\n",
            // Keys that are not strings.
            "1: a\ntrue: b\n~: c\n1.5: d\n",
            "? [a, b]\n: c\n",
            "a: 1\n'1': 2\n",
            "\"1\": x\n1: y\n",
            // Two keys of one name.
            "a: 1\nb: 2\na: 3\n",
            "m: {x: 1, x: 1}\n",
            // Tags, standard and not.
            "a: !!str 123\nb: !custom {x: 1}\nc: !!int \"7\"\n",
            "a: !thing [1, 2]\n",
            // Numbers.
            "a: [1, -1, 1.5, 1e3, 0x1f, 0o17, -0.0, 18446744073709551615, -9223372036854775808]\n",
            "a: .inf\n",
            "a: 18446744073709551616\n",
            // Scalars of every style, empty and null documents, anchors.
            "a: |\n  text\nb: >\n  folded\nc: 'q'\nd: \"e\\n\"\ne: ~\nf: null\ng:\n",
            "---\n---\nx: &v [1, {y: *v}]\n",
            "---\n- &r {a: 1}\n- *r\n",
            // Syntax errors.
            "a: [1, 2\n",
            "a: b: c\n",
        ];
        for text in cases {
            assert_eq!(read(text), general(text), "{text}");
        }
        // The ordinary cases (merges of mappings, numbers, scalars of every style, anchors) are read by
        // the fast path itself, not left to the general one.
        for text in [
            cases[0], cases[1], cases[2], cases[3], cases[16], cases[19], cases[21],
        ] {
            let prescan = prescan_yaml("f.yaml", text).unwrap();
            let layout = Layout::new(text, &prescan);
            let all = 0..layout.documents();
            assert!(parse_yaml_pieces(&layout, all, 1).is_some(), "{text}");
        }
        // The same amid other documents parsed in pieces: a piece gives the general path's
        // documents, or leaves the whole text to it.
        for text in cases {
            let text = format!("---\nx: 1\n---\ny: 2\n---\n{text}---\nz: 3\n---\nw: 4\n");
            let Ok(prescan) = prescan_yaml("f.yaml", &text) else {
                continue;
            };
            let layout = Layout::new(&text, &prescan);
            if let Some(docs) = parse_yaml_pieces(&layout, 0..layout.documents(), 3) {
                let docs: Vec<(u32, Json)> =
                    docs.into_iter().map(|d| (d.number, d.value)).collect();
                assert_eq!(Ok(docs), general(&text), "{text}");
            }
        }
    }

    #[test]
    fn non_finite_numbers_are_rejected_with_a_path() {
        let err = parse_documents("f.yaml", "a:\n  b: [1, .inf]\n", false)
            .err()
            .unwrap();
        assert!(err.to_string().contains("field a.b[1]"), "{err}");
    }
}
