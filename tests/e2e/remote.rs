//! Remote inputs: `s3://` (a local S3 endpoint, moto) and `http://` (a tiny server with Range,
//! tests/remote_server.py) give what the same local file gives, a region query fetches a fraction
//! of the file (counted by sortase, `SORTASE_REMOTE_STATS=1`; over HTTP also by the server), and a
//! missing object, bad credentials or an unreachable server fail with one line naming the URL.
//! Credentials come from the environment or from a profile of the shared AWS files, and no error
//! shows a secret. A whole-file job fetches each byte about once.

use crate::common::{line, p, python, run, tempdir, Rng};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// A server of tests/remote_server.py, stopped (its standard input closed) on drop.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    /// The first line it printed: the URL (and for S3 a key id and secret).
    words: Vec<String>,
}

impl Server {
    fn start(args: &[&str]) -> Option<Server> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/remote_server.py");
        let mut child = Command::new(python())
            .arg(script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let mut first = String::new();
        let mut out = BufReader::new(child.stdout.take()?);
        out.read_line(&mut first).ok()?;
        if first.trim().is_empty() {
            let mut err = String::new();
            let _ = child.stderr.take()?.read_to_string(&mut err);
            let _ = child.wait();
            eprintln!("remote_server.py {args:?} did not start: {err}");
            return None;
        }
        let stdin = child.stdin.take();
        Some(Server {
            child,
            stdin,
            words: first.split_whitespace().map(String::from).collect(),
        })
    }

    /// The environment that points sortase at this S3 server with its credentials.
    fn s3_env(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("AWS_ENDPOINT_URL", self.words[0].as_str()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", self.words[1].as_str()),
            ("AWS_SECRET_ACCESS_KEY", self.words[2].as_str()),
        ]
    }

