//! Issue 33: an out-of-core sort's heap stays within its memory budget. A counting allocator (this
//! test binary's own) records the most bytes live at once while a sorter with a small budget sorts
//! ~56 MB of records through many runs, background compactions and a final merge of many sources;
//! the peak above what was live before the sort must not exceed the budget (plus the one batch the
//! caller builds before handing it over). The run writers' buffers, the entries' spare capacity and
//! the merge's run readers (fan-in x ~256 KiB) once came on top of the records' budget.

use sortase_bam::RecordBatch;
use sortase_sort::{ranges::RangePlan, RangeSource, SortOptions, SortOrder, Sorter};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn add(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Both blocks exist while the bytes are copied.
        add(new_size);
        let p = System.realloc(ptr, layout, new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// A raw BAM record (with `block_size`) of ~400 bytes at `pos` on reference 0.
fn record(pos: i32, i: u64, out: &mut Vec<u8>) {
    let name = format!("read{i:09}");
    let l_seq = 150u32;
    let mut body = Vec::with_capacity(400);
    body.extend_from_slice(&0i32.to_le_bytes());
    body.extend_from_slice(&pos.to_le_bytes());
    body.push(name.len() as u8 + 1);
    body.push(60);
    body.extend_from_slice(&4680u16.to_le_bytes());
    body.extend_from_slice(&1u16.to_le_bytes()); // one CIGAR op
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&l_seq.to_le_bytes());
    body.extend_from_slice(&(-1i32).to_le_bytes());
    body.extend_from_slice(&(-1i32).to_le_bytes());
    body.extend_from_slice(&0i32.to_le_bytes());
    body.extend_from_slice(name.as_bytes());
    body.push(0);
    body.extend_from_slice(&(l_seq << 4).to_le_bytes()); // 150M
                                                         // Sequence and qualities that vary, so LZ4 does not shrink them to nothing.
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for _ in 0..(l_seq as usize).div_ceil(2) + l_seq as usize {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        body.push(x as u8);
    }
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
}

/// Sorts `RECORDS` generated records with `memory` bytes on two threads: the peak heap above what
/// was live before, one batch's allocation, and the sort's stats.
fn sort_counting(memory: usize) -> (usize, usize, sortase_sort::SortStats) {
    const RECORDS: u64 = 200_000; // ~56 MB of records
    const BATCH: u64 = 500; // ~200 KiB batches
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut sorter = Sorter::new(SortOptions {
        order: SortOrder::Coordinate,
        memory,
        temp_dir: dir.path().to_path_buf(),
        max_fan_in: 64,
        ranges: RangePlan::default(),
    })
    .with_pool(pool);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let mut batch_bytes = 0;
    let mut i = 0u64;
    while i < RECORDS {
        let (mut buf, mut offsets) = (Vec::with_capacity(BATCH as usize * 300), Vec::new());
        for j in i..(i + BATCH).min(RECORDS) {
            offsets.push(buf.len() as u32);
            // Positions spread over the input so that every run covers the whole key space.
            record((j.wrapping_mul(7919) % 1_000_003) as i32, j, &mut buf);
        }
        i += BATCH;
        let end = buf.len();
        let batch = RecordBatch::from_parts(buf, offsets, end, 0);
        batch_bytes = batch_bytes.max(batch.allocated());
        sorter.push(batch).unwrap();
    }
    let (mut records, mut last) = (0u64, i64::MIN);
    let stats = sorter
        .finish_ranges(
            2,
            |_| {},
            |range| {
                // Counted, not kept: the encoded ranges are the caller's memory.
                let (mut n, mut first) = (0u64, None);
                range.for_each(|r| {
                    first.get_or_insert(i32::from_le_bytes(r[8..12].try_into().unwrap()));
                    n += 1;
                    Ok(())
                })?;
                Ok((n, first))
            },
            |(n, first)| {
                records += n;
                if let Some(p) = first {
                    assert!(i64::from(p) >= last, "ranges out of order");
                    last = i64::from(p);
                }
                Ok(())
            },
        )
        .unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert_eq!(records, RECORDS);
    (peak, batch_bytes, stats)
}

#[test]
fn an_out_of_core_sort_keeps_its_heap_within_the_budget() {
    // 24 MiB: a few runs, merged at once; 12 MiB: more runs than the fan-in the budget allows
    // (6), so compactions run in the background while records are read.
    for (memory, compactions) in [(24 << 20, false), (12 << 20, true)] {
        let (peak, batch, stats) = sort_counting(memory);
        assert!(stats.final_fan_in > 2, "several runs merged: {stats:?}");
        assert_eq!(stats.compactions > 0, compactions, "{stats:?}");
        assert!(
            peak <= memory + batch,
            "peak heap {peak} bytes over the {memory}-byte budget (+ one {batch}-byte batch): {stats:?}"
        );
    }
}
