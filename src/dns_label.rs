//! DNS-1123 labels (RFC 1123), the names of the namespaces and Services the flags take. Each flag
//! words its own message; the check is this one.

/// Why a value is not a DNS-1123 label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LabelProblem {
    /// Empty, or longer than 63 characters.
    Length,
    /// A character other than a lowercase letter, a digit or '-'.
    Characters,
    /// Starts or ends with '-'.
    Ends,
}

pub(crate) fn check(value: &str) -> Result<(), LabelProblem> {
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > 63 {
        return Err(LabelProblem::Length);
    }
    if !bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-') {
        return Err(LabelProblem::Characters);
    }
    if bytes[0] == b'-' || bytes[bytes.len() - 1] == b'-' {
        return Err(LabelProblem::Ends);
    }
    Ok(())
}
