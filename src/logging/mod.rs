//! Logging setup: text for people, JSON lines for log pipelines. `RUST_LOG` refines the level.
//! Lines go through a bounded in-memory buffer to a writer thread ([`writer`]), so a
//! storm of denials is never bound by how fast stderr drains; when the buffer is full, lines are
//! dropped and counted (`trainguard_log_lines_dropped_total`) rather than blocking a request.

use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::util::SubscriberInitExt as _;

pub(crate) mod writer;

use writer::{DroppedLines, WriterGuard};

/// Bytes of log lines waiting for stderr before lines are dropped (~16k denial lines).
const BUFFERED_BYTES: usize = 4 << 20;

/// Keeps the writer thread alive; dropping it writes the buffered lines.
pub(crate) struct Logging {
    pub(crate) dropped: DroppedLines,
    _guard: WriterGuard,
}

pub(crate) fn init(format: LogFormat) -> std::io::Result<Logging> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (writer, guard) = writer::spawn(std::io::stderr(), BUFFERED_BYTES)?;
    let dropped = writer.dropped();
    // Colour only on a terminal: escape codes in a file or a log collector are noise.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // A second init (tests running several servers in one process) keeps the first subscriber.
    let _ = subscriber(format, filter, writer, ansi).try_init();
    Ok(Logging { dropped, _guard: guard })
}

/// The fmt subscriber of `format`.
pub(crate) fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi);
    match format {
        LogFormat::Text => Box::new(builder.finish()),
        LogFormat::Json => Box::new(builder.json().flatten_event(true).with_current_span(false).finish()),
    }
}

/// `--log-format`: text for people, JSON lines for log pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}
