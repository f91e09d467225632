//! How `validate` prints verdicts: text lines, JSON lines, GitHub Actions annotations (each
//! written as soon as it is known), or one SARIF 2.1.0 or JUnit XML document at the end.

use std::io::{self, Write};

use clap::ValueEnum;
use serde_json::{Value, json};

use super::check::Checked;
use trainguard_core::admission::{Rule, response};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub(crate) enum OutputFormat {
    /// One line per TrainJob, then a summary line.
    #[default]
    Text,
    /// One JSON object per TrainJob (and per input error or warning), one per line.
    Json,
    /// GitHub Actions `::error` / `::warning` workflow commands, then a summary line.
    Github,
    /// One SARIF 2.1.0 log (code scanning): a result per denied field, warning and input
    /// problem, and a rule (with help) per rule id.
    Sarif,
    /// One JUnit XML report: a test case per TrainJob (a denial is one failure listing its
    /// fields) and per unusable input; warnings in system-out (of the test case) or system-err.
    Junit,
}

/// One line of a SARIF or JUnit document, kept until the end.
#[derive(Debug, Clone)]
struct Record {
    level: Level,
    /// SARIF ruleId: the webhook's rule (audit annotation), `input-error`, `input-warning`.
    rule: String,
    /// The TrainJob, or the input, the record is about.
    name: String,
    message: String,
    file: Option<String>,
    line: Option<usize>,
    /// JUnit: each denied field on its line (`file:line: error`), the failure's body.
    details: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Allowed without a warning (JUnit only).
    Pass,
    /// Allowed with a warning.
    Warning,
    Denied,
    InputError,
    InputWarning,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub allowed: usize,
    /// Allowed with a warning (offline gate).
    pub(crate) warned: usize,
    pub(crate) denied: usize,
    /// Documents of other kinds.
    pub(crate) skipped: usize,
    pub(crate) input_errors: usize,
    /// Inputs used only in part: an old side that could not be read (its TrainJobs checked as
    /// CREATEs), an object that looks like a TrainJob but is not one (not checked).
    pub(crate) input_warnings: usize,
}

impl Counts {
    /// 0 all allowed, 1 any denied (or, with `strict`, no TrainJob checked at all), 2 any
    /// unusable input.
    pub(crate) fn exit_code(&self, strict: bool) -> u8 {
        if self.input_errors > 0 {
            2
        } else if self.denied > 0 || (strict && self.checked() == 0) {
            1
        } else {
            0
        }
    }

    pub(crate) fn checked(&self) -> usize {
        self.allowed + self.denied
    }

    pub(crate) fn summary(&self) -> String {
        let checked = self.checked();
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
        if self.input_warnings > 0 {
            s.push_str(&format!(
                "; {} input warning{}",
                self.input_warnings,
                if self.input_warnings == 1 { "" } else { "s" }
            ));
        }
        s
    }
}

/// What a run that checked no TrainJob at all says (a typo'd path or kind, an empty directory).
pub(crate) const NOTHING_CHECKED: &str = "no TrainJob was checked: no input holds an object with apiVersion \
     trainer.kubeflow.org/v1alpha1 and kind TrainJob (check the paths; --strict fails such a run)";

pub(crate) struct Reporter<O: Write, E: Write> {
    format: OutputFormat,
    quiet: bool,
    out: O,
    err: E,
    pub(crate) counts: Counts,
    /// SARIF and JUnit: everything, written by [`Self::finish`].
    records: Vec<Record>,
    /// SARIF: the tool's `informationUri` (the repository), and its rules' help pages under it.
    information_uri: Option<String>,
}

impl<O: Write, E: Write> Reporter<O, E> {
    pub(crate) fn new(format: OutputFormat, quiet: bool, out: O, err: E) -> Self {
        Reporter { format, quiet, out, err, counts: Counts::default(), records: Vec::new(), information_uri: None }
    }

    /// The SARIF `informationUri` (empty: none).
    pub(crate) fn with_information_uri(mut self, uri: &str) -> Self {
        self.information_uri = Some(uri.trim_end_matches('/').to_string()).filter(|u| !u.is_empty());
        self
    }

