//! What the binary says about itself: an example per command at the end of its `--help`, shell
//! completions (`sortase completions bash|zsh|fish`) and man pages (`sortase man DIR`), all from
//! the one clap definition so they cannot drift from the flags.

use anyhow::{Context, Result};
use clap::Command;
use std::path::{Path, PathBuf};

/// Examples shown after each command's options (`sortase CMD --help`), one command line per line,
/// as a user would type them; each goes to the command its second word names, in this order. A
/// unit test parses every line, so each stays a valid command line, and checks that every command
/// has one.
pub const EXAMPLES: &str = "\
sortase view -b -o out.bam in.sam
sortase view -c -q 30 -F 0x904 in.bam chr1:1-100000
sortase view -L targets.bed -e 'mapq >= 30 && [NM] < 5' -o on_target.bam in.bam
sortase view -d RG:lane1 -N names.txt -1 -o picked.bam in.bam
sortase index in.bam
sortase index -c -@ 8 in.bam
sortase sort -@ 8 -m 2G -o sorted.bam in.bam
sortase sort -n -o by_name.bam in.bam
sortase sort --write-index -o sorted.bam in.sam
sortase sort --checksums -v -o sorted.bam in.bam
sortase sort -O agd --chunk-size 50000 -o sorted_ds in.bam
sortase merge -o all.bam a.bam b.bam c.bam
sortase merge --checksums -v -o all.bam a.bam b.bam
sortase checksum in.bam
sortase checksum -F 0 -P -C -M in.bam sorted.bam
sortase flagstat in.bam
sortase flagstat -O json in.cram
sortase idxstats in.bam
sortase snp-pileup -g -q 15 -Q 20 -r 10,0 snps.vcf.gz out.csv.gz normal.bam tumor.bam
sortase bgzip -@ 8 -i reads.fq
sortase bgzip -d -c reads.fq.gz
sortase faidx ref.fa
sortase faidx ref.fa chr1:1000-2000
sortase loc reads.fq.gz
sortase fetch -n names.txt -o picked.fq reads.fq.gz
sortase markdup -o marked.bam aligned.bam
sortase markdup -o marked.bam --write-index sorted.bam
sortase markdup -r --checksums -v -o deduplicated.bam aligned.bam
sortase fq2bam -x ref.fa -o sample.bam --write-index r1.fq.gz r2.fq.gz
sortase fq2bam --checksums -v -x ref.fa -o sample.bam r1.fq.gz r2.fq.gz
sortase agd import -o dataset in.bam
sortase agd flagstat dataset
sortase agd export -o back.bam dataset
sortase agd import --checksums -v -o dataset in.bam
sortase agd export --checksums -v -o back.bam dataset
sortase stats --plot summary.html in.bam
sortase completions bash > ~/.local/share/bash-completion/completions/sortase
sortase completions zsh > ~/.zfunc/_sortase
sortase completions fish > ~/.config/fish/completions/sortase.fish
sortase man ~/.local/share/man/man1
";

/// The example lines of `EXAMPLES` for the command `name`.
fn examples(name: &str) -> impl Iterator<Item = &'static str> + '_ {
    EXAMPLES
        .lines()
        .filter(move |l| l.split(' ').nth(1) == Some(name))
}

/// `command` with an "Examples:" block after the options of each subcommand that has examples.
pub fn with_examples(command: Command) -> Command {
    let mut command = command;
    // In the order of EXAMPLES: mut_subcommand moves a command to the end of the completion scripts.
    let mut names: Vec<&str> = EXAMPLES
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .collect();
    names.dedup();
    for name in names {
        let lines: Vec<String> = examples(name).map(|l| format!("  {l}")).collect();
        let text = format!("Examples:\n{}", lines.join("\n"));
        command = command.mut_subcommand(name, |sub| sub.after_help(text));
    }
    // sort and markdup write uncompressed BAM into a pipe unless a level is given.
    for name in ["sort", "markdup"] {
        command = command.mut_subcommand(name, |sub| {
            sub.mut_arg("level", |a| {
                a.help("Compression level 0-9 with samtools' meaning [0 into a pipe, as -u]")
                    .long_help(format!(
                        "Compression level 0-9 with samtools' meaning.\n\n{}",
                        crate::args::PIPE_LEVEL_HELP
                    ))
            })
        });
    }
    command
}

