//! The old side compared with the new side's tape as it is read, so that what is byte-identical
//! on both sides is passed with one `memcmp` instead of being read.
//!
//! A changed update usually changes one value deep inside the overrides (a node selector, an
//! image): reading the old side into a tape of its own cost as much as reading the new one, and
//! almost all of it was bytes the new side has too. Here the old text is walked in step with the
//! new tape: where the old bytes at a value equal the new container's text, the values are equal
//! (equal bytes read as equal values under every rule); where they do not, objects and lists are
//! entered and compared member by member.
//!
//! The answer is always the one [`super::equal`] gives on two tapes. A member-by-member walk
//! decides only where that is certain to agree: objects that list the same plain keys in the same
//! order, none twice (then they are equal exactly when their values are, which is also what the
//! tape comparison finds), lists element by element, and `runtimePatches` items only when every
//! item has the same distinct `manager` as the new item at its index. Anywhere else (other keys,
//! other types, scalars) the old value there is read into a tape and compared by
//! [`Compare::value`]; a `runtimePatches` list whose managers moved is compared whole, as before.
//! Whatever is not passed by bytes is read by the same [`Reader`], so an old value that the tape
//! would refuse is refused here too (and counts as changed). Objects read again after their keys
//! went out of step are counted; past the old value's length the whole comparison takes over, so
//! the walk stays linear in its input however the value nests.

use super::{Compare, Kind, MAX_DEPTH, Node, Reader, Tape, elements, equal, members};

/// `Tape::read(old).is_ok_and(|old| equal(&old, new, keyed))`, reading of `old` only what
/// differs from `new` byte for byte.
pub fn equal_to_text(old: Option<&str>, new: &Tape<'_>, keyed: bool) -> bool {
    let Some(text) = old else {
        return Tape::read(None).is_ok_and(|old| equal(&old, new, keyed));
    };
    match walk(text, new, keyed).0 {
        Ok(equal) => equal,
        Err(Stop::Whole) => Tape::read(old).is_ok_and(|old| equal(&old, new, keyed)),
        Err(Stop::Unreadable) => false,
    }
}

/// The walk of the old text against the new tape, and how many bytes it read again.
fn walk(text: &str, new: &Tape<'_>, keyed: bool) -> (Step, usize) {
    let mut walk = Guided {
        reader: Reader { text, bytes: text.as_bytes(), pos: 0, nodes: Vec::new() },
        new: &new.nodes,
        sort: Vec::new(),
        reread: 0,
    };
    let root = if keyed && new.nodes[0].kind == Kind::Array { walk.keyed_root() } else { walk.value(0, 0) };
    let root = root.map(|equal| {
        walk.reader.skip_ws();
        // Only whitespace may follow, or the tape would refuse the text.
        equal && walk.reader.pos == walk.reader.bytes.len()
    });
    (root, walk.reread)
}

struct Guided<'t, 'a> {
    /// The old text, and the nodes of the old values read for [`Compare::value`].
    reader: Reader<'a>,
    new: &'t [Node<'a>],
    /// [`Compare`]'s stack for sorting members, kept between values.
    sort: Vec<(u32, u32)>,
    /// Bytes of objects read again after their keys went out of step (see [`Guided::object`]).
    reread: usize,
}

/// Why the walk stopped before deciding.
enum Stop {
    /// The old text is not one the tape reads: not equal.
    Unreadable,
    /// Only the comparison of two whole tapes can decide.
    Whole,
}

impl From<super::Unreadable> for Stop {
    fn from(_: super::Unreadable) -> Self {
        Stop::Unreadable
    }
}

/// Whether the old value equals the new node, the old one consumed to its end.
type Step = Result<bool, Stop>;

