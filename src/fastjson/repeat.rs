//! Skipping a container the body has already skipped once, by comparing bytes instead of walking
//! its brackets.
//!
//! An UPDATE review carries the object twice (`object`, then `oldObject`), and most of what the
//! views skip (managedFields, the trainer and initializer specs, unchanged overrides) is often
//! byte-identical in both. Where a container ends depends only on its own bytes: the skip stops
//! at the bracket that closes the one it started at. So when the bytes at a new position equal a
//! container skipped before, the value there is that same container and ends as far on, found
//! with one `memcmp`, several times faster than the skip.
//!
//! Lists of containers (managedFields above all) are skipped one element at a time and their
//! element bounds are kept, because the API server re-stamps one manager's `time` on most
//! updates: when such a list differs, the elements before the first differing byte are the
//! same elements, and the skip resumes after the last of them (at the first element when the
//! first one differs), comparing each further element with the one at the same index before
//! skipping it.

use super::skip::{self, SkipError};

/// Containers shorter than this are skipped as usual: looking them up would cost what it saves.
const MIN_LEN: usize = 256;

/// How many skipped containers are remembered (the first ones of the body).
const CAPACITY: usize = 16;

/// Bytes compared at the start of a candidate before the whole of it is.
const PREFIX: usize = 16;

/// Elements remembered per body, over all lists (a list with more is remembered whole only).
const MAX_ELEMENTS: usize = 4096;

#[derive(Debug, Clone, Copy, Default)]
struct Skipped {
    start: u32,
    end: u32,
    /// The skip saw only ASCII bytes in it.
    ascii: bool,
    /// For a list skipped element by element: its elements' bounds, `elements[first..last]`.
    first: u32,
    last: u32,
}

/// The containers skipped so far in one body.
#[derive(Debug, Clone)]
pub(super) struct Repeats {
    seen: [Skipped; CAPACITY],
    len: usize,
    /// The entry after the last one found again: both objects list their fields in the same
    /// order, so the next repeat is usually there.
    next: usize,
    /// Bytes that may still be compared for candidates that turn out different. It starts at the
    /// input's length, so a body made to look repetitive costs at most one more pass over it.
    budget: usize,
    /// Bounds (absolute) of the elements of the lists in `seen`.
    elements: Vec<(u32, u32)>,
}

/// What the bytes at a container's start are, as far as the remembered ones tell.
enum Lookup {
    /// A remembered container: where it ends, and whether it is ASCII.
    Whole(usize, bool),
    /// A remembered list up to the end of its element `index - 1` (at `at`; just past `[` when
    /// `index` is 0), not the rest.
    Resume {
        candidate: usize,
        index: usize,
        at: usize,
    },
    Unknown,
}

impl Repeats {
    pub(super) fn new(input_len: usize) -> Self {
        Repeats { seen: [Skipped::default(); CAPACITY], len: 0, next: 0, budget: input_len, elements: Vec::new() }
    }

    /// `input[at]` opens a container: the index just past it, and whether it is all ASCII
    /// (`false` may also mean "not known").
    pub(super) fn skip(&mut self, input: &[u8], at: usize) -> Result<(usize, bool), SkipError> {
        if input.len() > u32::MAX as usize {
            return skip::container_ascii(input, at); // positions are kept as u32
        }
        match self.lookup(input, at) {
            Lookup::Whole(end, ascii) => Ok((end, ascii)),
            Lookup::Resume { candidate, index, at: from } => {
                let prefix_ascii = self.seen[candidate].ascii;
                self.walk_list(input, from, index, Some(candidate)).map(|(end, ascii)| (end, ascii && prefix_ascii))
            }
            Lookup::Unknown => {
                let lists_containers = input[at] == b'['
                    && self.len < CAPACITY
                    && matches!(input.get(skip::whitespace(input, at + 1)), Some(b'{' | b'['));
                if !lists_containers {
                    let (end, ascii) = skip::container_ascii(input, at)?;
                    self.record(at, end, ascii, (0, 0));
                    return Ok((end, ascii));
                }
                let first = self.elements.len();
                let (end, ascii) = self.walk_list(input, at + 1, 0, None)?;
                let last = self.elements.len();
                if last > MAX_ELEMENTS {
                    self.elements.truncate(first);
                    self.record(at, end, ascii, (0, 0));
                } else if !self.record(at, end, ascii, (first, last)) {
                    self.elements.truncate(first);
                }
                Ok((end, ascii))
            }
        }
    }

