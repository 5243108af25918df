//! samtools merge's heap merge on one thread: one reader thread per input translates its records into
//! the output header, and the calling thread merges the batches and writes them. This reproduces
//! samtools' interleaving exactly, unsorted inputs included, for any input (stdin, SAM, CRAM).

use anyhow::Result;
use sortase_bam::checksum::{ChecksumOptions, Fault, Sums, Tally};
use sortase_bam::header_merge::Translation;
use sortase_bam::RecordBatch;
use sortase_exec::input::Input;
use sortase_exec::proof::{self, SumsCell};
use sortase_exec::runtime::Runtime;
use sortase_exec::writer::RecordSink;
use sortase_sort::merge::{merge as heap_merge, Source};
use sortase_sort::{SortError, SortOrder};
use std::sync::Arc;

/// Batches each reader may have waiting for the merge.
const QUEUED_BATCHES: usize = 4;

/// Merges `inputs` (named `names`, translated by `translations`) in `order` into `sink`. Readers stop
/// between batches once `rt` is cancelled. With `sums`, returns the sums of the records read (as
/// translated, on the reader threads) and of those written.
pub(super) fn merge(
    order: SortOrder,
    inputs: Vec<Input>,
    translations: Vec<Arc<Translation>>,
    names: &[String],
    rt: &Runtime,
    sink: &mut RecordSink,
    sums: Option<&ChecksumOptions>,
) -> Result<Option<(Sums, Sums)>> {
    let read = SumsCell::default();
    let mut written = sums.map(|o| Tally::new(o, &Fault::from_env()));
    std::thread::scope(|scope| -> Result<()> {
        let read = &read;
        let mut sources = Vec::with_capacity(inputs.len());
        let attach = translations.clone();
        for ((mut input, t), name) in inputs.into_iter().zip(translations).zip(names) {
            input.set_cancel(rt.cancel_flag().clone());
            let (tx, rx) =
                crossbeam_channel::bounded::<Result<RecordBatch, String>>(QUEUED_BATCHES);
            scope.spawn(move || {
                let identity = t.tids_identity();
                let r = input.for_each_batch(|batch| {
                    let mut buf = Vec::with_capacity(batch.bytes().len() + 1024);
                    let mut offsets = Vec::with_capacity(batch.len());
                    for raw in batch.iter_raw() {
                        offsets.push(buf.len() as u32);
                        t.translate_into(raw, &mut buf, identity);
                    }
                    let end = buf.len();
                    let batch = RecordBatch::from_parts(buf, offsets, end, 0);
                    if let Some(o) = sums {
                        read.merge(&proof::batch_sums_here(o, &batch));
                    }
                    tx.send(Ok(batch))
                        .map_err(|_| anyhow::anyhow!("merge stopped"))
                });
                if let Err(e) = r {
                    let _ = tx.send(Err(format!("{name}: {e:#}")));
                }
            });
            sources.push(Source::feed(Box::new(move || match rx.recv() {
                Ok(Ok(b)) => Ok(Some(b)),
                Ok(Err(e)) => Err(SortError::Input(e)),
                Err(_) => Ok(None),
            }))?);
        }
        let mut scratch = Vec::new();
        heap_merge(order, &mut sources, |i, _, r| {
            let r = if attach[i].attach_rg_into(r, &mut scratch) {
                &scratch[..]
            } else {
                r
            };
            match written.as_mut() {
                Some(t) => Ok(sink.write(t.pass(r))?),
                None => Ok(sink.write(r)?),
            }
        })?;
        Ok(())
    })?;
    Ok(written.map(|t| (read.get(), t.sums())))
}