impl<'a> Guided<'_, 'a> {
    fn byte(&self) -> Option<u8> {
        self.reader.bytes.get(self.reader.pos).copied()
    }

    /// Past the old bytes at the cursor when they are new container `j`'s own text: then the
    /// values are equal (a container ends on its own closing bracket).
    fn passed_identical(&mut self, j: usize) -> bool {
        let text = self.new[j].text.as_bytes();
        let same = self.reader.bytes[self.reader.pos..].starts_with(text);
        if same {
            self.reader.pos += text.len();
        }
        same
    }

    /// The old value at the cursor against new node `j`; `depth` counts the containers around it.
    fn value(&mut self, j: usize, depth: usize) -> Step {
        self.reader.skip_ws();
        let node = self.new[j];
        match (self.byte(), node.kind) {
            (Some(b'{'), Kind::Object) | (Some(b'['), Kind::Array) => {
                if self.passed_identical(j) {
                    return Ok(true);
                }
                if node.kind == Kind::Object {
                    self.object(j, depth + 1, None, &mut None)
                } else {
                    self.array(j, depth + 1)
                }
            }
            _ => self.read_and_compare(j, depth, None),
        }
    }

    /// Reads the old value at the cursor into a tape and compares it with new node `j`, as the
    /// whole comparison would.
    fn read_and_compare(&mut self, j: usize, depth: usize, skip: Option<&str>) -> Step {
        self.reader.nodes.clear();
        self.reader.value(depth)?;
        let mut compare = Compare { a: &self.reader.nodes, b: self.new, scratch: std::mem::take(&mut self.sort) };
        let equal = compare.value(0, j, skip);
        self.sort = compare.scratch;
        Ok(equal)
    }

    /// Reads the old value at the cursor (so that it is checked as the tape would check it) and
    /// drops it: `time` in a `runtimePatches` item.
    fn read_and_drop(&mut self, depth: usize) -> Result<(), super::Unreadable> {
        self.reader.nodes.clear();
        self.reader.value(depth)
    }

    /// Past the old value at the cursor without reading it, once the answer is known to be "not
    /// equal" (then an unreadable value would not change it).
    fn pass(&mut self) -> Result<(), super::Unreadable> {
        use crate::fastjson::skip;
        self.reader.skip_ws();
        let (bytes, at) = (self.reader.bytes, self.reader.pos);
        self.reader.pos = match bytes.get(at) {
            Some(b'{' | b'[') => skip::container(bytes, at).map_err(|_| super::Unreadable)?,
            Some(b'"') => skip::string(bytes, at).map_err(|_| super::Unreadable)?,
            Some(_) => {
                let len = bytes[at..]
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
                    .unwrap_or(bytes.len() - at);
                at + len
            }
            None => return Err(super::Unreadable),
        };
        Ok(())
    }

    /// The old object at the cursor (`{`, not byte-identical) against new object `j`. Member by
    /// member when the old object lists the new one's plain, distinct keys in the same order;
    /// otherwise read and compared whole. `skip` is a key whose values are not compared (`time`
    /// in a `runtimePatches` item); `manager` is set to whether the `manager` values were equal,
    /// when the walk compared them.
    fn object(&mut self, j: usize, depth: usize, skip: Option<&str>, manager: &mut Option<bool>) -> Step {
        // The new side was read with a container at this depth, so the reader's limit holds here.
        debug_assert!(depth < MAX_DEPTH);
        let start = self.reader.pos;
        if let Some(equal) = self.object_in_step(j, depth, skip, manager)? {
            return Ok(equal);
        }
        *manager = None;
        self.reader.pos = start;
        let equal = self.read_and_compare(j, depth - 1, skip)?;
        // Objects nested so that each goes out of step only at its end would have each level read
        // again what the levels inside it were read for: past the old value's length in such
        // reads, the whole comparison takes over, so the walk stays linear in the input.
        self.reread += self.reader.pos - start;
        if self.reread > self.reader.bytes.len() {
            return Err(Stop::Whole);
        }
        Ok(equal)
    }

    /// [`Guided::object`]'s member-by-member walk: Ok(None) as soon as the keys are not in step,
    /// and when the values of a key given twice differ (which one counts is the whole
    /// comparison's business).
    fn object_in_step(
        &mut self,
        j: usize,
        depth: usize,
        skip: Option<&str>,
        manager: &mut Option<bool>,
    ) -> Result<Option<bool>, Stop> {
        self.reader.pos += 1;
        let mut new_members = members(self.new, j);
        let mut equal = true;
        // The key of the first member whose values differ.
        let mut differs_at = "";
        self.reader.skip_ws();
        if self.byte() == Some(b'}') {
            self.reader.pos += 1;
            return Ok((self.new[j].len == 0).then_some(true));
        }
        loop {
            self.reader.skip_ws();
            if self.byte() != Some(b'"') {
                return Err(Stop::Unreadable);
            }
            let at = self.reader.nodes.len();
            self.reader.string()?;
            let key = self.reader.nodes[at];
            self.reader.nodes.truncate(at);
            let Some((new_key, new_value)) = new_members.next() else { return Ok(None) };
            let new_key = self.new[new_key];
            if key.kind != Kind::Str || new_key.kind != Kind::Str || key.text != new_key.text {
                return Ok(None);
            }
            self.reader.expect(b':')?;
            let is_manager = key.text == "manager" && skip.is_some();
            if skip == Some(key.text) {
                self.read_and_drop(depth)?;
            } else if equal || is_manager {
                let same = self.value(new_value, depth)?;
                if is_manager {
                    *manager = Some(same);
                }
                if equal && !same {
                    differs_at = key.text;
                    equal = false;
                }
            } else {
                self.pass()?;
            }
            if !self.reader.separator(b'}')? {
                break;
            }
        }
        if new_members.next().is_some() {
            return Ok(None);
        }
        // Equal values member by member are equal objects however duplicates are read; differing
        // values make different objects only when their key is not given again.
        if !equal
            && self.new[j].len > 1
            && members(self.new, j).filter(|&(key, _)| self.new[key].text == differs_at).nth(1).is_some()
        {
            return Ok(None);
        }
        Ok(Some(equal))
    }

    /// The old list at the cursor (`[`, not byte-identical) against new list `j`, element by
    /// element (lists are atomic: same length, same order).
    fn array(&mut self, j: usize, depth: usize) -> Step {
        debug_assert!(depth < MAX_DEPTH, "as in `object`");
        self.reader.pos += 1;
        let mut new_elements = elements(self.new, j);
        let mut equal = true;
        self.reader.skip_ws();
        if self.byte() == Some(b']') {
            self.reader.pos += 1;
            return Ok(self.new[j].len == 0);
        }
        loop {
            match new_elements.next() {
                Some(element) if equal => {
                    equal = self.value(element, depth)?;
                }
                _ => {
                    equal = false;
                    self.pass()?;
                }
            }
            if !self.reader.separator(b']')? {
                break;
            }
        }
        Ok(equal && new_elements.next().is_none())
    }

    /// `runtimePatches` (new root `j = 0` is a list): items are keyed by `manager`, so walking them
    /// by index decides only when every old item has the `manager` of the new item at its index
    /// and the new managers are distinct strings; then each pair is compared with `time` ignored.
    /// [`Stop::Whole`] otherwise: the whole comparison sorts both lists by manager.
    fn keyed_root(&mut self) -> Step {
        if !distinct_managers(self.new) {
            return Err(Stop::Whole);
        }
        self.reader.skip_ws();
        if self.byte() != Some(b'[') {
            return Err(Stop::Whole);
        }
        if self.passed_identical(0) {
            return Ok(true);
        }
        self.reader.pos += 1;
        let mut new_items = elements(self.new, 0);
        let mut equal = true;
        self.reader.skip_ws();
        if self.byte() == Some(b']') {
            self.reader.pos += 1;
            return Ok(self.new[0].len == 0);
        }
        loop {
            let Some(item) = new_items.next() else {
                // More items than the new list: not equal, whatever they hold.
                self.pass()?;
                equal = false;
                if !self.reader.separator(b']')? {
                    break;
                }
                continue;
            };
            self.reader.skip_ws();
            if self.byte() != Some(b'{') {
                return Err(Stop::Whole);
            }
            let same = if self.passed_identical(item) {
                true
            } else {
                let mut manager = None;
                let same = self.object(item, 2, Some("time"), &mut manager)?;
                if manager != Some(true) {
                    return Err(Stop::Whole);
                }
                same
            };
            equal &= same;
            if !self.reader.separator(b']')? {
                break;
            }
        }
        Ok(equal && new_items.next().is_none())
    }
}

