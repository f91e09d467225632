//! Field errors, rendered like Kubernetes `field.Error` / `field.ErrorList.ToAggregate()`.

use std::fmt::{self, Write as _};

use super::rule::Rule;

/// Kubernetes `field.ErrorType`, restricted to the ones trainguard emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// A state-dependent denial: the value is fine, but not now.
    Forbidden,
    /// The value itself is wrong.
    Invalid,
    /// A value that must be present is missing or empty.
    Required,
    /// trainguard could not decide (cluster state unknown, deadline missed). Retryable.
    Internal,
    /// A field the TrainJob schema does not have (`validate`'s schema check only).
    UnsupportedField,
    /// A value of the wrong JSON type or format (`validate`'s schema check only); shown as
    /// `Invalid value`, like apimachinery's `TypeInvalid`.
    TypeInvalid,
    /// A value outside the schema's enum (`validate`'s schema check only).
    NotSupported,
    /// A string over the schema's `maxLength` (`validate`'s schema check only); the value is not shown.
    TooLong,
    /// A list or map over the schema's `maxItems` or `maxProperties` (`validate`'s schema check only).
    TooMany,
    /// A repeated key of a list map or item of a set (`validate`'s schema check only).
    Duplicate,
}

impl ErrorType {
    /// `field.ErrorType.String()`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorType::Forbidden => "Forbidden",
            ErrorType::Invalid => "Invalid value",
            ErrorType::Required => "Required value",
            ErrorType::Internal => "Internal error",
            ErrorType::UnsupportedField => "Unsupported field",
            ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Duplicate => "Duplicate value",
        }
    }

    /// Whether `field.Error.ErrorBody()` shows the value for this type.
    pub(crate) fn shows_value(self) -> bool {
        matches!(
            self,
            ErrorType::Invalid
                | ErrorType::TypeInvalid
                | ErrorType::NotSupported
                | ErrorType::TooMany
                | ErrorType::Duplicate
        )
    }

    /// `metav1.CauseType` of a `StatusCause`.
    pub(crate) fn cause_reason(self) -> &'static str {
        match self {
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Internal => "InternalError",
            ErrorType::UnsupportedField => "FieldValueNotSupported",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Duplicate => "FieldValueDuplicate",
        }
    }
}

/// One reason to deny, tied to the field it is about and the rule that found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub kind: ErrorType,
    /// The offending value, already rendered (`"quoted"` for strings); only for the types whose
    /// `field.Error.ErrorBody()` shows it (invalid, unsupported, duplicate, too many).
    pub value: Option<String>,
    pub(crate) detail: String,
    /// Where the remedy at the end of `detail` begins, joint included (see
    /// [`FieldError::with_remedy`]).
    pub(crate) remedy_at: Option<usize>,
    /// Spec rule id (`U2`, `G1`, `M1`, …), for the audit annotation and metrics.
    pub rule: Rule,
}

impl FieldError {
    pub fn new(rule: Rule, kind: ErrorType, path: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError { path: path.into(), kind, value: None, detail: detail.into(), remedy_at: None, rule }
    }

    /// Ends the detail with what to do, after `joint` (`": "`). Every field one cause denies gets
    /// the same remedy, often longer than the rest of the error: a message of several errors
    /// gives each remedy once, with the first error that has it, so the cut under
    /// [`MAX_MESSAGE_BYTES`] keeps the other fields. The error's own text (and its cause) keeps it.
    pub fn with_remedy(mut self, joint: &str, remedy: &str) -> Self {
        // With no detail of its own, the remedy is the detail: there is nothing to keep apart.
        if !self.detail.is_empty() {
            self.remedy_at = Some(self.detail.len());
            self.detail.push_str(joint);
        }
        self.detail.push_str(remedy);
        self
    }

    /// The detail without its remedy, and the remedy with its joint (empty when there is none).
    fn detail_and_remedy(&self) -> (&str, &str) {
        self.detail.split_at(self.remedy_at.unwrap_or(self.detail.len()))
    }

