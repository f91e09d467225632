//! Bytes of one file into documents: YAML streams (serde-saphyr, with budgets) and JSON streams
//! (serde_json), `*List` objects flattened into their items, each with its line.

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use serde_saphyr::Spanned;

use super::{Document, Limits, ManifestError};

/// How to read a file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
    /// JSON when the first non-blank byte is `{`, else YAML (stdin, unknown extensions).
    Sniff,
}

impl Format {
    pub(crate) fn of_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => Format::Yaml,
            Some("json") => Format::Json,
            _ => Format::Sniff,
        }
    }
}

/// Parses one file. `source_name` is used in documents and errors.
pub fn parse(source_name: &str, bytes: &[u8], format: Format, limits: &Limits) -> Result<Vec<Document>, ManifestError> {
    if bytes.len() as u64 > limits.max_file_bytes {
        return Err(ManifestError::TooLarge { source_name: source_name.to_string(), limit: limits.max_file_bytes });
    }
    if let Some(offset) = bytes.iter().position(|b| *b == 0) {
        return Err(ManifestError::Binary { source_name: source_name.to_string(), offset });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let (line, column) = line_column(bytes, e.valid_up_to());
        ManifestError::NotUtf8 { source_name: source_name.to_string(), line, column }
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let json = match format {
        Format::Json => true,
        Format::Yaml => false,
        Format::Sniff => text.trim_start().starts_with('{'),
    };
    let mut documents = Vec::new();
    if json {
        parse_json(source_name, text, limits, &mut documents)?;
    } else {
        parse_yaml(source_name, text, limits, &mut documents)?;
    }
    Ok(documents)
}

fn parse_yaml(source_name: &str, text: &str, limits: &Limits, out: &mut Vec<Document>) -> Result<(), ManifestError> {
    // The file size cap bounds node and event counts; depth and alias replay are what a small
    // crafted file can blow up, so those are the budgets that matter.
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: limits.max_depth,
            max_documents: usize::MAX,
            max_nodes: usize::MAX,
            max_events: usize::MAX,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: limits.max_alias_replays,
        },
        // kubectl reads YAML 1.1 (`0644` is octal, as in volume `defaultMode`).
        legacy_octal_numbers: true,
    };
    let roots: Vec<Spanned<Root>> = serde_saphyr::from_str_multiple_with_options(text, options).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
        ManifestError::Yaml { source_name: source_name.to_string(), line, column, message: yaml_message(&e, limits) }
    })?;
    for root in roots {
        let line = root.referenced.line() as usize;
        let Root { value, items } = root.value;
        push_flattened(source_name, value, line, items, out);
    }
    Ok(())
}

fn parse_json(source_name: &str, text: &str, limits: &Limits, out: &mut Vec<Document>) -> Result<(), ManifestError> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut lines = LineCounter::new(text);
    loop {
        let start = stream.byte_offset() + leading_blanks(&text[stream.byte_offset()..]);
        let line = lines.line_at(start);
        match stream.next() {
            None => return Ok(()),
            Some(Err(e)) => {
                return Err(ManifestError::Json {
                    source_name: source_name.to_string(),
                    line: e.line(),
                    // serde_json reports column 0 for an error right after a newline; positions
                    // here are 1-based, like YAML's.
                    column: e.column().max(1),
                    message: strip_location(&e.to_string()),
                });
            }
            Some(Ok(value)) => {
                if depth(&value) > limits.max_depth {
                    return Err(ManifestError::TooDeep {
                        source_name: source_name.to_string(),
                        line,
                        limit: limits.max_depth,
                    });
                }
                push_flattened(source_name, value, line, None, out);
            }
        }
    }
}

