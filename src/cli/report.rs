//! How `validate` prints verdicts: text lines, JSON lines, or GitHub Actions annotations.
//! Streams: each verdict is written as soon as it is known.

use std::io::{self, Write};

use clap::ValueEnum;
use serde_json::{Value, json};

use super::check::Checked;
use crate::admission::response;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    /// One line per TrainJob, then a summary line.
    #[default]
    Text,
    /// One JSON object per TrainJob (and per input error), one per line.
    Json,
    /// GitHub Actions `::error` / `::warning` workflow commands, then a summary line.
    Github,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub allowed: usize,
    /// Allowed with a warning (offline gate).
    pub warned: usize,
    pub denied: usize,
    /// Documents of other kinds.
    pub skipped: usize,
    pub input_errors: usize,
}

impl Counts {
    /// 0 all allowed, 1 any denied, 2 any unusable input.
    pub fn exit_code(&self) -> u8 {
        if self.input_errors > 0 {
            2
        } else if self.denied > 0 {
            1
        } else {
            0
        }
    }

    pub fn summary(&self) -> String {
        let checked = self.allowed + self.denied;
        let mut s = format!(
            "trainguard validate: {checked} TrainJob{} checked: {} allowed",
            if checked == 1 { "" } else { "s" },
            self.allowed
        );
        if self.warned > 0 {
            s.push_str(&format!(" ({} with warnings)", self.warned));
        }
        s.push_str(&format!(", {} denied; {} other objects skipped", self.denied, self.skipped));
        if self.input_errors > 0 {
            s.push_str(&format!(
                "; {} input error{}",
                self.input_errors,
                if self.input_errors == 1 { "" } else { "s" }
            ));
        }
        s
    }
}

pub struct Reporter<O: Write, E: Write> {
    format: OutputFormat,
    quiet: bool,
    out: O,
    err: E,
    pub counts: Counts,
}

impl<O: Write, E: Write> Reporter<O, E> {
    pub fn new(format: OutputFormat, quiet: bool, out: O, err: E) -> Self {
        Reporter { format, quiet, out, err, counts: Counts::default() }
    }

    pub fn skipped(&mut self) {
        self.counts.skipped += 1;
    }

    pub fn checked(&mut self, c: &Checked) -> io::Result<()> {
        let denied = c.denied();
        if denied {
            self.counts.denied += 1;
        } else {
            self.counts.allowed += 1;
            if !c.decision.warnings.is_empty() {
                self.counts.warned += 1;
            }
        }
        if self.quiet && !denied {
            return Ok(());
        }
        match self.format {
            OutputFormat::Text => {
                let place = format!("{} ({}:{})", c.object_id(), c.source, c.line);
                if denied {
                    writeln!(self.out, "{place}: denied: {}", c.message())
                } else if c.decision.warnings.is_empty() {
                    writeln!(self.out, "{place}: allowed ({})", c.operation.as_str())
                } else {
                    writeln!(
                        self.out,
                        "{place}: allowed ({}); warning: {}",
                        c.operation.as_str(),
                        c.decision.warnings.join("; ")
                    )
                }
            }
            OutputFormat::Json => {
                let line = serde_json::to_string(&json_verdict(c)).unwrap_or_default();
                writeln!(self.out, "{line}")
            }
            OutputFormat::Github => {
                let props = format!("file={},line={}", property(&c.source), c.line);
                if denied {
                    let title = format!("trainguard denied {}", c.object_id());
                    writeln!(self.out, "::error {props},title={}::{}", property(&title), data(&c.message()))
                } else {
                    for warning in &c.decision.warnings {
                        let title = format!("trainguard {}", c.object_id());
                        writeln!(self.out, "::warning {props},title={}::{}", property(&title), data(warning))?;
                    }
                    Ok(())
                }
            }
        }
    }

