//! Semantic equality of two raw JSON values, without building `serde_json::Value` trees.
//!
//! The new side is read once into a flat tape of nodes that borrow their strings and numbers from
//! the request body (one `Vec`, no allocation per node). The old side is walked against that tape
//! ([`guided`]): what is byte-identical to the new side is passed with a `memcmp`, and only what
//! differs is read into a tape of its own and compared node by node ([`equal`] on two tapes).
//!
//! Rules (docs/webhook.md, "When the overrides count as changed"):
//!
//! - null, `[]`, `{}` and a map whose members are all of these (at any depth) are "empty", and
//!   any two empty values are equal; a map member that is empty equals an absent one;
//! - lists are atomic: same length, same order (`[{}]` is a one-element list, not empty);
//! - strings compare after unescaping (`"\u0041"` equals `"A"`);
//! - numbers compare by value, exactly as `serde_json::Number` reads them: two integers that fit
//!   64 bits compare exactly, anything else as 64-bit floats;
//! - `runtimePatches` items are keyed by `manager` and each item's own `time` is ignored.

use std::cmp::Ordering;

mod guided;

pub use guided::equal_to_text;

/// serde_json refuses values nested this deep; so does this reader, so that such a value is
/// never compared by one reader and refused by the other.
const MAX_DEPTH: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    True,
    False,
    Number,
    /// A string without backslashes: its raw text is its value.
    Str,
    /// A string with escapes, checked to decode when the tape was built.
    EscapedStr,
    /// `len` elements follow, each subtree ending where its `end` says.
    Array,
    /// `len` members follow, each a key node (a string) and then a value subtree.
    Object,
}

#[derive(Debug, Clone, Copy)]
struct Node<'a> {
    kind: Kind,
    /// Number token, a string's text between the quotes (escapes not decoded), or a
    /// container's whole text, brackets included (what [`guided`] compares the old side with).
    text: &'a str,
    /// Index just past this node's subtree.
    end: u32,
    /// Elements of an array, members of an object.
    len: u32,
    /// Null, `[]`, `{}`, or a map whose members are all empty (at any depth): settled when the
    /// tape is read, so that the comparison asks it of every node at no cost.
    empty: bool,
}

/// A value the reader refuses: nested too deep, an escape that does not decode, or not JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unreadable JSON value")]
pub struct Unreadable;

/// One side of the comparison, read into a tape.
#[derive(Debug)]
pub struct Tape<'a> {
    nodes: Vec<Node<'a>>,
}

impl<'a> Tape<'a> {
    /// Reads `text` (one JSON value, surrounding whitespace allowed); `None` reads as null.
    pub fn read(text: Option<&'a str>) -> Result<Tape<'a>, Unreadable> {
        let Some(text) = text else {
            return Ok(Tape { nodes: vec![Node { kind: Kind::Null, text: "", end: 1, len: 0, empty: true }] });
        };
        // A node per ~6 bytes is typical of pod specs; a guess that saves most regrowth.
        let mut reader = Reader { text, bytes: text.as_bytes(), pos: 0, nodes: Vec::with_capacity(text.len() / 6 + 1) };
        reader.value(0)?;
        reader.skip_ws();
        if reader.pos != reader.bytes.len() {
            return Err(Unreadable);
        }
        Ok(Tape { nodes: reader.nodes })
    }
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    nodes: Vec<Node<'a>>,
}

impl<'a> Reader<'a> {
    fn skip_ws(&mut self) {
        self.pos = crate::fastjson::skip::whitespace(self.bytes, self.pos);
    }

    fn push(&mut self, kind: Kind, text: &'a str) -> usize {
        let at = self.nodes.len();
        self.nodes.push(Node { kind, text, end: at as u32 + 1, len: 0, empty: kind == Kind::Null });
        at
    }

    /// Completes the container node at `at`, whose opening bracket is at `start`; `pos` is just
    /// past its closing one.
    #[inline]
    fn close(&mut self, at: usize, start: usize, len: u32, empty: bool) {
        let end = self.nodes.len() as u32;
        debug_assert!(matches!(self.bytes[start], b'{' | b'[') && matches!(self.bytes[self.pos - 1], b'}' | b']'));
        // SAFETY: `start` is the opening bracket and `pos` is just past the closing one, both
        // ASCII bytes of the `str` (so char boundaries), with `start < pos <= len`. The checked
        // slice cost a few per cent of reading a tape.
        let text = unsafe { self.text.get_unchecked(start..self.pos) };
        let node = &mut self.nodes[at];
        node.end = end;
        node.len = len;
        node.empty = empty;
        node.text = text;
    }

