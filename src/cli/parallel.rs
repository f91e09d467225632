//! Parse and check files on every core while printing results in input order. Bounded: at most
//! `window` items are in flight, so memory does not grow with the number of files.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, PoisonError, mpsc};
use std::thread;

/// How many worker threads to use: the cores the process may run on.
pub(crate) fn workers() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get()).min(8)
}

/// Calls `sink(work(item))` for every item, in the order of `items`, running `work` on
/// `workers` threads. `items` is pulled under a lock, so it may do sequential I/O (a pipe).
pub(crate) fn ordered_map<I, T, R, W, S>(items: I, workers: usize, window: usize, work: W, mut sink: S)
where
    I: Iterator<Item = T> + Send,
    T: Send,
    R: Send,
    W: Fn(T) -> R + Sync,
    S: FnMut(R),
{
    if workers <= 1 {
        items.for_each(|item| sink(work(item)));
        return;
    }
    let queue = Mutex::new(Queue { items, next: 0, emitted: 0 });
    let room = Condvar::new();
    let (tx, rx) = mpsc::channel::<(usize, R)>();
    let (queue, room, work) = (&queue, &room, &work);
    thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            scope.spawn(move || {
                while let Some((index, item)) = Queue::take(queue, room, window) {
                    if tx.send((index, work(item))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut pending = BTreeMap::new();
        let mut want = 0;
        for (index, result) in rx {
            pending.insert(index, result);
            while let Some(result) = pending.remove(&want) {
                sink(result);
                want += 1;
            }
            queue.lock().unwrap_or_else(PoisonError::into_inner).emitted = want;
            room.notify_all();
        }
    });
}

/// The items not yet taken, how many were taken, and how many results were emitted in order.
struct Queue<I> {
    items: I,
    next: usize,
    emitted: usize,
}

impl<I: Iterator> Queue<I> {
    /// The next item and its index, once it is within `window` of the last emitted result (so
    /// that results held back for ordering stay bounded); `None` when the items are exhausted.
    fn take(queue: &Mutex<Self>, room: &Condvar, window: usize) -> Option<(usize, I::Item)> {
        let mut q = queue.lock().unwrap_or_else(PoisonError::into_inner);
        while q.next >= q.emitted + window {
            q = room.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
        let item = q.items.next()?;
        q.next += 1;
        Some((q.next - 1, item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods, reason = "uneven work is what is tested: later items must often finish first")]
    fn results_come_in_input_order_whatever_the_worker_count() {
        for workers in [1, 2, 4] {
            for window in [1, 3, 64] {
                let mut got = Vec::new();
                // Uneven work so that later items often finish first.
                let work = |i: u64| {
                    thread::sleep(std::time::Duration::from_micros((i * 7919) % 300));
                    i * 2
                };
                ordered_map(0..200u64, workers, window, work, |r| got.push(r));
                assert_eq!(got, (0..200).map(|i| i * 2).collect::<Vec<_>>(), "workers {workers} window {window}");
            }
        }
    }
}
