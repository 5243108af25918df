//! The runtime's promises (issue 16): each job uses its own runtime's thread count, a memory pool
//! shared by two jobs keeps their sum within the budget, and cancelling a sort stops it and removes
//! its temporary files and partial output.

use sortase::{ErrorKind, MemoryPool, OutputSpec, Runtime, SortJob};
use std::path::{Path, PathBuf};

/// A SAM file of `n` records on 3 references in a scrambled order, with sequences and qualities.
fn write_sam(path: &Path, n: usize) {
    let mut s = String::new();
    for (i, len) in [1_000_000u32, 2_000_000, 500_000].iter().enumerate() {
        s.push_str(&format!("@SQ\tSN:chr{}\tLN:{len}\n", i + 1));
    }
    for i in 0..n {
        let x = (i as u64).wrapping_mul(2_654_435_761) % 1_000_003;
        let (tid, pos) = (x % 3, 1 + x % 400_000);
        let flag = if x.is_multiple_of(5) { 16 } else { 0 };
        s.push_str(&format!(
            "read{i}\t{flag}\tchr{}\t{pos}\t60\t50M\t*\t0\t0\t{}\t{}\tNM:i:{}\n",
            tid + 1,
            "ACGTTGCAAC".repeat(5),
            "IIIIIHHHHH".repeat(5),
            x % 4
        ));
    }
    std::fs::write(path, s).unwrap();
}

/// Opens `fifo` for writing once a reader has opened it (polled, so a reader that never comes fails
/// the test instead of hanging it), in blocking mode.
fn open_fifo_writer(fifo: &Path) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let started = std::time::Instant::now();
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(f) => {
                use std::os::fd::AsRawFd;
                // SAFETY: fcntl(2) on a descriptor we own, clearing O_NONBLOCK.
                unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, 0) };
                return f;
            }
            // ENXIO: no reader yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                assert!(
                    started.elapsed().as_secs() < 300,
                    "the job never opened {fifo:?}"
                );
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("{fifo:?}: {e}"),
        }
    }
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn job(input: &Path, output: PathBuf, temp: &Path) -> SortJob {
    let mut job = SortJob::new(input.to_str().unwrap(), OutputSpec::to_path(output));
    job.temp_prefix = Some(temp.to_path_buf());
    job
}

/// Two jobs in one process with different thread counts each run their parallel steps on their own
/// count (rayon's global pool would have kept the first count for both), before, after and at the
/// same time as each other.
#[test]
fn jobs_use_their_own_runtime_thread_counts() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.sam");
    write_sam(&input, 2_000);
    let one = Runtime::with_threads(1).unwrap();
    let three = Runtime::with_threads(3).unwrap();
    let a = job(&input, dir.path().join("a.bam"), dir.path())
        .run(&one)
        .unwrap();
    let b = job(&input, dir.path().join("b.bam"), dir.path())
        .run(&three)
        .unwrap();
    assert_eq!((a.threads, b.threads), (1, 3));
    let (c, d) = std::thread::scope(|s| {
        let c = s.spawn(|| job(&input, dir.path().join("c.bam"), dir.path()).run(&three));
        let d = s.spawn(|| job(&input, dir.path().join("d.bam"), dir.path()).run(&one));
        (c.join().unwrap().unwrap(), d.join().unwrap().unwrap())
    });
    assert_eq!((c.threads, d.threads), (3, 1));
    let bytes = std::fs::read(dir.path().join("a.bam")).unwrap();
    for n in ["b.bam", "c.bam", "d.bam"] {
        assert!(std::fs::read(dir.path().join(n)).unwrap() == bytes, "{n}");
    }
}

/// Two sorts at the same time on runtimes that share one 16 MiB pool: both spill (neither could hold
/// its input; each reserves a quarter of the pool for its final phase, the rest is for records), the pool's peak stays within its limit, and both outputs equal a sort alone.
#[test]
fn a_shared_memory_pool_keeps_two_jobs_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.sam");
    write_sam(&input, 100_000); // ~19 MB of BAM records
    let pool = MemoryPool::new(16 << 20);
    let rt = |threads| {
        Runtime::builder()
            .threads(threads)
            .memory_pool(pool.clone())
            .build()
            .unwrap()
    };
    let (rt1, rt2) = (rt(2), rt(1));
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| job(&input, dir.path().join("a.bam"), dir.path()).run(&rt1));
        let b = s.spawn(|| job(&input, dir.path().join("b.bam"), dir.path()).run(&rt2));
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    assert!(a.runs_spilled > 0 && b.runs_spilled > 0, "{a:?} {b:?}");
    assert!(
        pool.peak() <= pool.limit(),
        "peak {} > limit {}",
        pool.peak(),
        pool.limit()
    );
    // Beyond the two final-phase reserves (a quarter of the pool each): records were held.
    assert!(pool.peak() > pool.limit() / 2, "peak {}", pool.peak());
    assert_eq!(pool.reserved(), 0, "every reservation given back");
    let alone = Runtime::with_threads(2).unwrap();
    job(&input, dir.path().join("c.bam"), dir.path())
        .run(&alone)
        .unwrap();
    let want = std::fs::read(dir.path().join("c.bam")).unwrap();
    assert!(std::fs::read(dir.path().join("a.bam")).unwrap() == want);
    assert!(std::fs::read(dir.path().join("b.bam")).unwrap() == want);
}

/// Cancelling an out-of-core sort from another thread while it runs: it returns `Cancelled`, and
/// neither its temporary directory (with its runs) nor a partial output is left.
///
/// Deterministic (issue 34): the input is a FIFO that this test feeds, so the sort cannot finish
/// before the test lets it. The feeder writes three quarters of the records, waits until runs have
/// been spilled, cancels, and only then writes the rest: the sort is provably running when the flag
/// is set, and still has batches to read after it, at whose boundaries it must see the flag.
#[test]
fn cancelling_a_sort_removes_its_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("in.sam");
    write_sam(&text, 200_000);
    let data = std::fs::read(&text).unwrap();
    std::fs::remove_file(&text).unwrap();
    let input = dir.path().join("in.fifo");
    let c_path = std::ffi::CString::new(input.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) on a NUL-terminated path in our own temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let rt = Runtime::builder()
        .threads(2)
        .memory(1 << 20)
        .build()
        .unwrap();
    let feeder = {
        let (rt, work, input) = (rt.clone(), work.clone(), input.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            let mut fifo = open_fifo_writer(&input);
            let cut = data.len() * 3 / 4;
            fifo.write_all(&data[..cut]).unwrap();
            let spilled = || {
                std::fs::read_dir(&work)
                    .unwrap()
                    .filter_map(|e| e.ok())
                    .filter(|e| e.path().is_dir())
                    .any(|d| std::fs::read_dir(d.path()).map_or(0, |r| r.count()) > 2)
            };
            // A bound only against a hang: the sort cannot end while the FIFO is open.
            let started = std::time::Instant::now();
            while !spilled() {
                assert!(started.elapsed().as_secs() < 300, "no runs were spilled");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            rt.cancel();
            // The rest, after the flag: the sort is reading it when it must stop (EPIPE once it
            // has stopped reading is expected).
            let _ = fifo.write_all(&data[cut..]);
        })
    };
    let out = work.join("out.bam");
    let r = job(&input, out.clone(), &work).run(&rt);
    feeder.join().unwrap();
    let e = r.expect_err("the sort was cancelled");
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    assert!(listing(&work).is_empty(), "left {:?}", listing(&work));
}