    pub(crate) fn skipped(&mut self) {
        self.counts.skipped += 1;
    }

    pub(crate) fn checked(&mut self, c: &Checked) -> io::Result<()> {
        let denied = c.denied();
        if denied {
            self.counts.denied += 1;
        } else {
            self.counts.allowed += 1;
            if !c.decision.warnings.is_empty() {
                self.counts.warned += 1;
            }
        }
        if matches!(self.format, OutputFormat::Sarif | OutputFormat::Junit) {
            self.record_checked(c, denied);
            return Ok(());
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
                    if c.field_errors().is_empty() {
                        return writeln!(
                            self.out,
                            "::error {props},title={}::{}",
                            property(&title),
                            data(&c.message())
                        );
                    }
                    // One annotation per field, on the field's own line.
                    for e in c.field_errors() {
                        let props = format!("file={},line={}", property(&c.source), c.line_of(&e.path));
                        writeln!(self.out, "::error {props},title={}::{}", property(&title), data(&e.to_string()))?;
                    }
                    Ok(())
                } else {
                    for warning in &c.decision.warnings {
                        let title = format!("trainguard {}", c.object_id());
                        writeln!(self.out, "::warning {props},title={}::{}", property(&title), data(warning))?;
                    }
                    Ok(())
                }
            }
            OutputFormat::Sarif | OutputFormat::Junit => Ok(()),
        }
    }

    /// SARIF and JUnit: the records of one checked TrainJob, written by [`Self::finish`].
    fn record_checked(&mut self, c: &Checked, denied: bool) {
        let file = (c.source != "-").then(|| c.source.clone());
        if denied && self.format == OutputFormat::Junit {
            // One test case per TrainJob: the webhook's whole message, each field on its line.
            let details =
                c.field_errors().iter().map(|e| format!("{}:{}: {e}", c.source, c.line_of(&e.path))).collect();
            let rule = if c.strict_denial { "strict".to_string() } else { c.decision.audit_rules() };
            self.records.push(Record {
                level: Level::Denied,
                rule,
                name: c.object_id(),
                message: c.message(),
                file,
                line: Some(c.line),
                details,
            });
            return;
        }
        if denied && !c.field_errors().is_empty() {
            // One record per field, on its line.
            for e in c.field_errors() {
                let line = Some(c.line_of(&e.path));
                let (rule, message) = (e.rule.to_string(), e.to_string());
                self.records.push(Record {
                    level: Level::Denied,
                    rule,
                    name: c.object_id(),
                    message,
                    file: file.clone(),
                    line,
                    details: Vec::new(),
                });
            }
            return;
        }
        let (level, rule, message) = if denied {
            let rule = if c.strict_denial { "strict".to_string() } else { c.decision.audit_rules() };
            (Level::Denied, rule, c.message())
        } else if c.decision.warnings.is_empty() {
            (Level::Pass, String::new(), format!("allowed ({})", c.operation.as_str()))
        } else {
            (Level::Warning, "warning".to_string(), c.decision.warnings.join("; "))
        };
        let name = c.object_id();
        self.records.push(Record { level, rule, name, message, file, line: Some(c.line), details: Vec::new() });
    }

    /// An input that could not be used. `file` is set when it names a file of the change itself
    /// (an annotation on a file at another revision would point at the wrong lines).
    pub(crate) fn input_error(&mut self, message: &str, file: Option<&str>, line: Option<usize>) -> io::Result<()> {
        self.counts.input_errors += 1;
        self.input_record(Level::InputError, message, file, line)
    }

    /// An input used only in part, or an object that was not checked though it looks like a
    /// TrainJob: a warning (exit status unchanged). `file` as for [`Self::input_error`].
    pub(crate) fn input_warning(&mut self, message: &str, file: Option<&str>, line: Option<usize>) -> io::Result<()> {
        self.counts.input_warnings += 1;
        self.input_record(Level::InputWarning, message, file, line)
    }

    /// A warning about an object that is not judged (a training runtime): never changes the exit
    /// status, and `--quiet` drops it.
    pub(crate) fn runtime_warning(&mut self, message: &str, file: &str, line: usize) -> io::Result<()> {
        if self.quiet {
            return Ok(());
        }
        // Printed, so counted: the summary's warnings are the ones shown.
        self.counts.input_warnings += 1;
        self.input_record(Level::InputWarning, &format!("{file}:{line}: {message}"), Some(file), Some(line))
    }

    /// One error or warning record about an input, in the output format.
    fn input_record(&mut self, level: Level, message: &str, file: Option<&str>, line: Option<usize>) -> io::Result<()> {
        let (key, title) =
            if level == Level::InputError { ("error", "unusable input") } else { ("warning", "input warning") };
        match self.format {
            OutputFormat::Text => writeln!(self.err, "{key}: {message}"),
            OutputFormat::Json => {
                let mut obj = json!({ "file": file, "line": line });
                obj[key] = json!(message);
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
                props.push(format!("title=trainguard: {title}").replace(':', "%3A"));
                writeln!(self.out, "::{key} {}::{}", props.join(","), data(message))
            }
            OutputFormat::Sarif | OutputFormat::Junit => {
                self.push_input(level, message, file, line);
                Ok(())
            }
        }
    }

    fn push_input(&mut self, level: Level, message: &str, file: Option<&str>, line: Option<usize>) {
        let rule = if level == Level::InputError { "input-error" } else { "input-warning" };
        let name = file.map_or_else(|| "input".to_string(), |f| format!("input {f}"));
        let line = file.and(line);
        self.records.push(Record {
            level,
            rule: rule.to_string(),
            name,
            message: message.to_string(),
            file: file.map(str::to_string),
            line,
            details: Vec::new(),
        });
    }

    /// The summary line (not with `--quiet`; on stderr for JSON so stdout stays JSON lines),
    /// after a warning record when nothing was checked (even with `--quiet`).
    pub(crate) fn finish(mut self) -> io::Result<Counts> {
        if self.counts.checked() == 0 && self.counts.input_errors == 0 {
            self.input_record(Level::InputWarning, NOTHING_CHECKED, None, None)?;
        }
        if !self.quiet {
            let summary = self.counts.summary();
            match self.format {
                OutputFormat::Json | OutputFormat::Sarif | OutputFormat::Junit => writeln!(self.err, "{summary}")?,
                OutputFormat::Text | OutputFormat::Github => writeln!(self.out, "{summary}")?,
            }
        }
        match self.format {
            OutputFormat::Sarif => {
                let log = sarif(&self.records, self.information_uri.as_deref());
                serde_json::to_writer_pretty(&mut self.out, &log)?;
                writeln!(self.out)?;
            }
            OutputFormat::Junit => self.out.write_all(junit(&self.records, &self.counts).as_bytes())?,
            _ => {}
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
            d.causes
                .iter()
                .map(|k| {
                    let line = c.line_of(&k.field);
                    json!({ "field": k.field, "reason": k.reason, "message": k.message, "line": line })
                })
                .collect()
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

/// What a SARIF rule id stands for: (short description, help).
fn rule_help(id: &str) -> (&'static str, &'static str) {
    match id {
        "U2" => (
            "Overrides changed on a running TrainJob",
            "The overrides may change only while the TrainJob is suspended and its JobSet has no active jobs. \
             Suspend it first (training stops; progress since the last checkpoint is lost), wait until its \
             jobs are gone, change the overrides, then resume. In git: two commits.",
        ),
        "U5" => (
            "Suspend and overrides change in one update of a running TrainJob",
            "The old manifest says the job runs, so its JobSet is active and the cluster denies the single \
             update. Commit and apply spec.suspend: true alone, wait until the JobSet has no active jobs, then \
             change the overrides in a second commit.",
        ),
        "G1" | "G2" | "G3" | "G4" | "G5" => (
            "The old run of the TrainJob is still there",
            "The JobSet gate found evidence that the old run has not stopped (active jobs or pods, pods still \
             terminating, a JobSet being deleted). Wait until it has stopped, then apply the change.",
        ),
        "M1" => (
            "spec.managedBy changed",
            "spec.managedBy is immutable: keep the old value and create a new TrainJob with the other one.",
        ),
        "M2" => (
            "spec.managedBy is not an allowed controller",
            "Leave spec.managedBy unset for Trainer's own controller, or use one of the allowed values.",
        ),
        "O1" => (
            "Opt-out label set without permission",
            "Only members of the opt-out groups may set or change the trainguard.io/webhook label.",
        ),
        "shape" => ("An overrides item without its target", "List the replicated jobs (targetJobs) or the manager."),
        "name" => ("metadata.name is not a DNS-1035 label", "Use lower case letters, digits and '-'."),
        "schema" => (
            "Not in the Trainer release's TrainJob schema",
            "The field is unknown, misplaced, from another Trainer release, or wrongly typed: the API server \
             refuses or prunes it. Check --trainer-version.",
        ),
        "strict" => (
            "Allowed only on cluster state that was not given (--strict)",
            "Pass --state with the live JobSets and Jobs, or check it with kubectl apply --dry-run=server.",
        ),
        "warning" => ("Allowed with a warning", "The verdict rests on what the warning says was not checked."),
        "input-error" => ("Unusable input", "A file or object could not be read or decoded; fix it and run again."),
        "input-warning" => (
            "Input used in part, or not checked",
            "An old side that could not be read, an object that is not a TrainJob, or a runtime warning.",
        ),
        _ => ("Denied by the trainguard webhook's rules", "The message says what to do."),
    }
}

/// The SARIF 2.1.0 log: one run of the `trainguard` driver with a rule per rule id used, a
/// result per record that is not a plain allow. Locations only for files of the change (never
/// stdin or another revision).
fn sarif(records: &[Record], information_uri: Option<&str>) -> Value {
    let mut rule_ids: Vec<&str> = Vec::new();
    for r in records.iter().filter(|r| r.level != Level::Pass) {
        let id = if r.rule.is_empty() { "trainguard" } else { r.rule.as_str() };
        if !rule_ids.contains(&id) {
            rule_ids.push(id);
        }
    }
    let rules: Vec<Value> = rule_ids
        .iter()
        .map(|id| {
            let (short, help) = rule_help(id);
            let mut rule = json!({
                "id": id,
                "shortDescription": { "text": short },
                "help": { "text": help },
            });
            if let Some(uri) = information_uri {
                let page = match Rule::from_label(id) {
                    Some(rule) => rule.doc().page,
                    // `validate`'s own ids: its input, and `--strict`.
                    None if id.starts_with("input") || *id == "strict" => "docs/ci.md",
                    None => "docs/webhook.md",
                };
                rule["helpUri"] = json!(format!("{uri}/blob/main/{page}"));
            }
            rule
        })
        .collect();
    let results: Vec<Value> = records
        .iter()
        .filter(|r| r.level != Level::Pass)
        .map(|r| {
            let level = match r.level {
                Level::Denied | Level::InputError => "error",
                _ => "warning",
            };
            let id = if r.rule.is_empty() { "trainguard" } else { r.rule.as_str() };
            let mut result = json!({
                "ruleId": id,
                "ruleIndex": rule_ids.iter().position(|r| *r == id),
                "level": level,
                "message": { "text": match r.level {
                    // Input messages start with the file already.
                    Level::InputError | Level::InputWarning => r.message.clone(),
                    _ => format!("{}: {}", r.name, r.message),
                } },
            });
            if let Some(file) = &r.file {
                let mut physical = json!({ "artifactLocation": { "uri": uri_reference(file) } });
                if let Some(line) = r.line.filter(|l| *l > 0) {
                    physical["region"] = json!({ "startLine": line });
                }
                result["locations"] = json!([{ "physicalLocation": physical }]);
            }
            result
        })
        .collect();
    let mut driver = json!({
        "name": "trainguard",
        "version": env!("CARGO_PKG_VERSION"),
        "rules": rules,
    });
    if let Some(uri) = information_uri {
        driver["informationUri"] = json!(uri);
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": driver },
            "results": results,
        }],
    })
}

