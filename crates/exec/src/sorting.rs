//! The frame of a job that sorts records out of core on the runtime (`sortase sort`, `agd sort`):
//! the sorter gets its share of the runtime's memory pool ([`budgeted_sorter`]: a reserve for the
//! final phase is taken first, the records get the rest), its temporary runs go to a private
//! temporary directory, and its final phase ([`SortFrame::finish_ranges`]) hands the key ranges to
//! the job's encoder and sink, returning the heap's free pages to the kernel when the merge starts.

use crate::error::Result;
use crate::files::TempDir;
use crate::memory::Reservation;
use crate::options::PhaseClock;
use crate::output::OutFormat;
use crate::runtime::{CancelFlag, Runtime};
use sortase_bam::RecordBatch;
use sortase_bgzf::CompressionLevel;
use sortase_sort::{Budget, RangeRecords, SortError, SortOptions, SortOrder, SortStats, Sorter};

/// `--max-fan-in N`'s check: the final merge must be able to open at least two runs.
pub fn check_max_fan_in(max_fan_in: usize) -> Result<()> {
    if max_fan_in < 2 {
        crate::error::bail_argument!("--max-fan-in {max_fan_in}: must be at least 2");
    }
    Ok(())
}

/// Returns the heap's free pages to the kernel (glibc `malloc_trim`). Called when an out-of-core
/// sort starts its final merge: the read phase's batches were freed into the arenas of the threads
/// that allocated them, where the final phase's new threads cannot reuse them. On the large bench BAM
/// with `-u --max-memory 228M` peak RSS was 308-350 MiB without it and 262-280 MiB with it.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free heap pages; it takes the allocator's locks itself.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `sortase sort`'s and `agd sort`'s sorter: `reserve` bytes of `rt`'s pool are taken first for the
/// final phase (waited for; returned, to be held until the sort ends) and the records get the rest
/// through a [`PoolBudget`]. `name` labels the reservations.
pub fn budgeted_sorter(
    rt: &Runtime,
    name: &str,
    order: SortOrder,
    reserve: usize,
    temp_dir: &std::path::Path,
    max_fan_in: usize,
) -> Result<(Reservation, Sorter)> {
    let mut final_reserve = rt.memory().reservation(&format!("{name}: final phase"));
    let cancel = rt.cancel_flag().clone();
    if final_reserve
        .grow_waiting(reserve, || cancel.is_cancelled())
        .is_err()
    {
        rt.check_cancelled()?;
    }
    let record_memory = rt.memory().limit().saturating_sub(reserve);
    let budget = PoolBudget::new(rt, &format!("{name}: records"), record_memory);
    let sorter = Sorter::new(SortOptions {
        order,
        memory: record_memory,
        temp_dir: temp_dir.to_path_buf(),
        max_fan_in,
        ranges: Default::default(),
    })
    .with_budget(Box::new(budget))
    .with_pool(rt.shared_pool())
    .with_cancel(rt.cancel_flag().shared());
    Ok((final_reserve, sorter))
}

/// A sort in progress: the sorter, with the temporary directory of its runs and the final phase's
/// reserve, both held until the job drops what [`SortFrame::finish_ranges`] returns.
pub struct SortFrame {
    sorter: Sorter,
    held: Held,
}

/// The temporary directory and the final phase's reserve of a finished sort: dropping it removes
/// the directory and returns the reserve to the pool.
pub struct Held {
    _temp: TempDir,
    _reserve: Reservation,
}

impl SortFrame {
    /// A sorter in `order` for `rt` (see [`budgeted_sorter`]), its runs in `temp`.
    pub fn open(
        rt: &Runtime,
        name: &str,
        order: SortOrder,
        reserve: usize,
        temp: TempDir,
        max_fan_in: usize,
    ) -> Result<Self> {
        let (reserve, sorter) = budgeted_sorter(rt, name, order, reserve, temp.path(), max_fan_in)?;
        Ok(Self {
            sorter,
            held: Held {
                _temp: temp,
                _reserve: reserve,
            },
        })
    }

