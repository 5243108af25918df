//! Output files written under a temporary name next to the target and renamed on success; temporary
//! files and directories are removed on error and cancellation (drop). Every pending name is also
//! kept in a process-wide list so that a process that must exit at once can remove them
//! ([`remove_pending_files`]).

use anyhow::{Context, Result};
use sortase_bgzf::direct_io::DirectWriter;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temporary files to delete if a signal ends the process.
static TEMP_FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn register(path: &Path) {
    TEMP_FILES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(path.to_path_buf());
}

fn unregister(path: &Path) {
    TEMP_FILES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|p| p != path);
}

/// Removes every temporary file and directory still registered (outputs not yet renamed, sort
/// runs). For a process that must exit at once (a second Ctrl-C, or a job blocked on a read that
/// cancellation cannot interrupt); a job that returns normally cleans up after itself.
pub fn remove_pending_files() {
    let pending: Vec<PathBuf> = TEMP_FILES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain(..)
        .collect();
    for p in pending {
        if p.is_dir() {
            remove_dir_now(&p);
        } else {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Creates a new scratch file readable only by its owner: `O_CREAT|O_EXCL` (an existing file or
/// symlink at `path` is an error, never followed or truncated), `O_NOFOLLOW`, mode 0600. One
/// definition for every crate: the sort crate's, which writes the runs.
pub use sortase_sort::run::create_private;

/// Creates a new file that will become an output: like [`create_private`] but with the usual mode
/// (0666 less the umask), since it is renamed to the output's name.
pub fn create_exclusive(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Refuses a directory that other users may write to without the sticky bit (mode o+w, no +t):
/// there anyone can rename or replace our temporary directory (even a 0700 one) after we create it
/// and plant a symlink in its place, so no name inside it is safe. `/tmp` (1777) is fine.
pub fn check_shared_directory(dir: &Path) -> Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(meta) = std::fs::metadata(dir) else {
        return Ok(()); // creating inside it fails with its own message
    };
    let mode = meta.mode();
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        anyhow::bail!(
            "temporary directory {} is writable by all users without the sticky bit (mode {:o}): \
             another user could replace sortase's temporary files; use a private directory with -T \
             (or chmod +t {})",
            dir.display(),
            mode & 0o7777,
            dir.display()
        );
    }
    Ok(())
}

/// A file being written under a temporary name; [`OutputFile::commit`] renames it to the target.
/// A target that exists and is not a regular file (`/dev/null`, `/dev/stdout`, a FIFO) is written in
/// place: renaming over it would replace the device with a regular file.
pub struct OutputFile {
    target: PathBuf,
    /// The temporary file, or `None` when writing in place.
    temp: Option<PathBuf>,
    committed: bool,
}

impl OutputFile {
    /// Creates `.<name>.sortase-<pid>.tmp` next to `target` (or opens a special file in place); if
    /// that name is taken (by anything, a symlink included), `.<name>.sortase-<pid>-<n>.tmp`.
    pub fn create(target: &Path) -> Result<(Self, File)> {
        if std::fs::metadata(target).is_ok_and(|m| !m.is_file()) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(target)
                .with_context(|| format!("{}: cannot open for writing", target.display()))?;
            let out = Self {
                target: target.to_path_buf(),
                temp: None,
                committed: false,
            };
            return Ok((out, file));
        }
        let name = target
            .file_name()
            .with_context(|| format!("{}: not a file name", target.display()))?;
        // `O_EXCL|O_NOFOLLOW`: a file or symlink already at the temporary name (planted, or left by
        // a killed run with the same pid) is skipped, never followed or truncated.
        let mut last_error = None;
        let mut created = None;
        for n in 0..100 {
            let mut temp_name = std::ffi::OsString::from(".");
            temp_name.push(name);
            match n {
                0 => temp_name.push(format!(".sortase-{}.tmp", std::process::id())),
                n => temp_name.push(format!(".sortase-{}-{n}.tmp", std::process::id())),
            }
            let temp = target.with_file_name(temp_name);
            register(&temp);
            match create_exclusive(&temp) {
                Ok(f) => {
                    created = Some((temp, f));
                    break;
                }
                Err(e) => {
                    unregister(&temp);
                    let exists = e.kind() == io::ErrorKind::AlreadyExists;
                    last_error = Some(e);
                    if !exists {
                        break;
                    }
                }
            }
        }
        let Some((temp, file)) = created else {
            let e = last_error.unwrap_or_else(|| io::Error::other("no free temporary name"));
            return Err(e).with_context(|| format!("{}: cannot create", target.display()));
        };
        let out = Self {
            target: target.to_path_buf(),
            temp: Some(temp),
            committed: false,
        };
        Ok((out, file))
    }

    /// The file being written: the temporary name, or the target when it is written in place.
    pub fn written_path(&self) -> &Path {
        self.temp.as_deref().unwrap_or(&self.target)
    }

    /// Renames the temporary file to the target.
    pub fn commit(mut self) -> Result<()> {
        if let Some(temp) = &self.temp {
            std::fs::rename(temp, &self.target).with_context(|| {
                format!(
                    "{}: cannot rename from {}",
                    self.target.display(),
                    temp.display()
                )
            })?;
            unregister(temp);
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let (false, Some(temp)) = (self.committed, &self.temp) {
            let _ = std::fs::remove_file(temp);
            unregister(temp);
        }
    }
}

/// Where output goes: a file (via [`OutputFile`]) or standard output.
pub struct Destination {
    /// The pending file, if not stdout.
    pub file: Option<OutputFile>,
    /// A name for error messages.
    pub name: String,
}

impl Destination {
    /// Opens `path` (`None` or `-`: stdout) and returns the destination and its writer.
    pub fn open(path: Option<&Path>) -> Result<(Self, Box<dyn Write + Send>)> {
        match path {
            Some(p) if p != Path::new("-") => {
                let (file, f) = OutputFile::create(p)?;
                let name = p.display().to_string();
                // A new regular file goes through `DirectWriter` (page cache bypassed once large);
                // a device or FIFO written in place through a plain buffer.
                let writer: Box<dyn Write + Send> = if file.temp.is_some() {
                    Box::new(DirectWriter::new(f))
                } else {
                    Box::new(io::BufWriter::with_capacity(1 << 20, f))
                };
                Ok((
                    Self {
                        file: Some(file),
                        name,
                    },
                    writer,
                ))
            }
            _ => Ok((
                Self {
                    file: None,
                    name: "standard output".into(),
                },
                Box::new(io::BufWriter::with_capacity(1 << 20, io::stdout())),
            )),
        }
    }

    /// Renames the file into place (nothing for stdout).
    pub fn commit(self) -> Result<()> {
        match self.file {
            Some(f) => f.commit(),
            None => Ok(()),
        }
    }
}

/// Removes a temporary directory while other threads may still be creating files in it: the directory
/// is first renamed away (so new files under the old path fail instead of landing after the removal),
/// then removed, retrying if a file appeared between listing and removal.
fn remove_dir_now(dir: &Path) {
    let mut doomed = dir.as_os_str().to_owned();
    doomed.push(".removing");
    let doomed = PathBuf::from(doomed);
    let target = if std::fs::rename(dir, &doomed).is_ok() {
        doomed
    } else {
        dir.to_path_buf()
    };
    for _ in 0..10 {
        if std::fs::remove_dir_all(&target).is_ok() || !target.exists() {
            return;
        }
    }
}

/// A directory for temporary files (sort runs; private, mode 0700) or a staged output, removed with everything in it when dropped
/// (success or error) and on SIGINT/SIGTERM.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates the private (mode 0700) scratch directory `<prefix>.sortase-<pid>-<n>.tmp/` (the
    /// prefix may name a directory: then inside it). A directory that others may write to without
    /// the sticky bit is refused ([`check_shared_directory`]).
    pub fn create(prefix: &Path) -> Result<Self> {
        Self::make(prefix, true)
    }

    /// Creates `<prefix>.sortase-<pid>-<n>.tmp/` with the usual mode (0777 less the umask): an
    /// output being staged (an AGD dataset, a column group), renamed into place when complete.
    pub fn staging(prefix: &Path) -> Result<Self> {
        Self::make(prefix, false)
    }

    fn make(prefix: &Path, private: bool) -> Result<Self> {
        let base = if prefix.is_dir() {
            prefix.join("sortase")
        } else {
            prefix.to_path_buf()
        };
        if private {
            check_shared_directory(base.parent().unwrap_or(Path::new(".")))?;
        }
        let mut builder = std::fs::DirBuilder::new();
        if private {
            builder.mode(0o700);
        }
        for n in 0..1000 {
            let mut name = base.as_os_str().to_owned();
            name.push(format!(".sortase-{}-{n}.tmp", std::process::id()));
            let path = PathBuf::from(name);
            // mkdir fails on any existing name, a symlink included: never followed.
            match builder.create(&path) {
                Ok(()) => {
                    register(&path);
                    return Ok(Self { path });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("cannot create temporary directory {}", path.display())
                    })
                }
            }
        }
        anyhow::bail!(
            "cannot create a temporary directory next to {}",
            base.display()
        )
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        unregister(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_symlink_at_the_output_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let target = dir.path().join("out.bam");
        // The name a first attempt uses, planted as a symlink to the victim.
        let planted = dir
            .path()
            .join(format!(".out.bam.sortase-{}.tmp", std::process::id()));
        symlink(&victim, &planted).unwrap();
        let (pending, mut f) = OutputFile::create(&target).unwrap();
        assert_ne!(pending.written_path(), planted);
        f.write_all(b"output").unwrap();
        drop(f);
        pending.commit().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&target).unwrap(), b"output");
        assert!(std::fs::symlink_metadata(&planted).unwrap().is_symlink());
    }

    #[test]
    fn scratch_files_are_private_and_never_follow_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = dir.path().join("link");
        symlink(&victim, &link).unwrap();
        let e = create_private(&link).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let fresh = dir.path().join("fresh");
        create_private(&fresh).unwrap();
        assert_eq!(mode(&fresh), 0o600);
        // And sort's run files (crates/sort) are created the same way.
        let run = dir.path().join("run");
        sortase_sort::run::create_private(&run).unwrap();
        assert_eq!(mode(&run), 0o600);
        assert!(sortase_sort::run::create_private(&link).is_err());
    }

    #[test]
    fn temporary_directories_are_private_and_skip_planted_names() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        let prefix = dir.path().join("job");
        let planted = dir
            .path()
            .join(format!("job.sortase-{}-0.tmp", std::process::id()));
        symlink(&victim, &planted).unwrap();
        let temp = TempDir::create(&prefix).unwrap();
        assert_ne!(temp.path(), planted);
        assert_eq!(mode(temp.path()), 0o700);
        std::fs::write(temp.path().join("x"), "y").unwrap();
        drop(temp);
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
        // An output being staged keeps the usual mode (the umask decides, as for any output).
        let staged = TempDir::staging(&dir.path().join(".dataset")).unwrap();
        let plain = dir.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        assert_eq!(mode(staged.path()), mode(&plain));
    }

    #[test]
    fn a_directory_writable_by_all_without_the_sticky_bit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = TempDir::create(&shared).err().unwrap().to_string();
        assert!(
            e.contains("writable by all users without the sticky bit"),
            "{e}"
        );
        assert!(e.contains(shared.to_str().unwrap()), "{e}");
        assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
        // A file prefix inside it is refused too; with the sticky bit (as /tmp) it is used.
        assert!(TempDir::create(&shared.join("pre")).is_err());
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let temp = TempDir::create(&shared).unwrap();
        assert_eq!(mode(temp.path()), 0o700);
    }
}
