//! The background trace writer: samples are encoded and written on a low-priority thread of their
//! own, off the path that drains the ring buffers.

use anyhow::{bail, Result};

use numaff_behave::{Sample, TraceError, TraceWriter};

/// Samples handed to the trace writer at a time (the writer's own batches are as large).
pub(super) const WRITE_BATCH: usize = numaff_behave::tracefile::BATCH_ROWS;

/// Batches of [`WRITE_BATCH`] samples the writer may lag behind (64 × 64 Ki samples, about 250 MiB).
const QUEUED_BATCHES: usize = 64;

/// Encodes and writes the trace on a thread of its own at the lowest priority (nice 19): Parquet
/// encoding then takes cpu time the profiled program leaves idle instead of competing with it.
/// Batches queue up in memory meanwhile, at most [`QUEUED_BATCHES`] of them (then the reader waits
/// for the writer).
/// Dropped without [`Self::finish`] (an error ended the recording), it waits for the thread, whose
/// unfinished trace then removes its temporary file.
pub(super) struct BackgroundWriter {
    tx: Option<std::sync::mpsc::SyncSender<Vec<Sample>>>,
    /// Emptied batches coming back for reuse: no fresh memory (and page faults) per batch.
    spare: std::sync::mpsc::Receiver<Vec<Sample>>,
    thread: Option<std::thread::JoinHandle<Result<TraceWriter, TraceError>>>,
}

impl BackgroundWriter {
    pub(super) fn start(mut writer: TraceWriter) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Sample>>(QUEUED_BATCHES);
        let (back, spare) = std::sync::mpsc::sync_channel::<Vec<Sample>>(QUEUED_BATCHES + 2);
        let thread = std::thread::spawn(move || {
            // SAFETY: setpriority on this thread (who = its tid); no memory is involved. A failure
            // only leaves the writer at normal priority.
            unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                libc::setpriority(libc::PRIO_PROCESS, tid, 19);
            }
            for mut batch in rx {
                writer.write_all(&batch)?;
                batch.clear();
                let _ = back.try_send(batch);
            }
            Ok(writer)
        });
        BackgroundWriter {
            tx: Some(tx),
            spare,
            thread: Some(thread),
        }
    }

    /// An empty batch of [`WRITE_BATCH`] capacity, reused when the writer has one.
    pub(super) fn empty_batch(&self) -> Vec<Sample> {
        self.spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(WRITE_BATCH))
    }

    /// Queues samples; false if the writer stopped on an error ([`Self::finish`] returns it).
    pub(super) fn send(&self, batch: Vec<Sample>) -> bool {
        batch.is_empty() || self.tx.as_ref().is_some_and(|tx| tx.send(batch).is_ok())
    }

    /// Waits for every queued sample to be written; the writer, or its error.
    pub(super) fn finish(mut self) -> Result<TraceWriter> {
        self.tx = None;
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => Ok(r?),
            _ => bail!("the trace writer thread panicked"),
        }
    }
}

impl Drop for BackgroundWriter {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
