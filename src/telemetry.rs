//! Logging setup: text for people, JSON lines for log pipelines. `RUST_LOG` refines the level.
//! Lines go through a bounded in-memory queue to a writer thread, so a storm of denials is never
//! bound by how fast stderr drains; when the queue is full, lines are dropped and counted
//! (`trainguard_log_lines_dropped_total`) rather than blocking a request.

use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Lines the queue holds before it drops (a few MiB at most).
const QUEUED_LINES: usize = 16 * 1024;

/// Keeps the writer thread alive; dropping it flushes the queued lines.
pub struct Logging {
    pub dropped: ErrorCounter,
    _guard: WorkerGuard,
}

pub fn init(format: LogFormat) -> Logging {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (writer, guard) =
        NonBlockingBuilder::default().buffered_lines_limit(QUEUED_LINES).lossy(true).finish(std::io::stderr());
    let dropped = writer.error_counter();
    // Colour only on a terminal: escape codes in a file or a log collector are noise.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi);
    // A second init (tests running several servers in one process) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).try_init(),
    };
    Logging { dropped, _guard: guard }
}
