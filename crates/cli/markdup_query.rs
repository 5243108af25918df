//! samblaster's flags of `sortase markdup` (query-grouped input): those of
//! [`sortase::markdup::SamblasterOptions`] (declared on its fields) and `-q`, under their heading.

use sortase::markdup::SamblasterOptions;

/// samblaster's own options.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Query-grouped input (samblaster)")]
pub struct QueryArgs {
    /// The job's samblaster options (`-q` stays with the CLI: it only silences the summary).
    #[command(flatten)]
    pub options: SamblasterOptions,
    /// Do not print the summary to stderr (samblaster -q).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
}
