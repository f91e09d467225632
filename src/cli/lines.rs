//! The line of a field in a YAML manifest, so that an annotation lands on the offending field
//! rather than on the object's first line.
//!
//! A scan of block-style YAML by indentation, not a parser: the manifest has already been parsed
//! (the verdict stands without this), so a field this cannot place (flow style `{…}`, JSON, keys
//! that need quoting rules beyond plain and simple quotes) falls back to the deepest part of its
//! path that it could place, and at worst to the object's own line.

/// One step of a field path as the webhook writes it: `spec.runtimePatches[0].manager`,
/// `metadata.labels[trainguard.io/webhook]`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            let Some(end) = inner.find(']') else { break };
            let item = &inner[..end];
            out.push(item.parse().map_or(Step::Key(item), Step::Index));
            rest = &inner[end + 1..];
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            if end > 0 {
                out.push(Step::Key(&rest[..end]));
            }
            rest = &rest[end..];
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    out
}

/// A content line, with a sequence item's dash split off: `- name: x` at indent 2 gives a dash
/// line at 2 and `name: x` at 4, both on the same source line.
#[derive(Debug)]
struct Line<'a> {
    number: usize,
    indent: usize,
    dash: bool,
    text: &'a str,
}

/// The content lines of the document that starts at `start_line` (1-based), up to the next
/// document separator.
fn lines(text: &str, start_line: usize) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate().skip(start_line.saturating_sub(1)) {
        let number = i + 1;
        if number > start_line && (raw.starts_with("---") || raw.starts_with("...")) {
            break;
        }
        let trimmed = raw.trim_start_matches(' ');
        if trimmed.is_empty() || trimmed.starts_with('#') || (raw.starts_with("---") && number == start_line) {
            continue;
        }
        let mut indent = raw.len() - trimmed.len();
        let mut text = trimmed;
        // `- - x`, `- key: v`: a dash line per dash, then the rest further in.
        while let Some(after) = text.strip_prefix("- ").or_else(|| (text == "-").then_some("")) {
            out.push(Line { number, indent, dash: true, text: "-" });
            let inner = after.trim_start_matches(' ');
            indent += 2 + (after.len() - inner.len());
            text = inner;
        }
        if !text.is_empty() {
            out.push(Line { number, indent, dash: false, text });
        }
    }
    out
}

/// Whether `text` is the mapping entry `key:` (plain, single- or double-quoted key).
fn is_key(text: &str, key: &str) -> bool {
    let rest = if let Some(q) = text.strip_prefix('"') {
        q.strip_prefix(key).and_then(|r| r.strip_prefix('"'))
    } else if let Some(q) = text.strip_prefix('\'') {
        q.strip_prefix(key).and_then(|r| r.strip_prefix('\''))
    } else {
        text.strip_prefix(key)
    };
    rest.and_then(|r| r.strip_prefix(':')).is_some_and(|r| r.is_empty() || r.starts_with(' '))
}

/// The 1-based line of `path` in the YAML document starting at `start_line`, or of the deepest
/// part of it found; `None` when not even its first step is found (`start_line` is the caller's
/// fallback).
pub(crate) fn field_line(text: &str, start_line: usize, path: &str) -> Option<usize> {
    let lines = lines(text, start_line);
    let mut found = None;
    // The lines of the current node's value: (first index, parent indent); the root has none.
    // An item of a `kind: List` starts on its dash: the object is what follows it.
    let mut from = lines.iter().take_while(|l| l.dash && l.number == start_line).count();
    let mut parent: Option<usize> = None;
    for step in steps(path) {
        // The indent of the node's children: the first content line after it, deeper than the
        // parent, or at the parent's indent for a sequence written without indentation.
        let Some(first) = lines.get(from) else { break };
        let child_indent = match parent {
            None => first.indent,
            Some(p) if first.indent > p || (first.indent == p && first.dash) => first.indent,
            Some(_) => break,
        };
        let mut hit = None;
        let mut index = 0;
        for (at, line) in lines.iter().enumerate().skip(from) {
            if line.indent < child_indent
                || (line.indent == child_indent && matches!(step, Step::Index(_)) && !line.dash)
            {
                break;
            }
            if line.indent != child_indent {
                continue;
            }
            match step {
                Step::Key(key) if !line.dash && is_key(line.text, key) => {
                    hit = Some(at);
                    break;
                }
                Step::Index(n) if line.dash => {
                    if index == n {
                        hit = Some(at);
                        break;
                    }
                    index += 1;
                }
                _ => {}
            }
        }
        let Some(at) = hit else { break };
        found = Some(lines[at].number);
        from = at + 1;
        parent = Some(child_indent);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
apiVersion: v1
kind: ConfigMap
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: Llama_7B
  labels:
    'trainguard.io/webhook': disabled
spec:
  # a comment
  managedBy: example.com/other
  runtimePatches:
  - manager: a

    time: x
  - time: y
    trainingRuntimeSpec:
      template:
        spec:
          replicatedJobs:
            - name: node
            -   name: launcher
  podTemplateOverrides:
    - targetJobs:
        - name: node
        - {}
---
kind: Other
spec:
  managedBy: later
";

    #[test]
    fn fields_are_found_on_their_lines() {
        let cases = [
            ("metadata.name", Some(7)),
            ("metadata.labels[trainguard.io/webhook]", Some(9)),
            ("spec.managedBy", Some(12)),
            ("spec.runtimePatches", Some(13)),
            ("spec.runtimePatches[0]", Some(14)),
            ("spec.runtimePatches[0].manager", Some(14)),
            ("spec.runtimePatches[0].time", Some(16)),
            ("spec.runtimePatches[1]", Some(17)),
            ("spec.runtimePatches[1].manager", Some(17)), // missing: the item
            ("spec.runtimePatches[1].trainingRuntimeSpec.template.spec.replicatedJobs[1].name", Some(23)),
            ("spec.runtimePatches[2]", Some(13)), // no third item: the list
            ("spec.podTemplateOverrides[0].targetJobs[0].name", Some(26)),
            ("spec.podTemplateOverrides[0].targetJobs[1].name", Some(27)), // flow style: the item
            ("spec.suspend", Some(10)),                                    // missing: spec
            ("status", None),
        ];
        for (path, want) in cases {
            assert_eq!(field_line(DOC, 4, path), want, "{path}");
        }
        // Each document on its own: the third's spec is not the second's.
        assert_eq!(field_line(DOC, 29, "spec.managedBy"), Some(31));
        assert_eq!(field_line(DOC, 1, "spec.managedBy"), None);
        // An item of a List starts at its dash.
        let list = "kind: List\nitems:\n- apiVersion: x\n  kind: TrainJob\n  spec:\n    managedBy: a\n- kind: TrainJob\n  spec: {}\n";
        assert_eq!(field_line(list, 3, "spec.managedBy"), Some(6));
        assert_eq!(field_line(list, 7, "spec.managedBy"), Some(8));
        // JSON has no block structure to follow.
        assert_eq!(field_line("{\"spec\": {\"managedBy\": \"x\"}}", 1, "spec.managedBy"), None);
    }

    #[test]
    fn paths_split_into_steps() {
        assert_eq!(
            steps("spec.a[0].b[trainguard.io/webhook]"),
            [Step::Key("spec"), Step::Key("a"), Step::Index(0), Step::Key("b"), Step::Key("trainguard.io/webhook")]
        );
    }
}