/// Whether every item of the new list (the root) is an object with a plain string `manager` (the
/// last one, as the whole comparison reads it), and no two items share a manager.
fn distinct_managers(tape: &[Node<'_>]) -> bool {
    const MAX_ITEMS: usize = 16;
    let mut managers = [""; MAX_ITEMS];
    for (at, item) in elements(tape, 0).enumerate() {
        if at == MAX_ITEMS || tape[item].kind != Kind::Object {
            return false;
        }
        let Some(manager) = super::manager(tape, item).map(|m| tape[m]) else { return false };
        if manager.kind != Kind::Str || managers[..at].contains(&manager.text) {
            return false;
        }
        managers[at] = manager.text;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{"a":{"a":…{"a":<leaf>}…}}`, `depth` objects deep, each with `tail` after its member.
    fn nested(depth: usize, leaf: &str, tail: &str) -> String {
        let mut text = leaf.to_string();
        for _ in 0..depth {
            text = format!(r#"{{"a":{text}{tail}}}"#);
        }
        text
    }

    #[test]
    fn objects_out_of_step_at_every_level_stay_linear() {
        // Every old object has one member more than the new one, found only at its end: each
        // level would read again everything inside it.
        let new = nested(100, "1", "");
        let old = nested(100, "2", r#","z":{"pad":"xxxxxxxxxxxxxxxx"}"#);
        let tape = Tape::read(Some(&new)).expect("reads");
        let (result, reread) = walk(&old, &tape, false);
        assert!(matches!(result, Err(Stop::Whole)), "gives up on the walk");
        assert!(reread <= 2 * old.len(), "read again {reread} bytes of {}", old.len());
        assert!(!equal_to_text(Some(&old), &tape, false));
    }

    #[test]
    fn one_object_out_of_step_is_decided_where_it_is() {
        let new = nested(20, r#"{"x":1}"#, "");
        let old = nested(20, r#"{"x":1,"y":{}}"#, "");
        let tape = Tape::read(Some(&new)).expect("reads");
        let (result, reread) = walk(&old, &tape, false);
        // `{"y":{}}` is an empty member: equal, and only the innermost object was read again.
        assert!(matches!(result, Ok(true)));
        assert_eq!(reread, r#"{"x":1,"y":{}}"#.len());
    }
}
