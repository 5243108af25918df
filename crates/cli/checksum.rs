//! `sortase checksum`: samtools checksum's flags → [`sortase::ChecksumJob`] → samtools' text.

use anyhow::Result;
use sortase::view::parse_flags;
use sortase::ChecksumJob;
use std::path::PathBuf;

/// Arguments of `sortase checksum`: the flag masks, the job's own flags (declared on its fields:
/// -c -t -P -C -M -q -v -T --reference), then the command's.
#[derive(clap::Args, Debug)]
pub struct ChecksumArgs {
    /// Leave out records with any of these flags.
    #[arg(short = 'F', long = "exclude-flags", value_name = "FLAG", default_value = "0x900")]
    exclude_flags: String,
    /// Leave out records without all of these flags.
    #[arg(short = 'f', long = "require-flags", value_name = "FLAG", default_value = "0")]
    require_flags: String,
    /// BAM flags to use in checksums.
    #[arg(short = 'b', long = "flag-mask", value_name = "FLAG", default_value = "0x0c1")]
    flag_mask: String,
    #[command(flatten)]
    job: ChecksumJob,
    /// Write the report to FILE [stdout].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    threads: crate::args::Threads,
    /// Input SAM/BAM/CRAM files [stdin].
    inputs: Vec<String>,
}

/// Runs `sortase checksum`: one report per input, as samtools prints them.
pub fn run(args: ChecksumArgs) -> Result<()> {
    let rt = args.threads.runtime(None)?;
    let inputs = if args.inputs.is_empty() {
        vec!["-".to_string()]
    } else {
        args.inputs.clone()
    };
    let mut text = String::new();
    for input in inputs {
        let job = ChecksumJob {
            input,
            exclude_flags: parse_flags(&args.exclude_flags)?,
            require_flags: parse_flags(&args.require_flags)?,
            flag_mask: parse_flags(&args.flag_mask)?,
            ..args.job.clone()
        };
        text += &job.run(&rt)?.to_text();
    }
    match &args.output {
        Some(path) => Ok(std::fs::write(path, text)?),
        None => crate::common::print_stdout(text),
    }
}
