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
    /// Spec rule id (`U2`, `G1`, `M1`, …), for the audit annotation and metrics.
    pub rule: Rule,
}

impl FieldError {
    pub fn new(rule: Rule, kind: ErrorType, path: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError { path: path.into(), kind, value: None, detail: detail.into(), rule }
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

/// `[e1, e2]` for several errors, the error itself for one; cut as `… and N more errors` so the
/// result stays under [`MAX_MESSAGE_BYTES`]. `omitted` errors were found but not kept.
pub(crate) fn aggregate(errors: &[FieldError], omitted: usize) -> String {
    match errors {
        [] => String::new(),
        [one] if omitted == 0 => truncate_to(one.rendered(), MAX_MESSAGE_BYTES),
        many => {
            let rendered: Vec<String> = many.iter().map(FieldError::rendered).collect();
            // Room kept for ", … and N more errors]".
            const TAIL_RESERVE: usize = 32;
            let mut out = String::from("[");
            let mut shown = 0;
            for r in &rendered {
                let sep = if shown == 0 { "" } else { ", " };
                if out.len() + sep.len() + r.len() + TAIL_RESERVE > MAX_MESSAGE_BYTES {
                    break;
                }
                out.push_str(sep);
                out.push_str(r);
                shown += 1;
            }
            if shown == 0 {
                out.push_str(&truncate_to(rendered[0].clone(), MAX_MESSAGE_BYTES - TAIL_RESERVE));
                shown = 1;
            }
            let rest = rendered.len() - shown + omitted;
            if rest > 0 {
                let _ = write!(out, ", … and {rest} more errors");
            }
            out.push(']');
            out
        }
    }
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