    /// Threads the sorter uses.
    pub fn threads(&self) -> usize {
        self.sorter.threads()
    }

    /// Gives the sorter one batch of records.
    pub fn push(&mut self, batch: RecordBatch) -> std::result::Result<(), SortError> {
        self.sorter.push(batch)
    }

    /// The final phase on `threads` threads (`Sorter::finish_ranges`), its phases told to `clock`;
    /// the heap's free pages go back to the kernel when the merge starts.
    pub fn finish_ranges<T: Send>(
        self,
        threads: usize,
        clock: &mut PhaseClock,
        encode: impl Fn(&mut RangeRecords<'_>) -> std::result::Result<T, SortError> + Sync,
        sink: impl FnMut(T) -> std::result::Result<(), SortError>,
    ) -> std::result::Result<(SortStats, Held), SortError> {
        let phase = |p: &str| {
            if p == "merge" {
                release_free_memory();
            }
            clock.next(p)
        };
        let stats = self.sorter.finish_ranges(threads, phase, encode, sink)?;
        Ok((stats, self.held))
    }
}

/// The sorter's records budget: a reservation from the runtime's pool (`sortase sort`'s, `agd
/// sort`'s and `fq2bam`'s); a request the cap can never grant is refused at once.
pub struct PoolBudget {
    reservation: Reservation,
    cancel: CancelFlag,
    /// The records' share of the pool: the whole pool less the final phase's reserve, which the sort
    /// holds until it ends.
    cap: usize,
}

impl PoolBudget {
    /// A budget of at most `cap` bytes from `rt`'s pool.
    pub fn new(rt: &Runtime, consumer: &str, cap: usize) -> Self {
        Self {
            reservation: rt.memory().reservation(consumer),
            cancel: rt.cancel_flag().clone(),
            cap,
        }
    }
}

impl Budget for PoolBudget {
    fn try_grow(&mut self, n: usize) -> bool {
        self.reservation.try_grow(n).is_ok()
    }

    fn grow_waiting(&mut self, n: usize) -> bool {
        // More than the records' share can never be freed for us (the final phase's reserve is our
        // own): refuse, and the sorter makes the batch a run of its own. Waiting here hung
        // `sort -@ 2 -m 1M` once a recycled chunk buffer made one batch 1.7 MB.
        if self.reservation.size() + n > self.cap {
            return false;
        }
        let cancel = self.cancel.clone();
        self.reservation
            .grow_waiting(n, || cancel.is_cancelled())
            .is_ok()
    }

    /// Called once the sorter has dropped the records of a spilled run: the batches' buffers go
    /// back to the kernel, not only to the allocator. glibc keeps the freed chunks in the arenas of
    /// the inflating threads that allocated them, and the next batches do not fill those holes: on
    /// small16.bam at `--max-memory 228M` peak RSS crept from 220 to 291 MiB over the read phase
    /// while the records held stayed at the budget.
    fn free(&mut self) {
        self.reservation.free();
        release_free_memory();
    }
}

/// Memory the final phase holds besides the records: up to `threads + 1` encoded ranges (being
/// encoded, done and waiting, being written; see `Sorter::finish_ranges`) and the output writer's
/// buffers. It is reserved from the pool before records so that the whole sort stays within the
/// budget (out of core with `-u`, 16 MiB ranges took peak RSS ~45 MiB past the bound of issue 3 at a
/// 228 MiB budget); at most a quarter of the budget.
pub fn final_phase_reserve(memory: usize, threads: usize, format: OutFormat) -> usize {
    let range = sortase_sort::ranges::RANGE_BYTES as usize;
    let encoded = match format {
        OutFormat::Bam(level) if level == CompressionLevel::STORED => range,
        OutFormat::Bam(_) => range / 2,
        OutFormat::Sam => range * 2,
        OutFormat::Cram => range,
        // Ranges being cut into dataset chunks (their columns about as much again as the
        // records); no output writer.
        OutFormat::Agd => return ((threads + 1) * 2 * range).min(memory / 4),
    };
    ((threads + 1) * encoded + sortase_bgzf::direct_io::BUFFER_BYTES).min(memory / 4)
}