    pub(crate) fn invalid(rule: Rule, path: impl Into<String>, value: String, detail: impl Into<String>) -> Self {
        FieldError::with_value(rule, ErrorType::Invalid, path, value, detail)
    }

    /// An error of `kind` showing `value` (already rendered): dropped for the types whose
    /// `field.Error.ErrorBody()` never shows one (required, forbidden, too long, internal).
    pub(crate) fn with_value(
        rule: Rule,
        kind: ErrorType,
        path: impl Into<String>,
        value: String,
        detail: impl Into<String>,
    ) -> Self {
        let value = kind.shows_value().then_some(value);
        FieldError { value, ..FieldError::new(rule, kind, path, detail) }
    }

    /// The part after the path: `Invalid value: "x": detail`.
    pub(crate) fn body(&self) -> String {
        let mut s = String::with_capacity(self.body_len());
        self.push_body(&mut s);
        s
    }

    /// `path: body`, as [`fmt::Display`] writes it.
    fn rendered(&self) -> String {
        let mut s = String::with_capacity(self.path.len() + 2 + self.body_len());
        s.push_str(&self.path);
        s.push_str(": ");
        self.push_body(&mut s);
        s
    }

    /// What [`FieldError::push_body`] writes, in bytes.
    fn body_len(&self) -> usize {
        let part = |p: Option<&str>| p.map_or(0, |p| p.len() + 2);
        self.kind.as_str().len()
            + part(self.value.as_deref())
            + part(Some(self.detail.as_str()).filter(|d| !d.is_empty()))
    }

    // Pieces pushed rather than `write!`: a denial renders this for its message and each cause,
    // and the formatting machinery cost more than the text.
    fn push_body(&self, s: &mut String) {
        s.push_str(self.kind.as_str());
        if let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rendered())
    }
}

/// Renders a string value the way Go's `%q` does for plain text, capped so that a huge value
/// cannot fill the message.
pub(crate) fn quote(value: &str) -> String {
    const MAX_CHARS: usize = 100;
    let mut shown: String = value.chars().take(MAX_CHARS).collect();
    if shown.len() < value.len() {
        shown.push('…');
    }
    serde_json::to_string(&shown).unwrap_or_else(|_| format!("\"{shown}\""))
}

/// Field errors kept in one answer. A review can name millions of list items; past this many,
/// errors are only counted (`… and N more errors`), so the work and the answer stay small.
pub(crate) const MAX_FIELD_ERRORS: usize = 50;

/// Field errors as they are found: the first [`MAX_FIELD_ERRORS`] kept, the rest counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorList {
    pub(crate) errors: Vec<FieldError>,
    /// Errors found beyond the kept ones.
    pub omitted: usize,
}

impl ErrorList {
    /// Whether a further error would only be counted: callers skip building it.
    pub(crate) fn is_full(&self) -> bool {
        self.errors.len() >= MAX_FIELD_ERRORS
    }

    pub(crate) fn push(&mut self, error: FieldError) {
        if self.is_full() {
            self.omitted += 1;
        } else {
            self.errors.push(error);
        }
    }

    /// Counts one error without building it (the list is full).
    pub(crate) fn count(&mut self) {
        self.omitted += 1;
    }

    pub(crate) fn append(&mut self, other: ErrorList) {
        for e in other.errors {
            self.push(e);
        }
        self.omitted += other.omitted;
    }

    /// Every error found, kept or not.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.errors.len() + self.omitted
    }
}

impl From<Vec<FieldError>> for ErrorList {
    fn from(errors: Vec<FieldError>) -> Self {
        let mut list = ErrorList::default();
        list.errors.reserve(errors.len().min(MAX_FIELD_ERRORS));
        for e in errors {
            list.push(e);
        }
        list
    }
}