    fn expect(&mut self, byte: u8) -> Result<(), Unreadable> {
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Unreadable)
        }
    }

    /// After a member or element: a `,` (more follows: true) or the closing bracket `close`
    /// (false).
    #[inline(always)]
    fn separator(&mut self, close: u8) -> Result<bool, Unreadable> {
        self.skip_ws();
        match self.bytes.get(self.pos) {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(&b) if b == close => {
                self.pos += 1;
                Ok(false)
            }
            _ => Err(Unreadable),
        }
    }

    /// `depth` is the number of containers around this value.
    fn value(&mut self, depth: usize) -> Result<(), Unreadable> {
        self.skip_ws();
        let next = *self.bytes.get(self.pos).ok_or(Unreadable)?;
        // Strings first: most values of a pod spec are, and a compare predicts better than the
        // jump table below.
        if next == b'"' {
            return self.string().map(drop);
        }
        match next {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'n' => self.literal("null", Kind::Null),
            b't' => self.literal("true", Kind::True),
            b'f' => self.literal("false", Kind::False),
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.bytes.get(self.pos) {
                    self.pos += 1;
                }
                self.push(Kind::Number, &self.text[start..self.pos]);
                Ok(())
            }
            _ => Err(Unreadable),
        }
    }

    fn literal(&mut self, word: &'static str, kind: Kind) -> Result<(), Unreadable> {
        if !self.bytes[self.pos..].starts_with(word.as_bytes()) {
            return Err(Unreadable);
        }
        self.pos += word.len();
        self.push(kind, "");
        Ok(())
    }

    // Always inlined: a pod spec is mostly strings, and the call cost ~10 % of reading a tape.
    #[inline(always)]
    fn string(&mut self) -> Result<usize, Unreadable> {
        self.pos += 1; // the opening quote
        let start = self.pos;
        let mut escaped = false;
        loop {
            // Past the bytes that cannot end the string, 16 at a time.
            let run = crate::fastjson::skip::plain_run(self.bytes, self.pos);
            self.pos = run.end;
            if run.at_quote {
                break;
            }
            match *self.bytes.get(self.pos).ok_or(Unreadable)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.pos += 2;
                }
                _ => self.pos += 1,
            }
        }
        // SAFETY: `start` follows the opening quote and `pos` is the closing one (the loop only
        // breaks on a `"`, and `get` above refused a `pos` past the end); both are ASCII bytes of
        // a `str`, so both are char boundaries and `start <= pos <= len`. The checked slice cost
        // two byte loads and branches on every string of the tape.
        let text = unsafe { self.text.get_unchecked(start..self.pos) };
        self.pos += 1;
        if escaped {
            // Checked once here, so that comparing never meets a bad escape.
            let mut chars = Unescape(text);
            while chars.next().transpose()?.is_some() {}
            Ok(self.push(Kind::EscapedStr, text))
        } else {
            Ok(self.push(Kind::Str, text))
        }
    }

    /// At `{` or `[`: checks the depth and pushes the container's node. Its index, where it
    /// starts, and whether it closes at once (`{}`, `[ ]`).
    #[inline(always)]
    fn open(&mut self, depth: usize, kind: Kind, close: u8) -> Result<(usize, usize, bool), Unreadable> {
        if depth >= MAX_DEPTH {
            return Err(Unreadable);
        }
        let start = self.pos;
        self.pos += 1;
        let at = self.push(kind, "");
        self.skip_ws();
        let closed = self.bytes.get(self.pos) == Some(&close);
        if closed {
            self.pos += 1;
        }
        Ok((at, start, closed))
    }

    fn array(&mut self, depth: usize) -> Result<(), Unreadable> {
        let (at, start, closed) = self.open(depth, Kind::Array, b']')?;
        let mut len = 0;
        if !closed {
            loop {
                self.value(depth)?;
                len += 1;
                if !self.separator(b']')? {
                    break;
                }
            }
        }
        self.close(at, start, len, len == 0);
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Result<(), Unreadable> {
        let (at, start, closed) = self.open(depth, Kind::Object, b'}')?;
        let mut len = 0;
        let mut empty = true;
        if !closed {
            loop {
                self.skip_ws();
                if self.bytes.get(self.pos) != Some(&b'"') {
                    return Err(Unreadable);
                }
                self.string()?;
                // Serialisers write the colon right after the key.
                if self.bytes.get(self.pos) == Some(&b':') {
                    self.pos += 1;
                } else {
                    self.expect(b':')?;
                }
                let value = self.nodes.len();
                self.value(depth)?;
                empty &= self.nodes[value].empty;
                len += 1;
                if !self.separator(b'}')? {
                    break;
                }
            }
        }
        self.close(at, start, len, empty);
        Ok(())
    }
}