/// The shells `sortase completions` writes for.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Shell {
    /// bash (bash-completion).
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
    /// PowerShell.
    Powershell,
    /// elvish.
    Elvish,
}

/// Arguments of `sortase completions`.
#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: Shell,
}

/// Arguments of `sortase man`.
#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Directory to write sortase.1 and one page per command (sortase-view.1, ...) into; created
    /// if missing.
    dir: PathBuf,
}

/// Writes the completion script for `args.shell` to standard output.
pub fn completions(args: CompletionsArgs, mut command: Command) -> Result<()> {
    use clap_complete::Shell as S;
    let shell = match args.shell {
        Shell::Bash => S::Bash,
        Shell::Zsh => S::Zsh,
        Shell::Fish => S::Fish,
        Shell::Powershell => S::PowerShell,
        Shell::Elvish => S::Elvish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "sortase", &mut out);
    crate::common::print_stdout(out)
}

/// Writes the man pages into `args.dir`: `sortase.1` and `sortase-CMD.1` for every command and
/// subcommand (`sortase-agd-import.1`, ...).
pub fn man(args: ManArgs, command: Command) -> Result<()> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("{}: cannot create directory", args.dir.display()))?;
    let mut written = 0;
    write_pages(&args.dir, command, "sortase", "sortase", &mut written)?;
    eprintln!(
        "sortase: wrote {written} man pages to {} (read one with: man {}/sortase-view.1)",
        args.dir.display(),
        args.dir.display()
    );
    Ok(())
}

fn write_pages(
    dir: &Path,
    command: Command,
    file: &str,
    bin: &str,
    written: &mut usize,
) -> Result<()> {
    let command = command.bin_name(bin.to_string());
    let path = dir.join(format!("{file}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .title(file.to_ascii_uppercase())
        .render(&mut page)?;
    let temp = dir.join(format!(".{file}.1.tmp"));
    std::fs::write(&temp, &page).with_context(|| format!("{}: cannot write", temp.display()))?;
    std::fs::rename(&temp, &path).with_context(|| format!("{}: cannot write", path.display()))?;
    *written += 1;
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let (sub_file, sub_bin) = (
            format!("{file}-{}", sub.get_name()),
            format!("{bin} {}", sub.get_name()),
        );
        write_pages(dir, sub.clone(), &sub_file, &sub_bin, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Splits a shell line (single quotes only; `>` ends the command).
    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut quoted = false;
        for c in line.chars() {
            match c {
                '\'' => quoted = !quoted,
                '>' if !quoted => break,
                ' ' if !quoted => {
                    if !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                }
                c => cur.push(c),
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    #[test]
    fn every_example_parses_and_every_command_has_one() {
        let command = with_examples(crate::Cli::command());
        for line in EXAMPLES.lines() {
            if let Err(e) = command.clone().try_get_matches_from(words(line)) {
                panic!("example {line:?} does not parse: {e}");
            }
        }
        for sub in command.get_subcommands() {
            assert!(
                examples(sub.get_name()).next().is_some(),
                "{} has no example",
                sub.get_name()
            );
        }
    }

    #[test]
    fn man_pages_name_every_command() {
        let dir = tempfile::tempdir().unwrap();
        let args = ManArgs {
            dir: dir.path().join("man1"),
        };
        man(args, with_examples(crate::Cli::command())).unwrap();
        let top = std::fs::read_to_string(dir.path().join("man1/sortase.1")).unwrap();
        for sub in crate::Cli::command().get_subcommands() {
            let name = sub.get_name();
            // roff escapes the hyphens of `snp-pileup`.
            let roff = name.replace('-', "\\-");
            assert!(top.contains(&roff), "sortase.1 does not mention {name}");
            let page = dir.path().join(format!("man1/sortase-{name}.1"));
            let text = std::fs::read_to_string(&page).unwrap();
            assert!(text.contains(".TH"), "{} is not a man page", page.display());
        }
        let view = std::fs::read_to_string(dir.path().join("man1/sortase-view.1")).unwrap();
        assert!(view.contains("target\\-file") && view.contains("Examples"));
        assert!(dir.path().join("man1/sortase-agd-import.1").exists());
    }
}