impl Extend<FieldError> for ErrorList {
    fn extend<T: IntoIterator<Item = FieldError>>(&mut self, iter: T) {
        for e in iter {
            self.push(e);
        }
    }
}

/// Upper bound of the aggregated message, so a denial stays readable in `kubectl` and small in
/// audit logs.
pub(crate) const MAX_MESSAGE_BYTES: usize = 1024;

/// `[e1, e2]` for several errors, the error itself for one, under [`MAX_MESSAGE_BYTES`]; `omitted`
/// errors were found but not kept. A remedy several errors share is given once, with the first of
/// them (see [`FieldError::with_remedy`]). What a message of several errors keeps, first to last:
/// each field's first error, the remedies, the other errors in order (the rest counted as `… and N
/// more errors`). When the first two do not fit whole, the remedies are cut, then details and
/// remedies alike, so that every field is still named; only when even that cannot name them all are
/// the errors shown whole from the first, as far as they fit.
pub(crate) fn aggregate(errors: &[FieldError], omitted: usize) -> String {
    match errors {
        [] => String::new(),
        [one] if omitted == 0 => truncate_to(one.rendered(), MAX_MESSAGE_BYTES),
        many => aggregate_many(many, omitted),
    }
}

/// The longest message: [`MAX_MESSAGE_BYTES`] is a bound it stays under.
const BUDGET: usize = MAX_MESSAGE_BYTES - 1;
/// A detail is not cut shorter than this to name one more field: past it, errors are dropped.
const MIN_DETAIL: usize = 32;
/// A remedy cut shorter than this says nothing useful: it is left out instead.
const MIN_REMEDY: usize = 16;

/// One error of a message of several, in the pieces that are kept or cut apart.
struct Piece<'e> {
    path: &'e str,
    /// `path: Type[: value]`.
    lead: String,
    detail: &'e str,
    /// The remedy with its joint; empty when the error has none.
    remedy: &'e str,
}

impl<'e> Piece<'e> {
    fn of(e: &'e FieldError) -> Self {
        let mut lead = String::with_capacity(e.path.len() + 2 + e.body_len());
        lead.push_str(&e.path);
        lead.push_str(": ");
        lead.push_str(e.kind.as_str());
        if let Some(v) = &e.value {
            lead.push_str(": ");
            lead.push_str(v);
        }
        let (detail, remedy) = e.detail_and_remedy();
        Piece { path: &e.path, lead, detail, remedy }
    }
}

/// How far the details and the remedies of a message are cut (`usize::MAX`: not at all).
#[derive(Debug, Clone, Copy)]
struct Caps {
    detail: usize,
    remedy: usize,
}

const WHOLE: Caps = Caps { detail: usize::MAX, remedy: usize::MAX };

/// The errors `shown` (indices into `pieces`, ascending), `rest` more counted.
struct Layout<'p, 'e> {
    pieces: &'p [Piece<'e>],
    shown: Vec<usize>,
    rest: usize,
}

impl Layout<'_, '_> {
    /// The remedy each shown error gives: its own, unless an earlier one gave the same.
    fn remedies(&self) -> Vec<&str> {
        let mut given: Vec<&str> = Vec::new();
        self.shown
            .iter()
            .map(|&i| {
                let remedy = self.pieces[i].remedy;
                if remedy.is_empty() || given.contains(&remedy) {
                    ""
                } else {
                    given.push(remedy);
                    remedy
                }
            })
            .collect()
    }

    /// The message's length with `caps` (at most: a cut on a char boundary may be shorter).
    fn len(&self, caps: Caps) -> usize {
        let items: usize = self
            .shown
            .iter()
            .zip(self.remedies())
            .map(|(&i, remedy)| {
                let piece = &self.pieces[i];
                let detail = cut_len(piece.detail.len(), caps.detail, MIN_DETAIL);
                piece.lead.len()
                    + if detail > 0 { 2 + detail } else { 0 }
                    + cut_len(remedy.len(), caps.remedy, MIN_REMEDY)
            })
            .sum();
        2 + 2 * self.shown.len().saturating_sub(1) + items + self.count().len()
    }