    #[inline]
    fn lookup(&mut self, input: &[u8], at: usize) -> Lookup {
        if self.len == 0 {
            return Lookup::Unknown;
        }
        let Some(head) = input.get(at..at + PREFIX) else { return Lookup::Unknown };
        let head: &[u8; PREFIX] = head.try_into().expect("PREFIX bytes");
        let starts_alike = |s: &Skipped| {
            let start = s.start as usize;
            <&[u8; PREFIX]>::try_from(&input[start..start + PREFIX]).expect("PREFIX bytes") == head
        };
        let candidate = if self.next < self.len && starts_alike(&self.seen[self.next]) {
            self.next
        } else {
            match (0..self.len).find(|&i| starts_alike(&self.seen[i])) {
                Some(i) => i,
                None => return Lookup::Unknown,
            }
        };
        let Skipped { start, end, ascii, first, last } = self.seen[candidate];
        let (start, end) = (start as usize, end as usize);
        let Some(same) = self.common_prefix(&input[at..], &input[start..end]) else { return Lookup::Unknown };
        if same == end - start {
            self.next = candidate + 1;
            return Lookup::Whole(at + same, ascii);
        }
        // The elements that end before the first difference, and the byte after each (which
        // ends a number), are the same elements here.
        let elements = &self.elements[first as usize..last as usize];
        if elements.is_empty() {
            return Lookup::Unknown;
        }
        let index = elements.partition_point(|&(_, element_end)| (element_end as usize - start) < same);
        self.next = candidate + 1;
        // With no element in common (the first one differs), the walk starts just past `[`
        // and still compares each later element with the one at its index.
        let resume_at = match index {
            0 => at + 1,
            _ => at + (elements[index - 1].1 as usize - start),
        };
        Lookup::Resume { candidate, index, at: resume_at }
    }

    /// How many leading bytes `new` and `old` share (`old.len()` when `new` starts with all
    /// of `old`), or `None` when comparing would overdraw the budget. A difference is charged
    /// the bytes compared to find it.
    fn common_prefix(&mut self, new: &[u8], old: &[u8]) -> Option<usize> {
        const CHUNK: usize = 1024;
        let len = old.len().min(new.len());
        if len > self.budget {
            return None;
        }
        let word = |bytes: &[u8], at: usize| u128::from_ne_bytes(bytes[at..at + 16].try_into().expect("16 bytes"));
        let mut same = 0;
        while same + CHUNK <= len && new[same..same + CHUNK] == old[same..same + CHUNK] {
            same += CHUNK;
        }
        while same + 16 <= len && word(new, same) == word(old, same) {
            same += 16;
        }
        while same < len && new[same] == old[same] {
            same += 1;
        }
        if same < old.len() {
            self.budget -= (same + CHUNK).min(len); // at least what was compared
        }
        Some(same)
    }