/// A relative path as a URI reference (RFC 3986): `/` separators, the characters a path may
/// hold but a URI may not percent-encoded.
fn uri_reference(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.replace('\\', "/").bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The JUnit XML report: one suite, a test case per TrainJob (a denial is one failure, whatever
/// the number of its fields) and per unusable input (an error). Warnings are not tests: an
/// allowed TrainJob's in its test case's system-out, an input's in the suite's system-err.
fn junit(records: &[Record], counts: &Counts) -> String {
    let cases: Vec<&Record> = records.iter().filter(|r| r.level != Level::InputWarning).collect();
    let failures = cases.iter().filter(|r| r.level == Level::Denied).count();
    let errors = cases.iter().filter(|r| r.level == Level::InputError).count();
    let tests = cases.len();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"trainguard validate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\">\n"
    ));
    x.push_str(&format!(
        "  <testsuite name=\"trainguard validate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\">\n"
    ));
    x.push_str(&format!(
        "    <properties><property name=\"summary\" value=\"{}\"/></properties>\n",
        xml(&counts.summary())
    ));
    for r in cases {
        let place = match (&r.file, r.line) {
            (Some(f), Some(l)) => format!("{f}:{l}"),
            (Some(f), None) => f.clone(),
            (None, _) => "-".to_string(),
        };
        let classname = r.file.as_deref().unwrap_or("trainguard");
        let name = format!("{} ({place})", r.name);
        x.push_str(&format!("    <testcase classname=\"{}\" name=\"{}\"", xml(classname), xml(&name)));
        let body = match r.level {
            Level::Pass | Level::InputWarning => None,
            Level::Warning => Some(format!("<system-out>warning: {}</system-out>", xml(&r.message))),
            Level::Denied => {
                let text = if r.details.is_empty() { r.message.clone() } else { r.details.join("\n") };
                Some(format!(
                    "<failure message=\"{}\" type=\"{}\">{}</failure>",
                    xml(&r.message),
                    xml(&r.rule),
                    xml_text(&text)
                ))
            }
            Level::InputError => {
                Some(format!("<error message=\"{0}\" type=\"input-error\">{0}</error>", xml(&r.message)))
            }
        };
        match body {
            None => x.push_str("/>\n"),
            Some(body) => x.push_str(&format!(">\n      {body}\n    </testcase>\n")),
        }
    }
    let warnings: Vec<String> = records
        .iter()
        .filter(|r| r.level == Level::InputWarning)
        .map(|r| format!("warning: {}", xml_text(&r.message)))
        .collect();
    if !warnings.is_empty() {
        x.push_str(&format!("    <system-err>{}</system-err>\n", warnings.join("\n")));
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// Escapes element text, keeping line breaks as they are (a failure's body lists one field a line).
fn xml_text(s: &str) -> String {
    s.split('\n').map(xml).collect::<Vec<_>>().join("\n")
}

/// Escapes text and attribute values; drops characters XML 1.0 cannot hold.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
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
    fn paths_become_uri_references_and_xml_is_escaped() {
        let cases =
            [("jobs/a.yaml", "jobs/a.yaml"), ("my jobs/a#1.yaml", "my%20jobs/a%231.yaml"), ("ü.yaml", "%C3%BC.yaml")];
        for (path, uri) in cases {
            assert_eq!(uri_reference(path), uri);
        }
        assert_eq!(xml("a<b & \"c\"\n\u{1}"), "a&lt;b &amp; &quot;c&quot;&#10;\u{FFFD}");
    }

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
            (Counts { allowed: 1, input_warnings: 2, ..Counts::default() }, 0, "; 2 input warnings"),
        ];
        for (counts, code, summary) in cases {
            assert_eq!(counts.exit_code(false), code, "{counts:?}");
            assert!(counts.summary().contains(summary), "{}", counts.summary());
        }
        // --strict: a run that checked nothing fails; otherwise strict changes nothing here.
        let strict = [
            (Counts::default(), 1),
            (Counts { skipped: 3, ..Counts::default() }, 1),
            (Counts { allowed: 1, ..Counts::default() }, 0),
        ];
        for (counts, code) in strict {
            assert_eq!(counts.exit_code(true), code, "{counts:?}");
        }
    }
}