    fn fits(&self, caps: Caps) -> bool {
        self.len(caps) <= BUDGET
    }

    fn count(&self) -> String {
        if self.rest == 0 { String::new() } else { format!(", … and {} more errors", self.rest) }
    }

    fn render(&self, caps: Caps) -> String {
        let mut out = String::with_capacity(MAX_MESSAGE_BYTES);
        out.push('[');
        for (k, (&i, remedy)) in self.shown.iter().zip(self.remedies()).enumerate() {
            let piece = &self.pieces[i];
            if k > 0 {
                out.push_str(", ");
            }
            out.push_str(&piece.lead);
            let detail = cut(piece.detail, caps.detail, MIN_DETAIL);
            if !detail.is_empty() {
                out.push_str(": ");
                out.push_str(&detail);
            }
            out.push_str(&cut(remedy, caps.remedy, MIN_REMEDY));
        }
        out.push_str(&self.count());
        out.push(']');
        out
    }

    /// The largest cap in `0..=BUDGET` with which the message fits, if any.
    fn widest(&self, caps: impl Fn(usize) -> Caps) -> Option<usize> {
        if !self.fits(caps(0)) {
            return None;
        }
        let (mut fits, mut over) = (0, BUDGET + 1);
        while over - fits > 1 {
            let mid = (fits + over) / 2;
            if self.fits(caps(mid)) { fits = mid } else { over = mid }
        }
        Some(fits)
    }
}

fn aggregate_many(errors: &[FieldError], omitted: usize) -> String {
    let pieces: Vec<Piece<'_>> = errors.iter().map(Piece::of).collect();
    let firsts: Vec<usize> =
        (0..pieces.len()).filter(|&i| !pieces[..i].iter().any(|p| p.path == pieces[i].path)).collect();
    let mut layout = Layout { rest: pieces.len() - firsts.len() + omitted, shown: firsts, pieces: &pieces };
    if layout.fits(WHOLE) {
        // Each field's first error and the remedies whole: the other errors as they fit.
        for i in 0..pieces.len() {
            if layout.shown.contains(&i) {
                continue;
            }
            let at = layout.shown.partition_point(|&s| s < i);
            layout.shown.insert(at, i);
            layout.rest -= 1;
            if !layout.fits(WHOLE) {
                layout.shown.remove(at);
                layout.rest += 1;
                break;
            }
        }
        return layout.render(WHOLE);
    }
    // The first errors whole, the remedies cut to the room left.
    if let Some(remedy) = layout.widest(|remedy| Caps { detail: usize::MAX, remedy }) {
        return layout.render(Caps { detail: usize::MAX, remedy });
    }
    // Details and remedies cut alike; the remedies left out if the details would go below
    // MIN_DETAIL (then `widest` finds the details' own cap, at least MIN_DETAIL).
    if layout.fits(Caps { detail: MIN_DETAIL, remedy: 0 }) {
        let caps = match layout.widest(|cap| Caps { detail: cap, remedy: cap }) {
            Some(cap) if cap >= MIN_DETAIL => Caps { detail: cap, remedy: cap },
            _ => {
                let detail = layout.widest(|detail| Caps { detail, remedy: 0 }).unwrap_or(MIN_DETAIL);
                Caps { detail, remedy: 0 }
            }
        };
        return layout.render(caps);
    }
    // Too many fields to name: whole errors from the first, as far as they fit.
    whole_prefix(&pieces, errors, omitted)
}

