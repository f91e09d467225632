//! Where log lines go: a bounded in-memory buffer that a writer thread drains in batches.
//!
//! A request that logs (a denial) only copies its line into the buffer under a short lock; it
//! never waits for stderr, and it never wakes another thread per line. The writer thread is woken
//! by the first line after it went idle, then waits [`BATCH_DELAY`] so that the lines of a busy
//! moment leave in one `write`. On a webhook pod with one or two cores that matters: a wake-up,
//! two context switches and a syscall per line cost more than the denial itself (see
//! docs/benchmarks.md). When the buffer is full, lines are dropped and counted
//! (`trainguard_log_lines_dropped_total`) instead of blocking a request.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the writer thread collects lines after the first one arrived. Lines reach stderr at
/// most this much later than they were logged (plus the write itself).
pub(crate) const BATCH_DELAY: Duration = Duration::from_millis(5);

/// At shutdown, how long the buffered lines get to reach the sink. A sink that does not take
/// them (a stalled pipe) must not hold the process past its grace period.
pub(crate) const FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// Log lines dropped because the buffer was full; shared with the metrics registry.
#[derive(Debug, Clone, Default)]
pub struct DroppedLines(Arc<AtomicU64>);

impl DroppedLines {
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Default)]
struct Buffer {
    bytes: Vec<u8>,
    /// The writer thread is blocked on the condition variable, waiting for a first line.
    idle: bool,
    closed: bool,
    /// The writer thread wrote its last batch and ended.
    finished: bool,
}