/// Adds `value`, or its items when it is a list (`kind: List`, `TrainJobList`, … as kubectl
/// treats them: a kind ending in `List` with an `items` array).
fn push_flattened(
    source_name: &str,
    value: Value,
    line: usize,
    item_lines: Option<Vec<usize>>,
    out: &mut Vec<Document>,
) {
    let is_list = value.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
        && value.get("items").is_some_and(Value::is_array);
    if !is_list {
        out.push(Document { source: source_name.to_string(), line, value });
        return;
    }
    let Value::Object(mut map) = value else { return };
    let Some(Value::Array(items)) = map.remove("items") else { return };
    let item_lines = item_lines.unwrap_or_default();
    for (i, item) in items.into_iter().enumerate() {
        let line = item_lines.get(i).copied().filter(|l| *l > 0).unwrap_or(line);
        out.push(Document { source: source_name.to_string(), line, value: item });
    }
}

/// `Deserialize` for `$out` through a visitor `$visitor` that takes any value: a scalar is kept as
/// a plain [`Value`] made into `$out` by `$wrap`; sequences and maps are read by the methods given.
macro_rules! deserialize_any_value {
    ($out:ident, $visitor:ident, $de:lifetime, $expecting:literal, $wrap:path, { $($methods:tt)* }) => {
        impl<$de> Deserialize<$de> for $out {
            fn deserialize<D: Deserializer<$de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any($visitor)
            }
        }

        struct $visitor;

        impl<$de> Visitor<$de> for $visitor {
            type Value = $out;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str($expecting)
            }

            $($methods)*

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<$out, E> {
                Ok($wrap(Value::Bool(v)))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<$out, E> {
                Ok($wrap(Value::from(v)))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<$out, E> {
                Ok($wrap(Value::from(v)))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<$out, E> {
                Ok($wrap(Value::from(v)))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<$out, E> {
                Ok($wrap(Value::from(v)))
            }

            fn visit_unit<E: de::Error>(self) -> Result<$out, E> {
                Ok($wrap(Value::Null))
            }

            fn visit_none<E: de::Error>(self) -> Result<$out, E> {
                Ok($wrap(Value::Null))
            }
        }
    };
}

/// A YAML document's root: its value, plus the line of each element of a top-level `items`
/// sequence, so that list items point at their own lines.
struct Root {
    value: Value,
    items: Option<Vec<usize>>,
}

impl Root {
    /// A root that is not a mapping: no `items` to locate.
    fn plain(value: Value) -> Self {
        Root { value, items: None }
    }
}

deserialize_any_value!(Root, RootVisitor, 'de, "a YAML document", Root::plain, {
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Root, A::Error> {
        let mut object = Map::new();
        let mut items = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                match map.next_value::<SpannedItems>()? {
                    SpannedItems::Seq(spanned) => {
                        items = Some(spanned.iter().map(|s| s.referenced.line() as usize).collect());
                        object.insert(key, Value::Array(spanned.into_iter().map(|s| s.value).collect()));
                    }
                    SpannedItems::Other(value) => {
                        object.insert(key, value);
                    }
                }
            } else {
                let value = map.next_value::<Value>()?;
                object.insert(key, value);
            }
        }
        Ok(Root { value: Value::Object(object), items })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Root, A::Error> {
        Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Root::plain)
    }
});

/// The value of a top-level `items` key: a sequence whose elements keep their locations, or
/// anything else as a plain value.
enum SpannedItems {
    Seq(Vec<Spanned<Value>>),
    Other(Value),
}

deserialize_any_value!(SpannedItems, ItemsVisitor, 'de, "any value", SpannedItems::Other, {
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SpannedItems, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Value>>()? {
            items.push(item);
        }
        Ok(SpannedItems::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SpannedItems, A::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(SpannedItems::Other)
    }
});