/// The first errors whole, as many as fit; the first one cut when even it does not.
fn whole_prefix(pieces: &[Piece<'_>], errors: &[FieldError], omitted: usize) -> String {
    let mut layout = Layout { pieces, shown: Vec::new(), rest: pieces.len() + omitted };
    while layout.shown.len() < pieces.len() {
        layout.shown.push(layout.shown.len());
        layout.rest -= 1;
        if !layout.fits(WHOLE) {
            layout.shown.pop();
            layout.rest += 1;
            break;
        }
    }
    if !layout.shown.is_empty() {
        return layout.render(WHOLE);
    }
    // Room kept for ", … and N more errors]".
    const TAIL_RESERVE: usize = 32;
    let mut out = String::from("[");
    out.push_str(&truncate_to(errors[0].rendered(), MAX_MESSAGE_BYTES - TAIL_RESERVE));
    let _ = write!(out, ", … and {} more errors]", layout.rest - 1);
    out
}

/// The length of `text` cut to `cap` bytes by [`cut`].
fn cut_len(len: usize, cap: usize, min: usize) -> usize {
    if len <= cap {
        len
    } else if cap < min {
        0
    } else {
        cap
    }
}

/// `text` cut to at most `cap` bytes, the cut marked with `…`; nothing when `cap` is under `min`.
fn cut(text: &str, cap: usize, min: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= cap {
        return text.into();
    }
    if cap < min {
        return "".into();
    }
    let mut end = cap - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end]).into()
}

/// Cuts `s` to fewer than `max` bytes (on a char boundary), marking the cut with `…`.
pub(crate) fn truncate_to(mut s: String, max: usize) -> String {
    if s.len() < max {
        return s;
    }
    let mut cut = max.saturating_sub(4);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push('…');
    s
}

#[cfg(test)]
mod type_tests {
    use super::*;

    /// Each type renders as apimachinery's `field.Error.ErrorBody()` at v0.36.2: its
    /// `ErrorType.String()`, the value for the types that show one, then the detail; and its
    /// `CauseType`.
    #[test]
    fn each_type_renders_as_apimachinery_does() {
        let cases = [
            (
                ErrorType::TooLong,
                "\"xxx\"",
                "may not be more than 2 bytes",
                "p: Too long: may not be more than 2 bytes",
                "FieldValueTooLong",
            ),
            (
                ErrorType::TooMany,
                "17",
                "must have at most 16 items",
                "p: Too many: 17: must have at most 16 items",
                "FieldValueTooMany",
            ),
            (
                ErrorType::NotSupported,
                "\"Sometimes\"",
                "supported values: \"NoSchedule\"",
                "p: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\"",
                "FieldValueNotSupported",
            ),
            (
                ErrorType::TypeInvalid,
                "\"2\"",
                "must be of type integer",
                "p: Invalid value: \"2\": must be of type integer",
                "FieldValueTypeInvalid",
            ),
            (ErrorType::Duplicate, "\"a\"", "", "p: Duplicate value: \"a\"", "FieldValueDuplicate"),
            (
                ErrorType::Invalid,
                "0",
                "must be at least 1",
                "p: Invalid value: 0: must be at least 1",
                "FieldValueInvalid",
            ),
            (ErrorType::Required, "\"\"", "", "p: Required value", "FieldValueRequired"),
            (ErrorType::Forbidden, "\"x\"", "not now", "p: Forbidden: not now", "FieldValueForbidden"),
        ];
        for (kind, value, detail, rendered, cause) in cases {
            let error = FieldError::with_value(Rule::Schema, kind, "p", value.to_string(), detail);
            assert_eq!(error.to_string(), rendered, "{kind:?}");
            assert_eq!(error.body().len(), error.body_len(), "{kind:?}");
            assert_eq!(kind.cause_reason(), cause, "{kind:?}");
        }
    }
}

#[cfg(test)]
mod aggregate_tests {
    use super::*;

    /// An error on `path` with a detail of `detail` bytes, and a remedy of `remedy` bytes of `r`.
    fn error(path: &str, detail: usize, remedy: Option<(char, usize)>) -> FieldError {
        let error = FieldError::new(Rule::U2, ErrorType::Forbidden, path, "x".repeat(detail));
        match remedy {
            Some((r, len)) => error.with_remedy(": ", &r.to_string().repeat(len)),
            None => error,
        }
    }