    /// Skips a list element by element, from `at`, which is just past its `[` (`index` 0) or
    /// just past its element `index - 1`, up to and including its `]`. With a `candidate`,
    /// each element that has a container at the same index in it is compared with that one
    /// first; without, the elements' bounds are appended to `elements`.
    fn walk_list(
        &mut self,
        input: &[u8],
        mut at: usize,
        mut index: usize,
        candidate: Option<usize>,
    ) -> Result<(usize, bool), SkipError> {
        let mut ascii = true;
        loop {
            at = skip::whitespace(input, at);
            match input.get(at) {
                None => return Err(SkipError::Eof),
                Some(b']') => return Ok((at + 1, ascii)),
                Some(b',') if index > 0 => at = skip::whitespace(input, at + 1),
                Some(_) if index == 0 => {}
                Some(_) => return Err(SkipError::Syntax),
            }
            let start = at;
            let known = candidate.and_then(|c| {
                let Skipped { first, last, ascii, .. } = self.seen[c];
                let &(old_start, old_end) = self.elements[first as usize..last as usize].get(index)?;
                let old = &input[old_start as usize..old_end as usize];
                if !matches!(old[0], b'{' | b'[') {
                    return None; // a number's end depends on what follows it
                }
                let same = self.common_prefix(&input[start..], old)?;
                (same == old.len()).then_some((start + same, ascii))
            });
            let (end, element_ascii) = match known {
                Some(found) => found,
                None => skip_element(input, start)?,
            };
            ascii &= element_ascii;
            if candidate.is_none() {
                self.elements.push((start as u32, end as u32));
            }
            at = end;
            index += 1;
        }
    }

    /// Remembers a container just skipped at `start..end`, with its elements' bounds if it is a
    /// list skipped element by element. `false` when it is not remembered.
    fn record(&mut self, start: usize, end: usize, ascii: bool, (first, last): (usize, usize)) -> bool {
        if end - start < MIN_LEN || self.len == CAPACITY {
            return false;
        }
        // (`skip` keeps bodies past `u32::MAX` away from here.)
        let [start, end, first, last] = [start, end, first, last].map(|i| i as u32);
        self.seen[self.len] = Skipped { start, end, ascii, first, last };
        self.len += 1;
        true
    }
}