    /// An input that could not be used. `file` is set when it names a file of the change itself
    /// (an annotation on a file at another revision would point at the wrong lines).
    pub fn input_error(&mut self, message: &str, file: Option<&str>, line: Option<usize>) -> io::Result<()> {
        self.counts.input_errors += 1;
        match self.format {
            OutputFormat::Text => writeln!(self.err, "error: {message}"),
            OutputFormat::Json => {
                let obj = json!({ "error": message, "file": file, "line": line });
                writeln!(self.out, "{obj}")
            }
            OutputFormat::Github => {
                let mut props = Vec::new();
                if let Some(file) = file {
                    props.push(format!("file={}", property(file)));
                    if let Some(line) = line {
                        props.push(format!("line={line}"));
                    }
                }
                props.push("title=trainguard: unusable input".replace(':', "%3A"));
                writeln!(self.out, "::error {}::{}", props.join(","), data(message))
            }
        }
    }

    /// A warning about an object that is not judged (a training runtime): never changes the exit
    /// status.
    pub fn runtime_warning(&mut self, message: &str, file: &str, line: usize) -> io::Result<()> {
        if self.quiet {
            return Ok(());
        }
        match self.format {
            OutputFormat::Text => writeln!(self.err, "warning: {file}:{line}: {message}"),
            OutputFormat::Json => writeln!(self.out, "{}", json!({ "warning": message, "file": file, "line": line })),
            OutputFormat::Github => writeln!(
                self.out,
                "::warning file={},line={line},title={}::{}",
                property(file),
                property("trainguard runtime"),
                data(message)
            ),
        }
    }

    /// The summary line (not with `--quiet`; on stderr for JSON so stdout stays JSON lines).
    pub fn finish(mut self) -> io::Result<Counts> {
        if !self.quiet {
            let summary = self.counts.summary();
            match self.format {
                OutputFormat::Json => writeln!(self.err, "{summary}")?,
                _ => writeln!(self.out, "{summary}")?,
            }
        }
        self.out.flush()?;
        self.err.flush()?;
        Ok(self.counts)
    }
}

/// One TrainJob's verdict as JSON, with the causes the webhook's Status would carry.
fn json_verdict(c: &Checked) -> Value {
    let status = if c.strict_denial { None } else { response::status(&c.decision, &c.name) };
    let causes: Vec<Value> = status
        .as_ref()
        .and_then(|s| s.details.as_ref())
        .map(|d| {
            d.causes.iter().map(|k| json!({ "field": k.field, "reason": k.reason, "message": k.message })).collect()
        })
        .unwrap_or_default();
    json!({
        "object": c.object_id(),
        "namespace": c.namespace,
        "name": c.name,
        "file": c.source,
        "line": c.line,
        "operation": c.operation.as_str(),
        "old": c.old.as_ref().map(|(file, line)| json!({ "file": file, "line": line })),
        "verdict": if c.denied() { "denied" } else { "allowed" },
        "rule": if c.strict_denial { "strict".to_string() } else { c.decision.audit_rules() },
        "code": status.as_ref().map(|s| s.code),
        "reason": status.as_ref().map(|s| s.reason.clone()),
        "message": if c.denied() { Some(c.message()) } else { None },
        "causes": causes,
        "warnings": c.decision.warnings,
    })
}

/// Escapes the message part of a workflow command.
fn data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a property value of a workflow command.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_command_escaping() {
        assert_eq!(data("a%b\nc\rd: e, f"), "a%25b%0Ac%0Dd: e, f");
        assert_eq!(property("dir/a:b,c.yaml"), "dir/a%3Ab%2Cc.yaml");
    }

    #[test]
    fn exit_codes_and_summary() {
        let cases = [
            (Counts::default(), 0, "0 TrainJobs checked: 0 allowed, 0 denied; 0 other objects skipped"),
            (
                Counts { allowed: 1, warned: 1, skipped: 2, ..Counts::default() },
                0,
                "1 TrainJob checked: 1 allowed (1 with warnings), 0 denied; 2 other objects skipped",
            ),
            (Counts { allowed: 1, denied: 2, ..Counts::default() }, 1, "3 TrainJobs checked: 1 allowed, 2 denied"),
            (Counts { denied: 2, input_errors: 1, ..Counts::default() }, 2, "; 1 input error"),
        ];
        for (counts, code, summary) in cases {
            assert_eq!(counts.exit_code(), code, "{counts:?}");
            assert!(counts.summary().contains(summary), "{}", counts.summary());
        }
    }
}
