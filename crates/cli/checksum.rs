//! `sortase checksum`: samtools checksum's flags → [`sortase::ChecksumJob`] → samtools' text.

use anyhow::Result;
use sortase::ChecksumJob;
use std::path::PathBuf;

/// Arguments of `sortase checksum`: the job's flags (declared on its fields: -F -f -b -c -t -P -C
/// -M -q -v -T --reference), then the command's.
#[derive(clap::Args, Debug)]
pub struct ChecksumArgs {
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
            ..args.job.clone()
        };
        text += &job.run(&rt)?.to_text();
    }
    match &args.output {
        Some(path) => Ok(std::fs::write(path, text)?),
        None => crate::common::print_stdout(text),
    }
}