    /// Stops the server and returns its standard error.
    fn stop(mut self) -> String {
        drop(self.stdin.take());
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let _ = self.child.wait();
        err
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.stdin.take().is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A coordinate-sorted, indexed BAM of random reads over chr1 (2 Mb) and chr2 (1 Mb) plus unmapped
/// ones: a few MB, so a 100 kb region is a small part of it.
fn make_bam(dir: &Path) -> PathBuf {
    let mut rng = Rng::new(29);
    let mut sam = String::from(
        "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:2000000\n@SQ\tSN:chr2\tLN:1000000\n",
    );
    for i in 0..24_000 {
        let (chr, len) = if i % 3 == 2 {
            ("chr2", 1_000_000)
        } else {
            ("chr1", 2_000_000)
        };
        let pos = (1 + rng.below(len - 200)).to_string();
        let flag = if i % 5 == 0 { "16" } else { "0" };
        let mapq = rng.below(61).to_string();
        sam += &line(&[
            &format!("r{i}"),
            flag,
            chr,
            &pos,
            &mapq,
            "100M",
            "*",
            "0",
            "0",
            &rng.bases(100),
            &rng.quals(100),
        ]);
    }
    for i in 0..500 {
        sam += &crate::common::unmapped(&format!("u{i}"), &rng.bases(80));
    }
    let sam_path = dir.join("reads.sam");
    std::fs::write(&sam_path, sam).unwrap();
    let bam = dir.join("x.bam");
    run_ok(&["sort", "-o", p(&bam), p(&sam_path)], &[]);
    run_ok(&["index", p(&bam)], &[]);
    bam
}

fn sortase_env(args: &[&str], env: &[(&str, &str)]) -> crate::common::Run {
    let mut cmd: Vec<std::ffi::OsString> = Vec::new();
    for (k, v) in env {
        cmd.push(format!("{k}={v}").into());
    }
    cmd.push(crate::common::sortase_bin().into_os_string());
    // `env -i`-like isolation is not wanted (PATH, HOME stay); credentials only from `env`.
    let mut prefix: Vec<std::ffi::OsString> = vec![
        "-u".into(),
        "AWS_ACCESS_KEY_ID".into(),
        "-u".into(),
        "AWS_SECRET_ACCESS_KEY".into(),
        "-u".into(),
        "AWS_SESSION_TOKEN".into(),
        "-u".into(),
        "AWS_PROFILE".into(),
    ];
    prefix.extend(cmd);
    run(Path::new("/usr/bin/env"), &prefix, args)
}

fn run_ok(args: &[&str], env: &[(&str, &str)]) -> crate::common::Run {
    sortase_env(args, env).expect_ok()
}

/// The `fetched N bytes` of `SORTASE_REMOTE_STATS=1`.
fn fetched(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("sortase: remote: fetched "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no fetched-bytes line in {stderr:?}"))
}

/// The failure of a run: non-zero exit and exactly one line on stderr, which is returned.
fn one_line_failure(r: &crate::common::Run) -> String {
    assert!(!r.ok(), "`{}` succeeded", r.cmd);
    let lines: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| !l.starts_with("sortase: remote: fetched"))
        .collect();
    assert_eq!(lines.len(), 1, "`{}`: not one line: {:?}", r.cmd, r.stderr);
    lines[0].to_string()
}

fn server_or_skip(args: &[&str]) -> Option<Server> {
    let s = Server::start(args);
    if s.is_none() {
        crate::common::skip("tests/remote_server.py could not start (moto missing?)");
    }
    s
}

#[test]
fn s3_inputs_equal_local_files_and_region_queries_fetch_little() {
    let dir = tempdir();
    let bam = make_bam(dir.path());
    let bai = dir.path().join("x.bam.bai");
    let size = std::fs::metadata(&bam).unwrap().len();
    let index_size = std::fs::metadata(&bai).unwrap().len();
    // Bad inputs: not BAM at all, and a BAM cut in the middle of a block.
    let junk = dir.path().join("junk.bam");
    let mut rng = Rng::new(7);
    std::fs::write(&junk, rng.bases(50_000).replace('A', "\u{1}")).unwrap();
    let truncated = dir.path().join("truncated.bam");
    let whole_bytes = std::fs::read(&bam).unwrap();
    std::fs::write(&truncated, &whole_bytes[..whole_bytes.len() / 2]).unwrap();
    let Some(server) = server_or_skip(&["s3", "bkt", p(&bam), p(&bai), p(&junk), p(&truncated)])
    else {
        return;
    };
    let (endpoint, key, secret) = (&server.words[0], &server.words[1], &server.words[2]);
    let mut env = server.s3_env();
    env.push(("SORTASE_REMOTE_STATS", "1"));
    let url = "s3://bkt/x.bam";
    let region = "chr1:1-100000";

    let local = run_ok(&["view", p(&bam), region], &[]).text();
    assert!(local.lines().count() > 100, "the region holds records");
    let remote = run_ok(&["view", url, region], &env);
    assert_eq!(remote.text(), local, "view {url} {region}");
    let bytes = fetched(&remote.stderr);
    eprintln!("view {url} {region}: fetched {bytes} of {size} bytes");
    // The header's block, the index and the region's blocks (here ~130 KB): not the file.
    assert!(size > 2_000_000, "the test file is {size} bytes");
    assert!(
        bytes < size / 4,
        "fetched {bytes} bytes of a {size}-byte file"
    );

    let count = run_ok(&["view", "-c", url, region], &env);
    assert_eq!(
        count.text(),
        run_ok(&["view", "-c", p(&bam), region], &[]).text()
    );
    assert!(fetched(&count.stderr) < size / 4);

    // Whole-file jobs stream the object (count: byte ranges on all threads), each byte fetched
    // about once: the planner's probes at the range cuts and the ends of the ranges share the
    // windows their neighbours fetched. Readers running at once may both fetch the few windows
    // around a cut before either is kept: 1.0x alone, up to 1.18x seen on a loaded machine.
    let about_once = |what: &str, n: u64| {
        eprintln!("{what} {url}: fetched {n} of {size} bytes");
        assert!(
            n >= size && n <= size + size / 4 + index_size,
            "{what}: fetched {n} bytes of a {size}-byte file"
        );
    };
    for args in [
        &["view", "-c", "-@", "3"][..],
        &["view", "-c", "-q", "30"][..],
        &["flagstat"][..],
        &["flagstat", "-@", "4"][..],
    ] {
        let ours = run_ok(&[args, &[url]].concat(), &env);
        let theirs = run_ok(&[args, &[p(&bam)]].concat(), &[]);
        assert_eq!(ours.text(), theirs.text(), "{args:?} {url}");
        about_once(&format!("{args:?}"), fetched(&ours.stderr));
    }
    // idxstats reads the index and the header only.
    let stats = run_ok(&["idxstats", url], &env);
    assert_eq!(stats.text(), run_ok(&["idxstats", p(&bam)], &[]).text());
    assert!(fetched(&stats.stderr) < size / 4);
    // Whole file to SAM, and as the input of sort.
    let whole = run_ok(&["view", url], &env);
    assert_eq!(whole.text(), run_ok(&["view", p(&bam)], &[]).text());
    about_once("view", fetched(&whole.stderr));
    let sorted = dir.path().join("by_name.sam");
    let sort = run_ok(
        &["sort", "--no-PG", "-n", "-O", "sam", "-o", p(&sorted), url],
        &env,
    );
    about_once("sort -n", fetched(&sort.stderr));
    let local_sorted = dir.path().join("by_name_local.sam");
    run_ok(
        &[
            "sort",
            "--no-PG",
            "-n",
            "-O",
            "sam",
            "-o",
            p(&local_sorted),
            p(&bam),
        ],
        &[],
    );
    assert_eq!(
        std::fs::read(&sorted).unwrap(),
        std::fs::read(&local_sorted).unwrap()
    );

    // Errors: one line naming the URL; the secret is never shown.
    let missing = one_line_failure(&sortase_env(&["view", "s3://bkt/nope.bam"], &env));
    assert!(
        missing.contains("s3://bkt/nope.bam") && missing.contains("no such object"),
        "{missing}"
    );
    let mut bad = env.clone();
    bad[3] = ("AWS_SECRET_ACCESS_KEY", "not-the-secret-1234");
    let denied = sortase_env(&["view", "-c", url, region], &bad);
    let denied = one_line_failure(&denied);
    assert!(
        denied.contains(url) && denied.contains("access denied"),
        "{denied}"
    );
    assert!(!denied.contains("not-the-secret-1234") && !denied.contains(secret.as_str()));
    let no_index = one_line_failure(&sortase_env(&["view", "s3://bkt/x.bam.bai", region], &env));
    assert!(no_index.contains("s3://bkt/x.bam.bai"), "{no_index}");
    // Not BAM, and truncated: one line naming the URL, no output left behind.
    for name in ["junk.bam", "truncated.bam"] {
        let bad_url = format!("s3://bkt/{name}");
        for args in [&["view", "-c"][..], &["flagstat"][..]] {
            let line = one_line_failure(&sortase_env(&[args, &[bad_url.as_str()]].concat(), &env));
            assert!(line.contains(&bad_url), "{args:?} {bad_url}: {line}");
        }
        let out = dir.path().join(format!("{name}.sorted.bam"));
        let line = one_line_failure(&sortase_env(&["sort", "-o", p(&out), &bad_url], &env));
        assert!(line.contains(&bad_url), "sort {bad_url}: {line}");
        assert!(!out.exists(), "sort {bad_url} left {}", out.display());
    }

    // Credentials from a profile of the shared files (no key in the environment), the endpoint from
    // AWS_ENDPOINT_URL_S3.
    let credentials = dir.path().join("credentials");
    let config = dir.path().join("config");
    let write_profile = |secret: &str| {
        std::fs::write(
            &credentials,
            format!(
                "[default]\naws_access_key_id = AKIANOTTHISONE\naws_secret_access_key = nope\n\
                 [moto]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n"
            ),
        )
        .unwrap();
    };
    std::fs::write(&config, "[profile moto]\nregion = us-east-1\n").unwrap();
    write_profile(secret);
    let profile_env = [
        ("AWS_ENDPOINT_URL_S3", endpoint.as_str()),
        ("AWS_SHARED_CREDENTIALS_FILE", p(&credentials)),
        ("AWS_CONFIG_FILE", p(&config)),
        ("AWS_PROFILE", "moto"),
        ("SORTASE_REMOTE_STATS", "1"),
    ];
    let by_profile = run_ok(&["view", "-c", url, region], &profile_env);
    assert_eq!(by_profile.text(), count.text(), "view -c with AWS_PROFILE");
    write_profile("a-wrong-secret-5678");
    let line = one_line_failure(&sortase_env(&["view", "-c", url, region], &profile_env));
    assert!(
        line.contains(url) && line.contains("access denied"),
        "{line}"
    );
    assert!(
        !line.contains("a-wrong-secret-5678") && !line.contains(secret.as_str()),
        "{line}"
    );
    drop(server);
}

/// `sortase fq2bam` reads its FASTQ from `s3://` (streamed by ranged reads; the index stays a local
/// file): the records and header of the same reads read locally, but for minimap2's `@PG CL:`,
/// which names the reads as given; an `s3://` index is refused with one line.
#[test]
fn fq2bam_reads_s3_fastq() {
    let dir = tempdir();
    crate::fq2bam::dataset(dir.path(), 400);
    let (r1, r2, fa) = (
        dir.path().join("r1.fq"),
        dir.path().join("r2.fq"),
        dir.path().join("ref.fa"),
    );
    let Some(server) = server_or_skip(&["s3", "bkt", p(&r1), p(&r2), p(&fa)]) else {
        return;
    };
    let env = server.s3_env();
    let (local, remote) = (dir.path().join("local.bam"), dir.path().join("remote.bam"));
    let base = ["fq2bam", "-@", "2", "--no-PG", "-x", p(&fa)];
    run_ok(
        &[&base[..], &["-o", p(&local), p(&r1), p(&r2)]].concat(),
        &[],
    );
    let urls = ["s3://bkt/r1.fq", "s3://bkt/r2.fq"];
    run_ok(&[&base[..], &["-o", p(&remote)], &urls[..]].concat(), &env);
    let records = |bam: &Path| run_ok(&["view", p(bam)], &[]).text();
    assert_eq!(records(&remote), records(&local));
    assert!(records(&local).lines().count() >= 800);
    let header = |bam: &Path| run_ok(&["view", "-H", "--no-PG", p(bam)], &[]).text();
    let named = header(&local)
        .replace(&format!(" {}", p(&r1)), &format!(" {}", urls[0]))
        .replace(&format!(" {}", p(&r2)), &format!(" {}", urls[1]));
    assert_eq!(header(&remote), named);
    let refused = sortase_env(
        &[
            "fq2bam",
            "-x",
            "s3://bkt/ref.fa",
            "-o",
            p(&remote),
            urls[0],
            urls[1],
        ],
        &env,
    );
    let line = one_line_failure(&refused);
    assert!(
        line.contains("s3://bkt/ref.fa") && line.contains("local file"),
        "{line}"
    );
}

#[test]
fn http_inputs_equal_local_files() {
    let dir = tempdir();
    let bam = make_bam(dir.path());
    let size = std::fs::metadata(&bam).unwrap().len();
    let Some(server) = server_or_skip(&["http", p(dir.path())]) else {
        return;
    };
    let url = format!("{}/x.bam", server.words[0]);
    let env = [("SORTASE_REMOTE_STATS", "1")];
    let region = "chr1:1-100000";
    let mut total = 0;
    for args in [
        &["view", "-c"][..],
        &["view", "-c", "-f", "16", "-@", "2"][..],
        &["flagstat"][..],
        &["view", "-c", "chr2:500000-600000"][..],
        &["view", region][..],
    ] {
        let (ours, theirs) = if args.len() > 1 && args[args.len() - 1].contains(':') {
            let (opts, r) = args.split_at(args.len() - 1);
            (
                run_ok(&[opts, &[url.as_str()], r].concat(), &env),
                run_ok(&[opts, &[p(&bam)], r].concat(), &[]),
            )
        } else {
            (
                run_ok(&[args, &[url.as_str()]].concat(), &env),
                run_ok(&[args, &[p(&bam)]].concat(), &[]),
            )
        };
        assert_eq!(ours.text(), theirs.text(), "{args:?} {url}");
        let n = fetched(&ours.stderr);
        eprintln!("{args:?} {url}: fetched {n} of {size} bytes");
        if args.last() == Some(&region) {
            assert!(n < size / 4, "fetched {n} bytes of a {size}-byte file");
        }
        total += n;
    }
    let missing = format!("{}/nope.bam", server.words[0]);
    let line = one_line_failure(&sortase_env(&["flagstat", &missing], &env));
    assert!(
        line.contains(&missing) && line.contains("no such object"),
        "{line}"
    );
    // What the server sent is what sortase counted.
    let served: u64 = server
        .stop()
        .lines()
        .find_map(|l| l.strip_prefix("served "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the server's count");
    assert_eq!(served, total, "bytes served vs bytes sortase counted");
    // Nothing listens any more: a network failure.
    let line = one_line_failure(&sortase_env(&["view", "-c", &url], &env));
    assert!(
        line.contains(&url) && line.contains("cannot fetch"),
        "{line}"
    );
}