    /// The message with each run of one letter as the letter and its length (`…` when cut):
    /// `[p1 x100 y300, p2 x100]`.
    fn sketch(message: &str) -> String {
        let (open, inner, close) = match message.strip_prefix('[').and_then(|m| m.strip_suffix(']')) {
            Some(inner) => ("[", inner, "]"),
            None => ("", message, ""),
        };
        let items: Vec<String> = inner
            .split(", ")
            .map(|item| {
                if item.starts_with('…') {
                    return item.to_string();
                }
                let mut parts = item.split(": ");
                let mut out = vec![parts.next().unwrap_or("").to_string()];
                parts.next(); // the type
                for run in parts {
                    let letter = run.chars().next().unwrap_or('?');
                    let cut = run.ends_with('…');
                    let len = run.trim_end_matches('…').len();
                    assert!(run.trim_end_matches('…').chars().all(|c| c == letter), "{run}");
                    out.push(if cut { format!("{letter}…") } else { format!("{letter}{len}") });
                }
                out.join(" ")
            })
            .collect();
        format!("{open}{}{close}", items.join(", "))
    }

    #[test]
    fn what_a_message_of_several_errors_keeps() {
        let y = |len| Some(('y', len));
        let many = |n: usize, first: usize| -> Vec<FieldError> {
            (0..n).map(|i| error(&format!("f{i:02}"), if i == 0 { first } else { 40 }, None)).collect()
        };
        let forty: Vec<String> = (0..17).map(|i| format!("f{i:02} x40")).collect();
        let cases: Vec<(&str, Vec<FieldError>, String)> = vec![
            (
                "all fits: the remedy with the first error that has it",
                vec![error("p1", 100, y(300)), error("p2", 100, y(300))],
                "[p1 x100 y300, p2 x100]".into(),
            ),
            (
                "two remedies, each once",
                vec![error("p1", 50, y(100)), error("p2", 50, Some(('z', 100))), error("p3", 50, y(100))],
                "[p1 x50 y100, p2 x50 z100, p3 x50]".into(),
            ),
            (
                "each field's first error, then the remedy, then the other errors",
                vec![
                    error("p1", 100, y(300)),
                    error("p1", 300, None),
                    error("p1", 300, None),
                    error("p2", 100, y(300)),
                ],
                "[p1 x100 y300, p1 x300, p2 x100, … and 1 more errors]".into(),
            ),
            (
                "the remedy cut to the room the fields leave",
                vec![error("p1", 100, y(2000)), error("p2", 100, y(2000))],
                "[p1 x100 y…, p2 x100]".into(),
            ),
            (
                "details and remedy cut alike so that every field is named",
                vec![error("p1", 500, y(300)), error("p2", 500, y(300)), error("p3", 500, y(300))],
                "[p1 x… y…, p2 x…, p3 x…]".into(),
            ),
            (
                "a detail too long for the message",
                vec![error("p1", 2000, None), error("p2", 10, None)],
                "[p1 x…, p2 x10]".into(),
            ),
            (
                "too many fields to name: whole errors as far as they fit",
                many(40, 40),
                format!("[{}, … and 23 more errors]", forty.join(", ")),
            ),
            ("too many fields, the first too long: it is cut", many(40, 2000), "[f00 x…, … and 39 more errors]".into()),
            ("one error: cut at the end", vec![error("p1", 2000, y(10))], "p1 x…".into()),
        ];
        for (case, errors, expected) in cases {
            let message = aggregate(&errors, 0);
            assert!(message.len() < MAX_MESSAGE_BYTES, "{case}: {} bytes", message.len());
            assert_eq!(sketch(&message), expected, "{case}: {message}");
        }
    }
}
