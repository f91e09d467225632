//! The serde `Deserializer` of [`crate::fastjson`]: strict where a view reads, structural where
//! it skips (`deserialize_ignored_any`, raw values).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use super::repeat::Repeats;
use super::skip::{self, SkipError, plain_run};

/// serde_json's private name for `RawValue`; a deserializer that hands back the raw text under
/// it gets `&RawValue` fields filled without a copy. Pinned by this module's tests.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Views are a few levels deep; anything deeper is left to serde_json.
const MAX_DEPTH: u32 = 64;

/// Why the fast decode gave up. The message is for tests and debugging only: callers decode
/// again with serde_json, whose message is the one users see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("unexpected end of input")]
    Eof,
    #[error("unexpected byte at offset {0}")]
    Syntax(usize),
    #[error("left to serde_json: {what} at offset {at}")]
    Unsupported { what: &'static str, at: usize },
    #[error("{0}")]
    Custom(String),
}

impl de::Error for Error {
    #[cold]
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error::Custom(msg.to_string())
    }
}

pub struct Deserializer<'de> {
    input: &'de [u8],
    pos: usize,
    depth: u32,
    /// Unescaped strings (rare in Kubernetes objects).
    scratch: Vec<u8>,
    /// Containers skipped so far, so that the old object's copies of them are found by bytes.
    repeats: Repeats,
}

/// A string as read: borrowed from the input when it had no escapes.
enum Str<'de, 's> {
    Borrowed(&'de str),
    Copied(&'s str),
}

/// Bytes that end the plain run of a string: the quote, a backslash, control characters.
static STRING_STOP: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

impl<'de> Deserializer<'de> {
    pub fn new(input: &'de [u8]) -> Self {
        Deserializer { input, pos: 0, depth: 0, scratch: Vec::new(), repeats: Repeats::new(input.len()) }
    }

    /// Only whitespace may follow the value.
    pub fn end(&mut self) -> Result<(), Error> {
        self.skip_whitespace();
        if self.pos == self.input.len() { Ok(()) } else { Err(Error::Syntax(self.pos)) }
    }

    #[inline]
    fn skip_whitespace(&mut self) {
        self.pos = skip::whitespace(self.input, self.pos);
    }

    /// The next byte that is not whitespace, not consumed.
    #[inline]
    fn peek(&mut self) -> Result<u8, Error> {
        self.skip_whitespace();
        self.input.get(self.pos).copied().ok_or(Error::Eof)
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), Error> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(Error::Syntax(self.pos))
        }
    }

    fn unsupported(&self, what: &'static str) -> Error {
        Error::Unsupported { what, at: self.pos }
    }

    /// At `"`: the string, unescaped and UTF-8 checked, as serde_json reads it.
    #[inline(always)]
    fn parse_str(&mut self) -> Result<Str<'de, '_>, Error> {
        let input = self.input;
        let start = self.pos + 1;
        let run = plain_run(input, start);
        let (mut i, mut non_ascii) = (run.end, run.non_ascii);
        if run.at_quote && !non_ascii {
            // The usual key or value: plain ASCII up to its closing quote.
            self.pos = i + 1;
            // SAFETY: every byte up to the quote was checked to be ASCII.
            return Ok(Str::Borrowed(unsafe { std::str::from_utf8_unchecked(&input[start..i]) }));
        }
        loop {
            let b = *input.get(i).ok_or(Error::Eof)?;
            non_ascii |= !b.is_ascii();
            if STRING_STOP[b as usize] {
                match b {
                    b'"' => {
                        self.pos = i + 1;
                        let bytes = &input[start..i];
                        let s = if !non_ascii {
                            // SAFETY: every byte was checked to be ASCII just above.
                            unsafe { std::str::from_utf8_unchecked(bytes) }
                        } else {
                            std::str::from_utf8(bytes).map_err(|_| Error::Syntax(start))?
                        };
                        return Ok(Str::Borrowed(s));
                    }
                    b'\\' => return self.parse_escaped(start, i),
                    _ => return Err(Error::Syntax(i)),
                }
            }
            i += 1;
        }
    }

