//! `sortase faidx`: samtools faidx's flags → [`sortase::FaidxJob`].

use anyhow::Result;
use sortase::FaidxJob;

/// Arguments of `sortase faidx` (samtools faidx's flags, declared on the job's fields, plus `-@`).
#[derive(clap::Args, Debug)]
pub struct FaidxArgs {
    #[command(flatten)]
    job: FaidxJob,
    #[command(flatten)]
    threads: crate::args::Threads,
}

/// Runs `sortase faidx`; warnings are printed as they arise, as samtools prints them.
pub fn run(args: FaidxArgs) -> Result<()> {
    let rt = args.threads.runtime(None)?;
    args.job.run_with_warnings(&rt, &mut |w| eprintln!("{w}"))?;
    Ok(())
}
