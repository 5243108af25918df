//! `sortase markdup` on coordinate-sorted input: Picard MarkDuplicates' algorithm (to be written).

use crate::input::Input;
use crate::markdup::MarkdupArgs;
use crate::progress::Progress;
use anyhow::{bail, Result};

/// Picard MarkDuplicates' options.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Coordinate-sorted input (Picard)")]
pub struct CoordArgs {}

/// Marks duplicates in coordinate-sorted `input`.
pub fn run(
    _args: &MarkdupArgs,
    _input: Input,
    input_name: &str,
    _threads: usize,
    _progress: &Progress,
) -> Result<()> {
    bail!("{input_name}: coordinate-sorted duplicate marking is not written yet")
}