    #[cold]
    fn parse_escaped(&mut self, start: usize, mut i: usize) -> Result<Str<'de, '_>, Error> {
        let input = self.input;
        self.scratch.clear();
        self.scratch.extend_from_slice(&input[start..i]);
        loop {
            let b = *input.get(i).ok_or(Error::Eof)?;
            match b {
                b'"' => {
                    self.pos = i + 1;
                    let s = std::str::from_utf8(&self.scratch).map_err(|_| Error::Syntax(start))?;
                    return Ok(Str::Copied(s));
                }
                b'\\' => {
                    let escape = *input.get(i + 1).ok_or(Error::Eof)?;
                    i += 2;
                    let byte = match escape {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let (c, used) = unicode_escape(input, i)?;
                            i += used;
                            let mut buf = [0u8; 4];
                            self.scratch.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                            continue;
                        }
                        _ => return Err(Error::Syntax(i - 1)),
                    };
                    self.scratch.push(byte);
                }
                0..0x20 => return Err(Error::Syntax(i)),
                _ => {
                    self.scratch.push(b);
                    i += 1;
                }
            }
        }
    }

    /// At `-` or a digit: an integer (`visit_u64` / `visit_i64`, as serde_json calls them).
    /// Fractions, exponents, `-0` and integers beyond 64 bits are left to serde_json.
    fn visit_integer<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Error> {
        let negative = self.input[self.pos] == b'-';
        if negative {
            self.pos += 1;
        }
        let digits_start = self.pos;
        let mut value: u64 = 0;
        while let Some(&b @ b'0'..=b'9') = self.input.get(self.pos) {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(b - b'0')))
                .ok_or_else(|| self.unsupported("an integer beyond 64 bits"))?;
            self.pos += 1;
        }
        let digits = self.pos - digits_start;
        if digits == 0 || (digits > 1 && self.input[digits_start] == b'0') {
            return Err(Error::Syntax(digits_start));
        }
        if let Some(b'.' | b'e' | b'E') = self.input.get(self.pos) {
            return Err(self.unsupported("a floating-point number"));
        }
        if !negative {
            return visitor.visit_u64(value);
        }
        match i64::try_from(-i128::from(value)) {
            Ok(v) if value != 0 => visitor.visit_i64(v),
            _ => Err(self.unsupported("-0 or an integer below i64")),
        }
    }

    /// At `-` or a digit: past a number, checking its grammar.
    fn skip_number(&mut self) -> Result<(), Error> {
        let input = self.input;
        let digits = |pos: &mut usize| {
            let start = *pos;
            while let Some(b'0'..=b'9') = input.get(*pos) {
                *pos += 1;
            }
            *pos - start
        };
        let mut pos = self.pos;
        if input[pos] == b'-' {
            pos += 1;
        }
        let int_start = pos;
        let n = digits(&mut pos);
        if n == 0 || (n > 1 && input[int_start] == b'0') {
            return Err(Error::Syntax(int_start));
        }
        if input.get(pos) == Some(&b'.') {
            pos += 1;
            if digits(&mut pos) == 0 {
                return Err(Error::Syntax(pos));
            }
        }
        if let Some(b'e' | b'E') = input.get(pos) {
            pos += 1;
            if let Some(b'+' | b'-') = input.get(pos) {
                pos += 1;
            }
            if digits(&mut pos) == 0 {
                return Err(Error::Syntax(pos));
            }
        }
        self.pos = pos;
        Ok(())
    }

    /// Past the next value: containers and strings by structure, scalars by grammar. Returns
    /// whether the value is known to be ASCII (a string's bytes are not looked at for that).
    fn skip_value(&mut self) -> Result<bool, Error> {
        let at = self.pos;
        let ascii = match self.peek()? {
            b'{' | b'[' => {
                let (end, ascii) = self.repeats.skip(self.input, self.pos).map_err(|e| located(e, at))?;
                self.pos = end;
                ascii
            }
            b'"' => {
                self.pos = skip::string(self.input, self.pos).map_err(|e| located(e, at))?;
                false
            }
            b'n' => self.literal(b"null").map(|()| true)?,
            b't' => self.literal(b"true").map(|()| true)?,
            b'f' => self.literal(b"false").map(|()| true)?,
            b'-' | b'0'..=b'9' => self.skip_number().map(|()| true)?,
            _ => return Err(Error::Syntax(self.pos)),
        };
        Ok(ascii)
    }

    fn enter(&mut self) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.unsupported("nesting deeper than the views"));
        }
        self.pos += 1; // the opening bracket
        Ok(())
    }

    fn leave(&mut self, close: u8) -> Result<(), Error> {
        self.depth -= 1;
        if self.peek()? == close {
            self.pos += 1;
            Ok(())
        } else {
            Err(Error::Syntax(self.pos))
        }
    }

    fn read_map<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Error> {
        self.enter()?;
        let value = visitor.visit_map(Entries { de: self, first: true })?;
        self.leave(b'}')?;
        Ok(value)
    }

    fn read_seq<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Error> {
        self.enter()?;
        let value = visitor.visit_seq(Elements { de: self, first: true })?;
        self.leave(b']')?;
        Ok(value)
    }

    #[inline]
    fn visit_string<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Error> {
        match self.parse_str()? {
            Str::Borrowed(s) => visitor.visit_borrowed_str(s),
            Str::Copied(s) => visitor.visit_str(s),
        }
    }
}

