//! Picard's flags of `sortase markdup` (coordinate-sorted input): those of
//! [`sortase::markdup::PicardOptions`] (declared on its fields) and `--max-memory`, under their
//! heading.

use sortase::markdup::PicardOptions;
use std::path::PathBuf;

/// Picard MarkDuplicates' options.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Coordinate-sorted input (Picard)")]
pub struct CoordArgs {
    /// The job's Picard options but the metrics file (`--metrics`, `sortase markdup`'s).
    #[command(flatten)]
    pub options: PicardOptions,
    /// Memory for the read ends (K/M/G suffix), the job's memory pool; beyond it they are sorted
    /// into runs under -T and merged back at the end (about 58 MB per million records are kept
    /// otherwise).
    #[arg(long = "max-memory", value_name = "SIZE", default_value = "2G")]
    pub max_memory: String,
}

impl CoordArgs {
    /// The job's Picard options, with the metrics file `metrics` (`--metrics`, of both modes);
    /// `command_line` heads it. `--max-memory` is not among them: it sizes the runtime's memory
    /// pool.
    pub fn options(&self, metrics: Option<PathBuf>, command_line: String) -> PicardOptions {
        PicardOptions {
            metrics,
            metrics_command_line: Some(command_line),
            ..self.options.clone()
        }
    }
}
