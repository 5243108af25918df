//! Every kind of task implements [`Task`]: its kind, its run, the byte spans it reads and the files
//! it writes. (What a driver would otherwise work out from the task's JSON and the formats it
//! reads: BGZF blocks, a BAM header, a dataset's file layout.)

use super::registry::{by_file, Span, Task};
use crate::agd_tasks::{AgdCountPart, AgdCountTask, AgdFlagstatTask, AgdIdxstatsTask};
use crate::error::{Error, Result};
use crate::index::{IndexPart, IndexTask};
use crate::runtime::Runtime;
use crate::snp_pileup::{SnpPileupPart, SnpPileupTask};
use crate::stats::{FileRange, FlagstatPart, FlagstatTask, IdxstatsPart, IdxstatsTask};
use sortase_agd::{ChunkEntry, ExtraGroup, Group};
use sortase_exec::task::bam_range;
pub use sortase_exec::task::{bam_header_end, HEADER_SPAN, READ_SLACK};
use std::path::Path;

/// A BAM range task's span, or a CRAM one's: its file definition and header container, then its
/// run of containers (its reader stops after the run's records).
fn file_range(range: &FileRange) -> Span {
    match range {
        FileRange::Bam { slice } => {
            let end = (slice.range.end != u64::MAX).then_some(slice.range.end);
            bam_range(&slice.input, slice.range.start, end)
        }
        FileRange::Cram { cram } => Span::ranges(
            &cram.input,
            vec![
                (0, cram.header_end),
                (cram.offset, cram.offset + cram.bytes),
            ],
        ),
    }
}

/// The files of `chunks` a dataset task reads, whole (a Parquet file is read from its footer),
/// through `sortase_io` (`sortase_agd`'s chunk reader): the `results` group's, and the
/// `duplicate` group's when given.
fn chunk_files<'a>(
    dir: &Path,
    chunks: impl Iterator<Item = &'a ChunkEntry>,
    duplicate: Option<&ExtraGroup>,
) -> Vec<Span> {
    let mut out = Vec::new();
    for c in chunks {
        out.push(Span::whole(sortase_agd::chunk_path(dir, Group::Results, c.index)).streamed());
        if let Some(d) = duplicate {
            out.push(Span::whole(sortase_agd::extra::extra_path(dir, d, c.index)).streamed());
        }
    }
    out
}

/// [`Task`] for a task of one BAM or CRAM range (its [`FileRange`] is `.0`): its kind, its output.
macro_rules! file_range_task {
    ($task:ident, $kind:literal, $output:ty) => {
        impl Task for $task {
            const KIND: &'static str = $kind;
            type Output = $output;

            fn run(&self, rt: &Runtime) -> Result<$output> {
                $task::run(self, rt)
            }

            fn reads(&self) -> Result<Vec<Span>> {
                Ok(vec![file_range(&self.0)])
            }
        }
    };
}

file_range_task!(FlagstatTask, "flagstat", FlagstatPart);
file_range_task!(IdxstatsTask, "idxstats", IdxstatsPart);

impl Task for IndexTask {
    const KIND: &'static str = "index";
    type Output = IndexPart;

    fn run(&self, rt: &Runtime) -> Result<IndexPart> {
        IndexTask::run(self, rt)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        let s = &self.slice;
        let end = (s.range.end != u64::MAX).then_some(s.range.end);
        Ok(vec![bam_range(&s.input, s.range.start, end)])
    }
}

impl Task for SnpPileupTask {
    const KIND: &'static str = "snp_pileup";
    type Output = SnpPileupPart;

    fn run(&self, rt: &Runtime) -> Result<SnpPileupPart> {
        SnpPileupTask::run(self, rt)
    }

    /// Per BAM its header, its index (whole) and the index chunks of the regions the task's
    /// batches read, computed from the indexes when planned. A batch that reads further back to
    /// warm up, or a probe past its first window, makes a remote task fall back to whole files.
    fn reads(&self) -> Result<Vec<Span>> {
        if self.input_spans().is_empty() {
            return Err(Error::argument(
                "snp_pileup task planned without its input spans",
            ));
        }
        // The BAMs and their indexes are opened through `sortase_io` (`sortase_bam::query`).
        let spans = by_file(self.input_spans().iter().map(|s| {
            let end = s.end.map_or(u64::MAX, |e| e.saturating_add(READ_SLACK));
            (s.path.clone(), Some((s.start, end)))
        }));
        Ok(spans.into_iter().map(Span::streamed).collect())
    }
}

impl Task for AgdFlagstatTask {
    const KIND: &'static str = "agd_flagstat";
    type Output = FlagstatPart;

    fn run(&self, rt: &Runtime) -> Result<FlagstatPart> {
        AgdFlagstatTask::run(self, rt)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        Ok(chunk_files(
            &self.input,
            self.chunks.iter(),
            self.duplicate.as_ref(),
        ))
    }
}

impl Task for AgdCountTask {
    const KIND: &'static str = "agd_count";
    type Output = AgdCountPart;

    fn run(&self, rt: &Runtime) -> Result<AgdCountPart> {
        AgdCountTask::run(self, rt)
    }

    fn reads(&self) -> Result<Vec<Span>> {
        Ok(chunk_files(&self.input, self.chunks(), self.duplicate()))
    }
}

impl Task for AgdIdxstatsTask {
    const KIND: &'static str = "agd_idxstats";
    type Output = IdxstatsPart;

    fn run(&self, rt: &Runtime) -> Result<IdxstatsPart> {
        AgdIdxstatsTask::run(self, rt)
    }

    /// The `results` files alone (idxstats reads no `duplicate` group).
    fn reads(&self) -> Result<Vec<Span>> {
        Ok(chunk_files(&self.input, self.chunks.iter(), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_end_is_found_in_a_prefix_or_more_bytes_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        // A header of 3000 @SQ lines (a few blocks uncompressed).
        let mut sam = String::new();
        for i in 0..3000 {
            sam.push_str(&format!(
                "@SQ\tSN:contig_with_a_long_name_{i}\tLN:{}\n",
                1000 + i
            ));
        }
        sam.push_str("r1\t0\tcontig_with_a_long_name_0\t10\t60\t4M\t*\t0\t0\tACGT\tIIII\n");
        let sam_path = dir.path().join("in.sam");
        std::fs::write(&sam_path, sam).unwrap();
        let bam = dir.path().join("in.bam");
        let job = crate::SortJob {
            program: None,
            ..crate::SortJob::new(sam_path.to_str().unwrap(), crate::OutputSpec::to_path(&bam))
        };
        job.run(&Runtime::with_threads(1).unwrap()).unwrap();
        let bytes = std::fs::read(&bam).unwrap();
        let end = bam_header_end(&bytes, true).unwrap().unwrap();
        assert!(end > 0 && end < bytes.len() as u64, "{end}");
        // Blocks end there: the header's last block ends at `end`, a record block follows.
        assert!(sortase_bgzf::parse_header(&bytes[end as usize..]).is_ok());
        for cut in [0, 10, 100, end as usize - 1] {
            assert_eq!(bam_header_end(&bytes[..cut], false).unwrap(), None, "{cut}");
        }
        assert_eq!(
            bam_header_end(&bytes[..end as usize], false).unwrap(),
            Some(end)
        );
        assert!(bam_header_end(&bytes[..100], true).is_err());
        assert!(bam_header_end(b"not a bam at all", true).is_err());
    }
}
