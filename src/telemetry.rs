//! Logging setup: text for people, JSON lines for log pipelines. `RUST_LOG` refines the level.
//! Lines go through a bounded in-memory buffer to a writer thread ([`crate::log_writer`]), so a
//! storm of denials is never bound by how fast stderr drains; when the buffer is full, lines are
//! dropped and counted (`trainguard_log_lines_dropped_total`) rather than blocking a request.

use std::cell::RefCell;
use std::sync::OnceLock;
use std::time::SystemTime;

use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::LogFormat;
use crate::log_line::Denial;
use crate::log_writer::{self, BatchWriter, DroppedLines, WriterGuard};

/// Bytes of log lines waiting for stderr before lines are dropped (~16k denial lines).
const BUFFERED_BYTES: usize = 4 << 20;

/// Keeps the writer thread alive; dropping it writes the buffered lines.
pub struct Logging {
    pub dropped: DroppedLines,
    _guard: WriterGuard,
}

/// Where denial lines go when the installed subscriber is the one [`init`] built: its writer,
/// its format. Unset when another subscriber is installed or colours are on.
struct Direct {
    writer: BatchWriter,
    format: LogFormat,
}

static DIRECT: OnceLock<Direct> = OnceLock::new();

pub fn init(format: LogFormat) -> std::io::Result<Logging> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (writer, guard) = log_writer::spawn(std::io::stderr(), BUFFERED_BYTES)?;
    let dropped = writer.dropped();
    // Colour only on a terminal: escape codes in a file or a log collector are noise.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // A second init (tests running several servers in one process) keeps the first subscriber.
    if subscriber(format, filter, writer.clone(), ansi).try_init().is_ok() && !ansi {
        let _ = DIRECT.set(Direct { writer, format });
    }
    Ok(Logging { dropped, _guard: guard })
}

/// The fmt subscriber of `format` (public for the test that pins [`crate::log_line`] to it).
pub fn subscriber<W>(format: LogFormat, filter: EnvFilter, writer: W, ansi: bool) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi);
    match format {
        LogFormat::Text => Box::new(builder.finish()),
        LogFormat::Json => Box::new(builder.json().flatten_event(true).with_current_span(false).finish()),
    }
}

/// Writes a denial's line for an event of `target` straight into the log buffer, in the bytes
/// the installed subscriber would write (see [`crate::log_line`]). False when it cannot (the
/// subscriber is not [`init`]'s, colours are on, or a span is entered, which the line would have
/// to name): the caller then logs the event through tracing. The caller checks the level filter.
pub fn log_denial(target: &str, line: &Denial<'_>) -> bool {
    let Some(direct) = DIRECT.get() else { return false };
    if !tracing::Span::current().is_none() {
        return false;
    }
    thread_local! {
        // Reused per thread: formatting a line allocates nothing once it has grown.
        static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    LINE.with_borrow_mut(|out| {
        out.clear();
        line.write(direct.format, target, SystemTime::now(), out);
        direct.writer.push(out);
    });
    true
}