fn located(e: SkipError, at: usize) -> Error {
    match e {
        SkipError::Eof => Error::Eof,
        SkipError::Syntax => Error::Syntax(at),
    }
}

/// At the `XXXX` of `\uXXXX`: the character and how many bytes it used (a surrogate pair is
/// `XXXX\uYYYY`). Lone surrogates are errors, as in serde_json.
fn unicode_escape(input: &[u8], i: usize) -> Result<(char, usize), Error> {
    let hex4 = |at: usize| -> Result<u32, Error> {
        let digits = input.get(at..at + 4).ok_or(Error::Eof)?;
        let text = std::str::from_utf8(digits).map_err(|_| Error::Syntax(at))?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::Syntax(at));
        }
        u32::from_str_radix(text, 16).map_err(|_| Error::Syntax(at))
    };
    let first = hex4(i)?;
    match first {
        0xD800..=0xDBFF => {
            if input.get(i + 4..i + 6) != Some(b"\\u") {
                return Err(Error::Syntax(i));
            }
            let second = hex4(i + 6)?;
            if !(0xDC00..=0xDFFF).contains(&second) {
                return Err(Error::Syntax(i + 6));
            }
            let c = char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00));
            Ok((c.ok_or(Error::Syntax(i))?, 10))
        }
        0xDC00..=0xDFFF => Err(Error::Syntax(i)),
        _ => Ok((char::from_u32(first).ok_or(Error::Syntax(i))?, 4)),
    }
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.peek()? {
            b'{' => self.read_map(visitor),
            b'[' => self.read_seq(visitor),
            b'"' => self.visit_string(visitor),
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_unit()
            }
            b't' => {
                self.literal(b"true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal(b"false")?;
                visitor.visit_bool(false)
            }
            b'-' | b'0'..=b'9' => self.visit_integer(visitor),
            _ => Err(Error::Syntax(self.pos)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, Error> {
        if name != RAW_VALUE_TOKEN {
            return visitor.visit_newtype_struct(self);
        }
        self.skip_whitespace();
        let start = self.pos;
        let ascii = self.skip_value()?;
        let bytes = &self.input[start..self.pos];
        let raw = if ascii {
            // SAFETY: the skip saw only ASCII bytes in the value.
            unsafe { std::str::from_utf8_unchecked(bytes) }
        } else {
            std::str::from_utf8(bytes).map_err(|_| Error::Syntax(start))?
        };
        visitor.visit_map(RawValueEntry(Some(raw)))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.peek()? {
            b'{' => self.read_map(visitor),
            // serde_json would fill the struct by position; leave that oddity to it.
            _ => Err(self.unsupported("a struct that is not a JSON object")),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Error> {
        Err(self.unsupported("an enum"))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.skip_value()?;
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map identifier
    }
}

/// The entries of an object being read.
struct Entries<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    first: bool,
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        match self.de.peek()? {
            b'}' => return Ok(None),
            b',' if !self.first => {
                self.de.pos += 1;
            }
            _ if self.first => {}
            _ => return Err(Error::Syntax(self.de.pos)),
        }
        self.first = false;
        if self.de.peek()? != b'"' {
            return Err(Error::Syntax(self.de.pos));
        }
        seed.deserialize(Key(&mut *self.de)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        if self.de.peek()? != b':' {
            return Err(Error::Syntax(self.de.pos));
        }
        self.de.pos += 1;
        seed.deserialize(&mut *self.de)
    }
}

/// The elements of an array being read.
struct Elements<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    first: bool,
}

impl<'de> SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        match self.de.peek()? {
            b']' => return Ok(None),
            b',' if !self.first => {
                self.de.pos += 1;
                if self.de.peek()? == b']' {
                    return Err(Error::Syntax(self.de.pos));
                }
            }
            _ if self.first => {}
            _ => return Err(Error::Syntax(self.de.pos)),
        }
        self.first = false;
        seed.deserialize(&mut *self.de).map(Some)
    }
}

