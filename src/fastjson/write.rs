//! Strings written into an answer or a log line. Almost none of them need escaping (paths, rule
//! ids, uids, the denial's own sentences), so each is checked a block at a time and copied as it
//! is; only one that needs escaping goes through the formatter.

use std::io::Write as _;

use super::skip::plain_run;

/// `s` as a JSON string, escaped exactly as serde_json escapes it.
pub fn json_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // serde_json escapes `"`, `\` and the control characters, and nothing else: exactly the
    // bytes that end a plain run.
    let run = plain_run(bytes, 0);
    if bytes[run.end..].iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\') {
        quoted(out, bytes);
    } else {
        // Writing a str into a Vec cannot fail.
        let _ = serde_json::to_writer(out, s);
    }
}

/// `s` as `{s:?}` writes it. For short strings: printable ASCII without `"` or `\` is only
/// quoted; anything else goes through `Debug`, whose escapes (of Unicode too) are its own.
pub fn debug_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\') {
        quoted(out, s.as_bytes());
    } else {
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{s:?}");
    }
}

fn quoted(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    out.extend_from_slice(bytes);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(f: fn(&mut Vec<u8>, &str), s: &str) -> String {
        let mut out = b"prefix ".to_vec();
        f(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    /// Strings either side of a 16-byte block, with the byte that needs escaping at its start,
    /// inside, at the block's edge and in the short tail.
    fn cases() -> Vec<String> {
        let mut cases: Vec<String> =
            ["", "a", "plain text", "é✓😀", "</script>", "del \u{7f}", "nbsp \u{a0}", "\u{200b}"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        for special in ["\"", "\\", "\n", "\t", "\u{1}", "\u{1f}", "\u{7f}", "\u{301}"] {
            for at in [0, 1, 15, 16, 17, 31, 40] {
                let mut s = "x".repeat(at);
                s.push_str(special);
                s.push_str("tail");
                cases.push(s);
            }
        }
        cases.push("x".repeat(600));
        cases
    }

    #[test]
    fn json_str_writes_what_serde_json_writes() {
        for s in cases() {
            assert_eq!(written(json_str, &s), format!("prefix {}", serde_json::to_string(&s).unwrap()), "{s:?}");
        }
    }

    #[test]
    fn debug_str_writes_what_debug_writes() {
        for s in cases() {
            assert_eq!(written(debug_str, &s), format!("prefix {s:?}"), "{s:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_and_debug_write_it(s in "\\PC*|[\\x00-\\x7f]{0,80}") {
            proptest::prop_assert_eq!(written(json_str, &s), format!("prefix {}", serde_json::to_string(&s).unwrap()));
            proptest::prop_assert_eq!(written(debug_str, &s), format!("prefix {s:?}"));
        }
    }
}