/// The characters of a JSON string's raw text, escapes decoded one at a time (no allocation).
struct Unescape<'a>(&'a str);

impl Iterator for Unescape<'_> {
    type Item = Result<char, Unreadable>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut chars = self.0.chars();
        let c = chars.next()?;
        if c != '\\' {
            self.0 = chars.as_str();
            return Some(Ok(c));
        }
        let rest = chars.as_str();
        let (decoded, used) = match rest.as_bytes().first() {
            Some(b'"') => ('"', 1),
            Some(b'\\') => ('\\', 1),
            Some(b'/') => ('/', 1),
            Some(b'b') => ('\u{8}', 1),
            Some(b'f') => ('\u{c}', 1),
            Some(b'n') => ('\n', 1),
            Some(b'r') => ('\r', 1),
            Some(b't') => ('\t', 1),
            Some(b'u') => match unicode_escape(rest) {
                Some(pair) => pair,
                None => return Some(Err(Unreadable)),
            },
            _ => return Some(Err(Unreadable)),
        };
        self.0 = &rest[used..];
        Some(Ok(decoded))
    }
}

/// `u` + four hex digits (after the backslash), or a surrogate pair of two such escapes. A lone
/// surrogate is refused, as serde_json refuses it.
fn unicode_escape(rest: &str) -> Option<(char, usize)> {
    let hex = |s: &str| {
        s.get(1..5).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit())).and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    let first = hex(rest)?;
    match first {
        0xD800..=0xDBFF => {
            let low = rest.get(5..).filter(|s| s.starts_with("\\u")).and_then(|s| hex(&s[1..]))?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return None;
            }
            char::from_u32(0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00)).map(|c| (c, 11))
        }
        0xDC00..=0xDFFF => None,
        _ => char::from_u32(first).map(|c| (c, 5)),
    }
}

/// Two tapes and a scratch stack for sorting object members.
struct Compare<'t, 'a> {
    a: &'t [Node<'a>],
    b: &'t [Node<'a>],
    scratch: Vec<(u32, u32)>,
}

/// Semantic equality of the roots of two tapes. `keyed` reads two lists as maps keyed by
/// `manager`, each item's `time` ignored (`runtimePatches`).
pub fn equal(a: &Tape<'_>, b: &Tape<'_>, keyed: bool) -> bool {
    let mut cmp = Compare { a: &a.nodes, b: &b.nodes, scratch: Vec::new() };
    if keyed && cmp.a[0].kind == Kind::Array && cmp.b[0].kind == Kind::Array {
        return cmp.keyed(0, 0);
    }
    cmp.value(0, 0, None)
}