/// An object key: always a JSON string.
struct Key<'a, 'de>(&'a mut Deserializer<'de>);

impl<'de> de::Deserializer<'de> for Key<'_, 'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.0.visit_string(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// serde_json's raw-value protocol: one entry, the token as key and the raw text as value.
struct RawValueEntry<'de>(Option<&'de str>);

impl<'de> MapAccess<'de> for RawValueEntry<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        if self.0.is_none() {
            return Ok(None);
        }
        seed.deserialize(de::value::BorrowedStrDeserializer::new(RAW_VALUE_TOKEN)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let raw = self.0.take().ok_or(Error::Custom("raw value read twice".to_string()))?;
        seed.deserialize(de::value::BorrowedStrDeserializer::new(raw))
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::value::RawValue;

    use super::super::from_slice;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)] // compared through Debug
    struct View<'a> {
        #[serde(borrow, default)]
        name: Option<Cow<'a, str>>,
        #[serde(default)]
        count: Option<i32>,
        #[serde(default)]
        flag: Option<bool>,
        #[serde(borrow, default)]
        raw: Option<&'a RawValue>,
        #[serde(default)]
        list: Option<Vec<u8>>,
        #[serde(default)]
        map: Option<BTreeMap<String, String>>,
    }

    /// Inputs both decoders accept must decode the same.
    #[test]
    fn agrees_with_serde_json() {
        let cases = [
            r#"{}"#,
            r#"  {"name":"a"}  "#,
            r#"{"name":"a\"b\\c\/\n\u00e9\ud83d\ude00","count":-12,"flag":true}"#,
            r#"{"skip":{"deep":[1,2,{"x":"}"}]},"name":"n","skip2":[],"skip3":-1.5e+3,"skip4":"s\"","skip5":null}"#,
            r#"{"raw":  [ {"a" : 1} , 2 ] ,"count":0}"#,
            r#"{"raw":"text","list":[1,2,3],"map":{"k":"v","k2":"v2"}}"#,
            r#"{"raw":null,"name":null,"count":null}"#,
            r#"{"count":2147483647,"flag":false}"#,
            "{\"name\":\"\u{e9}t\u{e9}\",\n\t\"count\":1}",
        ];
        for case in cases {
            let expected: View = serde_json::from_str(case).unwrap_or_else(|e| panic!("{case}: {e}"));
            let got: View = from_slice(case.as_bytes()).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(format!("{got:?}"), format!("{expected:?}"), "{case}");
            if let (Some(a), Some(b)) = (&got.raw, &expected.raw) {
                assert_eq!(a.get(), b.get());
            }
        }
    }

    /// What the fast decoder refuses; serde_json then decides. Each must be an error here.
    #[test]
    fn refuses() {
        let cases = [
            ("", "empty"),
            ("[]", "array as struct"),
            (r#"{"name":"a"} x"#, "trailing bytes"),
            (r#"{"name":"a",}"#, "trailing comma"),
            (r#"{"name" "a"}"#, "missing colon"),
            (r#"{"name":"a" "count":1}"#, "missing comma"),
            (r#"{"count":1.0}"#, "float for an int"),
            (r#"{"count":01}"#, "leading zero"),
            (r#"{"count":-0}"#, "negative zero"),
            (r#"{"count":99999999999999999999}"#, "beyond u64"),
            (r#"{"count":4294967296}"#, "beyond i32"),
            (r#"{"flag":"true"}"#, "string for bool"),
            (r#"{"flag":tru}"#, "bad literal"),
            (r#"{"name":"a\x"}"#, "bad escape"),
            (r#"{"name":"\ud800"}"#, "lone surrogate"),
            ("{\"name\":\"a\u{1}\"}", "control character"),
            (r#"{"name":"a"#, "unterminated string"),
            (r#"{"skip":{"a":[1,2}}"#, "mismatched close"),
            (r#"{"skip":{"a":1"#, "unterminated skip"),
            (r#"{"skip":tru}"#, "bad skipped literal"),
            (r#"{"skip":-}"#, "bad skipped number"),
            (r#"{"skip":1.}"#, "bad skipped fraction"),
            (r#"{"list":[1,]}"#, "trailing comma in a list"),
            (r#"{"name":"a","name":"b"}"#, "duplicate field"),
        ];
        for (case, why) in cases {
            assert!(from_slice::<View>(case.as_bytes()).is_err(), "{why}: {case}");
        }
        assert!(from_slice::<View>(b"{\"name\":\"\xff\"}").is_err(), "invalid UTF-8 in a read string");
    }

    /// Strings longer than a SIMD block, with one special character at every position: a read
    /// string must decode as serde_json decodes it (or be refused), and a skipped one must end
    /// where serde_json says it ends.
    #[test]
    fn special_characters_at_every_position() {
        let specials =
            ["\\\"", "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "é", "😀", "\u{1}", "\u{1f}", "\\x", "\u{7f}"];
        let mut agreed = 0;
        for special in specials {
            for at in 0..40 {
                let text = format!("{}{special}{}", "a".repeat(at), "b".repeat(40 - at));
                let read = format!(r#"{{"name":"{text}","count":1}}"#);
                let expected: Result<View, _> = serde_json::from_str(&read);
                let got = from_slice::<View>(read.as_bytes());
                match (&expected, &got) {
                    (Ok(e), Ok(g)) => {
                        assert_eq!(format!("{g:?}"), format!("{e:?}"), "{read}");
                        agreed += 1;
                    }
                    (Err(_), Err(_)) => {}
                    (Ok(_), Err(e)) => panic!("refused {read}: {e}"),
                    (Err(e), Ok(_)) => panic!("accepted {read}, serde_json: {e}"),
                }
                if expected.is_ok() {
                    let skipped = format!(r#"{{"other":"{text}","count":2}}"#);
                    let view = from_slice::<View>(skipped.as_bytes()).unwrap_or_else(|e| panic!("{skipped}: {e}"));
                    assert_eq!(view.count, Some(2), "{skipped}");
                }
            }
        }
        assert_eq!(agreed, 8 * 40, "eight of the specials are valid JSON");
        let non_utf8 = [b"{\"name\":\"".as_slice(), &[b'a'; 20], &[0xff], &[b'b'; 20], b"\"}"].concat();
        assert!(from_slice::<View>(&non_utf8).is_err(), "invalid UTF-8 inside a long read string");
    }

    #[test]
    fn raw_value_token_is_serde_jsons() {
        // If serde_json renamed its private token, raw fields would stop decoding here.
        let view: View = from_slice(br#"{"raw":{"a":[1]}}"#).expect("raw value decodes");
        assert_eq!(view.raw.map(RawValue::get), Some(r#"{"a":[1]}"#));
    }

    #[test]
    fn nesting_is_bounded() {
        #[derive(Deserialize)]
        struct Any(#[allow(dead_code)] serde_json::Value);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(from_slice::<Any>(deep.as_bytes()).is_err());
        // Skipped, nesting is followed 128 levels deep; deeper, the fast decoder gives up and the
        // caller hands the body to serde_json (whose skip has no depth limit): time, not answers.
        let skipped = |depth: usize| format!(r#"{{"skip":{}{}}}"#, "[".repeat(depth), "]".repeat(depth));
        assert!(from_slice::<View>(skipped(128).as_bytes()).is_ok());
        assert!(from_slice::<View>(skipped(10_000).as_bytes()).is_err());
    }
}