/// One element of a list: a container or string by its own bytes, a number or literal up to
/// the next separator (its grammar is not checked, as inside any skipped container).
fn skip_element(input: &[u8], at: usize) -> Result<(usize, bool), SkipError> {
    match input.get(at) {
        None => Err(SkipError::Eof),
        Some(b'{' | b'[') => skip::container_ascii(input, at),
        Some(b'"') => skip::string(input, at).map(|end| (end, false)),
        Some(b'}') => Err(SkipError::Syntax),
        Some(_) => {
            match input[at..].iter().position(|b| matches!(b, b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t')) {
                Some(0) => Err(SkipError::Syntax), // a separator where an element belongs
                Some(len) => Ok((at + len, true)),
                None => Err(SkipError::Eof),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JSON list of strings, `n` bytes or a little more.
    fn list(n: usize, fill: char) -> String {
        let item = format!("\"{}\"", fill.to_string().repeat(30));
        let mut out = String::from("[");
        while out.len() < n {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&item);
        }
        out.push(']');
        out
    }

    /// A managedFields-like list of `n` objects; `time` of each element as given.
    fn entries(times: &[&str]) -> String {
        let items: Vec<String> = times
            .iter()
            .enumerate()
            .map(|(i, time)| {
                format!(r#"{{"manager":"m{i}","operation":"Update","time":"{time}","fieldsV1":{{"f:spec":{{"f:x":{{}},"f:y":[1,2,3]}}}}}}"#)
            })
            .collect();
        format!("[{}]", items.join(","))
    }

    /// `{"k0":v0,"k1":v1,...,"end":1}` and where each value starts.
    fn body_of(values: &[&str]) -> (String, Vec<usize>) {
        let mut body = String::from("{");
        let mut starts = Vec::new();
        for (i, v) in values.iter().enumerate() {
            body.push_str(&format!("\"k{i}\":"));
            starts.push(body.len());
            body.push_str(v);
            body.push(',');
        }
        body.push_str("\"end\":1}");
        (body, starts)
    }

    /// Skips each container of `body` (given by its start) with one `Repeats`: every end must be
    /// the plain skip's. Returns, per container, whether it was found without a full skip
    /// (that is, it was not remembered as new).
    fn found_again(body: &str, starts: &[usize]) -> Vec<bool> {
        let input = body.as_bytes();
        let mut repeats = Repeats::new(input.len());
        starts
            .iter()
            .map(|&at| {
                let plain = skip::container_ascii(input, at).expect("valid container");
                let remembered = repeats.len;
                let (end, ascii) = repeats.skip(input, at).expect("valid container");
                assert_eq!(end, plain.0, "a repeat ends where the skip does: {body}");
                assert!(!ascii || plain.1, "ASCII only when the skip says so");
                repeats.len == remembered && end - at >= MIN_LEN
            })
            .collect()
    }

    #[test]
    fn finds_repeats_and_only_repeats() {
        let (a, b) = (list(300, 'a'), list(300, 'b'));
        let small = list(100, 'a');
        let mut changed_late = a.clone();
        changed_late.replace_range(a.len() - 5..a.len() - 4, "z");
        let cases: Vec<(&str, Vec<&str>, Vec<bool>)> = vec![
            ("the same container twice", vec![&a, &a], vec![false, true]),
            ("two containers, then both again in order", vec![&a, &b, &a, &b], vec![false, false, true, true]),
            ("both again in the other order", vec![&a, &b, &b, &a], vec![false, false, true, true]),
            ("same start, a byte differs near the end", vec![&a, &changed_late], vec![false, false]),
            ("short containers are not looked up", vec![&small, &small], vec![false, false]),
        ];
        for (name, values, repeated) in cases {
            let (body, starts) = body_of(&values);
            assert_eq!(found_again(&body, &starts), repeated, "{name}");
        }
    }

    #[test]
    fn a_repeat_may_run_into_what_follows_it() {
        // The second value lacks its closing bracket, which the enclosing list supplies: the
        // bytes are the first value's, so they are that value, for any parser.
        let a = list(300, 'a');
        let body = format!("[{a},{}]", &a[..a.len() - 1]);
        assert_eq!(found_again(&body, &[1, a.len() + 2]), [false, true]);
    }

    #[test]
    fn a_list_that_differs_resumes_after_its_last_same_element() {
        let t = "2025-06-01T08:00:00Z";
        let old = entries(&[t; 6]);
        let restamped = |i: usize, time: &str| {
            let mut times = [t; 6];
            times[i] = time;
            entries(&times)
        };
        let appended = entries(&[t; 7]);
        let dropped = entries(&[t; 5]);
        let number_grown = old.replace(r#""f:y":[1,2,3]}}}]"#, r#""f:y":[1,2,34]}}}]"#);
        let number_list = |last: &str| format!("[{},{last}]", &old[1..old.len() - 1]);
        let (numbers_old, numbers_new) = (number_list("12"), number_list("123"));
        let strings = list(300, 'a');
        // (case, old list, new list, lookup: None = unknown, Some(None) = whole, Some(Some(i)) = resumes at element i)
        let cases: Vec<(&str, &str, String, Option<Option<usize>>)> = vec![
            ("identical", &old, old.clone(), Some(None)),
            ("last element re-stamped", &old, restamped(5, "2025-06-02T09:30:00Z"), Some(Some(5))),
            ("middle element re-stamped", &old, restamped(2, "2025-06-02T09:30:00Z"), Some(Some(2))),
            ("middle element re-stamped, longer", &old, restamped(2, "2025-06-02T09:30:00.5Z"), Some(Some(2))),
            ("first element re-stamped", &old, restamped(0, "2025-06-02T09:30:00Z"), Some(Some(0))),
            ("a list of strings that differs (not walked)", &strings, strings.replacen("aaa\"]", "aab\"]", 1), None),
            // The old list's last element is followed by `]`, the new one's by `,`: that element is
            // compared again after the resume (and found).
            ("an element appended", &old, appended, Some(Some(5))),
            ("the last element dropped", &old, dropped, Some(Some(4))),
            ("a number grows inside the last element", &old, number_grown, Some(Some(5))),
            ("a number element grows", &numbers_old, numbers_new, Some(Some(6))),
        ];
        for (name, old, new, expected) in cases {
            let (body, starts) = body_of(&[old, &new]);
            let input = body.as_bytes();
            let mut repeats = Repeats::new(input.len());
            let first = repeats.skip(input, starts[0]).expect("valid");
            assert_eq!(first.0, skip::container_ascii(input, starts[0]).unwrap().0, "{name}");
            let lookup = match repeats.clone().lookup(input, starts[1]) {
                Lookup::Unknown => None,
                Lookup::Whole(..) => Some(None),
                Lookup::Resume { index, .. } => Some(Some(index)),
            };
            assert_eq!(lookup, expected, "{name}");
            let (end, _) = repeats.skip(input, starts[1]).expect("valid");
            assert_eq!(end, skip::container_ascii(input, starts[1]).unwrap().0, "{name}");
        }
    }

    #[test]
    fn lists_walked_element_by_element_keep_the_skip_s_verdicts() {
        let cases: &[(&str, Result<usize, SkipError>)] = &[
            ("[{}]", Ok(4)),
            ("[ {} ,\n[] , 1 ,\"x\" ]", Ok(20)),
            ("[{},]", Err(SkipError::Syntax)),
            ("[{} {}]", Err(SkipError::Syntax)),
            ("[{},,{}]", Err(SkipError::Syntax)),
            ("[{}}", Err(SkipError::Syntax)),
            ("[{},", Err(SkipError::Eof)),
            ("[{", Err(SkipError::Eof)),
        ];
        for (text, expected) in cases {
            let mut repeats = Repeats::new(text.len());
            assert_eq!(repeats.skip(text.as_bytes(), 0).map(|(end, _)| end), *expected, "{text}");
        }
    }

    #[test]
    fn comparing_different_bytes_is_bounded_by_the_input() {
        // Short containers that start like the long recorded one: each miss is charged what it
        // compared, so after a pass over the input's length the lookups stop.
        let a = list(300, 'a');
        let short = list(2, 'a'); // one item
        assert_eq!(a[..PREFIX], short[..PREFIX]);
        let body = format!("[{a}{}]", format!(",{short}").repeat(200));
        let input = body.as_bytes();
        let mut repeats = Repeats::new(input.len());
        assert!(repeats.record(1, 1 + a.len(), true, (0, 0)));
        let mut at = 1 + a.len() + 1;
        let mut spent = Vec::new();
        for _ in 0..200 {
            let before = repeats.budget;
            assert!(matches!(repeats.lookup(input, at), Lookup::Unknown));
            spent.push(before - repeats.budget);
            at += short.len() + 1;
        }
        assert!(spent.iter().sum::<usize>() <= input.len());
        // (The last few may still fit what is left of the budget.)
        assert!(spent[0] > 0 && spent[150] == 0, "the budget ran out: {spent:?}");
    }

    proptest::proptest! {
        /// Any list of entries against any edit of it (re-stamps of any length, entries added or
        /// dropped, a number changed): the second skip ends where the plain skip does.
        #[test]
        fn an_edited_list_ends_where_the_skip_ends(
            times in proptest::collection::vec("[0-9]{1,3}", 1..8),
            edits in proptest::collection::vec((0usize..8, "[0-9]{0,3}"), 0..4),
            grow in 0usize..3,
            drop in 0usize..2,
            numbers in ("[1-9][0-9]{0,2}", "[1-9][0-9]{0,2}"),
        ) {
            let old_times: Vec<&str> = times.iter().map(String::as_str).collect();
            let mut new_times = old_times.clone();
            for (at, time) in &edits {
                let at = at % new_times.len();
                new_times[at] = time;
            }
            new_times.truncate(new_times.len().saturating_sub(drop).max(1));
            new_times.extend(std::iter::repeat_n("1", grow));
            // A number last: its end depends on the byte after it.
            let with_number = |list: String, number: &str| format!("{},{number}]", &list[..list.len() - 1]);
            let old = with_number(entries(&old_times), &numbers.0);
            let new = with_number(entries(&new_times), &numbers.1);
            let (body, starts) = body_of(&[&old, &new]);
            found_again(&body, &starts);
        }
    }
}
