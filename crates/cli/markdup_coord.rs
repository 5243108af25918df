//! Picard's flags of `sortase markdup` (coordinate-sorted input), as
//! [`sortase::markdup::PicardOptions`].

use sortase::markdup::PicardOptions;
use std::path::PathBuf;

/// Picard MarkDuplicates' options.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Coordinate-sorted input (Picard)")]
pub struct CoordArgs {
    /// Largest x/y distance between optical duplicates (Picard OPTICAL_DUPLICATE_PIXEL_DISTANCE).
    #[arg(long = "optical-distance", value_name = "INT", default_value_t = 100)]
    pub optical_distance: i32,
    /// Regex with 3 groups (tile, x, y) matched against read names; `null` turns optical detection
    /// off (Picard READ_NAME_REGEX) [the last three ':'-separated fields].
    #[arg(long = "read-name-regex", value_name = "REGEX")]
    pub read_name_regex: Option<String>,
    /// Largest duplicate set searched for optical duplicates; -1: no limit
    /// (Picard MAX_OPTICAL_DUPLICATE_SET_SIZE).
    #[arg(
        long = "max-optical-set",
        value_name = "INT",
        default_value_t = 300000,
        allow_negative_numbers = true
    )]
    pub max_optical_set: i64,
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
            optical_distance: self.optical_distance,
            read_name_regex: self.read_name_regex.clone(),
            max_optical_set: self.max_optical_set,
        }
    }
}
