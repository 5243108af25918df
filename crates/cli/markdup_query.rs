//! `sortase markdup` on query-grouped input: samblaster's algorithm (to be written).

use crate::input::Input;
use crate::markdup::MarkdupArgs;
use crate::progress::Progress;
use anyhow::{bail, Result};

/// samblaster's own options.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Query-grouped input (samblaster)")]
pub struct QueryArgs {}

/// Marks duplicates in query-grouped `input`.
pub fn run(
    _args: &MarkdupArgs,
    _input: Input,
    input_name: &str,
    _threads: usize,
    _progress: &Progress,
) -> Result<()> {
    bail!("{input_name}: query-grouped duplicate marking is not written yet")
}