#[derive(Debug)]
struct Shared {
    buffer: Mutex<Buffer>,
    wake: Condvar,
    /// Signalled when the writer thread has finished.
    finished: Condvar,
    limit: usize,
    dropped: DroppedLines,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Buffer> {
        // A panic while holding the lock leaves plain bytes behind; they are still worth writing.
        self.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The writer that log events go to (`tracing_subscriber`'s `with_writer`). Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct BatchWriter(Arc<Shared>);

/// Keeps the writer thread; dropping it writes what is buffered and ends the thread, waiting
/// [`FLUSH_TIMEOUT`] at most.
#[derive(Debug)]
pub(crate) struct WriterGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Starts the writer thread: lines go to `sink`, at most `limit` bytes of them wait at once.
pub(crate) fn spawn<W: Write + Send + 'static>(sink: W, limit: usize) -> io::Result<(BatchWriter, WriterGuard)> {
    let shared = Arc::new(Shared {
        buffer: Mutex::new(Buffer::default()),
        wake: Condvar::new(),
        finished: Condvar::new(),
        limit,
        dropped: DroppedLines::default(),
    });
    let thread = {
        let shared = shared.clone();
        std::thread::Builder::new().name("log-writer".into()).spawn(move || drain(&shared, sink))?
    };
    Ok((BatchWriter(shared.clone()), WriterGuard { shared, thread: Some(thread) }))
}

impl BatchWriter {
    pub(crate) fn dropped(&self) -> DroppedLines {
        self.0.dropped.clone()
    }

    /// Queues one line (one formatted event); drops it when the buffer has no room for it.
    pub(crate) fn push(&self, line: &[u8]) {
        let shared = &*self.0;
        let mut buffer = shared.lock();
        if buffer.bytes.len() + line.len() > shared.limit {
            drop(buffer);
            shared.dropped.0.fetch_add(1, Ordering::Relaxed);
            return;
        }
        buffer.bytes.extend_from_slice(line);
        let wake = std::mem::take(&mut buffer.idle);
        drop(buffer);
        if wake {
            shared.wake.notify_one();
        }
    }
}

impl Write for &BatchWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BatchWriter {
    type Writer = &'a BatchWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

/// The writer thread: waits for a first line, lets more gather for [`BATCH_DELAY`], writes them
/// all at once; until the guard is dropped, then writes what is left.
#[allow(clippy::disallowed_methods, reason = "batches log lines for a short real-time delay")]
fn drain<W: Write>(shared: &Shared, mut sink: W) {
    let mut out = Vec::new();
    loop {
        let mut buffer = shared.lock();
        while buffer.bytes.is_empty() && !buffer.closed {
            buffer.idle = true;
            buffer = shared.wake.wait(buffer).unwrap_or_else(|e| e.into_inner());
        }
        let closed = buffer.closed;
        if !closed {
            drop(buffer);
            std::thread::sleep(BATCH_DELAY);
            buffer = shared.lock();
        }
        // Swap buffers: the next lines go into the (emptied) one just written.
        std::mem::swap(&mut buffer.bytes, &mut out);
        drop(buffer);
        // Nothing better to do with a failed write of a log line than to go on.
        let _ = sink.write_all(&out).and_then(|()| sink.flush());
        out.clear();
        if closed {
            shared.lock().finished = true;
            shared.finished.notify_all();
            return;
        }
    }
}

impl Drop for WriterGuard {
    fn drop(&mut self) {
        let mut buffer = self.shared.lock();
        buffer.closed = true;
        self.shared.wake.notify_one();
        let (buffer, timeout) = self
            .shared
            .finished
            .wait_timeout_while(buffer, FLUSH_TIMEOUT, |b| !b.finished)
            .unwrap_or_else(|e| e.into_inner());
        drop(buffer);
        // A thread stuck in a write to a stalled sink is left behind; the process is ending.
        if let (false, Some(thread)) = (timeout.timed_out(), self.thread.take()) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A sink that records what it got, and how many writes, optionally slowly.
    #[derive(Clone, Default)]
    struct Recorder {
        got: Arc<Mutex<(Vec<u8>, usize)>>,
        delay: Duration,
        /// Writes begun (a slow write counts from its start).
        begun: Arc<AtomicU64>,
    }

    impl Write for Recorder {
        #[allow(clippy::disallowed_methods, reason = "a slow sink is what is tested")]
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.begun.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.delay);
            let mut got = self.got.lock().unwrap();
            got.0.extend_from_slice(buf);
            got.1 += 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Polls `check` every millisecond until it holds; fails naming `what` after 5 s.
    #[allow(clippy::disallowed_methods, reason = "a sync poll with a deadline: no runtime in these tests")]
    fn wait_until(what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn lines_arrive_in_order_and_in_few_writes_and_the_guard_flushes() {
        let sink = Recorder::default();
        let (writer, guard) = spawn(sink.clone(), 1 << 20).unwrap();
        let mut expected = Vec::new();
        for i in 0..1000 {
            let line = format!("denied {i}\n");
            (&writer).write_all(line.as_bytes()).unwrap();
            expected.extend_from_slice(line.as_bytes());
        }
        drop(guard);
        let got = sink.got.lock().unwrap();
        assert_eq!(String::from_utf8_lossy(&got.0), String::from_utf8_lossy(&expected));
        assert!(got.1 <= 3, "1000 lines logged at once leave in a batch or a few, not in {} writes", got.1);
        assert_eq!(writer.dropped().get(), 0);
    }

    #[test]
    fn a_line_logged_while_idle_is_written_soon() {
        let sink = Recorder::default();
        let (writer, _guard) = spawn(sink.clone(), 1 << 20).unwrap();
        wait_until("the writer thread waiting", || writer.0.lock().idle);
        (&writer).write_all(b"one line\n").unwrap();
        wait_until("the line written", || !sink.got.lock().unwrap().0.is_empty());
        assert_eq!(sink.got.lock().unwrap().0, b"one line\n");
    }

    #[test]
    fn shutdown_does_not_wait_for_a_stalled_sink() {
        let sink = Recorder { delay: Duration::from_secs(30), ..Recorder::default() };
        let (writer, guard) = spawn(sink.clone(), 1 << 20).unwrap();
        (&writer).write_all(b"never taken\n").unwrap();
        wait_until("the writer thread stuck in the write", || sink.begun.load(Ordering::SeqCst) == 1);
        // Real time from here: the guard's own deadline on a real thread is what is measured.
        let started = Instant::now();
        drop(guard);
        let waited = started.elapsed();
        assert!(waited >= FLUSH_TIMEOUT && waited < FLUSH_TIMEOUT * 5, "{waited:?}");
    }

    #[test]
    fn a_full_buffer_drops_and_counts_lines_without_blocking() {
        let sink = Recorder { delay: Duration::from_millis(200), ..Recorder::default() };
        let (writer, guard) = spawn(sink.clone(), 100).unwrap();
        let started = Instant::now();
        for _ in 0..50 {
            (&writer).write_all(b"0123456789\n").unwrap(); // 11 bytes: 9 fit in 100
        }
        assert!(started.elapsed() < Duration::from_millis(150), "the caller waited for the slow sink");
        let dropped = writer.dropped().get();
        assert!(dropped > 0, "50 lines of 11 bytes cannot all fit in 100 bytes");
        drop(guard);
        let got = sink.got.lock().unwrap().0.len();
        assert_eq!(got as u64, (50 - dropped) * 11, "every line not counted as dropped was written");
    }
}
