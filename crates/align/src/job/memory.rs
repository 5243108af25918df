//! How fq2bam shares out the memory budget: the index, the chunks in flight and the output
//! buffers (and Picard's read ends) are held for the whole run; the sorter's records get the rest,
//! through a budget that refuses at once what could never be granted (crates/exec `PoolBudget`,
//! the sort's).

use super::{DuplicateMarking, Fq2BamJob};
use crate::pipeline::PipelineOptions;
use crate::Aligner;
use sortase_exec::error::Error;
use sortase_exec::output::OutFormat;
use sortase_exec::runtime::Runtime;
use sortase_exec::sorting::final_phase_reserve;

/// How the memory budget is shared out.
pub(super) struct MemoryPlan {
    /// The whole budget.
    pub(super) memory: usize,
    /// The work queue (chunks in flight bounded by the budget).
    pub(super) pipeline: PipelineOptions,
    /// Reads and records of the chunks in flight.
    pub(super) batches: usize,
    /// Picard's read ends before they spill.
    pub(super) ends_budget: usize,
    /// Held for the whole run: index, batches, output buffers, Picard's ends.
    pub(super) fixed: usize,
    /// The rest: the sorter's records.
    pub(super) record_memory: usize,
}

impl MemoryPlan {
    pub(super) fn new(
        rt: &Runtime,
        aligner: &Aligner,
        format: OutFormat,
        job: &Fq2BamJob,
    ) -> anyhow::Result<Self> {
        let (memory, threads) = (rt.memory().limit(), rt.threads());
        let mut pipeline = PipelineOptions::new(threads);
        // Chunks in flight: their reads and records (~5 bytes a base: sequence, quality, names,
        // BAM records); at most an eighth of the budget, at least one chunk per thread and one more.
        let per_chunk = pipeline.chunk_bases * 5;
        pipeline.in_flight = pipeline
            .in_flight
            .min(memory / 8 / per_chunk)
            .max(threads + 1);
        let batches = pipeline.in_flight * per_chunk;
        let reserve = final_phase_reserve(memory, threads, format);
        // Picard's read ends (~60 bytes a record) beyond this spill to the temporary directory.
        let ends_budget = match job.markdup {
            DuplicateMarking::Picard => memory / 8,
            _ => 0,
        };
        let fixed = aligner.memory() + batches + reserve + ends_budget;
        if fixed >= memory {
            return Err(Error::argument(format!(
                "the memory budget of {} MiB is too small: the minimap2 index of {} takes about {} MiB, the read batches {} MiB and the output {} MiB; raise -m",
                memory >> 20,
                job.index.display(),
                aligner.memory() >> 20,
                batches >> 20,
                reserve >> 20
            ))
            .into());
        }
        Ok(Self {
            memory,
            pipeline,
            batches,
            ends_budget,
            fixed,
            record_memory: memory - fixed,
        })
    }
}
