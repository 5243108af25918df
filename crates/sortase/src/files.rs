//! Output files written under a temporary name next to the target and renamed on success; temporary
//! files and directories are removed on error and cancellation (drop). Every pending name is also
//! kept in a process-wide list so that a process that must exit at once can remove them
//! ([`remove_pending_files`]).

use anyhow::{Context, Result};
use sortase_bgzf::direct_io::DirectWriter;
use std::fs::File;
use std::io::{self, Write};
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
    /// Creates `.<name>.sortase-<pid>.tmp` next to `target` (or opens a special file in place).
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
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".sortase-{}.tmp", std::process::id()));
        let temp = target.with_file_name(temp_name);
        register(&temp);
        let file = match File::create(&temp) {
            Ok(f) => f,
            Err(e) => {
                unregister(&temp);
                return Err(e).with_context(|| format!("{}: cannot create", target.display()));
            }
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

/// A private directory for temporary files (sort runs), removed with everything in it when dropped
/// (success or error) and on SIGINT/SIGTERM.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<prefix>.sortase-<pid>-<n>.tmp/` (the prefix may name a directory: then inside it).
    pub fn create(prefix: &Path) -> Result<Self> {
        let base = if prefix.is_dir() {
            prefix.join("sortase")
        } else {
            prefix.to_path_buf()
        };
        for n in 0..1000 {
            let mut name = base.as_os_str().to_owned();
            name.push(format!(".sortase-{}-{n}.tmp", std::process::id()));
            let path = PathBuf::from(name);
            match std::fs::create_dir(&path) {
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