/// Null, `[]`, `{}`, or a map of only empty members.
fn is_empty(tape: &[Node<'_>], i: usize) -> bool {
    tape[i].empty
}

/// Element indices of the array at `i`.
fn elements<'t>(tape: &'t [Node<'_>], i: usize) -> impl Iterator<Item = usize> + 't {
    let mut at = i + 1;
    (0..tape[i].len).map(move |_| {
        let here = at;
        at = tape[here].end as usize;
        here
    })
}

/// (key, value) indices of the object at `i`.
fn members<'t>(tape: &'t [Node<'_>], i: usize) -> impl Iterator<Item = (usize, usize)> + 't {
    let mut at = i + 1;
    (0..tape[i].len).map(move |_| {
        let (key, value) = (at, at + 1);
        at = tape[value].end as usize;
        (key, value)
    })
}

/// Order of two string nodes by their decoded characters (code point order = UTF-8 byte order).
fn str_cmp(x: &Node<'_>, y: &Node<'_>) -> Ordering {
    if x.kind == Kind::Str && y.kind == Kind::Str {
        return x.text.as_bytes().cmp(y.text.as_bytes());
    }
    decoded(x.text).cmp(decoded(y.text))
}

fn str_is(x: &Node<'_>, literal: &str) -> bool {
    match x.kind {
        Kind::Str => x.text == literal,
        _ => decoded(x.text).eq(literal.chars()),
    }
}

/// A string's characters; its escapes were checked when the tape was built.
fn decoded(text: &str) -> impl Iterator<Item = char> + '_ {
    Unescape(text).map(|c| c.unwrap_or('\u{FFFD}'))
}

fn numbers_equal(x: &str, y: &str) -> bool {
    if x == y {
        return true;
    }
    // serde_json's own reading, so that the same token means the same number as elsewhere.
    let (Ok(x), Ok(y)) = (serde_json::from_str::<serde_json::Number>(x), serde_json::from_str::<serde_json::Number>(y))
    else {
        return false;
    };
    if let (Some(p), Some(q)) = (x.as_i64(), y.as_i64()) {
        return p == q;
    }
    if let (Some(p), Some(q)) = (x.as_u64(), y.as_u64()) {
        return p == q;
    }
    match (x.as_f64(), y.as_f64()) {
        (Some(p), Some(q)) => p == q,
        _ => false,
    }
}

impl Compare<'_, '_> {
    /// `skip` names a key ignored in this object only (not deeper down).
    fn value(&mut self, i: usize, j: usize, skip: Option<&str>) -> bool {
        let (x, y) = (self.a[i], self.b[j]);
        if is_empty(self.a, i) && is_empty(self.b, j) {
            return true;
        }
        match (x.kind, y.kind) {
            (Kind::Object, Kind::Object) => self.objects(i, j, skip),
            (Kind::Array, Kind::Array) => {
                x.len == y.len && elements(self.a, i).zip(elements(self.b, j)).all(|(p, q)| self.value(p, q, None))
            }
            (Kind::Number, Kind::Number) => numbers_equal(x.text, y.text),
            (Kind::Str | Kind::EscapedStr, Kind::Str | Kind::EscapedStr) => {
                let escaped = x.kind == Kind::EscapedStr || y.kind == Kind::EscapedStr;
                x.text == y.text || escaped && str_cmp(&x, &y).is_eq()
            }
            (Kind::True, Kind::True) | (Kind::False, Kind::False) => true,
            _ => false,
        }
    }

    /// Members sorted by key on the scratch stack; a key given twice keeps its last value, as a
    /// JSON object read into a map does.
    fn sorted_members(&mut self, side_a: bool, i: usize) -> (usize, usize) {
        let tape = if side_a { self.a } else { self.b };
        let start = self.scratch.len();
        self.scratch.extend(members(tape, i).map(|(k, v)| (k as u32, v as u32)));
        let run = &mut self.scratch[start..];
        // Stable, so that among equal keys the last one written stays last.
        run.sort_by(|p, q| str_cmp(&tape[p.0 as usize], &tape[q.0 as usize]));
        let mut kept = start;
        for at in start..self.scratch.len() {
            let entry = self.scratch[at];
            if kept > start && str_cmp(&tape[self.scratch[kept - 1].0 as usize], &tape[entry.0 as usize]).is_eq() {
                self.scratch[kept - 1] = entry;
            } else {
                self.scratch[kept] = entry;
                kept += 1;
            }
        }
        self.scratch.truncate(kept);
        (start, kept)
    }

    fn objects(&mut self, i: usize, j: usize, skip: Option<&str>) -> bool {
        if let Some(equal) = self.objects_in_step(i, j, skip) {
            return equal;
        }
        let base = self.scratch.len();
        let (a0, a1) = self.sorted_members(true, i);
        let (b0, b1) = self.sorted_members(false, j);
        let (mut p, mut q) = (a0, b0);
        let mut equal = true;
        while equal && (p < a1 || q < b1) {
            let order = if p == a1 {
                Ordering::Greater
            } else if q == b1 {
                Ordering::Less
            } else {
                str_cmp(&self.a[self.scratch[p].0 as usize], &self.b[self.scratch[q].0 as usize])
            };
            let skipped = |tape: &[Node<'_>], key: u32| skip.is_some_and(|s| str_is(&tape[key as usize], s));
            match order {
                Ordering::Less => {
                    let (k, v) = self.scratch[p];
                    equal = skipped(self.a, k) || is_empty(self.a, v as usize);
                    p += 1;
                }
                Ordering::Greater => {
                    let (k, v) = self.scratch[q];
                    equal = skipped(self.b, k) || is_empty(self.b, v as usize);
                    q += 1;
                }
                Ordering::Equal => {
                    let ((k, va), (_, vb)) = (self.scratch[p], self.scratch[q]);
                    equal = skipped(self.a, k) || self.value(va as usize, vb as usize, None);
                    p += 1;
                    q += 1;
                }
            }
        }
        self.scratch.truncate(base);
        equal
    }

    /// Two objects that list the same plain keys in the same order, none twice (the usual case:
    /// both sides come from the same serialiser), are equal exactly when their values are,
    /// member by member; no sorting needed. `None` for any other pair of objects. The keys are
    /// checked before any value is compared, so a fallback never compares a value twice.
    fn objects_in_step(&mut self, i: usize, j: usize, skip: Option<&str>) -> Option<bool> {
        const MAX_MEMBERS: u32 = 16;
        let n = self.a[i].len;
        if n != self.b[j].len || n > MAX_MEMBERS {
            return None;
        }
        let mut keys = [""; MAX_MEMBERS as usize];
        for (at, ((ka, _), (kb, _))) in members(self.a, i).zip(members(self.b, j)).enumerate() {
            let (x, y) = (self.a[ka], self.b[kb]);
            if x.kind != Kind::Str || y.kind != Kind::Str || x.text != y.text || keys[..at].contains(&x.text) {
                return None;
            }
            keys[at] = x.text;
        }
        let equal = members(self.a, i)
            .zip(members(self.b, j))
            .all(|((k, va), (_, vb))| skip.is_some_and(|s| str_is(&self.a[k], s)) || self.value(va, vb, None));
        Some(equal)
    }

    /// Two lists as maps keyed by `manager`: items sorted by it (stably: items without a string
    /// manager, or sharing one, keep their order) and compared pairwise, `time` ignored.
    fn keyed(&mut self, i: usize, j: usize) -> bool {
        if self.a[i].len != self.b[j].len {
            return false;
        }
        let sorted = |tape: &[Node<'_>], list: usize| {
            let mut items: Vec<(Option<usize>, usize)> = elements(tape, list).map(|e| (manager(tape, e), e)).collect();
            items.sort_by(|p, q| match (p.0, q.0) {
                (Some(x), Some(y)) => str_cmp(&tape[x], &tape[y]),
                (x, y) => x.is_some().cmp(&y.is_some()),
            });
            items
        };
        let (xs, ys) = (sorted(self.a, i), sorted(self.b, j));
        xs.iter().zip(&ys).all(|(x, y)| self.value(x.1, y.1, Some("time")))
    }
}

/// The string node of an item's `manager` (the last one, if written twice), if it is a string.
fn manager(tape: &[Node<'_>], item: usize) -> Option<usize> {
    if tape[item].kind != Kind::Object {
        return None;
    }
    let (_, value) = members(tape, item).filter(|&(k, _)| str_is(&tape[k], "manager")).last()?;
    matches!(tape[value].kind, Kind::Str | Kind::EscapedStr).then_some(value)
}

/// The JSON type of a value, as Kubernetes' schema errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    Null,
    Boolean,
    Number,
    String,
    List,
    Object,
}

/// A value on a tape, for readers other than the comparison (the shape check).
#[derive(Debug, Clone, Copy)]
pub struct ValueRef<'t, 'a> {
    tape: &'t [Node<'a>],
    at: usize,
}

impl<'a> Tape<'a> {
    pub fn root(&self) -> ValueRef<'_, 'a> {
        ValueRef { tape: &self.nodes, at: 0 }
    }
}

impl<'t, 'a> ValueRef<'t, 'a> {
    pub fn json_type(self) -> JsonType {
        match self.tape[self.at].kind {
            Kind::Null => JsonType::Null,
            Kind::True | Kind::False => JsonType::Boolean,
            Kind::Number => JsonType::Number,
            Kind::Str | Kind::EscapedStr => JsonType::String,
            Kind::Array => JsonType::List,
            Kind::Object => JsonType::Object,
        }
    }

    /// The elements of a list; nothing for any other value.
    pub fn elements(self) -> impl Iterator<Item = ValueRef<'t, 'a>> {
        let len = if self.tape[self.at].kind == Kind::Array { self.tape[self.at].len } else { 0 };
        let mut at = self.at + 1;
        let tape = self.tape;
        (0..len).map(move |_| {
            let here = at;
            at = tape[here].end as usize;
            ValueRef { tape, at: here }
        })
    }

    pub fn len(self) -> usize {
        self.tape[self.at].len as usize
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The member `key` of an object (the last one, if written twice); `None` for other values.
    pub fn get(self, key: &str) -> Option<ValueRef<'t, 'a>> {
        if self.tape[self.at].kind != Kind::Object {
            return None;
        }
        let (_, value) = members(self.tape, self.at).filter(|&(k, _)| str_is(&self.tape[k], key)).last()?;
        Some(ValueRef { tape: self.tape, at: value })
    }

    /// Whether this is a string with at least one character.
    pub fn is_non_empty_string(self) -> bool {
        let node = self.tape[self.at];
        // An escape always decodes to a character, so the raw text is empty only if the value is.
        matches!(node.kind, Kind::Str | Kind::EscapedStr) && !node.text.is_empty()
    }
}