/// A parser error in words for a person: limits named as limits, no library option names.
fn yaml_message(error: &serde_saphyr::Error, limits: &Limits) -> String {
    use serde_saphyr::Error as E;
    use serde_saphyr::budget::BudgetBreach;
    match error.without_snippet() {
        E::AliasError { error, .. } => yaml_message(error, limits),
        E::Budget { breach: BudgetBreach::Depth { .. }, .. } => {
            format!("YAML nesting deeper than {} levels", limits.max_depth)
        }
        E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. }
        | E::AliasReplayCounterOverflow { .. }
        | E::Budget { breach: BudgetBreach::Aliases { .. } | BudgetBreach::Anchors { .. }, .. } => format!(
            "YAML aliases expand to more than {} nodes; refusing what looks like an alias bomb",
            limits.max_alias_replays
        ),
        E::Budget { breach, .. } => format!("YAML exceeds a parser limit: {breach:?}"),
        other => {
            let message = other.render_with_options(serde_saphyr::render_options! {
                snippets: serde_saphyr::SnippetMode::Off,
            });
            let message = strip_location(&message);
            let message = message.split(", set DuplicateKeyPolicy").next().unwrap_or(&message);
            format!("YAML syntax error: {message}")
        }
    }
}

/// Parsers append " at line L column C"; the location is reported separately.
fn strip_location(message: &str) -> String {
    let cut = [" at line ", "\n at line "].iter().filter_map(|p| message.rfind(p)).min();
    let message = cut.map_or(message, |i| &message[..i]);
    message.trim().to_string()
}

fn leading_blanks(text: &str) -> usize {
    text.len() - text.trim_start().len()
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// 1-based line and column of byte `offset`.
fn line_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = 1 + before.iter().filter(|b| **b == b'\n').count();
    let column = 1 + before.iter().rev().take_while(|b| **b != b'\n').count();
    (line, column)
}

