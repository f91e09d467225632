//! Skipping a container the body has already skipped once, by comparing bytes instead of walking
//! its brackets.
//!
//! An UPDATE review carries the object twice (`object`, then `oldObject`), and most of what the
//! views skip (managedFields, the trainer and initializer specs, unchanged overrides) is often
//! byte-identical in both. Where a container ends depends only on its own bytes: the skip stops
//! at the bracket that closes the one it started at. So when the bytes at a new position equal a
//! container skipped before, the value there is that same container and ends as far on, found
//! with one `memcmp`, several times faster than the skip. A value that differs anywhere (a
//! manager's timestamp in managedFields) is skipped as usual.

/// Containers shorter than this are skipped as usual: looking them up would cost what it saves.
const MIN_LEN: usize = 256;

/// How many skipped containers are remembered (the first ones of the body).
const CAPACITY: usize = 16;

/// Bytes compared at the start of a candidate before the whole of it is.
const PREFIX: usize = 16;

#[derive(Debug, Clone, Copy, Default)]
struct Skipped {
    start: u32,
    end: u32,
    /// The skip saw only ASCII bytes in it.
    ascii: bool,
}

/// The containers skipped so far in one body.
#[derive(Debug)]
pub(super) struct Repeats {
    seen: [Skipped; CAPACITY],
    len: usize,
    /// The entry after the last one found again: both objects list their fields in the same
    /// order, so the next repeat is usually there.
    next: usize,
    /// Bytes that may still be compared for candidates that turn out different. It starts at the
    /// input's length, so a body made to look repetitive costs at most one more pass over it.
    budget: usize,
}

impl Repeats {
    pub(super) fn new(input_len: usize) -> Self {
        Repeats { seen: [Skipped::default(); CAPACITY], len: 0, next: 0, budget: input_len }
    }

    /// `input[at]` opens a container. If the bytes there repeat a container recorded before:
    /// the index just past it, and whether it is all ASCII (as the skip said the first time).
    #[inline]
    pub(super) fn find(&mut self, input: &[u8], at: usize) -> Option<(usize, bool)> {
        if self.len == 0 {
            return None;
        }
        let head = input.get(at..at + PREFIX)?;
        let starts_alike = |s: &Skipped| &input[s.start as usize..s.start as usize + PREFIX] == head;
        let candidate = if self.next < self.len && starts_alike(&self.seen[self.next]) {
            self.next
        } else {
            (0..self.len).find(|&i| starts_alike(&self.seen[i]))?
        };
        let Skipped { start, end, ascii } = self.seen[candidate];
        let (start, end) = (start as usize, end as usize);
        let len = end - start;
        let compared = len.min(input.len() - at);
        if compared > self.budget {
            return None;
        }
        if input.get(at..at + len) == Some(&input[start..end]) {
            self.next = candidate + 1;
            Some((at + len, ascii))
        } else {
            self.budget -= compared;
            None
        }
    }

    /// Remembers a container just skipped at `start..end`.
    #[inline]
    pub(super) fn record(&mut self, start: usize, end: usize, ascii: bool) {
        if end - start < MIN_LEN || self.len == CAPACITY {
            return;
        }
        let (Ok(start), Ok(end)) = (u32::try_from(start), u32::try_from(end)) else { return };
        self.seen[self.len] = Skipped { start, end, ascii };
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JSON list of `n` bytes or a little more.
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

    /// Records each container of `body` (given by its start) after a plain skip, and finds each
    /// one again where it can: the ends must be the skip's ends.
    fn ends(body: &str, starts: &[usize]) -> Vec<(usize, Option<usize>)> {
        let input = body.as_bytes();
        let mut repeats = Repeats::new(input.len());
        starts
            .iter()
            .map(|&at| {
                let (end, ascii) = super::super::skip::container_ascii(input, at).expect("valid container");
                let found = repeats.find(input, at);
                if let Some((found_end, found_ascii)) = found {
                    assert_eq!((found_end, found_ascii), (end, ascii), "a repeat ends where the skip does");
                } else {
                    repeats.record(at, end, ascii);
                }
                (end, found.map(|f| f.0))
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
            let mut body = String::from("{");
            let mut starts = Vec::new();
            for (i, v) in values.iter().enumerate() {
                body.push_str(&format!("\"k{i}\":"));
                starts.push(body.len());
                body.push_str(v);
                body.push(',');
            }
            body.push_str("\"end\":1}");
            let got: Vec<bool> = ends(&body, &starts).iter().map(|(_, found)| found.is_some()).collect();
            assert_eq!(got, repeated, "{name}");
        }
    }

    #[test]
    fn a_repeat_may_run_into_what_follows_it() {
        // The second value lacks its closing bracket, which the enclosing list supplies: the
        // bytes are the first value's, so they are that value, for any parser.
        let a = list(300, 'a');
        let body = format!("[{a},{}]", &a[..a.len() - 1]);
        let got = ends(&body, &[1, a.len() + 2]);
        assert_eq!(got[1], (body.len(), Some(body.len())));
    }

    #[test]
    fn comparing_different_bytes_is_bounded_by_the_input() {
        // Short containers that start like the long recorded one: each miss is charged the
        // recorded length, so after about (input length / that length) misses the lookups stop.
        let a = list(300, 'a');
        let short = list(2, 'a'); // one item
        assert_eq!(a[..PREFIX], short[..PREFIX]);
        let body = format!("[{a}{}]", format!(",{short}").repeat(200));
        let input = body.as_bytes();
        let mut repeats = Repeats::new(input.len());
        repeats.record(1, 1 + a.len(), true);
        let mut at = 1 + a.len() + 1;
        let mut spent = Vec::new();
        for _ in 0..200 {
            let before = repeats.budget;
            assert_eq!(repeats.find(input, at), None);
            spent.push(before - repeats.budget);
            at += short.len() + 1;
        }
        assert!(spent.iter().sum::<usize>() <= input.len());
        // (The last few may still fit what is left of the budget.)
        assert!(spent[0] > 0 && spent[100] == 0, "the budget ran out: {spent:?}");
    }
}