/// Line numbers of increasing offsets, counting each newline once.
struct LineCounter<'a> {
    text: &'a str,
    offset: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(text: &'a str) -> Self {
        LineCounter { text, offset: 0, line: 1 }
    }

    fn line_at(&mut self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        if offset > self.offset {
            self.line += self.text.as_bytes()[self.offset..offset].iter().filter(|b| **b == b'\n').count();
            self.offset = offset;
        }
        self.line
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn yaml(text: &str) -> Result<Vec<Document>, ManifestError> {
        parse("f.yaml", text.as_bytes(), Format::Yaml, &Limits::default())
    }

    fn lines_and_names(docs: &[Document]) -> Vec<(usize, String)> {
        docs.iter().map(|d| (d.line, d.name().unwrap_or("").to_string())).collect()
    }

    #[test]
    fn documents_keep_their_lines() {
        // (what, text, [(line, name)] of the documents read)
        type Case<'a> = (&'a str, &'a str, &'a [(usize, &'a str)]);
        let cases: &[Case] = &[
            ("one document", "kind: A\nmetadata: {name: a}\n", &[(1, "a")]),
            ("leading ---", "---\nkind: A\nmetadata: {name: a}\n", &[(2, "a")]),
            (
                "multi-doc with comments and empty docs",
                "# c\n---\nkind: A\nmetadata: {name: a}\n---\n---\n# only a comment\n---\nkind: B\nmetadata:\n  name: b\n",
                &[(3, "a"), (9, "b")],
            ),
            (
                "kind: List items on their own lines",
                "apiVersion: v1\nkind: List\nitems:\n- kind: A\n  metadata: {name: a}\n-   kind: B\n    metadata: {name: b}\n",
                &[(4, "a"), (6, "b")],
            ),
            ("typed list", "kind: TrainJobList\nitems:\n  - kind: TrainJob\n    metadata: {name: t}\n", &[(3, "t")]),
            ("empty file", "", &[]),
        ];
        for (what, text, want) in cases {
            let docs = yaml(text).unwrap_or_else(|e| panic!("{what}: {e}"));
            let want: Vec<(usize, String)> = want.iter().map(|(l, n)| (*l, n.to_string())).collect();
            assert_eq!(lines_and_names(&docs), want, "{what}");
        }
    }

    #[test]
    fn items_that_are_not_a_list_stay_in_place() {
        let docs = yaml("kind: Thing\nitems:\n- 1\n").unwrap();
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].value, json!({"kind": "Thing", "items": [1]}));
        let docs = yaml("kind: ThingList\nitems: {a: 1}\n").unwrap();
        assert_eq!(docs[0].value, json!({"kind": "ThingList", "items": {"a": 1}}));
    }

    #[test]
    fn yaml_values_read_as_kubectl_reads_them() {
        let docs = yaml("a: yes\nb: 0644\nc: 1.0\nd: ~\ne: '0644'\nf: &x {k: v}\ng: *x\n").unwrap();
        assert_eq!(
            docs[0].value,
            json!({"a": true, "b": 420, "c": 1.0, "d": null, "e": "0644", "f": {"k": "v"}, "g": {"k": "v"}})
        );
    }

    #[test]
    fn json_streams_and_lists() {
        let text = "\n{\"kind\": \"A\", \"metadata\": {\"name\": \"a\"}}\n\n{\"kind\": \"List\", \"items\": [\n{\"kind\": \"B\", \"metadata\": {\"name\": \"b\"}}]}\n";
        let docs = parse("f.json", text.as_bytes(), Format::Json, &Limits::default()).unwrap();
        assert_eq!(lines_and_names(&docs), vec![(2, "a".to_string()), (4, "b".to_string())]);
        let sniffed = parse("-", text.as_bytes(), Format::Sniff, &Limits::default()).unwrap();
        assert_eq!(sniffed, docs.into_iter().map(|d| Document { source: "-".into(), ..d }).collect::<Vec<_>>());
    }

    #[test]
    fn json_error_positions_are_one_based() {
        // The input the manifests fuzz target saved: an error right after a newline, where
        // serde_json says column 0.
        let bytes = include_bytes!("../../fuzz/regressions/manifests/json-column-zero");
        match parse("f.json", bytes, Format::Json, &Limits::default()) {
            Err(ManifestError::Json { line, column, .. }) => assert!(line >= 1 && column >= 1, "{line}:{column}"),
            other => panic!("expected a JSON error, got {other:?}"),
        }
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        let limits = Limits { max_file_bytes: 64, max_depth: 5, max_alias_replays: 1000 };
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n\
                    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n";
        let cases: &[(&str, &[u8], Format, &str)] = &[
            ("syntax", b"a: b\n c: d\n", Format::Yaml, "f:2:3: YAML syntax error: mapping values are not allowed"),
            ("unclosed flow", b"a: [1, 2\n", Format::Yaml, "YAML syntax error"),
            ("duplicate key", b"a: 1\na: 2\n", Format::Yaml, "f:2:1: YAML syntax error: duplicate mapping key: a"),
            ("json syntax", b"{\"a\": }", Format::Json, "f:1:7: JSON syntax error"),
            ("binary", b"\x7fELF\x02\x01\x00\x00", Format::Sniff, "binary data"),
            ("not utf-8", b"a: \xff\xfe\n", Format::Yaml, "f:1:4: not UTF-8"),
            ("too large", &[b'a'; 65], Format::Yaml, "larger than the limit of 64 bytes"),
            ("too deep yaml", b"a: [[[[[[[1]]]]]]]", Format::Yaml, "f:1:8: YAML nesting deeper than 5 levels"),
            ("too deep json", b"[[[[[[[1]]]]]]]", Format::Json, "nesting deeper than 5"),
        ];
        for (what, bytes, format, want) in cases {
            let err = parse("f", bytes, *format, &limits).expect_err(what).to_string();
            assert!(err.contains(want), "{what}: {err}");
        }
        let err = parse("f", bomb.as_bytes(), Format::Yaml, &Limits { max_file_bytes: 1024, ..limits })
            .expect_err("alias bomb")
            .to_string();
        assert!(err.contains("YAML aliases expand to more than 1000 nodes"), "{err}");
    }
}
